package store

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flowfabric/ff/compiler/plan"
)

// onePartition is an env whose runs and executions all share partition 0,
// so that hand-offs compete with other work of the same lane.
func onePartition(t *testing.T) *env {
	return newEnv(t, func(c *Config) { c.FlowPartitions = 1 })
}

func handoff(max int, lanes ...string) *Handoff {
	if len(lanes) == 0 {
		lanes = []string{"default"}
	}
	return &Handoff{Worker: worker1, Lanes: lanes, Max: max, LeaseTTL: time.Minute}
}

// finishOK completes g with result under hand-off h and returns the grants.
func (e *env) finishOK(g Grant, result string, h *Handoff) []Grant {
	e.t.Helper()
	res, grants, err := e.s.FinishHandoff(e.ctx, []Finish{{Lease: g.Lease, Result: []byte(result)}}, h)
	if err != nil || res[0].Err != nil || res[0].State != StateCompleted {
		e.t.Fatalf("FinishHandoff = %+v, %v", res, err)
	}
	for _, x := range grants {
		e.check(x.ExecutionID)
	}
	return grants
}

func eligibleCount(e *env, lane string) int64 {
	e.t.Helper()
	n, err := e.c.Do(e.ctx, e.c.B().Zcard().Key(e.s.k.lane(0, "default", lane, indexEligible)).Build()).AsInt64()
	if err != nil {
		e.t.Fatal(err)
	}
	return n
}

// A chain walked by hand-offs alone: each completion grants the next member
// to the same worker, with its input and upstreams, and the member never
// enters the eligible index; the run succeeds.
func TestHandoffWalksChain(t *testing.T) {
	t.Parallel()
	e := onePartition(t)
	f := flowOf("chain", execs("a", "b", "c"), "a->b", "b->c")
	f.Result = "c"
	r := e.stage(f, `{"n":1}`)
	g := e.claimAll(worker1, 1, time.Minute)
	if len(g) != 1 || g[0].FlowNode != "a" || !g[0].Downstream {
		t.Fatalf("claim = %+v, want a with Downstream", g)
	}
	var walked []string
	for cur := g[0]; ; {
		walked = append(walked, cur.FlowNode)
		next := e.finishOK(cur, `"out-`+cur.FlowNode+`"`, handoff(1))
		if cur.FlowNode == "c" {
			if len(next) != 0 {
				t.Fatalf("the last member handed off %+v", next)
			}
			break
		}
		if len(next) != 1 {
			t.Fatalf("finishing %s handed off %d grants, want 1", cur.FlowNode, len(next))
		}
		n := next[0]
		if n.Lease.ID == "" || n.Epoch != 1 || n.Attempt != 1 || n.AttemptType != AttemptInitial ||
			n.Kind != "chain."+n.FlowNode || !strings.HasSuffix(string(r.ID), "."+n.FlowID) || n.Namespace != "default" || n.Lane != "default" {
			t.Fatalf("hand-off grant = %+v", n)
		}
		if want := `"out-` + cur.FlowNode + `"`; string(n.Payload) != want || string(n.Upstreams[cur.FlowNode]) != want {
			t.Fatalf("%s got input %q upstreams %q, want %s", n.FlowNode, n.Payload, n.Upstreams, want)
		}
		if n.Downstream != (n.FlowNode != "c") {
			t.Fatalf("%s Downstream = %v", n.FlowNode, n.Downstream)
		}
		if x := e.get(n.ExecutionID); x.Lease == nil || x.Lease.InstanceID != worker1.InstanceID {
			t.Fatalf("%s lease = %+v, want held by %s", n.FlowNode, x.Lease, worker1.InstanceID)
		}
		if c := eligibleCount(e, "default"); c != 0 {
			t.Fatalf("eligible index holds %d after the hand-off of %s", c, n.FlowNode)
		}
		cur = n
	}
	if diff := cmp.Diff([]string{"a", "b", "c"}, walked); diff != "" {
		t.Fatalf("walk (-want +got):\n%s", diff)
	}
	done := e.run(r.ID)
	if done.State != RunSucceeded || string(done.Result) != `"out-c"` {
		t.Fatalf("run = %+v", done)
	}
}

