package server_test

import (
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/flowfabric/ff/compiler/plan"
	"github.com/flowfabric/ff/runtime/internal/valkeytest"
	"github.com/flowfabric/ff/runtime/server"
	"github.com/flowfabric/ff/runtime/server/servertest"
	"github.com/flowfabric/ff/runtime/wire"
)

// TestDeclaredScheduleMarkedKeepsItsFire: a schedule registered by an ffrun
// before 'declared' existed is stored without a source, like one put
// through the API. The first start of the new ffrun with the same
// declaration marks it declared and keeps its next fire: a fire that fell
// while ffrun was down for the upgrade is not dropped.
func TestDeclaredScheduleMarkedKeepsItsFire(t *testing.T) {
	t.Parallel()
	ctx := ctxT(t)
	sc := plan.Schedule{Name: "nightly", Flow: "two", Cron: "0 3 * * *", Input: json.RawMessage(`{"s":"n"}`)}
	a := servertest.Start(t, func(c *server.Config) {
		c.Templates = []*plan.Flow{twoStep()}
		c.DisableScanners = true
	})
	// What an older ffrun's registration left: no source field.
	if _, _, err := a.Client.PutSchedule(ctx, sc.Name, wire.PutSchedule{Template: sc.Flow, Cron: sc.Cron, Input: sc.Input}); err != nil {
		t.Fatal(err)
	}
	// ffrun was down over a fire: it is due.
	vk := valkeytest.Client(t, a.Config.ValkeyAddr)
	missed := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	if err := vk.Do(ctx, vk.B().Zadd().Key(a.Config.KeyPrefix+"ff:{s}:schedules").ScoreMember().
		ScoreMember(float64(missed.UnixMilli()), sc.Name).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	if err := a.Stop(); err != nil {
		t.Fatal(err)
	}
	cfg := a.Config
	cfg.Schedules = []plan.Schedule{sc}
	b := servertest.StartConfig(t, cfg)
	got, err := b.Client.GetSchedule(ctx, sc.Name)
	if err != nil {
		t.Fatal(err)
	}
	if got.NextAt == nil || !got.NextAt.Equal(missed) || !got.Declared {
		t.Errorf("next fire after the upgrade start %v (declared %v); want the missed fire %v kept (score %s), and declared",
			got.NextAt, got.Declared, missed, strconv.FormatInt(missed.UnixMilli(), 10))
	}
}
