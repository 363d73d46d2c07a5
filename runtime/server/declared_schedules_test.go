package server_test

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/flowfabric/ff/compiler/plan"
	"github.com/flowfabric/ff/runtime/server"
	"github.com/flowfabric/ff/runtime/server/servertest"
	"github.com/flowfabric/ff/runtime/wire"
)

// TestDeclaredScheduleRegistered: a schedule of Config.Schedules is
// created at Open through the API (behind its token), listed with its
// input, fires, and is logged. A restart with the same declaration leaves
// it as it is (its fires and next fire kept); one with a changed
// declaration replaces it; a schedule created through the API and not
// declared is left alone.
func TestDeclaredScheduleRegistered(t *testing.T) {
	t.Parallel()
	var logs servertest.LogBuffer
	declared := plan.Schedule{Name: "tick", Flow: "two", Cron: "@every 1s", Input: json.RawMessage(`{"s":"day {{fire_date}}"}`)}
	a := servertest.Start(t, func(c *server.Config) {
		c.Token = "declared-token-0123"
		c.Templates = []*plan.Flow{twoStep()}
		c.Schedules = []plan.Schedule{declared}
		c.Scanners.Schedules = 50 * time.Millisecond
		c.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	})
	if !strings.Contains(logs.String(), `msg="schedule registered" schedule=tick flow=two cron="@every 1s" timezone=UTC created=true unchanged=false`) {
		t.Errorf("no registration logged:\n%s", logs.String())
	}
	ctx := ctxT(t)
	l, err := a.Client.ListSchedules(ctx)
	if err != nil || len(l.Schedules) != 1 {
		t.Fatalf("ListSchedules = %+v, %v; want the declared schedule", l, err)
	}
	if s := l.Schedules[0]; s.Name != "tick" || s.Template != "two" || s.Cron != "@every 1s" || s.Timezone != "UTC" ||
		string(s.Input) != `{"s":"day {{fire_date}}"}` || !s.Declared {
		t.Fatalf("listed schedule %+v (input %s)", s, s.Input)
	}
	echoTwoStep(t, a)
	got := waitFires(t, a.Client, "tick", 1, 10*time.Second)
	run, err := a.Client.RunResult(ctx, got.LastRunID, 10*time.Second)
	if want := `{"s":"day ` + got.LastFireAt.UTC().Format(time.DateOnly) + `"}`; err != nil || run.State != wire.RunSucceeded || string(run.Result) != want {
		t.Fatalf("the scheduled run: %+v, %v; want result %s", run, err, want)
	}
	if _, _, err := a.Client.PutSchedule(ctx, "manual", wire.PutSchedule{Template: "two", Cron: "0 3 * * *", Input: json.RawMessage(`{"s":"m"}`)}); err != nil {
		t.Fatal(err)
	}
	if err := a.Stop(); err != nil {
		t.Fatal(err)
	}
	before, err := a.Client.GetSchedule(ctx, "tick")
	if err == nil {
		t.Fatalf("GetSchedule from a stopped server: %+v", before)
	}

	// The same declaration: nothing changes, not even updated_at.
	cfg := a.Config
	cfg.DisableScanners = true // no fire between the two reads below
	b := servertest.StartConfig(t, cfg)
	kept, err := b.Client.GetSchedule(ctx, "tick")
	if err != nil || kept.UpdatedAt == nil || got.UpdatedAt == nil || !kept.UpdatedAt.Equal(*got.UpdatedAt) || kept.Fires < got.Fires {
		t.Fatalf("after a restart with the same declaration: %+v, %v; was %+v", kept, err, got)
	}
	if !strings.Contains(logs.String(), `msg="schedule registered" schedule=tick flow=two cron="@every 1s" timezone=UTC created=false unchanged=true`) {
		t.Errorf("no unchanged registration logged:\n%s", logs.String())
	}
	if err := b.Stop(); err != nil {
		t.Fatal(err)
	}

	// A changed declaration replaces the schedule; "manual" is kept.
	cfg.Schedules = []plan.Schedule{{Name: "tick", Flow: "two", Cron: "30 1 * * *", Timezone: "Europe/Berlin", Input: json.RawMessage(`{"s":"changed"}`)}}
	c := servertest.StartConfig(t, cfg)
	l, err = c.Client.ListSchedules(ctx)
	if err != nil || len(l.Schedules) != 2 {
		t.Fatalf("ListSchedules after the restart = %+v, %v; want manual and tick", l, err)
	}
	if s := l.Schedules[0]; s.Name != "manual" || s.Cron != "0 3 * * *" || string(s.Input) != `{"s":"m"}` || s.Declared {
		t.Errorf("the undeclared schedule changed: %+v", s)
	}
	if s := l.Schedules[1]; s.Name != "tick" || s.Cron != "30 1 * * *" || s.Timezone != "Europe/Berlin" || string(s.Input) != `{"s":"changed"}` || !s.Declared {
		t.Errorf("the declared schedule was not replaced: %+v (input %s)", s, s.Input)
	}
	if strings.Contains(logs.String(), "these files do not declare") {
		t.Errorf("a warning with every declared schedule declared:\n%s", logs.String())
	}
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}

	// Declared no more: left as it is (it still fires), with a warning;
	// "manual" (the API's) is no orphan.
	cfg.Schedules = nil
	d := servertest.StartConfig(t, cfg)
	if l, err = d.Client.ListSchedules(ctx); err != nil || len(l.Schedules) != 2 {
		t.Fatalf("ListSchedules with the declaration removed = %+v, %v", l, err)
	}
	warn := regexp.MustCompile(`level=WARN msg="schedule declared in \.ff files that these files do not declare[^"]*" schedule=(\w+)`)
	if m := warn.FindAllStringSubmatch(logs.String(), -1); len(m) != 1 || m[0][1] != "tick" {
		t.Errorf("orphan warnings %q; want one for tick:\n%s", m, logs.String())
	}
	// Put through the API, a declared schedule becomes the API's.
	if s, _, err := d.Client.PutSchedule(ctx, "tick", wire.PutSchedule{Template: "two", Cron: "@hourly", Input: json.RawMessage(`{"s":"api"}`)}); err != nil || s.Declared {
		t.Errorf("tick put through the API: %+v, %v", s, err)
	}
}

