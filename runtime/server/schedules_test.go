package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/flowfabric/ff/compiler/plan"
	"github.com/flowfabric/ff/runtime/client"
	"github.com/flowfabric/ff/runtime/server"
	"github.com/flowfabric/ff/runtime/server/servertest"
	"github.com/flowfabric/ff/runtime/store"
	"github.com/flowfabric/ff/runtime/wire"
	"github.com/flowfabric/ff/runtime/worker"
)

// echoTwoStep runs the two-step template's handlers on env.
func echoTwoStep(t *testing.T, env *servertest.Env) {
	t.Helper()
	echo := func(_ context.Context, task *worker.Task) (json.RawMessage, error) { return task.Input(), nil }
	runWorker(t, env, worker.Config{Name: "w", Concurrency: 4}, map[string]worker.Handler{"two.a": echo, "two.b": echo})
}

// TestScheduleStartsRuns: a schedule of the two-step template every
// second starts runs that a worker ends; the schedule says how many fires
// it made and which run the last one started, runs are not made twice for
// one fire, and a deleted schedule starts none.
func TestScheduleStartsRuns(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t, func(c *server.Config) {
		c.Templates = []*plan.Flow{twoStep()}
		c.Scanners.Schedules = 50 * time.Millisecond
	})
	echoTwoStep(t, env)
	c := env.Client
	ctx := ctxT(t)
	s, created, err := c.PutSchedule(ctx, "tick", wire.PutSchedule{Template: "two", Cron: " @every 1s ",
		Input: json.RawMessage(`{"s":"hi {{fire_date}} {{fire_time}}"}`)})
	if err != nil || !created {
		t.Fatalf("PutSchedule = %+v, %v, %v", s, created, err)
	}
	// The zone and namespace it was left to are said; the expression is kept trimmed.
	if s.NextAt == nil || time.Until(*s.NextAt) > time.Second || s.Timezone != "UTC" || s.Namespace != "default" ||
		s.Cron != "@every 1s" || s.Fires != 0 {
		t.Fatalf("new schedule %+v", s)
	}
	got := waitFires(t, c, "tick", 2, 10*time.Second)
	if got.LastRunID == "" || got.LastError != "" || got.LastFireAt == nil || got.LastFireAt.UnixMilli()%1000 != 0 ||
		!got.NextAt.After(*got.LastFireAt) {
		t.Fatalf("schedule after its fires: %+v", got)
	}
	run, err := c.RunResult(ctx, got.LastRunID, 10*time.Second)
	// The run's input has its fire's time filled in.
	fired := got.LastFireAt.UTC()
	if want := `{"s":"hi ` + fired.Format(time.DateOnly) + ` ` + fired.Format(time.RFC3339) + `"}`; err != nil ||
		run.State != wire.RunSucceeded || string(run.Result) != want {
		t.Fatalf("the scheduled run: %+v, %v; want result %s", run, err, want)
	}
	// The run says which schedule and fire started it, in the result
	// answer and in the run.
	full, err := c.GetRun(ctx, got.LastRunID)
	for _, r := range []*wire.FlowRun{run, full} {
		if err != nil || r.Schedule != "tick" || r.ScheduledAt == nil || !r.ScheduledAt.Equal(*got.LastFireAt) ||
			!strings.HasPrefix(r.IdempotencyKey, "ffrun-schedule:tick:") {
			t.Fatalf("the scheduled run's origin: schedule %q at %v, key %q (%v); want tick at %v",
				r.Schedule, r.ScheduledAt, r.IdempotencyKey, err, got.LastFireAt)
		}
	}
	// The schedule says how its last run went, in the list and alone:
	// put once more to fire years from now (its record is kept), its last
	// run is the one it has, which is waited for.
	if _, _, err := c.PutSchedule(ctx, "tick", wire.PutSchedule{Template: "two", Cron: "0 0 1 1 *",
		Input: json.RawMessage(`{"s":"hi"}`)}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // a pass that read it before the put may still record a fire
	last, err := c.GetSchedule(ctx, "tick")
	if err != nil || last.LastRunID == "" {
		t.Fatalf("GetSchedule = %+v, %v", last, err)
	}
	if _, err := c.RunResult(ctx, last.LastRunID, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	l, err := c.ListSchedules(ctx)
	if err != nil || len(l.Schedules) != 1 || l.Schedules[0].LastRunID != last.LastRunID || l.Schedules[0].LastRunState != wire.RunSucceeded {
		t.Fatalf("ListSchedules = %+v, %v; want last run %s succeeded", l, err, last.LastRunID)
	}
	if one, err := c.GetSchedule(ctx, "tick"); err != nil || one.LastRunState != wire.RunSucceeded {
		t.Fatalf("GetSchedule = %+v, %v; want its last run succeeded", one, err)
	}
	if err := c.DeleteSchedule(ctx, "tick"); err != nil {
		t.Fatal(err)
	}
	// A pass that read the schedule before the delete may still stage its
	// fire: let it end before counting.
	time.Sleep(300 * time.Millisecond)
	runs, err := c.ListRuns(ctx, clientRuns("two"))
	if err != nil {
		t.Fatal(err)
	}
	n := len(runs.Runs)
	time.Sleep(1500 * time.Millisecond)
	if again, err := c.ListRuns(ctx, clientRuns("two")); err != nil || len(again.Runs) != n {
		t.Fatalf("runs after the delete: %d then %d (%v); want no new one", n, len(again.Runs), err)
	}
	if _, err := c.GetSchedule(ctx, "tick"); apiErr(t, err).Status != http.StatusNotFound {
		t.Fatalf("GetSchedule after the delete: %v", err)
	}
	if err := c.DeleteSchedule(ctx, "tick"); apiErr(t, err).Status != http.StatusNotFound {
		t.Fatalf("DeleteSchedule again: %v", err)
	}
}

// TestScheduleFiresOncePerTimeAcrossProcesses: two ffrun processes on one
// Valkey both look for due schedules every few milliseconds, so both stage
// nearly every fire: each fire time still starts one run (its key), and
// each is recorded once.
func TestScheduleFiresOncePerTimeAcrossProcesses(t *testing.T) {
	t.Parallel()
	shared := func(prefix string) func(*server.Config) {
		return func(c *server.Config) {
			c.Templates = []*plan.Flow{twoStep()}
			c.Scanners.Schedules = 5 * time.Millisecond
			if prefix != "" {
				c.KeyPrefix = prefix
			}
		}
	}
	a := servertest.Start(t, shared(""))
	b := servertest.Start(t, shared(a.Config.KeyPrefix))
	echoTwoStep(t, a)
	ctx := ctxT(t)
	if _, _, err := a.Client.PutSchedule(ctx, "tick", wire.PutSchedule{Template: "two", Cron: "@every 1s", Input: json.RawMessage(`{"s":"x"}`)}); err != nil {
		t.Fatal(err)
	}
	s := waitFires(t, b.Client, "tick", 3, 15*time.Second)
	if err := b.Client.DeleteSchedule(ctx, "tick"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // a pass that read it before the delete ends
	runs, err := a.Client.ListRuns(ctx, clientRuns("two"))
	if err != nil {
		t.Fatal(err)
	}
	// The fires read, plus at most one between that read and the delete.
	if n := len(runs.Runs); n < int(s.Fires) || n > int(s.Fires)+1 {
		t.Fatalf("%d runs for %d fires: a fire started more than one run, or none", n, s.Fires)
	}
}

// A fire this process cannot start (no template of that name here) is left
// due for another process, saying why; a fire found long after its time
// (no ffrun ran) is skipped as missed and the schedule moves on.
func TestScheduleFiresLeftAndMissed(t *testing.T) {
	t.Parallel()
	// a accepts the schedule (it serves the template) but never looks for
	// due ones; b serves no template.
	a := servertest.Start(t, func(c *server.Config) {
		c.Templates = []*plan.Flow{twoStep()}
		c.Scanners.Schedules = time.Hour
	})
	servertest.Start(t, func(c *server.Config) {
		c.KeyPrefix = a.Config.KeyPrefix
		c.Scanners.Schedules = 10 * time.Millisecond
	})
	ctx := ctxT(t)
	if _, _, err := a.Client.PutSchedule(ctx, "tick", wire.PutSchedule{Template: "two", Cron: "@every 1s", Input: json.RawMessage(`{"s":"x"}`)}); err != nil {
		t.Fatal(err)
	}
	var s *wire.Schedule
	var err error
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if s, err = a.Client.GetSchedule(ctx, "tick"); err == nil && s.LastError != "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no word on the fire left to another process: %+v, %v", s, err)
		}
	}
	if s.Fires != 0 || !strings.Contains(s.LastError, `serves template "two"`) || !s.NextAt.Before(time.Now()) {
		t.Fatalf("a fire left due: %+v", s)
	}

	// Two hours late: missed (its key would have expired), moved on.
	st := a.Server.Store()
	spec := store.ScheduleSpec{Name: "late", Template: "nope", Cron: "@every 1h", Input: []byte(`null`)}
	if _, err := st.PutSchedule(ctx, spec, time.Now().Add(-2*time.Hour).Truncate(time.Hour)); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if s, err = a.Client.GetSchedule(ctx, "late"); err == nil && s.Fires == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the late fire was not skipped: %+v, %v", s, err)
		}
	}
	if !strings.HasPrefix(s.LastError, "missed: ") || s.LastRunID != "" || !s.NextAt.After(time.Now()) {
		t.Fatalf("after a missed fire: %+v", s)
	}
}

