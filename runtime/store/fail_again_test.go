package store

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestFailSentAgainAfterRetryClaimed: a failure sent again once the retry
// it scheduled was claimed (and once that retry completed) is still a
// repeat: ff_finish finds the attempt of the item's lease and epoch, not
// only the last one, and answers the repeat with the execution's state
// now, changing nothing. Another message, or the lease id with another
// epoch, stays refused. The repeat used to be refused as a stale lease as
// soon as the retry's lease replaced the failed one.
func TestFailSentAgainAfterRetryClaimed(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	x := e.create(CreateRequest{Retry: RetryPolicy{Attempts: 3}})
	g1 := e.claim(x.ID, worker1, time.Minute)
	if _, err := e.s.Fail(e.ctx, g1.Lease, "boom", true); err != nil {
		t.Fatal(err)
	}
	g2 := e.claim(x.ID, worker1, time.Minute)
	before := e.get(x.ID)
	if r, err := e.s.Fail(e.ctx, g1.Lease, "boom", true); err != nil || r.State != StateActive {
		t.Fatalf("the first failure again while the retry runs = %+v, %v; want it answered active", r, err)
	}
	if diff := cmp.Diff(before, e.get(x.ID)); diff != "" {
		t.Fatalf("the repeat changed the execution (-before +after):\n%s", diff)
	}
	var le *LeaseError
	if _, err := e.s.Fail(e.ctx, g1.Lease, "other", true); !errors.As(err, &le) || le.Reason != LeaseReasonMismatch {
		t.Fatalf("a fail of the old lease with another message = %v, want lease_mismatch", err)
	}
	if err := e.s.Complete(e.ctx, g1.Lease, nil); !errors.As(err, &le) || le.Reason != LeaseReasonMismatch {
		t.Fatalf("a complete of the old lease = %v, want lease_mismatch", err)
	}
	for name, l := range map[string]Lease{
		"its id, the retry's epoch": {ExecutionID: x.ID, ID: g1.ID, Epoch: g2.Epoch},
		"the retry's id, its epoch": {ExecutionID: x.ID, ID: g2.ID, Epoch: g1.Epoch},
	} {
		if _, err := e.s.Fail(e.ctx, l, "boom", true); !errors.As(err, &le) {
			t.Fatalf("%s: Fail = %v, want a stale lease", name, err)
		}
	}
	if err := e.s.Complete(e.ctx, g2.Lease, []byte(`"ok"`)); err != nil {
		t.Fatal(err)
	}
	if r, err := e.s.Fail(e.ctx, g1.Lease, "boom", true); err != nil || r.State != StateCompleted {
		t.Fatalf("the first failure again once the retry completed = %+v, %v; want it answered completed", r, err)
	}
	if got := e.get(x.ID); got.State.Public != StateCompleted || got.AttemptCount != 2 {
		t.Fatalf("execution %s after %d attempts, want completed after 2", got.State.Public, got.AttemptCount)
	}
}
