package store

import (
	"testing"
	"time"

	"github.com/flowfabric/ff/compiler/plan"
)

// checkGrant checks one grant of a member of run id (flow f), right
// after the call that made it, against its upstreams as stored now: its
// join is met, its input is its feeding upstream's result, Upstreams holds
// the result of every upstream that has one and UpstreamErrors every
// upstream that ended without. An upstream that ended in the call that
// made the grant (its end has the grant's start time: a call reads the
// clock once) may have ended after the grant: a claim ends a candidate
// whose deadline passed where it finds it, and with it what that skips,
// after the grants of the candidates before it. Such an upstream is
// either reported as ended or not at all.
func (e *env) checkGrant(step string, flows map[string]*plan.Flow, g Grant) {
	e.t.Helper()
	f := flows[g.FlowID]
	run := e.run(RunID(makeID(0, g.FlowID)))
	by := map[string]*Execution{}
	for _, n := range run.Nodes {
		by[n.Name] = e.get(n.ExecutionID)
	}
	var started time.Time
	for _, a := range e.get(g.ExecutionID).Attempts {
		if a.Index == g.Attempt {
			started = a.StartedAt
		}
	}
	if started.IsZero() {
		e.t.Fatalf("%s: %s's record has no attempt %d", step, g.FlowNode, g.Attempt)
	}
	var x plan.Exec
	for _, ex := range f.Execs {
		if ex.Name == g.FlowNode {
			x = ex
		}
	}
	need, _ := joinNeed(x, len(x.Upstreams))
	ok := 0
	var feeding string
	for _, ed := range f.Edges {
		if ed.To != x.Name {
			continue
		}
		up := by[ed.From]
		if up.State.Lifecycle == LifecycleTerminal && holdsGo(ed.On, up.State.Outcome) {
			ok++
		}
		if len(x.Upstreams) == 1 && ed.On == plan.OnSuccess {
			feeding = ed.From
		}
	}
	if ok < need {
		e.t.Fatalf("%s: %s granted (attempt %d, %s) with %d of %d edges holding (nodes %v)", step, g.FlowNode, g.Attempt,
			g.AttemptType, ok, need, nodeStates(run))
	}
	if feeding != "" && string(g.Payload) != string(by[feeding].Result) {
		e.t.Fatalf("%s: %s got input %q, its feeding upstream %s holds %q", step, g.FlowNode, g.Payload, feeding, by[feeding].Result)
	}
	for _, u := range x.Upstreams {
		st := by[u].State
		res, has := g.Upstreams[u]
		uerr, hasErr := g.UpstreamErrors[u]
		switch {
		case st.Outcome == OutcomeSuccess:
			if !has || string(res) != string(by[u].Result) {
				e.t.Fatalf("%s: %s's grant has upstream %s = %q (%v), stored %q", step, g.FlowNode, u, res, has, by[u].Result)
			}
		case st.Lifecycle == LifecycleTerminal && !has && !hasErr && by[u].EndedAt.Equal(started):
			// Ended in the same call, after the grant.
		case st.Lifecycle == LifecycleTerminal:
			if has || !hasErr || uerr.State != st.Public {
				e.t.Fatalf("%s: %s's grant: upstream %s ended %s; upstreams %q errors %+v", step, g.FlowNode, u, st.Public, g.Upstreams, g.UpstreamErrors)
			}
		default:
			if has || hasErr {
				e.t.Fatalf("%s: %s's grant: upstream %s is %s; upstreams %q errors %+v", step, g.FlowNode, u, st.Public, g.Upstreams, g.UpstreamErrors)
			}
		}
	}
}

// A claim grants in the order of the lanes' index and ends a candidate
// whose deadline passed where it finds it: an upstream of a member
// granted earlier in the same call may end after the grant was made. The
// grant reports the upstream as it was (not ended: no error), and
// checkGrant, which reads the upstreams after the call, accepts that.
func TestGrantCheckAcceptsAnUpstreamEndedLaterInTheClaim(t *testing.T) {
	t.Parallel()
	e := onePartition(t)
	x := execs("w", "y", "m")
	x[0].Lane = "first" // claimed on its own
	x[1].DeadlineMs = 1
	x[2].Join = plan.Join{Kind: plan.JoinAny}
	x[2].Upstreams = []string{"w", "y"}
	x[2].Priority = 900 // before y in the lane
	fl := flowOf("late", x, "w->m", "y->m")
	r := e.stage(fl, `{}`)
	_, ru, _ := splitID(string(r.ID))
	ids := nodeIDs(r)
	gw, err := e.s.Claim(e.ctx, ClaimRequest{Partition: 0, Lanes: []string{"first"}, Worker: worker1, Max: 1, LeaseTTL: time.Minute})
	if err != nil || len(gw) != 1 {
		t.Fatalf("claim w = %v, %v", grantIDs(gw), err)
	}
	if err := e.s.Complete(e.ctx, gw[0].Lease, []byte(`1`)); err != nil {
		t.Fatal(err)
	}
	// y's deadline passed before the claim that finds it, after m.
	for e.get(ids["y"]).CreatedAt.Add(2 * time.Millisecond).After(time.Now()) {
		time.Sleep(time.Millisecond)
	}
	gs, err := e.s.Claim(e.ctx, ClaimRequest{Partition: 0, Lanes: []string{"default"}, Worker: worker1, Max: 2, LeaseTTL: time.Minute})
	if err != nil || len(gs) != 1 || gs[0].ExecutionID != ids["m"] {
		t.Fatalf("claim = %v, %v; want m", grantIDs(gs), err)
	}
	if y := e.get(ids["y"]); y.State.Outcome != OutcomeExpired {
		t.Fatalf("y is %s, want expired by the claim", y.State.Public)
	}
	if _, ok := gs[0].UpstreamErrors["y"]; ok {
		t.Fatalf("m's grant reports y's error %+v: y ended after the grant", gs[0].UpstreamErrors)
	}
	e.checkGrant("claim", map[string]*plan.Flow{ru: fl}, gs[0])
}
