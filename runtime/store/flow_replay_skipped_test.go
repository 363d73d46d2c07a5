package store

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// failedThroughExpiry stages a -> e on failure, e -> m on failure, with a
// deadline on e, and drives it so: e expires while a runs, which fires m;
// m fails (its attempt's error "handler failed"), unhandled; then a
// succeeds. The run fails. It returns the run ended.
func (e *env) failedThroughExpiry() *Run {
	e.t.Helper()
	x := execs("a", "e", "m")
	x[1].DeadlineMs = 20
	r := e.stage(flowOf("expiry", x, "a->e on failure", "e->m on failure"), "")
	a := e.claimOne("a")
	waitUntil(e.t, 10*time.Second, "e to expire", func() bool {
		if _, err := e.s.ExpireDeadlines(e.ctx, 0, 10); err != nil {
			e.t.Fatal(err)
		}
		return nodeStates(e.run(r.ID))["e"] == StateExpired
	})
	m := e.claimOne("m")
	if res, err := e.s.FinishMany(e.ctx, []Finish{{Lease: m.Lease, Failed: true, Error: "handler failed"}}); err != nil || res[0].Err != nil {
		e.t.Fatalf("fail m: %v %+v", err, res)
	}
	e.finishOKOne(a, "1")
	run := e.run(r.ID)
	want := map[string]PublicState{"a": StateCompleted, "e": StateExpired, "m": StateFailed}
	if diff := cmp.Diff(want, nodeStates(run)); diff != "" || run.State != RunFailed {
		e.t.Fatalf("run %s before the replay, members (-want +got):\n%s", run.State, diff)
	}
	return run
}

// A replay of a failed run that turns its failures into skips and runs
// nothing again (a's success makes e's join impossible, and so m's) ends
// the run again at once, succeeded: the failures that failed it became
// skips. Decided in one call or by steps, the members that became skipped
// read as skipped now: ended at the replay (not at their old failure or
// expiry), without the old attempt's error, with the skip's reason, out
// of the failures and the failed set.
func TestReplayIntoSkippedEndsRunSucceeded(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		step int // 0: one call
	}{{"in one call", 0}, {"by steps", 1}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := onePartition(t)
			s := e.s
			if tc.step > 0 {
				s = e.stepped(tc.step)
			}
			before := e.failedThroughExpiry()
			ids := nodeIDs(before)
			replayed, err := s.ReplayRun(e.ctx, before.ID)
			if err != nil {
				t.Fatalf("ReplayRun = %v, want e and m skipped and the run ended again", err)
			}
			run := e.run(before.ID)
			want := map[string]PublicState{"a": StateCompleted, "e": StateSkipped, "m": StateSkipped}
			if diff := cmp.Diff(want, nodeStates(run)); diff != "" {
				t.Fatalf("members after the replay (-want +got):\n%s", diff)
			}
			if run.State != RunSucceeded || run.Replays != 1 || run.Failed != 0 || run.Skipped != 2 ||
				run.Succeeded != 1 || run.Done != run.Total || run.Failures != nil {
				t.Fatalf("run after the replay = %+v, want it ended again, succeeded, with two skips", run)
			}
			if diff := cmp.Diff(run, replayed); diff != "" {
				t.Fatalf("ReplayRun's answer is not the run (-read +answer):\n%s", diff)
			}
			e.wantFailedSet(run)
			old := map[string]RunNode{}
			for _, n := range before.Nodes {
				old[n.Name] = n
			}
			for _, n := range run.Nodes {
				if n.Name == "a" {
					continue
				}
				if n.Error != "its join can no longer be satisfied" {
					t.Errorf("%s: error %q, want the skip's reason", n.Name, n.Error)
				}
				if n.EndedAt.Before(run.ReplayedAt) {
					t.Errorf("%s: ended at %s, before the replay at %s (it ended %s at %s)", n.Name,
						n.EndedAt.Format(time.RFC3339Nano), run.ReplayedAt.Format(time.RFC3339Nano), old[n.Name].State.Public,
						old[n.Name].EndedAt.Format(time.RFC3339Nano))
				}
				if tc.step == 0 && !n.EndedAt.Equal(run.ReplayedAt) {
					t.Errorf("%s: ended at %s, want the replay's time %s", n.Name, n.EndedAt.Format(time.RFC3339Nano),
						run.ReplayedAt.Format(time.RFC3339Nano))
				}
				x := e.get(ids[n.Name])
				if !x.EndedAt.Equal(n.EndedAt) || x.FailureReason != n.Error {
					t.Errorf("%s: GetExecution ended %s with %q, the run says %s with %q", n.Name, x.EndedAt, x.FailureReason,
						n.EndedAt, n.Error)
				}
				rec, err := e.c.Do(e.ctx, e.c.B().Hget().Key(e.s.k.core(0, uuidOf(t, ids[n.Name]))).Field("last_error").Build()).ToString()
				if err == nil && rec != "" {
					t.Errorf("%s: last_error %q kept from its old end", n.Name, rec)
				}
				score, err := e.c.Do(e.ctx, e.c.B().Zscore().Key(e.s.k.lane(0, "default", "default", indexTerminal)).
					Member(uuidOf(t, ids[n.Name])).Build()).AsInt64()
				if err != nil || score != n.EndedAt.UnixMilli() {
					t.Errorf("%s: terminal index score %d (%v), want its end %d", n.Name, score, err, n.EndedAt.UnixMilli())
				}
			}
		})
	}
}
