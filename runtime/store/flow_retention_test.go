package store

import (
	"errors"
	"testing"
	"time"
)

// Retention of an ended run with an idempotency key, next to a run still
// running: the ended run goes with its key (a new staging with the key
// creates a new run, and a replay of the purged run finds nothing), while
// the running run keeps every member, ended ones included, and still
// ends normally afterwards.
func TestFlowRetentionKeyAndRunningRun(t *testing.T) {
	t.Parallel()
	e := onePartition(t)
	f := flowOf("keyed", execs("a", "b"), "a->b")
	first, created, err := e.s.StageFlow(e.ctx, StageRequest{Flow: f, IdempotencyKey: "k"})
	if err != nil || !created {
		t.Fatalf("StageFlow = %v, %v", created, err)
	}
	// a fails: b is skipped and the run fails.
	e.drive(func(Grant) outcome { return outcome{fail: true} })
	if got := e.run(first.ID); got.State != RunFailed {
		t.Fatalf("first run %s", got.State)
	}
	// A second run whose first member ends, and whose second waits.
	other := e.stage(flowOf("other", execs("x", "y"), "x->y"), "")
	e.finishOK(e.claimOne("x"), "1", nil)
	time.Sleep(5 * time.Millisecond)
	e.purgeAll(100)
	if _, err := e.s.GetRun(e.ctx, first.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("GetRun of the purged run = %v", err)
	}
	if _, err := e.s.ReplayRun(e.ctx, first.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("ReplayRun of the purged run = %v", err)
	}
	again, created, err := e.s.StageFlow(e.ctx, StageRequest{Flow: f, IdempotencyKey: "k"})
	if err != nil || !created || again.ID == first.ID {
		t.Fatalf("StageFlow with the key of a purged run = %v, %v, %v", again, created, err)
	}
	kept := e.run(other.ID)
	if st := nodeStates(kept); st["x"] != StateCompleted || st["y"] != StateWaiting {
		t.Fatalf("running run after retention: %v", st)
	}
	e.finishOK(e.claimOne("y"), "2", nil)
	if done := e.run(other.ID); done.State != RunSucceeded {
		t.Fatalf("running run then ended %s", done.State)
	}
}