// Every reason not to hand off leaves the downstream member eligible, in
// the index, for any claimer; the near misses of each reason hand off.
func TestHandoffDeclines(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		setup  func(f *plan.Flow) // before staging
		before func(e *env)       // before staging
		after  func(e *env)       // after claiming a, before finishing it
		h      *Handoff
		want   int // grants
	}{
		{name: "no hand-off asked", h: nil},
		{name: "other lanes", h: handoff(1, "elsewhere")},
		{name: "other namespace", h: &Handoff{Worker: WorkerIdentity{WorkerID: "w1", InstanceID: "w1-a", Namespace: "other"},
			Lanes: []string{"default"}, Max: 1}},
		{name: "missing capability", h: handoff(1), setup: func(f *plan.Flow) {
			f.Execs[1].Requires = []string{"gpu"}
		}},
		{name: "quota", h: handoff(1), setup: func(f *plan.Flow) {
			f.Execs[1].Quotas = []string{"q"}
			f.QuotaDefs = []plan.Quota{{Name: "q", Concurrency: 5}}
		}},
		{name: "budget", h: handoff(1), setup: func(f *plan.Flow) {
			f.Execs[1].Budgets = []string{"b"}
			f.BudgetDefs = []plan.Budget{{Name: "b", Dimensions: []plan.Dimension{{Name: "tokens", Hard: 10}},
				OnHardLimit: plan.OnHardLimitBlock, Scope: plan.ScopeShared}}
		}},
		{name: "higher priority waits", h: handoff(1), after: func(e *env) {
			e.create(CreateRequest{Priority: plan.PriorityDefault + 1})
		}},
		{name: "older waits", h: handoff(1), before: func(e *env) {
			e.create(CreateRequest{Priority: plan.PriorityDefault})
		}},
		{name: "deadline passed", h: handoff(1), setup: func(f *plan.Flow) {
			f.Execs[1].DeadlineMs = 1
		}, after: func(*env) { time.Sleep(5 * time.Millisecond) }},
		{name: "newer waits", h: handoff(1), want: 1, after: func(e *env) {
			time.Sleep(2 * time.Millisecond)
			e.create(CreateRequest{Priority: plan.PriorityDefault})
		}},
		{name: "lower priority waits", h: handoff(1), want: 1, before: func(e *env) {
			e.create(CreateRequest{Priority: plan.PriorityDefault - 1})
		}},
		{name: "capability covered", want: 1,
			h: &Handoff{Worker: WorkerIdentity{WorkerID: "w1", InstanceID: "w1-a", Capabilities: []string{"gpu", "x"}},
				Lanes: []string{"default"}, Max: 1},
			setup: func(f *plan.Flow) { f.Execs[1].Requires = []string{"gpu"} }},
		{name: "one of several lanes", h: handoff(2, "x", "default"), want: 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := onePartition(t)
			// a runs in a lane of its own, so the test can claim it while
			// other work waits in b's lane.
			f := flowOf("two", execs("a", "b"), "a->b")
			f.Execs[0].Lane = "first"
			if tc.setup != nil {
				tc.setup(f)
			}
			if tc.before != nil {
				tc.before(e)
				time.Sleep(2 * time.Millisecond) // strictly older than the run
			}
			r := e.stage(f, `{}`)
			a, err := e.s.Claim(e.ctx, ClaimRequest{Partition: 0, Lanes: []string{"first"}, Worker: worker1, Max: 1, LeaseTTL: time.Minute})
			if err != nil || len(a) != 1 {
				t.Fatalf("claim a = %v, %v", a, err)
			}
			if tc.after != nil {
				tc.after(e)
			}
			got := e.finishOK(a[0], `1`, tc.h)
			if len(got) != tc.want {
				t.Fatalf("handed off %v, want %d grants", grantIDs(got), tc.want)
			}
			if tc.want == 0 {
				e.wantState(r.Nodes[1].ExecutionID, StateWaiting)
			} else if got[0].ExecutionID != r.Nodes[1].ExecutionID {
				t.Fatalf("handed off %s, want b", got[0].ExecutionID)
			}
		})
	}
}

