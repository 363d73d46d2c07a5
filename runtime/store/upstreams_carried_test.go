package store

import (
	"bytes"
	"fmt"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/flowfabric/ff/compiler/plan"
	"github.com/flowfabric/ff/lua"
)

// TestUpstreamsCarriedMatchesLua: the Go bounds of the upstream results
// a grant carries are the library's.
func TestUpstreamsCarriedMatchesLua(t *testing.T) {
	t.Parallel()
	for name, want := range map[string]int{
		"UPSTREAMS_CARRIED":      UpstreamsCarried,
		"UPSTREAMS_CARRIED_CALL": UpstreamsCarriedCall,
		"RESULT_MAX":             MaxPayloadBytes,
	} {
		m := regexp.MustCompile(`(?m)^local ` + name + ` = (\d+)$`).FindStringSubmatch(lua.Source())
		if m == nil {
			t.Errorf("lua: no constant %s", name)
			continue
		}
		if got, _ := strconv.Atoi(m[1]); got != want {
			t.Errorf("lua: %s = %d, Go says %d", name, got, want)
		}
	}
}

// bigResult returns a JSON string of n bytes that names tag.
func bigResult(tag string, n int) []byte {
	b := make([]byte, n)
	copy(b, `"`+tag+`:`)
	for i := len(tag) + 2; i < n-1; i++ {
		b[i] = 'x'
	}
	b[n-1] = '"'
	return b
}

// fanIn stages a flow of upstreams u0..u<n-1> all feeding the members
// named joins (each taking its input from feed, or none when feed is
// empty), one partition.
func (e *env) fanIn(name string, n int, feed string, joins ...string) map[string]ExecutionID {
	e.t.Helper()
	var names, edges []string
	for i := range n {
		u := fmt.Sprintf("u%d", i)
		names = append(names, u)
		for _, j := range joins {
			edges = append(edges, u+"->"+j)
		}
	}
	x := execs(append(names, joins...)...)
	for i := n; i < len(x); i++ {
		if feed == "" {
			x[i].InputFrom = plan.InputNone
		} else {
			x[i].InputFrom, x[i].InputExec = plan.InputExec, feed
		}
	}
	return nodeIDs(e.stage(flowOf(name, x, edges...), `"in"`))
}

// checkCarried checks what grant g of a member with upstream results
// want carries: each upstream either in Upstreams with its result or in
// UpstreamsOmitted with its id, the feeding upstream carried, at most
// UpstreamsCarried bytes carried, and each omitted result larger than the
// room left (room: what the call's bound left before this grant, when
// less). It returns the bytes carried.
func checkCarried(t *testing.T, g Grant, want map[string][]byte, ids map[string]ExecutionID, feed string, room int) int {
	t.Helper()
	carried := 0
	for name, r := range want {
		got, in := g.Upstreams[name]
		id, out := g.UpstreamsOmitted[name]
		switch {
		case in && out:
			t.Errorf("%s: upstream %s both carried and omitted", g.FlowNode, name)
		case in:
			if !bytes.Equal(got, r) {
				t.Errorf("%s: upstream %s carries %d bytes, want its %d-byte result", g.FlowNode, name, len(got), len(r))
			}
			carried += len(got)
		case out:
			if id != ids[name] {
				t.Errorf("%s: omitted upstream %s has id %s, want %s", g.FlowNode, name, id, ids[name])
			}
			if name == feed {
				t.Errorf("%s: the feeding upstream %s is omitted", g.FlowNode, name)
			}
		default:
			t.Errorf("%s: upstream %s neither carried nor omitted", g.FlowNode, name)
		}
	}
	if len(g.Upstreams)+len(g.UpstreamsOmitted) != len(want) {
		t.Errorf("%s: %d carried and %d omitted, want %d upstreams in all", g.FlowNode, len(g.Upstreams), len(g.UpstreamsOmitted), len(want))
	}
	if carried > UpstreamsCarried {
		t.Errorf("%s: carries %d bytes of upstream results, the bound is %d", g.FlowNode, carried, UpstreamsCarried)
	}
	left := min(UpstreamsCarried, room) - carried
	for name := range g.UpstreamsOmitted {
		if len(want[name]) <= left {
			t.Errorf("%s: omitted %s (%d bytes) though %d bytes of room were left", g.FlowNode, name, len(want[name]), left)
		}
	}
	if feed != "" && !bytes.Equal(g.Payload, want[feed]) {
		t.Errorf("%s: input is %d bytes, want the feeding upstream's %d", g.FlowNode, len(g.Payload), len(want[feed]))
	}
	return carried
}

