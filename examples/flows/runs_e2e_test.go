package flows

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flowfabric/ff/compiler/plan"
	"github.com/flowfabric/ff/runtime/client"
	"github.com/flowfabric/ff/runtime/server"
	"github.com/flowfabric/ff/runtime/server/servertest"
	"github.com/flowfabric/ff/runtime/wire"
	"github.com/flowfabric/ff/runtime/worker"
)

func TestMain(m *testing.M) {
	code := m.Run()
	servertest.StopShared()
	os.Exit(code)
}

// e2e is a real ffrun (serving the example flows as templates) on real
// Valkey with real workers running the demo handlers through the generated
// Register functions.
type e2e struct {
	t    *testing.T
	ctx  context.Context
	env  *servertest.Env
	c    *client.Client
	demo *Demo
}

func startE2E(t *testing.T, f Faults) *e2e {
	t.Helper()
	return startE2EWith(t, f, Plans())
}

// startE2EWith serves templates instead of the example flows: quick(Plans())
// for runs whose retries a test waits through, staged with stageQuick.
func startE2EWith(t *testing.T, f Faults, templates []*plan.Flow) *e2e {
	t.Helper()
	t.Parallel()
	env := servertest.Start(t, func(c *server.Config) { c.Templates = templates })
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	t.Cleanup(cancel)
	e := &e2e{t: t, ctx: ctx, env: env, c: env.Client, demo: NewDemo(f)}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- RunWorkers(runCtx, worker.Config{
			URL: env.URL, Name: "e2e", Concurrency: 8, ClaimWait: 2 * time.Second,
			LeaseTTL: 900 * time.Millisecond, DrainTimeout: 2 * time.Second, Logger: servertest.Logger(t),
		}, e.demo)
	}()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("RunWorkers: %v", err)
		}
	})
	return e
}

// quick returns the flows with every retry delay cut to milliseconds (5 ms,
// at most 20 ms), so that a test can wait through retries whose .ff delays
// are seconds long. Runs of them are staged by template (stageQuick): the
// generated Stage<Flow> functions send the plans as compiled.
func quick(flows []*plan.Flow) []*plan.Flow {
	out := make([]*plan.Flow, len(flows))
	for i, f := range flows {
		c := *f
		c.Execs = slices.Clone(f.Execs)
		for j := range c.Execs {
			r := &c.Execs[j].Retry
			r.DelayMs = min(r.DelayMs, 5)
			if r.MaxDelayMs > 0 {
				r.MaxDelayMs = 20
			}
		}
		out[i] = &c
	}
	return out
}

// stageQuick stages a run of the template flow (a quick plan) with input
// in and returns it once ended: its result decoded into out when it
// succeeded, else the run's error.
func (e *e2e) stageQuick(flow string, in, out any) (*client.Run, error) {
	e.t.Helper()
	run, err := e.c.StageTemplate(e.ctx, flow, in)
	if err != nil {
		e.t.Fatal(err)
	}
	raw, err := run.Result(e.ctx)
	if err == nil && out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			e.t.Fatalf("decode the result of %s: %v", flow, err)
		}
	}
	return run, err
}

// outcomes returns the terminal outcome of every member of run by name.
func (e *e2e) outcomes(id string) map[string]string {
	e.t.Helper()
	run, err := e.c.GetRun(e.ctx, id)
	if err != nil {
		e.t.Fatalf("GetRun: %v", err)
	}
	out := map[string]string{}
	for _, x := range run.Execs {
		out[x.Name] = x.Outcome
	}
	return out
}

