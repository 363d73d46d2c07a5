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
// a worker says so when no worker is connected to its namespace, none of
// those connected takes its lane, or none of those that take it has a
// handler for its kind; the hint goes once one does, or once a worker of
// the lane connects that does not say which kinds it handles.
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

	kinds := []string{"k1", "k2", "k3", "k4", "k5", "k6", "two.b"}
	if _, err := c.Heartbeat(ctx, wire.WorkerHeartbeat{WorkerID: "w2", Lanes: []string{"default", "gpu"}, Kinds: kinds}); err != nil {
		t.Fatal(err)
	}
	check("a worker of the lanes without the kinds",
		"no connected worker of namespace default that takes lane default has a handler for kind two.a (they handle k1, k2, k3, k4, k5 and 2 more)",
		"no connected worker of namespace default that takes lane gpu has a handler for kind k (they handle k1, k2, k3, k4, k5 and 2 more)")

	if _, err := c.Heartbeat(ctx, wire.WorkerHeartbeat{WorkerID: "w2", Lanes: []string{"default", "gpu"}, Kinds: append(kinds, "two.a", "k")}); err != nil {
		t.Fatal(err)
	}
	check("a worker of the lanes and the kinds", "", "")

	if _, err := c.Heartbeat(ctx, wire.WorkerHeartbeat{WorkerID: "w2", Lanes: []string{"default", "gpu"}, Kinds: []string{"k9"}}); err != nil {
		t.Fatal(err)
	}
	check("the kinds gone again",
		"no connected worker of namespace default that takes lane default has a handler for kind two.a (they handle k9)",
		"no connected worker of namespace default that takes lane gpu has a handler for kind k (they handle k9)")
	if _, err := c.Heartbeat(ctx, wire.WorkerHeartbeat{WorkerID: "w3", Lanes: []string{"default", "gpu"}}); err != nil {
		t.Fatal(err)
	}
	check("a worker of the lanes that does not say its kinds", "", "")
	ws, err := c.Workers(ctx, "default")
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range ws.Workers {
		if w.WorkerID == "w2" && (len(w.Kinds) != 1 || w.Kinds[0] != "k9") {
			t.Fatalf("GET /v1/workers lists w2 with kinds %v, want [k9]", w.Kinds)
		}
	}
}