// One call finishing members of two runs, with room for one hand-off,
// grants exactly one; the other downstream member waits in the index.
func TestHandoffMaxAcrossItems(t *testing.T) {
	t.Parallel()
	e := onePartition(t)
	f := flowOf("two", execs("a", "b"), "a->b")
	r1, r2 := e.stage(f, `{}`), e.stage(f, `{}`)
	a := e.claimAll(worker1, 2, time.Minute)
	if len(a) != 2 {
		t.Fatalf("claimed %v, want both a", grantIDs(a))
	}
	a1, a2 := a[0], a[1]
	if a1.ExecutionID != r1.Nodes[0].ExecutionID {
		r1, r2 = r2, r1
	}
	res, grants, err := e.s.FinishHandoff(e.ctx, []Finish{
		{Lease: a1.Lease, Result: []byte(`1`)}, {Lease: a2.Lease, Result: []byte(`2`)},
	}, handoff(1))
	if err != nil || res[0].Err != nil || res[1].Err != nil {
		t.Fatalf("FinishHandoff = %+v, %v", res, err)
	}
	if len(grants) != 1 || grants[0].ExecutionID != r1.Nodes[1].ExecutionID {
		t.Fatalf("grants = %v, want b of the first run", grantIDs(grants))
	}
	e.check(grants[0].ExecutionID)
	e.wantState(r2.Nodes[1].ExecutionID, StateWaiting)
	if c := eligibleCount(e, "default"); c != 1 {
		t.Fatalf("eligible index holds %d, want 1", c)
	}
}

// A stale lease in a hand-off call is refused as without one and makes no
// grant; bad hand-off parameters are refused before anything is written.
func TestHandoffStaleAndInvalid(t *testing.T) {
	t.Parallel()
	e := onePartition(t)
	f := flowOf("two", execs("a", "b"), "a->b")
	r := e.stage(f, `{}`)
	a := e.claim(r.Nodes[0].ExecutionID, worker1, time.Minute)
	stale := a.Lease
	stale.Epoch++
	res, grants, err := e.s.FinishHandoff(e.ctx, []Finish{{Lease: stale, Result: []byte(`1`)}}, handoff(1))
	if err != nil || res[0].Err == nil || len(grants) != 0 {
		t.Fatalf("stale FinishHandoff = %+v, %v, %v", res, grants, err)
	}
	for _, h := range []*Handoff{
		{Worker: worker1, Lanes: []string{"default"}, Max: 0},
		{Worker: worker1, Lanes: []string{"default"}, Max: MaxClaim + 1},
		{Worker: worker1, Max: 1},
		{Worker: worker1, Lanes: []string{"a b"}, Max: 1},
		{Worker: WorkerIdentity{WorkerID: "", InstanceID: "x"}, Lanes: []string{"default"}, Max: 1},
		{Worker: worker1, Lanes: []string{"default"}, Max: 1, LeaseTTL: time.Nanosecond},
	} {
		if _, _, err := e.s.FinishHandoff(e.ctx, []Finish{{Lease: a.Lease, Result: []byte(`1`)}}, h); !errors.Is(err, ErrInvalid) {
			t.Fatalf("FinishHandoff(%+v) = %v, want a validation error", h, err)
		}
	}
	e.wantState(a.ExecutionID, StateActive)
	e.wantState(r.Nodes[1].ExecutionID, StatePending)
}

// Two upstreams of a join-any member finishing in one hand-off call fire
// it once: one grant, one attempt, consistent indexes.
func TestHandoffJoinAnyFiresOnce(t *testing.T) {
	t.Parallel()
	e := onePartition(t)
	f := flowOf("any", execs("a", "b", "c"), "a->c", "b->c")
	f.Execs[2].Join = plan.Join{Kind: plan.JoinAny}
	f.Execs[2].InputFrom = plan.InputNone
	r := e.stage(f, `{}`)
	g := e.claimAll(worker1, 2, time.Minute)
	if len(g) != 2 {
		t.Fatalf("claimed %v, want a and b", grantIDs(g))
	}
	res, grants, err := e.s.FinishHandoff(e.ctx, []Finish{
		{Lease: g[0].Lease, Result: []byte(`1`)}, {Lease: g[1].Lease, Result: []byte(`2`)},
	}, handoff(2))
	if err != nil || res[0].Err != nil || res[1].Err != nil {
		t.Fatalf("FinishHandoff = %+v, %v", res, err)
	}
	if len(grants) != 1 || grants[0].FlowNode != "c" || grants[0].Attempt != 1 {
		t.Fatalf("grants = %+v, want c once", grants)
	}
	if len(grants[0].Upstreams) != 2 {
		t.Fatalf("c's upstreams = %q, want both results", grants[0].Upstreams)
	}
	e.check(grants[0].ExecutionID)
	if c := eligibleCount(e, "default"); c != 0 {
		t.Fatalf("eligible index holds %d, want 0", c)
	}
	if _, _, err := e.s.FinishHandoff(e.ctx, []Finish{{Lease: grants[0].Lease, Result: []byte(`3`)}}, nil); err != nil {
		t.Fatal(err)
	}
	if done := e.run(r.ID); done.State != RunSucceeded {
		t.Fatalf("run = %+v", done)
	}
}