// finishAll records items, failing the test unless each is recorded.
func (e *env) finishAll(items []Finish) {
	e.t.Helper()
	res, err := e.s.FinishMany(e.ctx, items)
	if err != nil {
		e.t.Fatal(err)
	}
	for i, r := range res {
		if r.Err != nil {
			e.t.Fatalf("FinishMany: item %d: %v", i, r.Err)
		}
	}
}

// TestClaimBoundsUpstreamsCarried: the claim of a member whose upstream
// results pass UpstreamsCarried carries the feeding upstream's result and
// as many of the others as fit, and lists the rest as omitted (by name
// and execution id), whose results Result reads.
func TestClaimBoundsUpstreamsCarried(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *Config) { c.FlowPartitions = 1 })
	ids := e.fanIn("carried", 7, "u2", "d")
	// 5 MB of results in 1 MB ones, then one that fits whatever the order
	// is, and an empty one (which costs nothing to carry).
	sizes := []int{1_000_000, 1_000_000, 1_000_000, 1_000_000, 1_000_000, 100, 2}
	want := map[string][]byte{}
	var items []Finish
	for _, g := range e.claimAll(worker1, 7, time.Minute) {
		var i int
		fmt.Sscanf(g.FlowNode, "u%d", &i)
		r := bigResult(g.FlowNode, sizes[i])
		want[g.FlowNode] = r
		items = append(items, Finish{Lease: g.Lease, Result: r})
	}
	if len(items) != 7 {
		t.Fatalf("claimed %d upstreams, want 7", len(items))
	}
	e.finishAll(items)
	g := e.claim(ids["d"], worker1, time.Minute)
	carried := checkCarried(t, g, want, ids, "u2", UpstreamsCarriedCall)
	if len(g.UpstreamsOmitted) != 1 || carried != 4_000_102 {
		t.Errorf("carried %d bytes and omitted %v; want 4000102 bytes and one upstream of 1 MB", carried, g.UpstreamsOmitted)
	}
	for name, id := range g.UpstreamsOmitted {
		r, err := e.s.Result(e.ctx, id)
		if err != nil || r.State != StateCompleted || !bytes.Equal(r.Result, want[name]) {
			t.Errorf("Result of omitted %s = %v, %v", name, r, err)
		}
	}
}

// TestClaimBoundsUpstreamsPerCall: the grants of one claim carry at most
// UpstreamsCarriedCall bytes of upstream results in all; the later ones
// list what no longer fits as omitted.
func TestClaimBoundsUpstreamsPerCall(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *Config) { c.FlowPartitions = 1 })
	joins := []string{"j0", "j1", "j2", "j3", "j4"}
	ids := e.fanIn("percall", 5, "", joins...)
	want := map[string][]byte{}
	var items []Finish
	for _, g := range e.claimAll(worker1, 5, time.Minute) {
		r := bigResult(g.FlowNode, MaxPayloadBytes)
		want[g.FlowNode] = r
		items = append(items, Finish{Lease: g.Lease, Result: r})
	}
	e.finishAll(items)
	gs := e.claimAll(worker1, 5, time.Minute)
	if len(gs) != 5 {
		t.Fatalf("claimed %v, want the 5 joins", grantIDs(gs))
	}
	total, omitted := 0, 0
	for _, g := range gs {
		total += checkCarried(t, g, want, ids, "", UpstreamsCarriedCall-total)
		omitted += len(g.UpstreamsOmitted)
	}
	// 5 grants of 5 MiB each: 4 MiB each at most, 16 MiB in all.
	if total != UpstreamsCarriedCall || omitted != 25-UpstreamsCarriedCall/MaxPayloadBytes {
		t.Errorf("the claim carried %d bytes and omitted %d upstream results; want %d and %d",
			total, omitted, UpstreamsCarriedCall, 25-UpstreamsCarriedCall/MaxPayloadBytes)
	}
	if last := gs[4]; len(last.Upstreams) != 0 || len(last.UpstreamsOmitted) != 5 {
		t.Errorf("the last grant carries %d upstream results and omits %d; want 0 and 5", len(last.Upstreams), len(last.UpstreamsOmitted))
	}
}

