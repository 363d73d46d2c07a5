package store

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/valkey-io/valkey-go"

	"github.com/flowfabric/ff/runtime/internal/valkeytest"
)

// leaseNotices subscribes to e's lease-end channel and returns a function
// that returns the notices received since, in order: it publishes a marker
// of its own on the channel and reads up to it, so every notice of the
// calls made before is in (a server delivers one connection's messages in
// publishing order).
func (e *env) leaseNotices(t *testing.T) func() []string {
	t.Helper()
	sub := valkeytest.Client(t, valkeytest.Shared(t))
	ctx, cancel := context.WithCancel(e.ctx)
	t.Cleanup(cancel)
	msgs := make(chan string, 256)
	ch := e.s.LeasesChannel()
	go sub.Receive(ctx, sub.B().Subscribe().Channel(ch).Build(), func(m valkey.PubSubMessage) { msgs <- m.Message })
	waitUntil(t, 5*time.Second, "the subscription", func() bool {
		n, _ := e.c.Do(e.ctx, e.c.B().PubsubNumsub().Channel(ch).Build()).AsIntMap()
		return n[ch] == 1
	})
	marks := 0
	return func() []string {
		t.Helper()
		marks++
		mark := "mark-" + strconv.Itoa(marks)
		if err := e.c.Do(e.ctx, e.c.B().Publish().Channel(ch).Message(mark).Build()).Error(); err != nil {
			t.Fatal(err)
		}
		var got []string
		for {
			select {
			case m := <-msgs:
				if m == mark {
					return got
				}
				got = append(got, m)
			case <-time.After(10 * time.Second):
				t.Fatalf("the marker never came back; notices so far: %q", got)
			}
		}
	}
}

// runningIn creates req in a lane of its own and claims it for worker1
// with a lease of ttl.
func (e *env) runningIn(lane string, req CreateRequest, ttl time.Duration) Grant {
	e.t.Helper()
	req.Lane = lane
	x := e.create(req)
	p, _ := x.ID.Partition()
	g, err := e.s.Claim(e.ctx, ClaimRequest{Partition: p, Lanes: []string{lane}, Worker: worker1, Max: 1, LeaseTTL: ttl})
	if err != nil || len(g) != 1 || g[0].ExecutionID != x.ID {
		e.t.Fatalf("Claim of lane %s = %v, %v; want %s", lane, grantIDs(g), err, x.ID)
	}
	return g[0]
}

func endNotice(g Grant, why string) string {
	return LeaseEnd{ExecutionID: g.ExecutionID, Epoch: g.Epoch, Why: why}.String()
}

// TestLeaseEndPublishedByTheCallThatEndsIt: every transition that ends a
// running attempt's lease other than by its worker's report publishes one
// notice naming the lease and why, in the call itself (the marker that
// follows the call finds it there); a report of the worker, a renew and a
// cancel of an execution that does not run publish none; a lease that the
// deadline scanner finds expired first is noticed once, as expired.
func TestLeaseEndPublishedByTheCallThatEndsIt(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	notices := e.leaseNotices(t)
	var want []string

	// The worker's own reports and renew: nothing.
	done := e.runningIn("own-complete", CreateRequest{}, time.Minute)
	if err := e.s.Complete(e.ctx, done.Lease, []byte(`1`)); err != nil {
		t.Fatal(err)
	}
	retried := e.runningIn("own-fail", CreateRequest{Retry: RetryPolicy{Attempts: 3}}, time.Minute)
	if _, err := e.s.Fail(e.ctx, retried.Lease, "boom", true); err != nil {
		t.Fatal(err)
	}
	renewed := e.runningIn("own-renew", CreateRequest{}, time.Minute)
	if res, err := e.s.Renew(e.ctx, []Lease{renewed.Lease}, time.Minute); err != nil || res[0].Err != nil {
		t.Fatalf("Renew = %+v, %v", res, err)
	}
	idle := e.create(CreateRequest{Lane: "idle"})
	if _, err := e.s.Cancel(e.ctx, idle.ID, "not running"); err != nil {
		t.Fatal(err)
	}
	if got := notices(); len(got) != 0 {
		t.Fatalf("notices of reports, a renew and the cancel of a waiting execution: %q, want none", got)
	}

	cancelled := e.runningIn("cancel", CreateRequest{}, time.Minute)
	if _, err := e.s.Cancel(e.ctx, cancelled.ExecutionID, "stop"); err != nil {
		t.Fatal(err)
	}
	want = append(want, endNotice(cancelled, LeaseEndCancelled))
	if _, err := e.s.Cancel(e.ctx, cancelled.ExecutionID, "stop again"); err != nil { // a no-op
		t.Fatal(err)
	}

	revoked := e.runningIn("revoke", CreateRequest{}, time.Minute)
	if _, err := e.s.RevokeLease(e.ctx, revoked.ExecutionID, "operator"); err != nil {
		t.Fatal(err)
	}
	want = append(want, endNotice(revoked, LeaseEndRevoked))
	given := e.runningIn("give-back", CreateRequest{}, time.Minute)
	if _, err := e.s.RevokeLeaseOf(e.ctx, given.Lease, "worker shut down"); err != nil {
		t.Fatal(err)
	}
	want = append(want, endNotice(given, LeaseEndRevoked))

	f := flowOf("two", execs("a", "b", "c"), "a->c")
	f.Lane = "run-cancel"
	r := e.stage(f, `{}`)
	p, _ := r.ID.Partition()
	member, err := e.s.Claim(e.ctx, ClaimRequest{Partition: p, Lanes: []string{"run-cancel"}, Worker: worker1, Max: 1, LeaseTTL: time.Minute})
	if err != nil || len(member) != 1 {
		t.Fatalf("Claim of a root = %v, %v", grantIDs(member), err)
	}
	if _, err := e.s.CancelRun(e.ctx, r.ID, "run stopped"); err != nil {
		t.Fatal(err)
	}
	want = append(want, endNotice(member[0], LeaseEndCancelled)) // the other root and c were not running

	if diff := cmp.Diff(want, notices()); diff != "" {
		t.Fatalf("notices of cancels and revokes (-want +got):\n%s", diff)
	}

	// Limits: each scanner, and a renew that finds its lease expired.
	want = nil
	expired := e.runningIn("expire", CreateRequest{}, LeaseTTLMin)
	late := e.runningIn("late-renew", CreateRequest{}, LeaseTTLMin)
	timedOut := e.runningIn("timeout", CreateRequest{AttemptTimeout: 100 * time.Millisecond, Retry: RetryPolicy{Attempts: 2}}, time.Minute)
	pastDeadline := e.runningIn("deadline", CreateRequest{Deadline: 100 * time.Millisecond}, time.Minute)
	// Its lease expires before its deadline passes: one notice, expired.
	both := e.runningIn("both", CreateRequest{Deadline: 150 * time.Millisecond}, LeaseTTLMin)
	time.Sleep(200 * time.Millisecond) // every limit above passes
	if res, err := e.s.Renew(e.ctx, []Lease{late.Lease}, time.Minute); err != nil || res[0].Err == nil {
		t.Fatalf("late Renew = %+v, %v; want a stale lease", res, err)
	}
	want = append(want, endNotice(late, LeaseEndExpired))
	scan := func(name string, f func(context.Context, int, int) (ScanResult, error)) {
		for p := range e.s.FlowPartitions() {
			if _, err := f(e.ctx, p, 100); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
		}
	}
	// The deadline scanner first: it finds both's lease expired first.
	scan("ExpireDeadlines", e.s.ExpireDeadlines)
	scan("TimeoutAttempts", e.s.TimeoutAttempts)
	scan("ExpireLeases", e.s.ExpireLeases)
	want = append(want, endNotice(pastDeadline, LeaseEndDeadline), endNotice(both, LeaseEndExpired),
		endNotice(timedOut, LeaseEndTimeout), endNotice(expired, LeaseEndExpired))
	got := notices()
	slices.Sort(want) // the scanners walk partitions and indexes in their own order
	slices.Sort(got)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("notices of limits (-want +got):\n%s", diff)
	}
	for _, g := range []Grant{expired, late, timedOut, pastDeadline, both} {
		if x := e.check(g.ExecutionID); x.State.Public == StateActive {
			t.Errorf("%s is still active after the scanners", g.ExecutionID)
		}
	}
}

