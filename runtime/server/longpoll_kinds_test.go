package server_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/flowfabric/ff/runtime/server"
	"github.com/flowfabric/ff/runtime/server/servertest"
	"github.com/flowfabric/ff/runtime/wire"
)

// TestLongPollKindWokenPastOtherKinds: a worker with the handler of kind
// "x" long-polls a lane it shares with workers of kind "y". Tasks of kind y
// land in many partitions (each wake-up rouses the x worker's claim and
// hints its partition as maybe holding work), then one task of kind x. The
// x claim must get it promptly although ScanMax is below the number of
// hinted partitions: an attempt that spends its claim calls on y-only
// partitions must not park with x's partition still hinted, as nothing
// would wake it again (the hint resync, the safety net, is off here).
func TestLongPollKindWokenPastOtherKinds(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t, noSafetyNet, func(c *server.Config) { c.FlowPartitions, c.ScanMax = 16, 2 })
	ctx := ctxT(t)
	x := wire.ClaimRequest{WorkerID: "wx", InstanceID: "wx-1", Kinds: []string{"x"}, WaitMs: 8_000}
	got := claimAsync(ctx, env, x)
	settle()
	// One batch, so that their wake-ups come in a burst; idempotency keys
	// spread them over the partitions.
	var ys []wire.CreateExecution
	for i := range 48 {
		ys = append(ys, wire.CreateExecution{Kind: "y", IdempotencyKey: "y" + strconv.Itoa(i)})
	}
	if _, err := env.Client.CreateExecutions(ctx, ys); err != nil {
		t.Fatal(err)
	}
	settle()
	start := time.Now()
	if _, _, err := env.Client.CreateExecution(ctx, wire.CreateExecution{Kind: "x"}); err != nil {
		t.Fatal(err)
	}
	res := <-got
	if res.err != nil {
		t.Fatal(res.err)
	}
	if len(res.tasks) != 1 {
		t.Fatalf("the x claim returned %d tasks after %s (its whole wait) with the x task eligible", len(res.tasks), time.Since(start).Round(time.Millisecond))
	}
	// Half the claim's wait: a claim that slept through the wake-up is
	// answered only when its 8 s wait ends, while a loaded machine can take
	// a second or more to create the task and pass the wake-up on.
	if d := time.Since(start); d > 4*time.Second {
		t.Fatalf("the x claim got its task %s after it was created: it slept through the wake-up", d.Round(time.Millisecond))
	}
}
