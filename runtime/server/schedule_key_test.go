package server_test

import (
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/flowfabric/ff/compiler/plan"
	"github.com/flowfabric/ff/runtime/client"
	"github.com/flowfabric/ff/runtime/server"
	"github.com/flowfabric/ff/runtime/server/servertest"
	"github.com/flowfabric/ff/runtime/store"
)

// The idempotency keys of schedule fires ("ffrun-schedule:<name>:<fire
// ms>") are ffrun's own: a caller's run may not take one (it then stood
// for that fire: the fire started no run, recorded the caller's run, with
// the caller's input, as the schedule's).
func TestScheduleKeyTakenByACaller(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t, func(c *server.Config) {
		c.Templates = []*plan.Flow{twoStep()}
		c.Scanners.Schedules = 20 * time.Millisecond
	})
	ctx := ctxT(t)
	fire := time.Now().Truncate(time.Second)
	key := "ffrun-schedule:tick:" + strconv.FormatInt(fire.UnixMilli(), 10)
	caller, err := env.Client.StageTemplate(ctx, "two", map[string]string{"s": "the caller's"}, client.WithIdempotencyKey(key))
	if err != nil {
		t.Logf("the API refused a run with a fire's key: %v", err)
		return // what is wanted
	}
	spec := store.ScheduleSpec{Name: "tick", Template: "two", Cron: "@every 1s", Input: []byte(`{"s":"the schedule's"}`)}
	if _, err := env.Server.Store().PutSchedule(ctx, spec, fire); err != nil {
		t.Fatal(err)
	}
	s := waitFires(t, env.Client, "tick", 1, 10*time.Second)
	if err := env.Client.DeleteSchedule(ctx, "tick"); err != nil {
		t.Fatal(err)
	}
	got, err := env.Client.GetRun(ctx, caller.ID)
	if err != nil {
		t.Fatal(err)
	}
	var in struct{ S string }
	_ = json.Unmarshal(got.Input, &in)
	if got.Schedule == "tick" || s.LastFireAt.Equal(fire) && s.LastRunID == caller.ID {
		t.Fatalf("a caller's run with key %q: it says it was started by schedule %q (at %v), and the fire at %s recorded it "+
			"(last run %s, input s=%q) instead of starting its own", key, got.Schedule, got.ScheduledAt, fire, s.LastRunID, in.S)
	}
}
