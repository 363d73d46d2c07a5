package store

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

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

// The random runs of TestFlowRandomRunsKeepCounters, on more seeds, with
// every grant (claim or hand-off) checked against its upstreams: no member
// starts before its join is met, and it gets its feeding upstream's
// current result and every upstream's result or error.
func TestRandomRunsGrantsMatchUpstreams(t *testing.T) {
	t.Parallel()
	e := onePartition(t)
	flows := map[string]*plan.Flow{}
	for seed := uint64(1000); seed < 1000+grantSeeds; seed++ {
		rng := rand.New(rand.NewPCG(seed, 7))
		f := randomFlow(rng, 4+rng.IntN(6))
		r := e.stage(f, `"in"`)
		_, ru, _ := splitID(string(r.ID))
		flows[ru] = f
		cancelling := false
		var active []Grant
		for step := range 70 {
			name := fmt.Sprintf("seed %d step %d", seed, step)
			run := e.checkRunInvariants(name, f, r.ID, cancelling)
			var err error
			switch op := rng.IntN(12); {
			case op <= 2:
				gs, cerr := e.s.Claim(e.ctx, ClaimRequest{Partition: 0, Lanes: []string{"default"}, Worker: worker1, Max: 1 + rng.IntN(3), LeaseTTL: []time.Duration{time.Minute, LeaseTTLMin}[rng.IntN(2)]})
				if cerr != nil {
					t.Fatal(cerr)
				}
				for _, g := range gs {
					e.checkGrant(name+" claim", flows, g)
				}
				active = append(active, gs...)
			case op <= 5 && len(active) > 0:
				k := 1 + rng.IntN(len(active))
				var items []Finish
				for _, g := range active[:k] {
					switch rng.IntN(4) {
					case 0:
						items = append(items, Finish{Lease: g.Lease, Failed: true, Error: "boom", Retryable: true})
					case 1:
						items = append(items, Finish{Lease: g.Lease, Failed: true, Error: "boom"})
					default:
						items = append(items, Finish{Lease: g.Lease, Result: []byte(fmt.Sprintf(`"%s@%d"`, g.FlowNode, step))})
					}
				}
				active = active[k:]
				var h *Handoff
				if rng.IntN(2) == 0 {
					h = handoff(1 + rng.IntN(2))
				}
				_, grants, ferr := e.s.FinishHandoff(e.ctx, items, h)
				if ferr != nil {
					t.Fatal(ferr)
				}
				for _, g := range grants {
					e.checkGrant(name+" hand-off", flows, g)
				}
				active = append(active, grants...)
			case op == 6:
				n := run.Nodes[rng.IntN(len(run.Nodes))]
				if rng.IntN(2) == 0 {
					_, err = e.s.Cancel(e.ctx, n.ExecutionID, "by hand")
				} else {
					_, err = e.s.RevokeLease(e.ctx, n.ExecutionID, "by hand")
				}
			case op == 7:
				time.Sleep(time.Duration(rng.IntN(60)) * time.Millisecond)
				for _, sc := range []func() (ScanResult, error){
					func() (ScanResult, error) { return e.s.ExpireDeadlines(e.ctx, 0, 100) },
					func() (ScanResult, error) { return e.s.PromoteDelayed(e.ctx, 0, 100) },
					func() (ScanResult, error) { return e.s.ExpireLeases(e.ctx, 0, 100) },
					func() (ScanResult, error) { return e.s.TimeoutAttempts(e.ctx, 0, 100) },
				} {
					if _, serr := sc(); serr != nil {
						t.Fatal(serr)
					}
				}
			case op == 8 && rng.IntN(3) == 0:
				if run.State == RunRunning {
					cancelling = true
				}
				_, err = e.s.CancelRun(e.ctx, r.ID, "stop")
			default:
				if run.State == RunFailed || run.State == RunCancelled {
					if _, err = e.s.ReplayRun(e.ctx, r.ID); err == nil {
						cancelling = false
					}
				}
			}
			if err != nil && !errors.Is(err, ErrWrongState) && !errors.Is(err, ErrNotFound) && !errors.Is(err, ErrStaleLease) {
				t.Fatalf("%s: %v", name, err)
			}
		}
		e.checkRunInvariants(fmt.Sprintf("seed %d end", seed), f, r.ID, cancelling)
	}
}

const grantSeeds = 8