// A grant says Downstream only when the member's success alone can fire a
// downstream member: an edge on success or done into a join that needs one
// edge. A fan-in (join all of several) or a failure branch cannot.
func TestHandoffDownstreamFlag(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		flow  func() *plan.Flow
		roots map[string]bool // root name -> Downstream
	}{
		{"chain", func() *plan.Flow { return flowOf("f", execs("a", "b"), "a->b") }, map[string]bool{"a": true}},
		{"fan-in", func() *plan.Flow { return flowOf("f", execs("a", "b", "c"), "a->c", "b->c") }, map[string]bool{"a": false, "b": false}},
		{"join any", func() *plan.Flow {
			f := flowOf("f", execs("a", "b", "c"), "a->c", "b->c")
			f.Execs[2].Join = plan.Join{Kind: plan.JoinAny}
			return f
		}, map[string]bool{"a": true, "b": true}},
		{"join count 1", func() *plan.Flow {
			f := flowOf("f", execs("a", "b", "c"), "a->c", "b->c")
			f.Execs[2].Join = plan.Join{Kind: plan.JoinCount, N: 1}
			return f
		}, map[string]bool{"a": true, "b": true}},
		{"on failure only", func() *plan.Flow { return flowOf("f", execs("a", "b"), "a->b on failure") }, map[string]bool{"a": false}},
		{"on done", func() *plan.Flow { return flowOf("f", execs("a", "b"), "a->b on done") }, map[string]bool{"a": true}},
		{"leaf", func() *plan.Flow { return flowOf("f", execs("a")) }, map[string]bool{"a": false}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := onePartition(t)
			e.stage(tc.flow(), `{}`)
			got := map[string]bool{}
			for _, g := range e.claimAll(worker1, 10, time.Minute) {
				got[g.FlowNode] = g.Downstream
			}
			if diff := cmp.Diff(tc.roots, got); diff != "" {
				t.Fatalf("Downstream of the roots (-want +got):\n%s", diff)
			}
		})
	}
}

// A member that a replay put back to wait for its upstreams keeps its
// pending replay: handed off, its attempt is a replay; declined (a kind the
// worker has no handler for), it waits to be claimed as a replay.
func TestHandoffAfterReplay(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		h    *Handoff
	}{
		{"granted", handoff(1)},
		{"declined", &Handoff{Worker: worker1, Lanes: []string{"default"}, Max: 1, LeaseTTL: time.Minute, Kinds: []string{"other"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := onePartition(t)
			f := flowOf("chain", execs("a", "b", "c"), "a->b", "b->c")
			f.Result = "c"
			r := e.stage(f, `{}`)
			// b fails, so c is skipped and the run fails.
			e.drive(func(g Grant) outcome { return outcome{result: []byte(`1`), fail: g.FlowNode == "b"} })
			if _, err := e.s.ReplayRun(e.ctx, r.ID); err != nil {
				t.Fatal(err)
			}
			b := e.claimAll(worker1, 10, time.Minute)
			if len(b) != 1 || b[0].FlowNode != "b" || b[0].AttemptType != AttemptReplay {
				t.Fatalf("claim after replay = %+v, want b, a replay", b)
			}
			c := e.finishOK(b[0], `2`, tc.h)
			if tc.h.Kinds == nil {
				if len(c) != 1 || c[0].FlowNode != "c" || c[0].AttemptType != AttemptReplay || c[0].Attempt != 1 {
					t.Fatalf("hand-off after replay = %+v, want c, a replay", c)
				}
				return
			}
			if len(c) != 0 {
				t.Fatalf("handed off %+v to a worker without c's kind", c)
			}
			c = e.claimAll(worker1, 10, time.Minute)
			if len(c) != 1 || c[0].FlowNode != "c" || c[0].AttemptType != AttemptReplay || c[0].Attempt != 1 {
				t.Fatalf("claim of c = %+v, want a replay", c)
			}
		})
	}
}

