package compiler

import (
	"github.com/flowfabric/ff/compiler/plan"
	"github.com/flowfabric/ff/dsl"
)

// Outcome facts used by the reachability analysis.
const (
	factSucceeded = 1
	factFailed    = 2
)

// fact says that exec `exec` must have ended with `outcome` for some exec
// to run.
type fact struct {
	exec    int
	outcome int
}

// checkReachable warns about execs that can never run (FF0901).
//
// Any exec that runs may succeed or fail, so an edge is satisfiable when
// its upstream can run; a failure or done edge from an exec with a
// deadline is satisfiable in any case, since the exec can expire while
// pending (and then that edge requires nothing else). What makes an exec
// impossible is a join that demands contradictory outcomes of one exec: for every exec X the analysis
// computes the outcomes of earlier execs that must hold whenever X runs: an
// edge from U needs what U needs, plus U succeeded (success edge) or U
// failed (failure edge); a done edge adds nothing. With `join all`, or a
// `join N` whose N is the number of X's upstreams, every edge must hold: X
// needs the union of its edges' requirements, so X can never run when that
// union asks some exec to both succeed and fail, or when an upstream can
// never run. With `join any` or a smaller `join N` only the requirements
// common to every satisfiable edge carry over, and X can never run when
// fewer than 1 (any) or N of its upstreams can run. Only execs that have
// both success and failure edges out of them can appear in a
// contradiction, so only their outcomes are tracked; this keeps the
// analysis linear on large flows without such branches.
func (fc *flowCheck) checkReachable() {
	n := len(fc.execs)
	branch := make([]bool, n)
	for i, ei := range fc.execs {
		var succ, fail bool
		for _, e := range ei.downs {
			succ = succ || e.on == plan.OnSuccess
			fail = fail || e.on == plan.OnFailure
		}
		branch[i] = succ && fail
	}
	// An upstream with a deadline can expire even while pending, and an
	// expiry satisfies its failure and done edges: such an edge can hold
	// whether or not the upstream can run, and needs nothing of what the
	// upstream needs.
	expires := func(e *edgeInfo) bool {
		return e.on != plan.OnSuccess && fc.execs[e.from].exec.DeadlineMs > 0
	}
	order := fc.topoOrder()
	runs := make([]bool, n)
	req := make([][]fact, n)
	for _, x := range order {
		ei := fc.execs[x]
		if len(ei.ups) == 0 {
			runs[x] = true
			continue
		}
		var ok []*edgeInfo
		var dead *edgeInfo
		for _, e := range ei.ups {
			if runs[e.from] || expires(e) {
				ok = append(ok, e)
			} else if dead == nil {
				dead = e
			}
		}
		edgeReq := func(e *edgeInfo) []fact {
			r := req[e.from]
			if expires(e) {
				r = nil // the upstream may expire before its own upstreams end
			}
			if branch[e.from] && e.on != plan.OnDone {
				o := factSucceeded
				if e.on == plan.OnFailure {
					o = factFailed
				}
				r = mergeFacts(r, []fact{{e.from, o}})
			}
			return r
		}
		name := ei.decl.Name.Name
		// need is how many edges must hold: all of them for `join all`,
		// and for a `join N` whose N counts every upstream.
		need := len(ei.ups)
		switch ei.exec.Join.Kind {
		case plan.JoinAny:
			need = 1
		case plan.JoinCount:
			need = ei.exec.Join.N
		}
		if len(ok) < need {
			switch {
			case ei.exec.Join.Kind == plan.JoinAll:
				fc.diags.Warnf(ei.decl.Name.Range(), dsl.CodeUnreachable, "exec %q can never run: it waits for %q, which can never run", name, fc.execs[dead.from].decl.Name.Name)
			case len(ok) == 0:
				fc.diags.Warnf(ei.decl.Name.Range(), dsl.CodeUnreachable, "exec %q can never run: none of its upstreams can run", name)
			default:
				fc.diags.Warnf(ei.decl.Name.Range(), dsl.CodeUnreachable, "exec %q can never run: join %d needs %d upstreams, but only %d can run", name, need, need, len(ok))
			}
			continue
		}
		if need == len(ei.ups) {
			// Every edge holds: the exec needs what each of them needs.
			var all []fact
			for _, e := range ok {
				all = mergeFacts(all, edgeReq(e))
			}
			if u, bad := contradiction(all); bad {
				fc.diags.Warnf(ei.decl.Name.Range(), dsl.CodeUnreachable, "exec %q can never run: with %s it needs %q to both succeed and fail", name, plan.JoinString(ei.exec.Join), fc.execs[u].decl.Name.Name)
				continue
			}
			runs[x], req[x] = true, all
			continue
		}
		// Some edges may fail to hold: only what all of them need.
		common := edgeReq(ok[0])
		for _, e := range ok[1:] {
			common = intersectFacts(common, edgeReq(e))
		}
		runs[x], req[x] = true, common
	}
}

// topoOrder returns the execs in an order where every edge goes forward.
// The flow must be acyclic.
func (fc *flowCheck) topoOrder() []int {
	n := len(fc.execs)
	indeg := make([]int, n)
	for i, ei := range fc.execs {
		indeg[i] = len(ei.ups)
	}
	order := make([]int, 0, n)
	for i := range n {
		if indeg[i] == 0 {
			order = append(order, i)
		}
	}
	for k := 0; k < len(order); k++ {
		for _, e := range fc.execs[order[k]].downs {
			indeg[e.to]--
			if indeg[e.to] == 0 {
				order = append(order, e.to)
			}
		}
	}
	return order
}

// mergeFacts returns the sorted union of two sorted fact lists; a and b
// are not modified.
func mergeFacts(a, b []fact) []fact {
	if len(b) == 0 {
		return a
	}
	if len(a) == 0 {
		return b
	}
	out := make([]fact, 0, len(a)+len(b))
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case j == len(b) || i < len(a) && less(a[i], b[j]):
			out = append(out, a[i])
			i++
		case i == len(a) || less(b[j], a[i]):
			out = append(out, b[j])
			j++
		default:
			out = append(out, a[i])
			i++
			j++
		}
	}
	return out
}

// intersectFacts returns the facts present in both sorted lists.
func intersectFacts(a, b []fact) []fact {
	var out []fact
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		switch {
		case less(a[i], b[j]):
			i++
		case less(b[j], a[i]):
			j++
		default:
			out = append(out, a[i])
			i++
			j++
		}
	}
	return out
}

func less(a, b fact) bool {
	if a.exec != b.exec {
		return a.exec < b.exec
	}
	return a.outcome < b.outcome
}

// contradiction returns an exec required to both succeed and fail.
func contradiction(fs []fact) (int, bool) {
	for i := 1; i < len(fs); i++ {
		if fs[i].exec == fs[i-1].exec {
			return fs[i].exec, true
		}
	}
	return 0, false
}