// TestSchedulePutRefusals: a schedule is checked before anything is
// stored: the template, the expression, the time zone, the input.
func TestSchedulePutRefusals(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t, func(c *server.Config) { c.Templates = []*plan.Flow{twoStep()} })
	c := env.Client
	ctx := ctxT(t)
	for _, tc := range []struct {
		name  string
		req   wire.PutSchedule
		field string
		msg   string
	}{
		{"no template", wire.PutSchedule{Cron: "@daily"}, "template", "required"},
		{"no expression", wire.PutSchedule{Template: "two", Input: json.RawMessage(`{"s":"x"}`)}, "cron", "required"},
		{"@every in days", wire.PutSchedule{Template: "two", Cron: "@every 2d", Input: json.RawMessage(`{"s":"x"}`)}, "cron", "such as 90s"},
		{"an unknown template", wire.PutSchedule{Template: "nope", Cron: "@daily"}, "template", `no template "nope"`},
		{"a misspelt template", wire.PutSchedule{Template: "tow", Cron: "@daily"}, "template", `no template "tow"; did you mean "two"?`},
		{"a bad expression", wire.PutSchedule{Template: "two", Cron: "61 * * * *", Input: json.RawMessage(`{"s":"x"}`)}, "cron", "61"},
		{"six fields", wire.PutSchedule{Template: "two", Cron: "0 0 * * * *", Input: json.RawMessage(`{"s":"x"}`)}, "cron", "5 fields"},
		{"an unknown zone", wire.PutSchedule{Template: "two", Cron: "@daily", Timezone: "Mars/Olympus", Input: json.RawMessage(`{"s":"x"}`)}, "timezone", "Mars/Olympus"},
		{"an input that does not fit", wire.PutSchedule{Template: "two", Cron: "@daily", Input: json.RawMessage(`{"s":1}`)}, "input.s", ""},
		{"no input where one is needed", wire.PutSchedule{Template: "two", Cron: "@daily"}, "input", ""},
	} {
		_, _, err := c.PutSchedule(ctx, "s1", tc.req)
		ae := apiErr(t, err)
		if ae.Status != http.StatusBadRequest || ae.Details["field"] != tc.field || !strings.Contains(ae.Message, tc.msg) {
			t.Errorf("%s: %d %v %q, want 400 on %s mentioning %q", tc.name, ae.Status, ae.Details, ae.Message, tc.field, tc.msg)
		}
	}
	for name, want := range map[string]string{"has space": "only letters", "a/b": "must not contain '/'", "..": "path segment", ".": "path segment"} {
		if _, _, err := c.PutSchedule(ctx, name, wire.PutSchedule{Template: "two", Cron: "@daily", Input: json.RawMessage(`{"s":"x"}`)}); apiErr(t, err).Status != http.StatusBadRequest ||
			!strings.Contains(err.Error(), want) {
			t.Errorf("a bad name %q: %v, want 400 saying %q", name, err, want)
		}
	}
	if _, _, err := c.PutSchedule(ctx, "never", wire.PutSchedule{Template: "two", Cron: "0 0 30 2 *", Input: json.RawMessage(`{"s":"x"}`)}); apiErr(t, err).Status != http.StatusBadRequest ||
		!strings.Contains(err.Error(), "never fires") {
		t.Errorf("an expression that never fires: %v", err)
	}
	if l, err := c.ListSchedules(ctx); err != nil || len(l.Schedules) != 0 {
		t.Fatalf("schedules after refusals: %+v, %v", l, err)
	}
	// In a zone: the next fire is the zone's 02:00.
	s, _, err := c.PutSchedule(ctx, "nightly", wire.PutSchedule{Template: "two", Cron: "0 2 * * *", Timezone: "America/New_York",
		Input: json.RawMessage(`{"s":"x"}`)})
	if err != nil {
		t.Fatal(err)
	}
	ny, _ := time.LoadLocation("America/New_York")
	if n := s.NextAt.In(ny); n.Hour() != 2 || n.Minute() != 0 || time.Until(n) > 25*time.Hour {
		t.Fatalf("next fire of 0 2 * * * in New York: %v", n)
	}
}