// TestHandoffSentAgainAfterLostAnswer: a worker whose complete with a
// hand-off went through, but whose answer (with the granted tasks) was
// lost, sends it again. The repeat gets the same grants back, under the
// same leases, so the run goes on at once instead of waiting for their
// leases to run out. Another instance, or a grant no longer running
// under that lease, gets nothing.
func TestHandoffSentAgainAfterLostAnswer(t *testing.T) {
	t.Parallel()
	e := onePartition(t)
	f := flowOf("again", execs("a", "b", "c"), "a->b", "b->c")
	f.Result = "c"
	r := e.stage(f, `{"n":1}`)
	a := e.claimAll(worker1, 1, time.Minute)[0]
	first := e.finishOK(a, `"out-a"`, handoff(1)) // the answer the worker never got
	if len(first) != 1 || first[0].FlowNode != "b" {
		t.Fatalf("first hand-off = %+v", first)
	}
	other := handoff(1)
	other.Worker = worker2
	if again := e.finishOK(a, `"out-a"`, other); len(again) != 0 {
		t.Fatalf("another instance got %+v", grantIDs(again))
	}
	again := e.finishOK(a, `"out-a"`, handoff(1))
	if diff := cmp.Diff(first, again); diff != "" {
		t.Fatalf("the repeat's grants (-first +again):\n%s", diff)
	}
	if n := eligibleCount(e, "default"); n != 0 {
		t.Fatalf("%d eligible after the repeat", n)
	}
	// The run goes on under the re-delivered lease.
	next := e.finishOK(again[0], `"out-b"`, handoff(1))
	if len(next) != 1 || next[0].FlowNode != "c" {
		t.Fatalf("b's hand-off = %+v", next)
	}
	// Once b ended, a repeat of a's success re-delivers nothing.
	if late := e.finishOK(a, `"out-a"`, handoff(1)); len(late) != 0 {
		t.Fatalf("a late repeat re-delivered %+v", grantIDs(late))
	}
	e.finishOK(next[0], `"out-c"`, nil)
	if done := e.run(r.ID); done.State != RunSucceeded || string(done.Result) != `"out-c"` {
		t.Fatalf("run = %+v", done)
	}

	// A grant whose lease expired is not sent again (the scanner reclaims it).
	e.stage(flowOf("again2", execs("a", "b"), "a->b"), `{}`)
	a2 := e.claimAll(worker1, 1, time.Minute)[0]
	short := handoff(1)
	short.LeaseTTL = LeaseTTLMin
	if g := e.finishOK(a2, `1`, short); len(g) != 1 {
		t.Fatalf("hand-off = %+v", g)
	}
	time.Sleep(LeaseTTLMin + 30*time.Millisecond)
	if g := e.finishOK(a2, `1`, handoff(1)); len(g) != 0 {
		t.Fatalf("an expired grant was sent again: %+v", grantIDs(g))
	}
}

