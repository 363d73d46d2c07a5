package store

import (
	"errors"
	"testing"
)

// TestCancelAndReplayRuns: the pipelined forms act on each run as
// CancelRun and ReplayRun do and say, per run, what they did: a run that
// had ended is not cancelled (and no error), an unknown run is
// ErrNotFound, a running run is not replayed (a run *StateError).
func TestCancelAndReplayRuns(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	runs := e.stageListed("bulk", "default", 3)
	if _, err := e.s.CancelRun(e.ctx, runs[2].ID, "before"); err != nil {
		t.Fatal(err)
	}
	missing := RunID("1.00000000-0000-0000-0000-000000000000")
	ids := []RunID{runs[0].ID, runs[1].ID, runs[2].ID, missing, "no-partition"}
	cancelled, errs := e.s.CancelRuns(e.ctx, ids, "bulk")
	want := []bool{true, true, false, false, false}
	for i := range ids {
		if cancelled[i] != want[i] {
			t.Errorf("run %d: cancelled %v, want %v (%v)", i, cancelled[i], want[i], errs[i])
		}
	}
	if errs[0] != nil || errs[1] != nil || errs[2] != nil || !errors.Is(errs[3], ErrNotFound) || errs[4] == nil {
		t.Fatalf("cancel errors %v", errs)
	}
	if r := e.run(runs[0].ID); r.State != RunCancelled {
		t.Fatalf("run after the cancel: %s", r.State)
	}
	errs = e.s.ReplayRuns(e.ctx, []RunID{runs[0].ID, runs[0].ID, missing})
	var se *StateError
	if errs[0] != nil || !errors.As(errs[1], &se) || !se.Run || !errors.Is(errs[2], ErrNotFound) {
		t.Fatalf("replay errors %v; want nil, a run state error (replayed just before), not found", errs)
	}
	if r := e.run(runs[0].ID); r.State != RunRunning || r.Replays != 1 {
		t.Fatalf("run after the replay: %s, %d replays", r.State, r.Replays)
	}
}

// TestRunStates: the states of many runs in one round trip; "" for one
// that does not exist or whose id names no partition.
func TestRunStates(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	runs := e.stageListed("states", "default", 2)
	if _, err := e.s.CancelRun(e.ctx, runs[1].ID, "x"); err != nil {
		t.Fatal(err)
	}
	got, err := e.s.RunStates(e.ctx, []RunID{runs[0].ID, runs[1].ID, "1.00000000-0000-0000-0000-000000000000", "bad"})
	if err != nil || len(got) != 4 || got[0] != RunRunning || got[1] != RunCancelled || got[2] != "" || got[3] != "" {
		t.Fatalf("RunStates = %v, %v", got, err)
	}
	if got, err := e.s.RunStates(e.ctx, nil); err != nil || len(got) != 0 {
		t.Fatalf("RunStates of none = %v, %v", got, err)
	}
}