// clientRuns lists the runs of flow, up to 100.
func clientRuns(flow string) client.RunListOptions {
	return client.RunListOptions{Flow: flow, Limit: 100}
}

// TestScheduleLeftToTheProcessServingItsTemplate: two ffrun processes on
// one Valkey, only one of which serves the template (a rolling deploy, or
// processes with different --flows). The one without the template leaves
// every fire to the other, which starts the runs.
func TestScheduleLeftToTheProcessServingItsTemplate(t *testing.T) {
	t.Parallel()
	a := servertest.Start(t, func(c *server.Config) {
		c.Templates = []*plan.Flow{twoStep()}
		c.Scanners.Schedules = 300 * time.Millisecond
	})
	// b serves no template and looks for due schedules more often.
	b := servertest.Start(t, func(c *server.Config) {
		c.KeyPrefix = a.Config.KeyPrefix
		c.Scanners.Schedules = 10 * time.Millisecond
	})
	_ = b
	ctx := ctxT(t)
	if _, _, err := a.Client.PutSchedule(ctx, "tick", wire.PutSchedule{Template: "two", Cron: "@every 1s", Input: json.RawMessage(`{"s":"x"}`)}); err != nil {
		t.Fatal(err)
	}
	got := waitFires(t, a.Client, "tick", 3, 10*time.Second)
	runs, err := a.Client.ListRuns(ctx, clientRuns("two"))
	if err != nil {
		t.Fatal(err)
	}
	if len(runs.Runs) < 3 || got.LastRunID == "" {
		t.Fatalf("%d fires, %d runs, last run %q, last_error %q: the process without the template dropped fires",
			got.Fires, len(runs.Runs), got.LastRunID, got.LastError)
	}
}