// The members one success makes eligible are settled in claim order (best
// score first), and one the hand-off leaves in the index is the head of
// its lane for those after it: a member of lower priority is never handed
// off while one of higher priority, made eligible by the same call, waits
// in the index (it counts against a budget, or the grants were spent), so
// the hand-off never overtakes what a claim would take first.
func TestHandoffKeepsClaimOrderAmongMembersOfOneCall(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		edges  []string // a's edges, in the order its success decides them
		budget bool     // b counts against a budget (not handed off)
		handed []string // the members handed off, in order
		next   string   // what a claim of the lane then grants
	}{
		{name: "the higher one has a budget", edges: []string{"a->b", "a->c"}, budget: true, next: "b"},
		{name: "the lower one became eligible first", edges: []string{"a->c", "a->b"}, handed: []string{"b"}, next: "c"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := onePartition(t)
			fl := flowOf("fan", execs("a", "b", "c"), tc.edges...)
			fl.Execs[0].Lane = "first" // claimed on its own, before b and c are eligible
			fl.Execs[1].Priority = 900
			fl.Execs[2].Priority = 100
			if tc.budget {
				budgeted(fl, 1)
			}
			ids := nodeIDs(e.stage(fl, `{}`))
			handed := e.handOffOne()
			if !cmp.Equal(handed, tc.handed) {
				t.Fatalf("handed off %v, want %v (b: priority 900, c: 100)", handed, tc.handed)
			}
			next, err := e.s.Claim(e.ctx, ClaimRequest{Partition: 0, Lanes: []string{"default"}, Worker: worker2, Max: 1, LeaseTTL: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			var want []ExecutionID
			if tc.next != "" {
				want = []ExecutionID{ids[tc.next]}
			}
			if got := grantIDs(next); !cmp.Equal(got, want) {
				t.Fatalf("the next claim granted %v, want %v (%s)", got, want, tc.next)
			}
		})
	}
}

// The same holds for a fan-out too wide to be ordered by insertion
// (claim_order sorts it): the best member, made eligible last, is handed
// off, or, when it counts against a budget, nothing is.
func TestHandoffKeepsClaimOrderInAWideFanOut(t *testing.T) {
	t.Parallel()
	for _, budget := range []bool{false, true} {
		t.Run(fmt.Sprintf("budget %v", budget), func(t *testing.T) {
			t.Parallel()
			e := onePartition(t)
			const n = 20
			names := []string{"a"}
			var edges []string
			for i := range n {
				names = append(names, fmt.Sprintf("x%02d", i))
				edges = append(edges, "a->"+names[i+1])
			}
			fl := flowOf("wide", execs(names...), edges...)
			fl.Execs[0].Lane = "first"
			for i := 1; i <= n; i++ {
				fl.Execs[i].Priority = 100 + i // the last edge's member is the best
			}
			if budget {
				budgeted(fl, n)
			}
			ids := nodeIDs(e.stage(fl, `{}`))
			handed := e.handOffOne()
			best := names[n]
			want := []string{best}
			if budget {
				want = nil
			}
			if !cmp.Equal(handed, want) {
				t.Fatalf("handed off %v, want %v", handed, want)
			}
			next, err := e.s.Claim(e.ctx, ClaimRequest{Partition: 0, Lanes: []string{"default"}, Worker: worker2, Max: 1, LeaseTTL: time.Minute})
			if err != nil || len(next) != 1 {
				t.Fatalf("next claim = %v, %v", grantIDs(next), err)
			}
			wantNext := names[n-1] // the best one left
			if budget {
				wantNext = best
			}
			if next[0].ExecutionID != ids[wantNext] {
				t.Fatalf("next claim granted %s, want %s", next[0].FlowNode, wantNext)
			}
		})
	}
}

// budgeted makes exec i of fl count against a shared budget that blocks
// at its hard limit: a hand-off passes such a member over.
func budgeted(fl *plan.Flow, i int) {
	fl.Execs[i].Budgets = []string{"spend"}
	fl.BudgetDefs = []plan.Budget{{Name: "spend", Dimensions: []plan.Dimension{{Name: "tokens", Hard: 1000}},
		OnHardLimit: plan.OnHardLimitBlock, Scope: plan.ScopeShared}}
}

// handOffOne claims the member of lane "first" and completes it with a
// hand-off of at most one member: the names of those handed off.
func (e *env) handOffOne() []string {
	e.t.Helper()
	a, err := e.s.Claim(e.ctx, ClaimRequest{Partition: 0, Lanes: []string{"first"}, Worker: worker1, Max: 1, LeaseTTL: time.Minute})
	if err != nil || len(a) != 1 {
		e.t.Fatalf("claim a = %v, %v", a, err)
	}
	var handed []string
	for _, g := range e.finishOK(a[0], `1`, handoff(1)) {
		handed = append(handed, g.FlowNode)
	}
	return handed
}
