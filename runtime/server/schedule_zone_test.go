package server_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/flowfabric/ff/compiler/plan"
	"github.com/flowfabric/ff/runtime/server"
	"github.com/flowfabric/ff/runtime/server/servertest"
	"github.com/flowfabric/ff/runtime/store"
)

// A fire of a schedule in a zone far from UTC (Kiritimati, UTC+14, where
// the date is often UTC's next) fills {{fire_date}}, {{fire_date-1}} and
// {{fire_time}} with the fire's time in that zone.
func TestScheduleFireFillsInItsZone(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t, func(c *server.Config) {
		c.Templates = []*plan.Flow{twoStep()}
		c.Scanners.Schedules = 20 * time.Millisecond
	})
	ctx := ctxT(t)
	loc, err := time.LoadLocation("Pacific/Kiritimati")
	if err != nil {
		t.Fatal(err)
	}
	// Due now: the minute that began, well within the 5 minutes after
	// which a fire of a minutely schedule counts as missed.
	fire := time.Now().Truncate(time.Minute)
	spec := store.ScheduleSpec{Name: "kiri", Template: "two", Cron: "* * * * *", Timezone: "Pacific/Kiritimati",
		Input: []byte(`{"s":"{{fire_date}}|{{fire_date-1}}|{{fire_time}}"}`)}
	if _, err := env.Server.Store().PutSchedule(ctx, spec, fire); err != nil {
		t.Fatal(err)
	}
	s := waitFires(t, env.Client, "kiri", 1, 10*time.Second)
	if s.LastRunID == "" || s.LastFireAt == nil || !s.LastFireAt.Equal(fire) {
		t.Fatalf("after the fire: %+v; want the fire at %s with a run", s, fire)
	}
	run, err := env.Client.GetRun(ctx, s.LastRunID)
	if err != nil {
		t.Fatal(err)
	}
	var in struct{ S string }
	if err := json.Unmarshal(run.Input, &in); err != nil {
		t.Fatalf("run input %s: %v", run.Input, err)
	}
	local := fire.In(loc)
	want := local.Format(time.DateOnly) + "|" + local.AddDate(0, 0, -1).Format(time.DateOnly) + "|" + local.Format(time.RFC3339)
	if in.S != want {
		t.Fatalf("the fire's input s = %q, want %q", in.S, want)
	}
}