// TestScheduleLocalZoneRefused: "Local" is not an IANA zone; it would be
// each ffrun host's own zone, so the hosts would fire at different times.
func TestScheduleLocalZoneRefused(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t, func(c *server.Config) { c.Templates = []*plan.Flow{twoStep()} })
	_, _, err := env.Client.PutSchedule(ctxT(t), "loc", wire.PutSchedule{Template: "two", Cron: "0 2 * * *", Timezone: "Local",
		Input: json.RawMessage(`{"s":"x"}`)})
	if err == nil {
		t.Fatal(`timezone "Local" accepted: fire times depend on the host's TZ`)
	}
	if ae := apiErr(t, err); ae.Status != http.StatusBadRequest || ae.Details["field"] != "timezone" || !strings.Contains(ae.Message, "each host's own zone") {
		t.Fatalf("timezone Local: %v, want 400 on timezone saying why", err)
	}
}

// An input under the 1 MiB limit that grows past it once filled in (each
// {{fire_time}} of 13 bytes becomes 20 or 25) is refused by PUT: every
// fire would be.
func TestScheduleFilledInputTooLarge(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t, func(c *server.Config) {
		c.Templates = []*plan.Flow{twoStep()}
		c.Scanners.Schedules = 50 * time.Millisecond
	})
	c := env.Client
	ctx := ctxT(t)
	in := `{"s":"` + strings.Repeat("{{fire_time}}", 60000) + `"}` // 780 KB; 1.2 MB filled in
	_, _, err := c.PutSchedule(ctx, "big", wire.PutSchedule{Template: "two", Cron: "@every 1s", Input: json.RawMessage(in)})
	if ae := apiErr(t, err); ae.Status != http.StatusRequestEntityTooLarge || ae.Details["field"] != "input" ||
		!strings.Contains(ae.Message, "placeholders filled in") {
		t.Fatalf("PUT of an input too large once filled in: %v", err)
	}
}

// waitFires waits up to within for schedule name to have fired n times or
// more, its last fire having started a run, and returns it.
func waitFires(t *testing.T, c *client.Client, name string, n int64, within time.Duration) *wire.Schedule {
	t.Helper()
	ctx := ctxT(t)
	for deadline := time.Now().Add(within); ; time.Sleep(20 * time.Millisecond) {
		s, err := c.GetSchedule(ctx, name)
		if err == nil && s.Fires >= n && s.LastRunID != "" {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("schedule %s did not fire %d times in %s: %+v, %v", name, n, within, s, err)
		}
	}
}
