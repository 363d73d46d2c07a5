package server_test

import (
	"testing"
	"time"

	"github.com/flowfabric/ff/compiler/plan"
	"github.com/flowfabric/ff/runtime/server"
	"github.com/flowfabric/ff/runtime/server/servertest"
	"github.com/flowfabric/ff/runtime/wire"
)

// TestWaitingSaysWhyNoWorkerClaims: a member or an execution waiting for
// a worker says so when no worker is connected to its namespace, or none
// of those connected takes its lane; the hint goes once one does.
func TestWaitingSaysWhyNoWorkerClaims(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t, func(c *server.Config) { c.Templates = []*plan.Flow{twoStep()} })
	ctx := ctxT(t)
	c := env.Client
	run := stageTwoStep(t, env)
	x, _, err := c.CreateExecution(ctx, wire.CreateExecution{Kind: "k", Lane: "gpu"})
	if err != nil {
		t.Fatal(err)
	}
	// The registry is read at most once a second per namespace: a change
	// shows within about that.
	check := func(step, wantA, wantX string) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); ; {
			r, err := c.GetRun(ctx, run.ID)
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			for _, m := range r.Execs {
				got[m.Name] = m.Blocked
			}
			e, err := c.GetExecution(ctx, x.ID)
			if err != nil {
				t.Fatal(err)
			}
			if got["a"] == wantA && got["b"] == "" && e.State == "waiting" && e.BlockingDetail == wantX {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: member a %q (want %q), pending b %q (want none); execution %s %q (want waiting %q)",
					step, got["a"], wantA, got["b"], e.State, e.BlockingDetail, wantX)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	check("no worker", "no worker is connected to namespace default", "no worker is connected to namespace default")

	if _, err := c.Heartbeat(ctx, wire.WorkerHeartbeat{WorkerID: "w1", Lanes: []string{"batch", "cpu"}}); err != nil {
		t.Fatal(err)
	}
	check("a worker of other lanes",
		"no connected worker of namespace default takes lane default (they take batch, cpu)",
		"no connected worker of namespace default takes lane gpu (they take batch, cpu)")

	if _, err := c.Heartbeat(ctx, wire.WorkerHeartbeat{WorkerID: "w2", Lanes: []string{"default", "gpu"}}); err != nil {
		t.Fatal(err)
	}
	check("a worker of the lanes", "", "")
}