// TestCheckLeasesWritesNothing: CheckLeases answers as a renew would
// (nil for a lease held, the same errors otherwise), except that it
// reports a limit passed without applying it: the record stays active.
func TestCheckLeasesWritesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	held := e.runningIn("held", CreateRequest{}, time.Minute)
	cancelled := e.runningIn("cancelled", CreateRequest{}, time.Minute)
	if _, err := e.s.Cancel(e.ctx, cancelled.ExecutionID, "stop"); err != nil {
		t.Fatal(err)
	}
	expired := e.runningIn("expired", CreateRequest{}, LeaseTTLMin)
	time.Sleep(150 * time.Millisecond)
	other := held.Lease
	other.Epoch++
	unknown := Lease{ExecutionID: makeID(1, newUUID()), ID: "x", Epoch: 1}
	leases := []Lease{held.Lease, cancelled.Lease, expired.Lease, other, unknown}
	errs, err := e.s.CheckLeases(e.ctx, leases)
	if err != nil {
		t.Fatal(err)
	}
	if errs[0] != nil {
		t.Errorf("held lease: %v, want nil", errs[0])
	}
	wantLeaseErr(t, "the cancelled execution's lease", errs[1], LeaseReasonNotActive, StateCancelled)
	wantLeaseErr(t, "the expired lease", errs[2], LeaseReasonExpired, StateActive)
	wantLeaseErr(t, "another epoch", errs[3], LeaseReasonMismatch, StateActive)
	if !errors.Is(errs[4], ErrNotFound) {
		t.Errorf("unknown execution: %v, want ErrNotFound", errs[4])
	}
	if x := e.check(expired.ExecutionID); x.State.Public != StateActive {
		t.Errorf("after CheckLeases the expired lease's execution is %s, want still active (reported, not applied)", x.State.Public)
	}
	if _, err := e.s.CheckLeases(e.ctx, make([]Lease, MaxBatch+1)); !errors.Is(err, ErrInvalid) {
		t.Errorf("CheckLeases of %d leases = %v, want ErrInvalid", MaxBatch+1, err)
	}
}

func TestParseLeaseEnd(t *testing.T) {
	t.Parallel()
	id := makeID(3, newUUID())
	e := LeaseEnd{ExecutionID: id, Epoch: 12, Why: LeaseEndRevoked}
	got, err := ParseLeaseEnd(e.String())
	if err != nil || got != e {
		t.Fatalf("ParseLeaseEnd(%q) = %+v, %v", e.String(), got, err)
	}
	for _, bad := range []string{"", string(id), string(id) + ":12", string(id) + ":x:revoked", string(id) + ":0:revoked",
		string(id) + ":3:", "nope:3:revoked"} {
		if _, err := ParseLeaseEnd(bad); err == nil {
			t.Errorf("ParseLeaseEnd(%q) = nil error", bad)
		}
	}
}