// TestDeclaredScheduleRefused: a declared schedule the API refuses fails
// Open with the schedule's name and the API's message.
func TestDeclaredScheduleRefused(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t, func(c *server.Config) {
		c.Token = "declared-token-0123"
		c.Templates = []*plan.Flow{twoStep()}
		c.DisableScanners = true
	})
	for _, tc := range []struct {
		s    plan.Schedule
		want string
	}{
		{plan.Schedule{Name: "ghost", Flow: "nope", Cron: "@hourly"}, `schedule ghost of flow nope: refused: template: no template "nope"`},
		{plan.Schedule{Name: "typed", Flow: "two", Cron: "@hourly", Input: json.RawMessage(`{"s":1}`)}, `schedule typed of flow two: refused: input.s: want string, got a number`},
		{plan.Schedule{Name: "cron", Flow: "two", Cron: "0 2 * *", Input: json.RawMessage(`{"s":"a"}`)}, `schedule cron of flow two: refused: cron: want 5 fields`},
		{plan.Schedule{Name: "zone", Flow: "two", Cron: "@hourly", Timezone: "Local", Input: json.RawMessage(`{"s":"a"}`)}, `schedule zone of flow two: refused: timezone: "Local" is each host's own zone`},
	} {
		cfg := env.Config
		cfg.Schedules = []plan.Schedule{tc.s}
		srv, err := server.Open(ctxT(t), cfg)
		if err == nil {
			srv.Close()
			t.Errorf("Open with schedule %+v: no error", tc.s)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Open with schedule %s: %v; want %q", tc.s.Name, err, tc.want)
		}
	}
	if l, err := env.Client.ListSchedules(ctxT(t)); err != nil || len(l.Schedules) != 0 {
		t.Errorf("refused schedules were stored: %+v, %v", l, err)
	}
}

// TestDeclaredSchedulesAreNoHTTPTraffic: the schedules of Config.Schedules
// are registered at Open through the API's routes in process, but those
// calls are no request a client sent: ff_http_requests_total counts none of
// them (a started server nobody called reports no traffic, and no 404 of
// the read before the put), while it counts a client's call of the same
// route.
func TestDeclaredSchedulesAreNoHTTPTraffic(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t, func(c *server.Config) {
		c.Templates = []*plan.Flow{twoStep()}
		c.Schedules = []plan.Schedule{{Name: "nightly", Flow: "two", Cron: "0 3 * * *", Input: json.RawMessage(`{"s":"x"}`)}}
	})
	scheduleSeries := func() []string {
		t.Helper()
		r := env.Do(t, http.MethodGet, "/metrics", nil, "")
		if r.Status != http.StatusOK {
			t.Fatalf("GET /metrics: %d", r.Status)
		}
		var out []string
		for line := range strings.Lines(r.Body) {
			if strings.HasPrefix(line, "ff_http_requests_total{") && strings.Contains(line, `route="/v1/schedules`) {
				out = append(out, strings.TrimSpace(line))
			}
		}
		return out
	}
	if got := scheduleSeries(); len(got) > 0 {
		t.Errorf("a server no client called counts requests: %q", got)
	}
	if r := env.Do(t, http.MethodGet, "/v1/schedules", nil, ""); r.Status != http.StatusOK {
		t.Fatalf("GET /v1/schedules: %d %s", r.Status, r.Body)
	}
	want := `ff_http_requests_total{method="GET",route="/v1/schedules",code="200"} 1`
	if got := scheduleSeries(); len(got) != 1 || got[0] != want {
		t.Errorf("after one client call: %q, want [%s]", got, want)
	}
}
