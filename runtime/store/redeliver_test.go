package store

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// finishMany finishes the grants gs with their results in one call under
// hand-off h and fails unless every item is answered completed.
func (e *env) finishMany(gs []Grant, results []string, h *Handoff) []Grant {
	e.t.Helper()
	var fs []Finish
	for i, g := range gs {
		fs = append(fs, Finish{Lease: g.Lease, Result: []byte(results[i])})
	}
	res, grants, err := e.s.FinishHandoff(e.ctx, fs, h)
	if err != nil {
		e.t.Fatalf("FinishHandoff: %v", err)
	}
	for i, r := range res {
		if r.Err != nil || r.State != StateCompleted {
			e.t.Fatalf("FinishHandoff item %d = %+v", i, r)
		}
	}
	return grants
}

// A join whose two upstreams succeeded in one call is granted once; the
// whole call sent again (its answer lost) re-delivers it once, not once
// per upstream.
func TestRedeliverJoinOnce(t *testing.T) {
	t.Parallel()
	e := onePartition(t)
	e.stage(flowOf("join", execs("a", "b", "j"), "a->j", "b->j"), `{}`)
	gs := e.claimAll(worker1, 2, time.Minute)
	if len(gs) != 2 {
		t.Fatalf("claim = %+v", gs)
	}
	results := []string{`"x"`, `"y"`}
	first := e.finishMany(gs, results, handoff(4))
	if len(first) != 1 || first[0].FlowNode != "j" {
		t.Fatalf("first hand-off = %+v", first)
	}
	again := e.finishMany(gs, results, handoff(4))
	if diff := cmp.Diff(first, again); diff != "" {
		t.Fatalf("the repeat's grants (-first +again):\n%s", diff)
	}
}

// A repeat and a fresh success in one call share the call's max: the
// re-delivered grant counts, the fresh member beyond it waits eligible,
// and with room both are granted under distinct leases.
func TestRedeliverSharesMax(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		max  int
		want []string
	}{{1, []string{"b"}}, {2, []string{"b", "y"}}} {
		e := onePartition(t)
		e.stage(flowOf("ab", execs("a", "b"), "a->b"), `{}`)
		a := e.claimAll(worker1, 1, time.Minute)[0]
		e.stage(flowOf("xy", execs("x", "y"), "x->y"), `{}`)
		x := e.claimAll(worker1, 1, time.Minute)[0]
		if a.FlowNode != "a" || x.FlowNode != "x" {
			t.Fatalf("claims %s %s", a.FlowNode, x.FlowNode)
		}
		first := e.finishOK(a, `1`, handoff(1))
		if len(first) != 1 || first[0].FlowNode != "b" {
			t.Fatalf("first hand-off = %+v", first)
		}
		got := e.finishMany([]Grant{a, x}, []string{`1`, `2`}, handoff(tc.max))
		var nodes []string
		seen := map[string]bool{}
		for _, g := range got {
			nodes = append(nodes, g.FlowNode)
			if seen[g.Lease.ID] {
				t.Fatalf("lease id %s granted twice: %+v", g.Lease.ID, got)
			}
			seen[g.Lease.ID] = true
		}
		if diff := cmp.Diff(tc.want, nodes); diff != "" {
			t.Fatalf("max %d: grants (-want +got):\n%s", tc.max, diff)
		}
		if got[0].Lease != first[0].Lease {
			t.Fatalf("b re-delivered under %+v, want %+v", got[0].Lease, first[0].Lease)
		}
		if want := int64(2 - len(tc.want)); eligibleCount(e, "default") != want {
			t.Fatalf("max %d: %d eligible, want %d", tc.max, eligibleCount(e, "default"), want)
		}
	}
}

