package store

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/flowfabric/ff/compiler/plan"
)

// randomFlow is a random DAG of n members with random edge conditions,
// joins, retries and (some) short deadlines; edges go from lower to higher
// index, so it has no cycle.
func randomFlow(rng *rand.Rand, n int) *plan.Flow {
	var names []string
	for i := range n {
		names = append(names, fmt.Sprintf("m%d", i))
	}
	xs := execs(names...)
	f := flowOf("rand", xs)
	ons := []string{plan.OnSuccess, plan.OnSuccess, plan.OnFailure, plan.OnDone}
	ups := map[int][]string{}
	for to := 1; to < n; to++ {
		for from := range to {
			if rng.IntN(3) == 0 {
				f.Edges = append(f.Edges, plan.Edge{From: names[from], To: names[to], On: ons[rng.IntN(len(ons))]})
				ups[to] = append(ups[to], names[from])
			}
		}
	}
	for i := range f.Execs {
		x := &f.Execs[i]
		x.Upstreams = ups[i]
		x.Retry.Attempts = 1 + rng.IntN(2)
		if len(ups[i]) > 1 {
			switch rng.IntN(3) {
			case 0:
				x.Join = plan.Join{Kind: plan.JoinAny}
			case 1:
				x.Join = plan.Join{Kind: plan.JoinCount, N: 1 + rng.IntN(len(ups[i]))}
			}
		}
		if rng.IntN(6) == 0 {
			x.DeadlineMs = int64(20 + rng.IntN(40))
		}
		if rng.IntN(6) == 0 {
			x.TimeoutMs = int64(10 + rng.IntN(30))
		}
		if rng.IntN(4) == 0 {
			x.Retry.DelayMs = int64(5 + rng.IntN(20))
		}
	}
	if rng.IntN(2) == 0 {
		f.Result = names[n-1]
	}
	return f
}

// checkRunInvariants checks run id against the states of its members:
// every counter of the record, the run's state while members are left and
// once none is, and that no member waits for upstreams whose outcomes
// already decide its join (it should have fired or been skipped).
// cancelling says whether CancelRun was called since the last replay.
func (e *env) checkRunInvariants(step string, f *plan.Flow, id RunID, cancelling bool) *Run {
	e.t.Helper()
	r := e.run(id)
	rec := e.runRecord(id)
	by := map[string]RunNode{}
	var done, succeeded, failed, skipped, cancelled, unhandled int
	handled := map[string]bool{}
	for _, ed := range f.Edges {
		if ed.On == plan.OnFailure || ed.On == plan.OnDone {
			handled[ed.From] = true
		}
	}
	for _, n := range r.Nodes {
		by[n.Name] = n
		if n.State.Lifecycle != LifecycleTerminal {
			continue
		}
		done++
		switch n.State.Outcome {
		case OutcomeSuccess:
			succeeded++
		case OutcomeFailed, OutcomeExpired:
			failed++
			if !handled[n.Name] {
				unhandled++
			}
		case OutcomeSkipped:
			skipped++
		case OutcomeCancelled:
			cancelled++
		}
	}
	got := fmt.Sprintf("done %d succeeded %d failed %d skipped %d cancelled %d unhandled %s",
		r.Done, r.Succeeded, r.Failed, r.Skipped, r.Cancelled, rec["unhandled"])
	want := fmt.Sprintf("done %d succeeded %d failed %d skipped %d cancelled %d unhandled %d",
		done, succeeded, failed, skipped, cancelled, unhandled)
	if got != want {
		e.t.Fatalf("%s: run counters %q, members say %q (nodes %v)", step, got, want, nodeStates(r))
	}
	if done < len(r.Nodes) && r.State != RunRunning {
		e.t.Fatalf("%s: run %s with %d of %d members ended (nodes %v)", step, r.State, done, len(r.Nodes), nodeStates(r))
	}
	if done == len(r.Nodes) {
		want := RunSucceeded
		switch {
		case cancelling:
			want = RunCancelled
		case f.Result != "":
			if by[f.Result].State.Outcome != OutcomeSuccess {
				want = RunFailed
			}
		case cancelled > 0:
			want = RunCancelled
		case unhandled > 0:
			want = RunFailed
		}
		if r.State != want {
			e.t.Fatalf("%s: run ended %s, want %s (nodes %v)", step, r.State, want, nodeStates(r))
		}
	}
	// A pending member's join is still open.
	for _, x := range f.Execs {
		n := by[x.Name]
		if n.State.Eligibility != BlockedByDependencies {
			continue
		}
		need, _ := joinNeed(x, len(x.Upstreams))
		total, dn, ok := 0, 0, 0
		for _, ed := range f.Edges {
			if ed.To != x.Name {
				continue
			}
			total++
			up := by[ed.From].State
			if up.Lifecycle != LifecycleTerminal {
				continue
			}
			dn++
			if holdsGo(ed.On, up.Outcome) {
				ok++
			}
		}
		if ok >= need || total-(dn-ok) < need {
			e.t.Fatalf("%s: %s pending with its join decided (need %d, %d of %d upstreams ended, %d held; nodes %v)",
				step, x.Name, need, dn, total, ok, nodeStates(r))
		}
	}
	return r
}

