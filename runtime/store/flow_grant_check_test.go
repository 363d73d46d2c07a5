package store

import (
	"github.com/flowfabric/ff/compiler/plan"
)

// checkGrant checks one grant of a member of run id (flow f)
// against its upstreams as stored now: its join is met, its input is its
// feeding upstream's result, Upstreams holds the result of every upstream
// that has one and UpstreamErrors every upstream that ended without.
func (e *env) checkGrant(step string, flows map[string]*plan.Flow, g Grant) {
	e.t.Helper()
	f := flows[g.FlowID]
	run := e.run(RunID(makeID(0, g.FlowID)))
	by := map[string]*Execution{}
	for _, n := range run.Nodes {
		by[n.Name] = e.get(n.ExecutionID)
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