// waitFor polls the run until cond holds.
func (e *e2e) waitFor(id, what string, cond func(*wire.FlowRun) bool) *wire.FlowRun {
	e.t.Helper()
	for {
		run, err := e.c.GetRun(e.ctx, id)
		if err != nil {
			e.t.Fatalf("GetRun: %v", err)
		}
		if cond(run) {
			return run
		}
		select {
		case <-e.ctx.Done():
			e.t.Fatalf("run %s: %s: not reached: %+v", id, what, run)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func execNamed(run *wire.FlowRun, name string) wire.FlowExec {
	for _, x := range run.Execs {
		if x.Name == name {
			return x
		}
	}
	return wire.FlowExec{}
}

// exec reads run and returns its exec name (zero when it has none).
func (e *e2e) exec(run *client.Run, name string) wire.FlowExec {
	e.t.Helper()
	full, err := run.Get(e.ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	return execNamed(full, name)
}

const (
	success   = "success"
	failure   = "failed"
	skip      = "skipped"
	cancelled = "cancelled"
)

// runError returns err as a *client.RunError or fails.
func runError(t *testing.T, err error) *client.RunError {
	t.Helper()
	var re *client.RunError
	if !errors.As(err, &re) {
		t.Fatalf("error %v is not a *client.RunError", err)
	}
	return re
}

func TestE2EPublish(t *testing.T) {
	t.Run("success", func(t *testing.T) {
		e := startE2E(t, Faults{})
		run, err := StagePublish(e.ctx, e.c, sampleClip)
		if err != nil {
			t.Fatal(err)
		}
		got, err := run.Result(e.ctx)
		if err != nil {
			t.Fatalf("Result: %v", err)
		}
		if got.URL != "s3://raw/clip-1.h264.mp4" || !slices.Equal(got.Tags, []string{"cats", "probed", "short", "published"}) || len(got.Thumb) == 0 {
			t.Fatalf("result = %+v", got)
		}
		want := map[string]string{"probe": success, "transcode": success, "thumbnail": success, "publish": success, "alert": skip, "cleanup": success}
		if diff := cmp.Diff(want, e.outcomes(run.ID)); diff != "" {
			t.Fatalf("outcomes (-want +got):\n%s", diff)
		}
		full, err := run.Get(e.ctx)
		if err != nil {
			t.Fatal(err)
		}
		if full.State != wire.RunSucceeded || full.Total != 6 || full.Succeeded != 5 || full.Skipped != 1 || full.ResultExec != "publish" || full.EndedAt == nil {
			t.Fatalf("run = %+v", full)
		}
		for _, x := range full.Execs {
			if x.Outcome == success && (x.Attempts != 1 || x.StartedAt == nil || x.EndedAt == nil) {
				t.Errorf("exec %s: attempts %d, started %v, ended %v", x.Name, x.Attempts, x.StartedAt, x.EndedAt)
			}
		}
		checkNotified(t, e.demo, nil) // alert was skipped
	})
	t.Run("probe retried: edges wait for its final outcome", func(t *testing.T) {
		// probe's policy retries after 1s (exponential from 1s): the first
		// attempt's failure must not resolve its edges.
		e := startE2E(t, Faults{FailTimes: map[string]int{"publish.probe": 1}})
		run, err := StagePublish(e.ctx, e.c, sampleClip)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := run.Result(e.ctx); err != nil {
			t.Fatalf("Result: %v", err)
		}
		if probe := e.exec(run.Run, "probe"); probe.Outcome != success || probe.Attempts != 2 {
			t.Fatalf("probe = %+v, want success on the second attempt", probe)
		}
		want := map[string]string{"probe": success, "transcode": success, "thumbnail": success, "publish": success, "alert": skip, "cleanup": success}
		if diff := cmp.Diff(want, e.outcomes(run.ID)); diff != "" {
			t.Fatalf("outcomes (-want +got):\n%s", diff)
		}
	})
	t.Run("transcode fails: alert on failure, cleanup on done", func(t *testing.T) {
		e := startE2E(t, Faults{})
		clip := sampleClip
		clip.Labels = map[string]string{"codec": "unsupported"}
		run, err := StagePublish(e.ctx, e.c, clip)
		if err != nil {
			t.Fatal(err)
		}
		_, err = run.Result(e.ctx)
		re := runError(t, err)
		if re.State != wire.RunFailed || !slices.Equal(re.FailedExecs(), []string{"transcode"}) ||
			!strings.Contains(re.Failures[0].Error, "codec not supported") || !strings.Contains(re.Message, "result exec publish ended skipped") {
			t.Fatalf("run error = %+v", re)
		}
		want := map[string]string{"probe": success, "transcode": failure, "thumbnail": success, "publish": skip, "alert": success, "cleanup": success}
		if diff := cmp.Diff(want, e.outcomes(run.ID)); diff != "" {
			t.Fatalf("outcomes (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]string{"publish: transcode failed"}, e.demo.Notifications()); diff != "" {
			t.Fatalf("notifications (-want +got):\n%s", diff)
		}
	})
}

func TestE2EAskAllDrafts(t *testing.T) {
	// Every draft succeeds; the prompt reaches them normalised; the same
	// question gives the same answer.
	e := startE2E(t, Faults{})
	var answers []Answer
	for range 2 {
		run, err := StageAsk(e.ctx, e.c, sampleQuestion)
		if err != nil {
			t.Fatal(err)
		}
		ans, err := run.Result(e.ctx)
		if err != nil {
			t.Fatalf("Result: %v", err)
		}
		answers = append(answers, ans)
	}
	ans := answers[0]
	if ans.QuestionID != "q-1" || len(ans.Drafts) != 3 || len(ans.Scores) != 3 || ans.ChosenModel == "" || ans.TotalTokens <= 0 {
		t.Fatalf("answer = %+v", ans)
	}
	if !strings.Contains(ans.Text, `"Why is the sky blue?"`) {
		t.Fatalf("prompt not normalised: %q", ans.Text)
	}
	if diff := cmp.Diff(answers[0], answers[1]); diff != "" {
		t.Fatalf("the second run's answer differs (-first +second):\n%s", diff)
	}
	// Each draft reported its tokens: the fleet's daily budget holds the
	// two runs' drafts, the answers' totals.
	b, err := e.c.GetBudget(e.ctx, "llm/llm_daily")
	if err != nil {
		t.Fatal(err)
	}
	var used int64
	for _, d := range b.Dimensions {
		if d.Dimension == "tokens" {
			used = d.Used
		}
	}
	if want := answers[0].TotalTokens + answers[1].TotalTokens; used != want {
		t.Fatalf("llm/llm_daily tokens used %d, want %d (the drafts' tokens of both runs)", used, want)
	}
}

func TestE2EAskEveryDraftFails(t *testing.T) {
	// Each draft fails after its retries; judge (join all "on done") runs
	// and fails for good with nothing to judge.
	e := startE2EWith(t, Faults{Fail: map[string]bool{"ask.draft_small": true, "ask.draft_large": true, "ask.draft_code": true}}, quick(Plans()))
	run, err := e.stageQuick("ask", sampleQuestion, nil)
	re := runError(t, err)
	if re.State != wire.RunFailed || !slices.Contains(re.FailedExecs(), "judge") {
		t.Fatalf("run error = %+v, want failed with judge among the failures", re)
	}
	want := map[string]string{"prepare": success, "draft_small": failure, "draft_large": failure, "draft_code": failure, "judge": failure}
	if diff := cmp.Diff(want, e.outcomes(run.ID)); diff != "" {
		t.Fatalf("outcomes (-want +got):\n%s", diff)
	}
	if small, judge := e.exec(run, "draft_small"), e.exec(run, "judge"); small.Attempts != 4 || judge.Attempts != 1 {
		t.Fatalf("draft_small %d attempts (want 4, its retry policy), judge %d (want 1: a permanent failure)", small.Attempts, judge.Attempts)
	}
}

func TestE2EAsk(t *testing.T) {
	// judge waits for every draft "on done" and reads those that succeeded.
	e := startE2E(t, Faults{Permanent: map[string]bool{"ask.draft_large": true}})
	run, err := StageAsk(e.ctx, e.c, sampleQuestion)
	if err != nil {
		t.Fatal(err)
	}
	ans, err := run.Result(e.ctx)
	if err != nil {
		t.Fatalf("Result: %v", err)
	}
	if ans.QuestionID != "q-1" || len(ans.Drafts) != 2 || ans.ChosenModel == "large-405b" || ans.TotalTokens <= 0 {
		t.Fatalf("answer = %+v", ans)
	}
	want := map[string]string{"prepare": success, "draft_small": success, "draft_large": failure, "draft_code": success, "judge": success}
	if diff := cmp.Diff(want, e.outcomes(run.ID)); diff != "" {
		t.Fatalf("outcomes (-want +got):\n%s", diff)
	}
}

func TestE2ENightlyETL(t *testing.T) {
	for _, tt := range []struct {
		name   string
		batch  Batch
		faults Faults
		want   map[string]string
		state  string
		failed []string // the failed members the run error names
		notify []string // the notifications sent, by prefix, sorted
	}{
		{
			name:  "success",
			batch: Batch{Source: "clickstream", Day: "2026-11-20"},
			want: map[string]string{"extract": success, "validate": success, "transform": success, "load": success,
				"quarantine": skip, "notify_failure": skip, "cleanup": success},
			state: wire.RunSucceeded,
		},
		{
			name:  "validation fails: quarantine joins success and failure edges",
			batch: Batch{Source: "corrupt-feed", Day: "2026-11-20"},
			want: map[string]string{"extract": success, "validate": failure, "transform": skip, "load": skip,
				"quarantine": success, "notify_failure": skip, "cleanup": success},
			state:  wire.RunFailed,
			failed: []string{"validate"},
			notify: []string{"nightly_etl: staging/corrupt-feed/2026-11-20.parquet quarantined"},
		},
		{
			name:   "transform fails: notify_failure (join any), skips propagate",
			batch:  Batch{Source: "clickstream", Day: "2026-11-20"},
			faults: Faults{Permanent: map[string]bool{"nightly_etl.transform": true}},
			want: map[string]string{"extract": success, "validate": success, "transform": failure, "load": skip,
				"quarantine": skip, "notify_failure": success, "cleanup": success},
			state:  wire.RunFailed,
			failed: []string{"transform"},
			notify: []string{"nightly_etl: transform failed: nightly_etl.transform: injected failure"},
		},
		{
			name:  "extract fails: every other member skipped",
			batch: Batch{Source: "clickstream", Day: "yesterday"},
			want: map[string]string{"extract": failure, "validate": skip, "transform": skip, "load": skip,
				"quarantine": skip, "notify_failure": skip, "cleanup": skip},
			state:  wire.RunFailed,
			failed: []string{"extract"},
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := startE2E(t, tt.faults)
			run, err := StageNightlyETL(e.ctx, e.c, tt.batch)
			if err != nil {
				t.Fatal(err)
			}
			got, err := run.Result(e.ctx)
			if tt.state == wire.RunSucceeded {
				if err != nil || got.Table != "events_clickstream" || got.Rows <= 0 {
					t.Fatalf("Result = %+v, %v", got, err)
				}
			} else if re := runError(t, err); re.State != tt.state || !slices.Equal(re.FailedExecs(), tt.failed) {
				t.Fatalf("run error = %+v, want state %s with failed %v", re, tt.state, tt.failed)
			}
			if diff := cmp.Diff(tt.want, e.outcomes(run.ID)); diff != "" {
				t.Fatalf("outcomes (-want +got):\n%s", diff)
			}
			checkNotified(t, e.demo, tt.notify)
		})
	}
}

func TestE2ENightlyETLRetries(t *testing.T) {
	t.Run("load fails after its retries: notify_failure", func(t *testing.T) {
		e := startE2EWith(t, Faults{Fail: map[string]bool{"nightly_etl.load": true}}, quick(Plans()))
		run, err := e.stageQuick("nightly_etl", Batch{Source: "clickstream", Day: "2026-11-20"}, nil)
		if re := runError(t, err); re.State != wire.RunFailed || !slices.Equal(re.FailedExecs(), []string{"load"}) {
			t.Fatalf("run error = %+v, want failed with load", re)
		}
		want := map[string]string{"extract": success, "validate": success, "transform": success, "load": failure,
			"quarantine": skip, "notify_failure": success, "cleanup": success}
		if diff := cmp.Diff(want, e.outcomes(run.ID)); diff != "" {
			t.Fatalf("outcomes (-want +got):\n%s", diff)
		}
		if load := e.exec(run, "load"); load.Attempts != 3 {
			t.Fatalf("load attempts = %d, want 3 (its retry policy)", load.Attempts)
		}
		checkNotified(t, e.demo, []string{"nightly_etl: load failed: nightly_etl.load: attempt 3: injected failure"})
	})
	t.Run("extract retried: the result", func(t *testing.T) {
		e := startE2EWith(t, Faults{FailTimes: map[string]int{"nightly_etl.extract": 2}}, quick(Plans()))
		rows := int64(5000)
		var got Loaded
		run, err := e.stageQuick("nightly_etl", Batch{Source: "click-stream", Day: "2026-11-20", ExpectedRows: &rows}, &got)
		if err != nil {
			t.Fatalf("Result: %v", err)
		}
		want := Loaded{Table: "events_click_stream", Day: "2026-11-20", Rows: 5000 - 25, Finished: time.Date(2026, 11, 21, 2, 0, 0, 0, time.UTC)}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("result (-want +got):\n%s", diff)
		}
		if extract := e.exec(run, "extract"); extract.Attempts != 3 {
			t.Fatalf("extract attempts = %d, want 3", extract.Attempts)
		}
	})
}

// checkNotified checks that the demo sent one notification per prefix in
// want (sorted), in any order: the handlers that notify ran with the upstream data
// their edges pass.
func checkNotified(t *testing.T, d *Demo, want []string) {
	t.Helper()
	got := d.Notifications()
	slices.Sort(got)
	ok := len(got) == len(want)
	for i := 0; ok && i < len(want); i++ {
		ok = strings.HasPrefix(got[i], want[i])
	}
	if !ok {
		t.Fatalf("notifications = %q, want one starting with each of %q", got, want)
	}
}

func TestE2EFulfilOrder(t *testing.T) {
	for _, tt := range []struct {
		name   string
		change func(o *Order)
		want   map[string]string
		failed []string // the failed members the run error names; none on success
		notify []string // the compensations' notifications, by prefix, sorted
	}{
		{
			name:   "success",
			change: func(o *Order) {},
			want: map[string]string{"check_order": success, "reserve_stock": success, "authorize_payment": success, "capture_payment": success,
				"ship": success, "confirm": success, "release_stock": skip, "void_authorization": skip, "refund_payment": skip},
		},
		{
			name:   "card declined: release_stock (join 2 of a success and a failure edge)",
			change: func(o *Order) { o.CardToken = "tok_declined" },
			want: map[string]string{"check_order": success, "reserve_stock": success, "authorize_payment": failure, "capture_payment": skip,
				"ship": skip, "confirm": skip, "release_stock": success, "void_authorization": skip, "refund_payment": skip},
			failed: []string{"authorize_payment"},
			notify: []string{"fulfil_order: released res-o-1001"},
		},
		{
			name:   "cannot ship: release and refund",
			change: func(o *Order) { o.Address.Country = "US" },
			want: map[string]string{"check_order": success, "reserve_stock": success, "authorize_payment": success, "capture_payment": success,
				"ship": failure, "confirm": skip, "release_stock": success, "void_authorization": skip, "refund_payment": success},
			failed: []string{"ship"},
			notify: []string{"fulfil_order: refunded pay-", "fulfil_order: released res-o-1001"},
		},
		{
			name:   "out of stock: void the authorisation",
			change: func(o *Order) { o.Items[0].SKU = "OOS-MUG-01" },
			want: map[string]string{"check_order": success, "reserve_stock": failure, "authorize_payment": success, "capture_payment": skip,
				"ship": skip, "confirm": skip, "release_stock": skip, "void_authorization": success, "refund_payment": skip},
			failed: []string{"reserve_stock"},
			notify: []string{"fulfil_order: voided "},
		},
		{
			name:   "wrong total: nothing else runs",
			change: func(o *Order) { o.TotalCents = 1 },
			want: map[string]string{"check_order": failure, "reserve_stock": skip, "authorize_payment": skip, "capture_payment": skip,
				"ship": skip, "confirm": skip, "release_stock": skip, "void_authorization": skip, "refund_payment": skip},
			failed: []string{"check_order"},
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := startE2E(t, Faults{})
			o := sampleOrder()
			tt.change(&o)
			run, err := StageFulfilOrder(e.ctx, e.c, o)
			if err != nil {
				t.Fatal(err)
			}
			c, err := run.Result(e.ctx)
			if tt.failed == nil {
				if err != nil || c.OrderID != "o-1001" || c.PaymentID == "" || !strings.HasPrefix(c.TrackingID, "TRK") ||
					!c.ETA.Equal(o.Placed.Add(72*time.Hour)) {
					t.Fatalf("Result = %+v, %v", c, err)
				}
			} else if re := runError(t, err); re.State != wire.RunFailed || !slices.Equal(re.FailedExecs(), tt.failed) {
				t.Fatalf("run error = %+v, want failed with %v", re, tt.failed)
			}
			if diff := cmp.Diff(tt.want, e.outcomes(run.ID)); diff != "" {
				t.Fatalf("outcomes (-want +got):\n%s", diff)
			}
			checkNotified(t, e.demo, tt.notify)
		})
	}
}

// TestE2ECancel cancels a run while transcode runs: the handler's context
// is cancelled through its lease, every other member ends cancelled, and
// none of them starts afterwards.
func TestE2ECancel(t *testing.T) {
	e := startE2E(t, Faults{Hang: map[string]bool{"publish.transcode": true}})
	run, err := StagePublish(e.ctx, e.c, sampleClip)
	if err != nil {
		t.Fatal(err)
	}
	e.waitFor(run.ID, "transcode active", func(r *wire.FlowRun) bool {
		return execNamed(r, "transcode").State == "active" && execNamed(r, "thumbnail").Outcome == success
	})
	out, err := run.Cancel(e.ctx, "customer withdrew the clip")
	if err != nil {
		t.Fatal(err)
	}
	if out.State != wire.RunCancelled {
		t.Fatalf("after cancel: %+v", out)
	}
	again, err := run.Cancel(e.ctx, "")
	if err != nil || again.State != wire.RunCancelled {
		t.Fatalf("second cancel: %+v, %v", again, err)
	}
	_, err = run.Result(e.ctx)
	if re := runError(t, err); re.State != wire.RunCancelled || !slices.Contains(re.FailedExecs(), "transcode") {
		t.Fatalf("run error = %+v", re)
	}
	// The hung handler sees its context cancelled (at its next renewal).
	for len(e.demo.Interrupted()) == 0 {
		select {
		case <-e.ctx.Done():
			t.Fatal("transcode's context was never cancelled")
		case <-time.After(20 * time.Millisecond):
		}
	}
	if got := e.demo.Interrupted(); len(got) != 1 || !strings.Contains(got[0], worker.ErrCancelled.Error()) {
		t.Fatalf("interrupted = %q, want transcode cancelled", got)
	}
	callsAtCancel := e.demo.Calls()
	time.Sleep(300 * time.Millisecond) // workers keep claiming
	want := map[string]string{"probe": success, "thumbnail": success, "transcode": cancelled, "publish": cancelled, "alert": cancelled, "cleanup": cancelled}
	if diff := cmp.Diff(want, e.outcomes(run.ID)); diff != "" {
		t.Fatalf("outcomes (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(callsAtCancel, e.demo.Calls()); diff != "" {
		t.Fatalf("members started after the cancel (-before +after):\n%s", diff)
	}
	for _, c := range e.demo.Calls() {
		if c == "publish.publish" || c == "publish.alert" || c == "publish.cleanup" {
			t.Fatalf("%s ran in a cancelled run", c)
		}
	}
}

// TestE2EReplay replays a failed run: the failed member runs again, the
// skipped ones behind it follow, members that succeeded keep their
// results without running again, except the ones the failure fired: the
// on-failure notice is skipped once the replayed transform succeeds, and
// cleanup (fired by it, on done) runs again, fired by load this time.
func TestE2EReplay(t *testing.T) {
	e := startE2E(t, Faults{FailTimes: map[string]int{"nightly_etl.transform": 1}})
	run, err := StageNightlyETL(e.ctx, e.c, Batch{Source: "clickstream", Day: "2026-11-20"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := run.Result(e.ctx); runError(t, err).State != wire.RunFailed {
		t.Fatalf("first pass: %v", err)
	}
	if _, err := e.c.ReplayRun(e.ctx, "0.00000000-0000-4000-8000-000000000000"); !client.IsCode(err, wire.CodeNotFound) {
		t.Fatalf("replay of an unknown run: %v", err)
	}
	replayed, err := run.Replay(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if replayed.State != wire.RunRunning {
		t.Fatalf("after replay: %+v", replayed)
	}
	got, err := run.Result(e.ctx)
	if err != nil || got.Table != "events_clickstream" {
		t.Fatalf("Result after replay = %+v, %v", got, err)
	}
	want := map[string]string{"extract": success, "validate": success, "transform": success, "load": success,
		"quarantine": skip, "notify_failure": skip, "cleanup": success}
	if diff := cmp.Diff(want, e.outcomes(run.ID)); diff != "" {
		t.Fatalf("outcomes (-want +got):\n%s", diff)
	}
	count := map[string]int{}
	for _, c := range e.demo.Calls() {
		count[c]++
	}
	if count["nightly_etl.extract"] != 1 || count["nightly_etl.validate"] != 1 || count["nightly_etl.transform"] != 2 || count["nightly_etl.load"] != 1 ||
		count["nightly_etl.notify_failure"] != 1 || count["nightly_etl.cleanup"] != 2 {
		t.Fatalf("calls = %v: succeeded members must not run again", count)
	}
	if _, err := run.Replay(e.ctx); !client.IsCode(err, wire.CodeConflict) {
		t.Fatalf("replay of a succeeded run: %v, want conflict", err)
	}
}

func TestE2EIdempotentStaging(t *testing.T) {
	e := startE2E(t, Faults{})
	first, err := StagePublish(e.ctx, e.c, sampleClip, client.WithIdempotencyKey("clip-1-v1"))
	if err != nil {
		t.Fatal(err)
	}
	again, err := StagePublish(e.ctx, e.c, sampleClip, client.WithIdempotencyKey("clip-1-v1"))
	if err != nil {
		t.Fatal(err)
	}
	if !first.Created || again.Created || again.ID != first.ID {
		t.Fatalf("first %s created=%v, again %s created=%v", first.ID, first.Created, again.ID, again.Created)
	}
	other, err := StagePublish(e.ctx, e.c, sampleClip, client.WithIdempotencyKey("clip-1-v2"))
	if err != nil || other.ID == first.ID {
		t.Fatalf("another key: %v, %v", other, err)
	}
	if _, err := first.Result(e.ctx); err != nil {
		t.Fatal(err)
	}
}

// TestE2EInputValidation: a bad input or plan is refused with 400 and the
// field path, and nothing is written.
func TestE2EInputValidation(t *testing.T) {
	e := startE2E(t, Faults{})
	pub := mustPlan(PublishPlan())
	bad := map[string]any{"id": "c", "url": "u", "seconds": 1.5, "tags": []any{"a", "b", 3}, "labels": map[string]string{},
		"taken": "2026-11-21T10:00:00Z", "ttl": 1}
	for _, tt := range []struct {
		name  string
		stage func() error
		field string
	}{
		{"list element", func() error { _, err := e.c.StageFlow(e.ctx, pub, bad); return err }, "input.tags[2]"},
		{"unknown field", func() error {
			b := map[string]any{"id": "c", "url": "u", "seconds": 1.5, "tags": nil, "labels": nil, "taken": "2026-11-21T10:00:00Z", "ttl": 1, "colour": "red"}
			_, err := e.c.StageFlow(e.ctx, pub, b)
			return err
		}, "input.colour"},
		{"missing field", func() error { _, err := e.c.StageTemplate(e.ctx, "publish", map[string]any{"id": "c"}); return err }, "input.url"},
		{"fractional int", func() error {
			_, err := e.c.StageTemplate(e.ctx, "nightly_etl", map[string]any{"source": "s", "day": "d", "expected_rows": 1.5})
			return err
		}, "input.expected_rows"},
		{"bad plan", func() error {
			p := *pub
			p.Execs = slices.Clone(p.Execs)
			p.Execs[1].Join.Kind = "most"
			_, err := e.c.StageFlow(e.ctx, &p, sampleClip)
			return err
		}, "plan.execs[1].join.kind"},
	} {
		err := tt.stage()
		var ae *client.APIError
		if !errors.As(err, &ae) || ae.Status != 400 || ae.Code != wire.CodeValidation || ae.Details["field"] != tt.field {
			t.Errorf("%s: got %v (details %v), want 400 validation_failed on %s", tt.name, err, detailsOf(err), tt.field)
		}
	}
	for _, ns := range []string{"media", "etl"} {
		list, err := e.c.ListExecutions(e.ctx, client.ListOptions{Namespace: ns})
		if err != nil || len(list.Executions) != 0 {
			t.Fatalf("namespace %s after refused stagings: %v, %v", ns, list, err)
		}
	}
	// A typed staging that fails says which flow once (the generated code
	// added it to the client's error, which names it already).
	dead, err := client.New("http://127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := StagePublish(e.ctx, dead, sampleClip); err == nil || strings.Count(err.Error(), "publish") != 1 {
		t.Fatalf("StagePublish against no server = %v, want the flow named once", err)
	}
	if _, err := e.c.StageTemplate(e.ctx, "nope", sampleClip); !client.IsCode(err, wire.CodeNotFound) {
		t.Fatalf("unknown template: %v", err)
	}
	if _, err := e.c.GetRun(e.ctx, "not-an-id"); !client.IsCode(err, wire.CodeNotFound) {
		t.Fatalf("malformed run id: %v", err)
	}
}

func detailsOf(err error) map[string]any {
	var ae *client.APIError
	if errors.As(err, &ae) {
		return ae.Details
	}
	return nil
}

func TestE2ETemplates(t *testing.T) {
	e := startE2E(t, Faults{})
	list, err := e.c.Templates(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tp := range list {
		names = append(names, tp.Name)
	}
	if diff := cmp.Diff([]string{"ask", "fulfil_order", "nightly_etl", "publish"}, names); diff != "" {
		t.Fatalf("templates (-want +got):\n%s", diff)
	}
	etl := list[2]
	if etl.Namespace != "etl" || etl.Input == nil || etl.Input.Name != "Batch" || etl.Output.Name != "Loaded" || len(etl.Execs) != 7 || etl.Result != "load" {
		t.Fatalf("nightly_etl template = %+v", etl)
	}
	one, err := e.c.Template(e.ctx, "nightly_etl")
	if err != nil || one.Plan == nil || !cmp.Equal(one.Plan, mustPlan(NightlyETLPlan())) {
		t.Fatalf("template with plan: %v", err)
	}
	run, err := e.c.StageTemplate(e.ctx, "nightly_etl", Batch{Source: "clickstream", Day: "2026-11-20"})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := run.Result(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	var got Loaded
	if err := json.Unmarshal(raw, &got); err != nil || got.Table != "events_clickstream" {
		t.Fatalf("result %s: %v", raw, err)
	}
	// The result route answers at once for an ended run, and waits for
	// a running one only as long as asked.
	res, err := e.c.RunResult(e.ctx, run.ID, 0)
	if err != nil || res.State != wire.RunSucceeded || len(res.Execs) != 0 {
		t.Fatalf("RunResult: %+v, %v", res, err)
	}
}

// TestE2EResultWaits: a result request parked on a running run answers as
// soon as the run ends (woken by the run-end notice), and answers
// not_terminal when its wait ends first.
func TestE2EResultWaits(t *testing.T) {
	e := startE2E(t, Faults{Hang: map[string]bool{"publish.probe": true}})
	run, err := StagePublish(e.ctx, e.c, sampleClip)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := e.c.RunResult(e.ctx, run.ID, 200*time.Millisecond); !client.IsCode(err, wire.CodeNotTerminal) {
		t.Fatalf("RunResult of a running run: %v", err)
	}
	if d := time.Since(start); d < 200*time.Millisecond {
		t.Fatalf("RunResult answered after %s, before its wait", d)
	}
	got := make(chan error, 1)
	go func() {
		res, err := e.c.RunResult(e.ctx, run.ID, 30*time.Second)
		if err == nil && res.State != wire.RunCancelled {
			err = errors.New("state " + res.State)
		}
		got <- err
	}()
	time.Sleep(100 * time.Millisecond)
	if _, err := run.Cancel(e.ctx, ""); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the waiting result request did not answer when the run ended")
	}
}
