package store

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// A claim's grants are remembered for its worker instance (for as long as
// their leases): ClaimLost delivers again those the instance still holds
// under the claim's leases, the same lease each, and none of another
// instance, none that ended, none whose lease was renewed past a revoke
// and granted again, and at most max.
func TestClaimLostDeliversWhatTheInstanceHolds(t *testing.T) {
	t.Parallel()
	e := onePartition(t)
	for range 4 {
		e.create(CreateRequest{})
	}
	g := e.claimAll(worker1, 3, time.Minute)
	if len(g) != 3 {
		t.Fatalf("claimed %d", len(g))
	}
	other := e.claimAll(worker2, 1, time.Minute)
	lost, err := e.s.ClaimLost(e.ctx, 0, worker1, 10)
	if err != nil {
		t.Fatal(err)
	}
	leases := func(gs []Grant) []Lease {
		var out []Lease
		for _, x := range gs {
			out = append(out, x.Lease)
		}
		return out
	}
	if diff := cmp.Diff(leases(g), leases(lost)); diff != "" {
		t.Fatalf("ClaimLost of worker1 (-claimed +delivered again):\n%s", diff)
	}
	if again, err := e.s.ClaimLost(e.ctx, 0, worker2, 10); err != nil || len(again) != 1 || again[0].Lease != other[0].Lease {
		t.Fatalf("ClaimLost of worker2 = %v, %v; want its one grant", leases(again), err)
	}
	// One completed, one revoked (and granted again to worker2): only
	// the third is still held under the lost claim's lease.
	if err := e.s.Complete(e.ctx, g[0].Lease, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := e.s.RevokeLease(e.ctx, g[1].ExecutionID, "move it"); err != nil {
		t.Fatal(err)
	}
	e.claimAll(worker2, 1, time.Minute)
	lost, err = e.s.ClaimLost(e.ctx, 0, worker1, 10)
	if err != nil || len(lost) != 1 || lost[0].Lease != g[2].Lease {
		t.Fatalf("ClaimLost after a completion and a revoke = %v, %v; want %v", leases(lost), err, g[2].Lease)
	}
	if lost, err := e.s.ClaimLost(e.ctx, 0, worker1, 1); err != nil || len(lost) != 1 {
		t.Fatalf("ClaimLost(max 1) = %d grants, %v", len(lost), err)
	}
	for _, bad := range []int{0, MaxClaim + 1} {
		if _, err := e.s.ClaimLost(e.ctx, 0, worker1, bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("ClaimLost(max %d) = %v, want invalid", bad, err)
		}
	}
}

// Leases that ran out are not delivered again (the lease scanner may not
// have expired them yet): the instance's claims are remembered only for
// as long as their leases.
func TestClaimLostLeavesExpiredLeases(t *testing.T) {
	t.Parallel()
	e := onePartition(t)
	e.create(CreateRequest{})
	if g := e.claimAll(worker1, 1, 150*time.Millisecond); len(g) != 1 {
		t.Fatalf("claimed %d", len(g))
	}
	time.Sleep(200 * time.Millisecond)
	if lost, err := e.s.ClaimLost(e.ctx, 0, worker1, 10); err != nil || len(lost) != 0 {
		t.Fatalf("ClaimLost after the lease ran out = %d grants, %v; want none", len(lost), err)
	}
}
