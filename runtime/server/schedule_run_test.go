package server_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flowfabric/ff/compiler/plan"
	"github.com/flowfabric/ff/runtime/api"
	"github.com/flowfabric/ff/runtime/client"
	"github.com/flowfabric/ff/runtime/server"
	"github.com/flowfabric/ff/runtime/server/servertest"
	"github.com/flowfabric/ff/runtime/wire"
	"github.com/flowfabric/ff/runtime/worker"
)

// TestScheduleRunByHand: POST /v1/schedules/{name}/runs starts a run of
// the schedule's template now, in its namespace, with its input's
// placeholders filled in for now in its zone; the run says it was started
// by hand from the schedule, the schedule's timetable and fires do not
// move, a repeat with the same key answers the first run and wait_ms
// waits for the run's end.
func TestScheduleRunByHand(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t, func(c *server.Config) { c.Templates = []*plan.Flow{twoStep()} })
	echo := func(_ context.Context, task *worker.Task) (json.RawMessage, error) { return task.Input(), nil }
	runWorker(t, env, worker.Config{Name: "w", Namespace: "nightly", Concurrency: 4},
		map[string]worker.Handler{"two.a": echo, "two.b": echo})
	c := env.Client
	ctx := ctxT(t)
	// Next fire years away: any run is one started by hand.
	before, _, err := c.PutSchedule(ctx, "yearly", wire.PutSchedule{Template: "two", Cron: "0 3 1 1 *", Timezone: "Asia/Tokyo",
		Namespace: "nightly", Input: json.RawMessage(`{"s":"day {{fire_date}} at {{fire_time}}"}`)})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	r, err := c.RunSchedule(ctx, "yearly", client.WithWait(10*time.Second))
	if err != nil || !r.Created || r.Namespace != "nightly" || r.Flow != "two" {
		t.Fatalf("RunSchedule = %+v, %v; want a new run of two in namespace nightly", r, err)
	}
	out, err := r.Wait(ctx)
	if err != nil || out.State != wire.RunSucceeded {
		t.Fatalf("the run: %+v, %v", out, err)
	}
	// The input was filled in for now, in Tokyo.
	var res struct{ S string }
	if err := json.Unmarshal(out.Result, &res); err != nil {
		t.Fatal(err)
	}
	tokyo, _ := time.LoadLocation("Asia/Tokyo")
	f := strings.Fields(res.S) // "day D at T"
	if len(f) != 4 {
		t.Fatalf("result %q: want day D at T", res.S)
	}
	day, at := f[1], f[3]
	filled, err := time.Parse(time.RFC3339, at)
	if err != nil || !strings.HasSuffix(at, "+09:00") || filled.Before(start.Add(-2*time.Second)) || filled.After(time.Now().Add(2*time.Second)) ||
		day != filled.In(tokyo).Format(time.DateOnly) {
		t.Fatalf("result %q: want now's date and time in Tokyo (%v)", res.S, err)
	}
	run, err := c.GetRun(ctx, r.ID)
	if err != nil || run.Schedule != "yearly" || !run.ScheduleManual || run.ScheduledAt == nil || run.CreatedAt == nil ||
		!run.ScheduledAt.Equal(*run.CreatedAt) || !strings.HasPrefix(run.IdempotencyKey, "ffrun-schedule:yearly:now:") {
		t.Fatalf("the run's origin: %+v, %v; want by hand from yearly", run, err)
	}
	// The schedule is as it was.
	after, err := c.GetSchedule(ctx, "yearly")
	if err != nil || after.Fires != 0 || after.LastRunID != "" || after.NextAt == nil || !after.NextAt.Equal(*before.NextAt) {
		t.Fatalf("schedule after a run by hand: %+v, %v; want it untouched (%+v)", after, err, before)
	}
	// Without a key each request starts a run; with one, a repeat is the
	// first run (200).
	other, err := c.RunSchedule(ctx, "yearly")
	if err != nil || !other.Created || other.ID == r.ID {
		t.Fatalf("a second run by hand: %+v, %v", other, err)
	}
	k1, err := c.RunSchedule(ctx, "yearly", client.WithIdempotencyKey("deploy-42"))
	if err != nil || !k1.Created {
		t.Fatalf("keyed run: %+v, %v", k1, err)
	}
	k2, err := c.RunSchedule(ctx, "yearly", client.WithIdempotencyKey("deploy-42"))
	if err != nil || k2.Created || k2.ID != k1.ID {
		t.Fatalf("keyed run again: %+v, %v; want run %s, not created", k2, err, k1.ID)
	}
	// The answer of a new run says where it came from, as GET does.
	raw := env.Do(t, http.MethodPost, "/v1/schedules/yearly/runs", map[string]string{"Content-Type": "application/json"}, `{}`)
	var staged wire.FlowRun
	if err := json.Unmarshal([]byte(raw.Body), &staged); err != nil || raw.Status != http.StatusCreated ||
		staged.Schedule != "yearly" || !staged.ScheduleManual || staged.ScheduledAt == nil ||
		!strings.HasPrefix(staged.IdempotencyKey, "ffrun-schedule:yearly:now:") {
		t.Fatalf("POST runs = %d %s (%v); want 201 with the schedule's fields", raw.Status, raw.Body, err)
	}
	// A namespace cannot be chosen: the schedule's applies.
	if _, err := c.RunSchedule(ctx, "yearly", client.WithNamespace("x")); err == nil {
		t.Fatal("RunSchedule took WithNamespace")
	}
}

