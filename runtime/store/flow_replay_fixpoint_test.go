package store

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/flowfabric/ff/compiler/plan"
)

// checkFixpoint checks an ended run against its flow: every member
// that ran (succeeded or failed) has its join met by its upstreams' final
// outcomes, every skipped member has a join they make impossible, and no
// member is left pending or waiting.
func (e *env) checkFixpoint(step string, f *plan.Flow, id RunID) *Run {
	e.t.Helper()
	r := e.run(id)
	by := map[string]RunNode{}
	for _, n := range r.Nodes {
		by[n.Name] = n
	}
	for _, x := range f.Execs {
		n := by[x.Name]
		if n.State.Lifecycle != LifecycleTerminal {
			e.t.Fatalf("%s: run %s ended with %s %s (nodes %v)", step, r.State, x.Name, n.State.Public, nodeStates(r))
		}
		need, _ := joinNeed(x, len(x.Upstreams))
		total, dn, ok := 0, 0, 0
		for _, ed := range f.Edges {
			if ed.To != x.Name {
				continue
			}
			total++
			dn++
			if holdsGo(ed.On, by[ed.From].State.Outcome) {
				ok++
			}
		}
		switch n.State.Outcome {
		case OutcomeSuccess, OutcomeFailed:
			if ok < need {
				e.t.Fatalf("%s: %s ran (%s) but its upstreams' outcomes meet %d of its %d edges (nodes %v)",
					step, x.Name, n.State.Public, ok, need, nodeStates(r))
			}
		case OutcomeSkipped:
			if total-(dn-ok) >= need {
				e.t.Fatalf("%s: %s skipped but its upstreams' outcomes meet %d of %d edges, need %d (nodes %v)",
					step, x.Name, ok, total, need, nodeStates(r))
			}
		}
	}
	return r
}

// fixpointFlow is a random flow of 3 to 9 execs whose members end only as
// the test drives them: no deadline, no attempt timeout, no retry.
func fixpointFlow(rng *rand.Rand) *plan.Flow {
	f := randomFlow(rng, 3+rng.IntN(7))
	for i := range f.Execs {
		f.Execs[i].DeadlineMs, f.Execs[i].TimeoutMs = 0, 0
		f.Execs[i].Retry = plan.Retry{Attempts: 1}
	}
	return f
}

// Random runs driven to their end with random failures, then replayed
// (up to four times, each with new random failures): after every end the
// members' states are a fixpoint of the edge rules (spec/runtime.md,
// Replay: "the rule is applied until nothing changes").
func TestReplayReachesAFixpoint(t *testing.T) {
	t.Parallel()
	e := onePartition(t)
	for seed := uint64(0); seed < 60; seed++ {
		rng := rand.New(rand.NewPCG(seed, 31))
		f := fixpointFlow(rng)
		r := e.stage(f, `{}`)
		failP := rng.Float64()
		for round := 0; round < 5; round++ {
			e.drive(func(Grant) outcome { return outcome{result: []byte(`1`), fail: rng.Float64() < failP} })
			run := e.checkFixpoint(fmt.Sprintf("seed %d round %d", seed, round), f, r.ID)
			if run.State != RunFailed {
				break
			}
			if _, err := e.s.ReplayRun(e.ctx, r.ID); err != nil {
				var se *StateError
				if run.Failed == 0 && run.Cancelled == 0 && errors.As(err, &se) && se.Reason == ReasonNothingToReplay {
					// Nothing to run again: every member that did not
					// succeed is skipped for good (the refusal is
					// TestReplayOfFailedRunWithNothingToRerun's).
					break
				}
				t.Fatalf("seed %d round %d: replay: %v (nodes %v)", seed, round, err, nodeStates(run))
			}
			failP /= 2
		}
	}
}

// As TestReplayReachesAFixpoint, with hand-offs, members cancelled
// on their own and runs cancelled part way, each replayed.
func TestReplayWithCancelsReachesAFixpoint(t *testing.T) {
	t.Parallel()
	e := onePartition(t)
	for seed := uint64(0); seed < 40; seed++ {
		rng := rand.New(rand.NewPCG(seed, 77))
		f := fixpointFlow(rng)
		r := e.stage(f, `{}`)
		failP := rng.Float64()
		for round := 0; round < 6; round++ {
			step := fmt.Sprintf("seed %d round %d", seed, round)
			var active []Grant
			for i := 0; i < 200; i++ {
				if len(active) == 0 {
					gs, err := e.s.Claim(e.ctx, ClaimRequest{Partition: 0, Lanes: []string{"default"}, Worker: worker1, Max: 1 + rng.IntN(3), LeaseTTL: 60e9})
					if err != nil {
						t.Fatal(err)
					}
					if len(gs) == 0 {
						break
					}
					active = gs
				}
				switch x := rng.IntN(20); {
				case x == 0:
					if _, err := e.s.CancelRun(e.ctx, r.ID, "stop"); err != nil {
						t.Fatal(err)
					}
					active = nil
				case x == 1:
					run := e.run(r.ID)
					n := run.Nodes[rng.IntN(len(run.Nodes))]
					if _, err := e.s.Cancel(e.ctx, n.ExecutionID, "by hand"); err != nil && !errors.Is(err, ErrWrongState) {
						t.Fatal(err)
					}
				default:
					g := active[0]
					active = active[1:]
					item := Finish{Lease: g.Lease, Result: []byte(`1`)}
					if rng.Float64() < failP {
						item = Finish{Lease: g.Lease, Failed: true, Error: "boom"}
					}
					var h *Handoff
					if rng.IntN(2) == 0 {
						h = handoff(1)
					}
					_, grants, err := e.s.FinishHandoff(e.ctx, []Finish{item}, h)
					if err != nil {
						t.Fatal(err)
					}
					active = append(active, grants...)
				}
			}
			run := e.run(r.ID)
			if run.State == RunRunning {
				// Leases of members cancelled by hand were dropped: the
				// rest may still wait; finish by cancelling.
				if _, err := e.s.CancelRun(e.ctx, r.ID, "end"); err != nil {
					t.Fatal(err)
				}
			}
			run = e.checkFixpoint(step, f, r.ID)
			if run.State == RunSucceeded {
				break
			}
			if _, err := e.s.ReplayRun(e.ctx, r.ID); err != nil {
				if se := (*StateError)(nil); errors.As(err, &se) && se.Reason == ReasonNothingToReplay {
					break // nothing to run again (see TestReplayOfFailedRunWithNothingToRerun)
				}
				t.Fatalf("%s: replay: %v (nodes %v)", step, err, nodeStates(run))
			}
			failP /= 2
		}
	}
}
