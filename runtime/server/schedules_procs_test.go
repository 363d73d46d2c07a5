package server_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/flowfabric/ff/compiler/plan"
	"github.com/flowfabric/ff/runtime/server"
	"github.com/flowfabric/ff/runtime/server/servertest"
	"github.com/flowfabric/ff/runtime/wire"
)

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
	var got *wire.Schedule
	var err error
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if got, err = a.Client.GetSchedule(ctx, "tick"); err == nil && got.Fires >= 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no 3 fires in 10 s: %+v, %v", got, err)
		}
	}
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
	if ae := apiErr(t, err); ae.Status != http.StatusBadRequest {
		t.Fatalf("timezone Local: %v", err)
	}
}
