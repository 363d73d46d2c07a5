package store

import (
	"fmt"
	"testing"
)

// What staging derives from a plan is kept per plan, within bounds, and
// only for valid plans; runs staged from a kept plan are the same as from
// a fresh one.
func TestPreparedFlowsKept(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *Config) { c.FlowPartitions = 1 })
	f := flowOf("kept", execs("a", "b"), "a->b")
	f.Result = "b"
	r1 := e.stage(f, `1`)
	pf := e.s.prepared.flows[f]
	if pf == nil {
		t.Fatal("the plan's preparation was not kept")
	}
	r2 := e.stage(f, `2`)
	if e.s.prepared.flows[f] != pf {
		t.Fatal("a second run prepared the plan again")
	}
	ran := e.drive(func(g Grant) outcome { return outcome{result: append([]byte(g.FlowNode+"-"), g.Payload...)} })
	if len(ran) != 4 {
		t.Fatalf("ran %v, want both runs' a and b", ran)
	}
	for id, want := range map[RunID]string{r1.ID: "b-a-1", r2.ID: "b-a-2"} {
		if r := e.run(id); r.State != RunSucceeded || string(r.Result) != want {
			t.Fatalf("run %s = %s %q, want succeeded %q", id, r.State, r.Result, want)
		}
	}

	bad := flowOf("bad", execs("a", "b"), "a->b", "b->a")
	if _, _, err := e.s.StageFlow(e.ctx, StageRequest{Flow: bad}); err == nil {
		t.Fatal("a cyclic plan was staged")
	}
	if _, ok := e.s.prepared.flows[bad]; ok {
		t.Fatal("an invalid plan was kept")
	}

	for i := range preparedMaxFlows + 10 {
		if _, err := e.s.prepare(flowOf(fmt.Sprint("f", i), execs("a"))); err != nil {
			t.Fatal(err)
		}
	}
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
