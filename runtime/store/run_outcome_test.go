package store

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestRunOutcomeReadsNoMembers: the outcome of an ended run that did not
// succeeded cleanly (the result route's read) is GetRun's run without its
// input and members: the same counts, result, result state and failures,
// in flow order; a run still running is answered as its record says.
func TestRunOutcomeReadsNoMembers(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	f := pagedFlow()
	handled := e.stage(f, `"in"`)
	e.drive(func(g Grant) outcome {
		return outcome{result: []byte(`"r"`), fail: g.FlowNode == "m07" || g.FlowNode == "m03"}
	})
	failed := e.stage(f, `"in"`)
	e.drive(func(g Grant) outcome { return outcome{result: []byte(`"r"`), fail: g.FlowNode == "src"} })
	cancelled := e.stage(f, `"in"`)
	if _, err := e.s.CancelRun(e.ctx, cancelled.ID, "stop"); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		id       RunID
		state    RunState
		failures int
	}{{handled.ID, RunSucceeded, 2}, {failed.ID, RunFailed, 1}, {cancelled.ID, RunCancelled, len(f.Execs)}} {
		want := e.run(c.id)
		if want.State != c.state || len(want.Failures) != c.failures {
			t.Fatalf("run %s: %d failures, want %s with %d", want.State, len(want.Failures), c.state, c.failures)
		}
		want.Nodes, want.Input = nil, nil
		got, err := e.s.GetRunOutcome(e.ctx, c.id)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("outcome of the %s run differs from GetRun but its members and input (-want +got):\n%s", c.state, diff)
		}
	}

	running := e.stage(f, `"in"`)
	got, err := e.s.GetRunOutcome(e.ctx, running.ID)
	if err != nil || got.State != RunRunning || got.Nodes != nil || got.Failures != nil || got.Total != len(f.Execs) {
		t.Fatalf("outcome of a running run = %+v, %v", got, err)
	}
}
