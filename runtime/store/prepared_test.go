package store

import (
	"fmt"
	"testing"

	"github.com/flowfabric/ff/compiler/plan"
)

// What staging derives from a shared plan is kept per plan, within
// bounds, and only for valid plans; runs staged from a kept plan are the
// same as from a fresh one. A plan that is not shared is not kept.
func TestPreparedFlowsKept(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *Config) { c.FlowPartitions = 1 })
	stage := func(f *plan.Flow, shared bool, input string) *Run {
		t.Helper()
		r, created, err := e.s.StageFlow(e.ctx, StageRequest{Flow: f, Shared: shared, Input: []byte(input)})
		if err != nil || !created {
			t.Fatalf("StageFlow = %v, %v", created, err)
		}
		return r
	}
	kept := func(f *plan.Flow) *preparedFlow {
		e.s.prepared.mu.Lock()
		defer e.s.prepared.mu.Unlock()
		return e.s.prepared.flows[f]
	}

	f := flowOf("kept", execs("a", "b"), "a->b")
	f.Result = "b"
	r1 := stage(f, true, `1`)
	pf := kept(f)
	if pf == nil {
		t.Fatal("the shared plan's preparation was not kept")
	}
	r2 := stage(f, true, `2`)
	if kept(f) != pf {
		t.Fatal("a second run prepared the plan again")
	}
	once := flowOf("once", execs("a"))
	r3 := stage(once, false, `3`)
	if kept(once) != nil {
		t.Fatal("a plan that is not shared was kept")
	}
	ran := e.drive(func(g Grant) outcome { return outcome{result: append([]byte(g.FlowNode+"-"), g.Payload...)} })
	if len(ran) != 5 {
		t.Fatalf("ran %v, want both runs' a and b, and the third run's a", ran)
	}
	for id, want := range map[RunID]string{r1.ID: "b-a-1", r2.ID: "b-a-2"} {
		if r := e.run(id); r.State != RunSucceeded || string(r.Result) != want {
			t.Fatalf("run %s = %s %q, want succeeded %q", id, r.State, r.Result, want)
		}
	}
	if r := e.run(r3.ID); r.State != RunSucceeded {
		t.Fatalf("the unshared plan's run = %s", r.State)
	}

	bad := flowOf("bad", execs("a", "b"), "a->b", "b->a")
	if _, _, err := e.s.StageFlow(e.ctx, StageRequest{Flow: bad, Shared: true}); err == nil {
		t.Fatal("a cyclic plan was staged")
	}
	if kept(bad) != nil {
		t.Fatal("an invalid plan was kept")
	}

	for i := range preparedMaxFlows + 10 {
		if _, err := e.s.prepare(flowOf(fmt.Sprint("f", i), execs("a")), true); err != nil {
			t.Fatal(err)
		}
	}
	e.s.prepared.mu.Lock()
	defer e.s.prepared.mu.Unlock()
	if n := len(e.s.prepared.flows); n > preparedMaxFlows {
		t.Fatalf("%d plans kept, the bound is %d", n, preparedMaxFlows)
	}
	execs := 0
	for _, p := range e.s.prepared.flows {
		execs += p.execs
	}
	if execs != e.s.prepared.execs || execs > preparedMaxExecs {
		t.Fatalf("kept plans have %d members, counted %d (bound %d)", execs, e.s.prepared.execs, preparedMaxExecs)
	}
}