// holdsGo is the edge rule of spec/runtime.md, "Resolution".
func holdsGo(on string, o Outcome) bool {
	failed := o == OutcomeFailed || o == OutcomeExpired
	switch on {
	case plan.OnSuccess:
		return o == OutcomeSuccess
	case plan.OnFailure:
		return failed
	}
	return o == OutcomeSuccess || failed
}

// Random operations on random runs (finishes with and without hand-off,
// failures, cancels of members and of the run, revokes, deadlines, attempt
// timeouts, retry backoffs, lease expiries, promotions, admission blocks
// and unblocks, priority changes, replays) keep every run counter equal to
// what its members' states say, every member in exactly the indexes of its
// state, and no member waiting on a decided join; and every grant (claim
// or hand-off) is checked against its upstreams (checkGrant): no member
// starts before its join is met, and it gets its feeding upstream's
// current result and every upstream's result or error.
func TestFlowRandomRunsKeepCounters(t *testing.T) {
	t.Parallel()
	e := onePartition(t)
	flows := map[string]*plan.Flow{} // by run uuid: what checkGrant reads
	for seed := range uint64(randomRunSeeds) {
		rng := rand.New(rand.NewPCG(seed, 99))
		f := randomFlow(rng, 4+rng.IntN(5))
		r := e.stage(f, `{}`)
		_, ru, _ := splitID(string(r.ID))
		flows[ru] = f
		cancelling := false
		var active []Grant
		for step := range 60 {
			name := fmt.Sprintf("seed %d step %d", seed, step)
			run := e.checkRunInvariants(name, f, r.ID, cancelling)
			var err error
			switch op := rng.IntN(12); {
			case op <= 2: // claim
				gs, cerr := e.s.Claim(e.ctx, ClaimRequest{Partition: 0, Lanes: []string{"default"}, Worker: worker1, Max: 1 + rng.IntN(3), LeaseTTL: []time.Duration{time.Minute, LeaseTTLMin}[rng.IntN(2)]})
				if cerr != nil {
					t.Fatal(cerr)
				}
				for _, g := range gs {
					e.checkGrant(name+" claim", flows, g)
				}
				active = append(active, gs...)
			case op <= 5 && len(active) > 0: // finish some, maybe with a hand-off
				k := 1 + rng.IntN(len(active))
				var items []Finish
				for _, g := range active[:k] {
					switch rng.IntN(4) {
					case 0:
						items = append(items, Finish{Lease: g.Lease, Failed: true, Error: "boom", Retryable: true})
					case 1:
						items = append(items, Finish{Lease: g.Lease, Failed: true, Error: "boom"})
					default:
						// Results differ by member and step: a grant's input
						// must be its feeding upstream's current one.
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
			case op == 6: // cancel or revoke one member
				n := run.Nodes[rng.IntN(len(run.Nodes))]
				if rng.IntN(2) == 0 {
					_, err = e.s.Cancel(e.ctx, n.ExecutionID, "by hand")
				} else {
					_, err = e.s.RevokeLease(e.ctx, n.ExecutionID, "by hand")
				}
			case op == 7: // scanners
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
			case op == 10: // block one member for admission, or change its priority
				n := run.Nodes[rng.IntN(len(run.Nodes))]
				reasons := []BlockingReason{WaitingForBudget, WaitingForQuota, WaitingForCapableWorker}
				if rng.IntN(3) == 0 {
					_, err = e.s.ChangePriority(e.ctx, n.ExecutionID, rng.IntN(1001))
				} else {
					err = e.s.Block(e.ctx, n.ExecutionID, reasons[rng.IntN(len(reasons))], "test", time.Hour)
				}
			case op == 11: // unblock every member
				var ids []ExecutionID
				for _, n := range run.Nodes {
					ids = append(ids, n.ExecutionID)
				}
				for _, reason := range []BlockingReason{WaitingForBudget, WaitingForQuota} {
					if _, uerr := e.s.Unblock(e.ctx, 0, reason, ids); uerr != nil {
						t.Fatal(uerr)
					}
				}
				if _, uerr := e.s.UnblockRoute(e.ctx, 0, "default", nil, 100, nil); uerr != nil {
					t.Fatal(uerr)
				}
			case op == 8 && rng.IntN(3) == 0: // cancel the run
				if run.State == RunRunning {
					cancelling = true
				}
				_, err = e.s.CancelRun(e.ctx, r.ID, "stop")
			default: // replay when it ended badly
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

// randomRunSeeds is the number of random runs: each is a different flow and
// sequence of operations.
const randomRunSeeds = 20