// TestScheduleRunByHandRefusals: an unknown schedule is a 404; a schedule
// of a template this process does not serve, and one whose input no longer
// fits the template served, are 409s that say why (nothing staged); a
// body or query the route does not take is a 400.
func TestScheduleRunByHandRefusals(t *testing.T) {
	t.Parallel()
	a := servertest.Start(t, func(c *server.Config) { c.Templates = []*plan.Flow{twoStep()} })
	// b serves another version of the template, whose input type wants a
	// number.
	changed := twoStep()
	changed.Types[0].Fields[0].Type = plan.TypeRef{Kind: plan.KindInt}
	b := servertest.Start(t, func(c *server.Config) {
		c.KeyPrefix = a.Config.KeyPrefix
		c.Templates = []*plan.Flow{changed}
	})
	bare := servertest.Start(t, func(c *server.Config) { c.KeyPrefix = a.Config.KeyPrefix })
	ctx := ctxT(t)
	if _, _, err := a.Client.PutSchedule(ctx, "s", wire.PutSchedule{Template: "two", Cron: "@daily", Input: json.RawMessage(`{"s":"x"}`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Client.RunSchedule(ctx, "nope"); apiErr(t, err).Status != http.StatusNotFound || apiErr(t, err).Code != wire.CodeNotFound {
		t.Fatalf("unknown schedule: %v", err)
	}
	_, err := bare.Client.RunSchedule(ctx, "s")
	if ae := apiErr(t, err); ae.Status != http.StatusConflict || !strings.Contains(ae.Message, `does not serve (--flows)`) {
		t.Fatalf("template not served: %v", err)
	}
	_, err = b.Client.RunSchedule(ctx, "s")
	if ae := apiErr(t, err); ae.Status != http.StatusConflict || !strings.Contains(ae.Message, "does not fit template") {
		t.Fatalf("input that no longer fits: %v", err)
	}
	if runs, err := a.Client.ListRuns(ctx, clientRuns("two")); err != nil || len(runs.Runs) != 0 {
		t.Fatalf("runs after refusals: %+v, %v; want none", runs, err)
	}
	for _, tc := range []struct{ query, body, field string }{
		{"?wait_ms=x", "", "wait_ms"},
		{"?limit=3", "", "limit"},
		{"", `{"namespace":"x"}`, "namespace"},
		{"", `{"idempotency_key":"` + strings.Repeat("k", 300) + `"}`, "idempotency_key"},
	} {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, a.URL+"/v1/schedules/s/runs"+tc.query, bytes.NewBufferString(tc.body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var body wire.ErrorEnvelope
		_ = json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		field, _ := body.Error.Details["field"].(string)
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body.Error.Message+" "+field, tc.field) {
			t.Errorf("POST runs%s %s = %d %+v; want 400 on %s", tc.query, tc.body, resp.StatusCode, body.Error, tc.field)
		}
	}
}

// TestScheduleRunByHandLongKey: a caller's idempotency key of up to the
// API's 256 bytes is taken, although the run's key wraps it in the
// schedule's prefix (a key the prefix pushes past the store's limit
// stands for itself by its hash), and a repeat answers the first run.
func TestScheduleRunByHandLongKey(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t, func(c *server.Config) { c.Templates = []*plan.Flow{twoStep()} })
	ctx := ctxT(t)
	if _, _, err := env.Client.PutSchedule(ctx, "yearly", wire.PutSchedule{Template: "two", Cron: "0 3 1 1 *",
		Input: json.RawMessage(`{"s":"x"}`)}); err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{200, 240, api.IdemKeyMaxBytes} {
		key := strings.Repeat("k", n-1) + strconv.Itoa(n%10)
		r, err := env.Client.RunSchedule(ctx, "yearly", client.WithIdempotencyKey(key))
		if err != nil || !r.Created {
			t.Fatalf("RunSchedule with a key of %d bytes = %+v, %v; want a new run", n, r, err)
		}
		again, err := env.Client.RunSchedule(ctx, "yearly", client.WithIdempotencyKey(key))
		if err != nil || again.Created || again.ID != r.ID {
			t.Fatalf("RunSchedule again with the key of %d bytes = %+v, %v; want run %s", n, again, err, r.ID)
		}
	}
}

// TestScheduleRunByHandKeysDoNotCollide: two different idempotency keys
// of a run by hand start two runs. A long key stands for itself by its
// hash ("sha256:<hex>"), and that stand-in must not be a key a caller
// can send: the short key "sha256:<hex of the long one>" is another key.
func TestScheduleRunByHandKeysDoNotCollide(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t, func(c *server.Config) { c.Templates = []*plan.Flow{twoStep()} })
	ctx := ctxT(t)
	if _, _, err := env.Client.PutSchedule(ctx, "yearly", wire.PutSchedule{Template: "two", Cron: "0 3 1 1 *",
		Input: json.RawMessage(`{"s":"x"}`)}); err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("k", api.IdemKeyMaxBytes)
	sum := sha256.Sum256([]byte(long))
	short := "sha256:" + hex.EncodeToString(sum[:])
	a, err := env.Client.RunSchedule(ctx, "yearly", client.WithIdempotencyKey(long))
	if err != nil || !a.Created {
		t.Fatalf("RunSchedule with the long key = %+v, %v; want a new run", a, err)
	}
	b, err := env.Client.RunSchedule(ctx, "yearly", client.WithIdempotencyKey(short))
	if err != nil {
		t.Fatal(err)
	}
	if !b.Created || b.ID == a.ID {
		t.Fatalf("RunSchedule with key %q answered run %s (created %v) of the other key %q…: two keys, one run",
			short, b.ID, b.Created, long[:16])
	}
}
