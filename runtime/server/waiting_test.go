package server_test

import (
	"fmt"
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

// An execution whose required capability is on one worker and whose kind's
// handler is on another is not parked (the namespace's capability union
// covers it) and waits for ever: the hint says why, for a run's member and
// a standalone execution alike.
func TestWaitingSaysWhenCapabilitiesAndHandlerAreApart(t *testing.T) {
	t.Parallel()
	f := twoStep()
	f.Execs[0].Requires = []string{"gpu"}
	env := servertest.Start(t, func(c *server.Config) { c.Templates = []*plan.Flow{f} })
	ctx := ctxT(t)
	c := env.Client
	for _, hb := range []wire.WorkerHeartbeat{
		{WorkerID: "has-gpu", Capabilities: []string{"gpu"}, Kinds: []string{"other"}},
		{WorkerID: "has-handlers", Kinds: []string{"two.a", "two.b", "k"}},
	} {
		if _, err := c.Heartbeat(ctx, hb); err != nil {
			t.Fatal(err)
		}
	}
	run, err := c.StageTemplate(ctx, "two", map[string]string{"s": "x"})
	if err != nil {
		t.Fatal(err)
	}
	x, _, err := c.CreateExecution(ctx, wire.CreateExecution{Kind: "k", Requires: []string{"gpu"}})
	if err != nil {
		t.Fatal(err)
	}
	const why = "no connected worker of namespace default that takes lane default and handles kind %s has the capabilities it requires (gpu): workers with them lack its handler"
	r, err := c.GetRun(ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range r.Execs {
		if m.Name == "a" && (m.State != "waiting" || m.Blocked != fmt.Sprintf(why, "two.a")) {
			t.Errorf("member a: %s %q, want waiting %q", m.State, m.Blocked, fmt.Sprintf(why, "two.a"))
		}
	}
	if e, err := c.GetExecution(ctx, x.ID); err != nil || e.State != "waiting" || e.BlockingDetail != fmt.Sprintf(why, "k") {
		t.Fatalf("execution: %+v %v, want waiting %q", e, err, fmt.Sprintf(why, "k"))
	}
	// A worker with both: no hint.
	if _, err := c.Heartbeat(ctx, wire.WorkerHeartbeat{WorkerID: "has-both", Capabilities: []string{"gpu"}, Kinds: []string{"k"}}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		e, err := c.GetExecution(ctx, x.ID)
		if err == nil && e.BlockingDetail == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("with a worker that has both: %+v %v, want no hint", e, err)
		}
	}
}