// TestHandoffBoundsUpstreamsCarried: a hand-off bounds the results it
// carries alike, those its own call recorded (the feeding one among
// them) and those recorded earlier.
func TestHandoffBoundsUpstreamsCarried(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *Config) { c.FlowPartitions = 1 })
	ids := e.fanIn("handcarried", 6, "u5", "d")
	want := map[string][]byte{}
	gs := e.claimAll(worker1, 6, time.Minute)
	var now []Finish
	for _, g := range gs {
		r := bigResult(g.FlowNode, MaxPayloadBytes)
		want[g.FlowNode] = r
		if g.FlowNode == "u4" || g.FlowNode == "u5" {
			now = append(now, Finish{Lease: g.Lease, Result: r})
		} else if err := e.s.Complete(e.ctx, g.Lease, r); err != nil {
			t.Fatal(err)
		}
	}
	res, grants, err := e.s.FinishHandoff(e.ctx, now, handoff(1))
	if err != nil || len(res) != 2 || res[0].Err != nil || res[1].Err != nil {
		t.Fatalf("FinishHandoff = %+v, %v", res, err)
	}
	g := grantOf(t, grants, ids["d"])
	if checkCarried(t, g, want, ids, "u5", UpstreamsCarriedCall) != UpstreamsCarried || len(g.UpstreamsOmitted) != 2 {
		t.Errorf("hand-off grant carries %d upstream results and omits %v; want 4 and 2", len(g.Upstreams), g.UpstreamsOmitted)
	}
}

// TestBoundedGrantKeepsUpstreamErrors: once the results a grant carries
// reach the bound, an upstream that ended without a result (an on failure
// edge) is still reported with its error, not listed as omitted.
func TestBoundedGrantKeepsUpstreamErrors(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *Config) { c.FlowPartitions = 1 })
	x := execs("u0", "u1", "u2", "u3", "u4", "f", "d")
	x[6].InputFrom = plan.InputNone
	ids := nodeIDs(e.stage(flowOf("carriederr", x, "u0->d", "u1->d", "u2->d", "u3->d", "u4->d", "f->d on failure"), ""))
	want := map[string][]byte{}
	var items []Finish
	for _, g := range e.claimAll(worker1, 6, time.Minute) {
		if g.FlowNode == "f" {
			items = append(items, Finish{Lease: g.Lease, Failed: true, Error: "f broke"})
			continue
		}
		r := bigResult(g.FlowNode, MaxPayloadBytes)
		want[g.FlowNode] = r
		items = append(items, Finish{Lease: g.Lease, Result: r})
	}
	e.finishAll(items)
	g := e.claim(ids["d"], worker1, time.Minute)
	if carried := checkCarried(t, g, want, ids, "", UpstreamsCarriedCall); carried != UpstreamsCarried || len(g.UpstreamsOmitted) != 1 {
		t.Errorf("carried %d bytes and omitted %v; want %d bytes and one upstream", carried, g.UpstreamsOmitted, UpstreamsCarried)
	}
	if got := g.UpstreamErrors["f"]; got.State != StateFailed || got.Error != "f broke" || len(g.UpstreamErrors) != 1 {
		t.Errorf("upstream errors %v, want f's failure", g.UpstreamErrors)
	}
	if _, ok := g.UpstreamsOmitted["f"]; ok {
		t.Error("the failed upstream is listed as omitted")
	}
}