// A member the same instance claimed (it knows it) in the very millisecond
// the hand-off call ended its upstream is no grant of that call: the repeat
// must not hand it to the worker a second time. The claim is made to look
// started in that millisecond by editing its attempt record, which is all
// a check by time and instance could tell. (The repeat carries a second
// item so that its call may make two grants.)
func TestRedeliverNotAClaimSameMs(t *testing.T) {
	t.Parallel()
	e := onePartition(t)
	e.stage(flowOf("fan", execs("a", "b1", "b2"), "a->b1", "a->b2"), `{}`)
	a := e.claimAll(worker1, 1, time.Minute)[0]
	first := e.finishOK(a, `1`, handoff(1))
	claimed, err := e.s.Claim(e.ctx, ClaimRequest{Partition: 0, Lanes: []string{"default"}, Worker: worker1, Max: 1, LeaseTTL: time.Minute})
	if err != nil || len(first) != 1 || len(claimed) != 1 || claimed[0].FlowNode == first[0].FlowNode {
		t.Fatalf("hand-off %+v, claim %+v, %v", first, claimed, err)
	}
	p, au, _ := splitID(string(a.ExecutionID))
	_, cu, _ := splitID(string(claimed[0].ExecutionID))
	ended, err := e.c.Do(e.ctx, e.c.B().Hget().Key(e.s.k.core(p, au)).Field("ended_at").Build()).ToString()
	if err != nil {
		t.Fatal(err)
	}
	ck := e.s.k.core(p, cu)
	att, err := e.c.Do(e.ctx, e.c.B().Hget().Key(ck).Field("att:1").Build()).ToString()
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(att, "\t")
	parts[len(parts)-1] = ended
	if err := e.c.Do(e.ctx, e.c.B().Hset().Key(ck).FieldValue().FieldValue("att:1", strings.Join(parts, "\t")).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	z := e.create(CreateRequest{})
	gz := e.claim(z.ID, worker1, time.Minute)
	again := e.finishMany([]Grant{a, gz}, []string{`1`, `1`}, handoff(2))
	if diff := cmp.Diff(first, again); diff != "" {
		t.Fatalf("the repeat's grants (-first +again):\n%s", diff)
	}
}

// A repeat re-delivers only what still runs under the hand-off's lease: a
// revoked or cancelled member is not sent again; a renewed one is, with its
// new expiry. Failures sent again and other outputs stay refused; a
// standalone execution's repeat is answered completed with nothing.
func TestRedeliverAfterChanges(t *testing.T) {
	t.Parallel()
	e := onePartition(t)
	start := func() (Grant, Grant) {
		e.stage(flowOf("ab", execs("a", "b"), "a->b"), `{}`)
		a := e.claimAll(worker1, 1, time.Minute)[0]
		first := e.finishOK(a, `1`, handoff(1))
		if len(first) != 1 {
			t.Fatalf("hand-off = %+v", first)
		}
		return a, first[0]
	}

	a, b := start()
	time.Sleep(3 * time.Millisecond)
	rn, err := e.s.Renew(e.ctx, []Lease{b.Lease}, 2*time.Minute)
	if err != nil || rn[0].Err != nil {
		t.Fatalf("Renew = %+v, %v", rn, err)
	}
	again := e.finishOK(a, `1`, handoff(1))
	if len(again) != 1 || again[0].Lease != b.Lease || !again[0].LeaseExpiresAt.Equal(rn[0].ExpiresAt) {
		t.Fatalf("renewed: re-delivered %+v, want lease %+v expiring %v", again, b.Lease, rn[0].ExpiresAt)
	}

	a, b = start()
	if _, err := e.s.RevokeLease(e.ctx, b.ExecutionID, "test"); err != nil {
		t.Fatalf("RevokeLease: %v", err)
	}
	if g := e.finishOK(a, `1`, handoff(1)); len(g) != 0 {
		t.Fatalf("revoked member re-delivered: %+v", g)
	}

	// Different output, or a failure, for a recorded success: refused.
	for _, f := range []Finish{{Lease: a.Lease, Result: []byte(`2`)}, {Lease: a.Lease, Failed: true, Error: "x"}} {
		res, g, err := e.s.FinishHandoff(e.ctx, []Finish{f}, handoff(1))
		if err != nil || res[0].Err == nil || len(g) != 0 {
			t.Fatalf("FinishHandoff(%+v) = %+v %+v, %v; want refused", f, res, g, err)
		}
	}

	// Standalone: completed again, no grants.
	e = onePartition(t)
	x := e.create(CreateRequest{})
	gx := e.claim(x.ID, worker1, time.Minute)
	e.finishOK(gx, `5`, handoff(1))
	if g := e.finishOK(gx, `5`, handoff(1)); len(g) != 0 {
		t.Fatalf("standalone repeat granted %+v", g)
	}
}

// After a replay, a repeat of a kept success re-delivers nothing (its
// downstream member runs under a later lease, claimed), and a repeat of
// the replayed member's success re-delivers what its own call granted.
func TestRedeliverAfterReplay(t *testing.T) {
	t.Parallel()
	e := onePartition(t)
	f := flowOf("chain", execs("a", "b", "c"), "a->b", "b->c")
	f.Result = "c"
	r := e.stage(f, `{}`)
	a := e.claimAll(worker1, 1, time.Minute)[0]
	b := e.finishOK(a, `1`, handoff(1))[0]
	if res, err := e.s.Fail(e.ctx, b.Lease, "boom", false); err != nil || res.Err != nil {
		t.Fatalf("Fail(b) = %+v, %v", res, err)
	}
	if _, err := e.s.ReplayRun(e.ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	b2 := e.claimAll(worker1, 1, time.Minute)
	if len(b2) != 1 || b2[0].FlowNode != "b" {
		t.Fatalf("claim after replay = %+v", b2)
	}
	if g := e.finishOK(a, `1`, handoff(1)); len(g) != 0 {
		t.Fatalf("a's repeat after the replay re-delivered %+v", g)
	}
	c := e.finishOK(b2[0], `2`, handoff(1))
	if len(c) != 1 || c[0].FlowNode != "c" {
		t.Fatalf("hand-off of c = %+v", c)
	}
	if diff := cmp.Diff(c, e.finishOK(b2[0], `2`, handoff(1))); diff != "" {
		t.Fatalf("b's repeat (-first +again):\n%s", diff)
	}
}
