package store

import (
	"testing"
	"time"
)

// spec/runtime.md, "Transitions in detail": an attempt's limits (lease
// expiry, attempt timeout, execution deadline) end it whether or not
// their scanner came by, and when several have passed the first to pass
// decides, whichever scanner (or fenced call of the worker) comes first.
// The tests below run the scanner of a limit that passed second and check
// that it applies the first one.

// TestTimeoutScannerReclaimsLeaseExpiredFirst: the lease expired (the
// worker died) before the attempt timed out; the timeout scanner, coming
// first, makes the uncharged reclaim the lease scanner would have made,
// not a charged timeout (with one attempt, a failure).
func TestTimeoutScannerReclaimsLeaseExpiredFirst(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	x := e.create(CreateRequest{AttemptTimeout: 300 * time.Millisecond, Retry: RetryPolicy{Attempts: 1}})
	p, _ := x.ID.Partition()
	e.claim(x.ID, worker1, LeaseTTLMin) // the lease expires at +100 ms, the attempt at +300 ms
	time.Sleep(350 * time.Millisecond)
	if res, err := e.s.TimeoutAttempts(e.ctx, p, 10); err != nil || res.Processed != 1 {
		t.Fatalf("TimeoutAttempts = %+v, %v", res, err)
	}
	got := e.check(x.ID)
	if got.State.Public != StateWaiting || got.Reclaims != 1 || len(got.Attempts) != 1 ||
		got.Attempts[0].Outcome != AttemptLeaseExpired {
		t.Fatalf("after the timeout scanner: state %s, reclaims %d, attempts %+v; want waiting with 1 reclaim "+
			"(the lease expired 200 ms before the attempt timed out)", got.State.Public, got.Reclaims, got.Attempts)
	}
	if res, err := e.s.ExpireLeases(e.ctx, p, 10); err != nil || res.Processed != 0 {
		t.Fatalf("ExpireLeases = %+v, %v; want nothing left", res, err)
	}
}

// TestLeaseScannerTimesOutAttemptTimedOutFirst: the attempt timed out (a
// hung handler) before its lease expired. The lease scanner, coming
// first, charges the timeout as the worker's late call does (with one
// attempt: failed, "attempt timed out"), rather than making an uncharged
// reclaim that runs the hung task again.
func TestLeaseScannerTimesOutAttemptTimedOutFirst(t *testing.T) {
	t.Parallel()
	e := newEnv(t)

	// The worker's late call: the reference outcome.
	ref := e.create(CreateRequest{AttemptTimeout: 100 * time.Millisecond, Retry: RetryPolicy{Attempts: 1}})
	g := e.claim(ref.ID, worker1, 300*time.Millisecond)
	time.Sleep(350 * time.Millisecond)
	wantLeaseErr(t, "late Complete", e.s.Complete(e.ctx, g.Lease, nil), LeaseReasonTimedOut, StateFailed)

	// The lease scanner in the same situation.
	x := e.create(CreateRequest{AttemptTimeout: 100 * time.Millisecond, Retry: RetryPolicy{Attempts: 1}})
	p, _ := x.ID.Partition()
	e.claim(x.ID, worker1, 300*time.Millisecond)
	time.Sleep(350 * time.Millisecond)
	if res, err := e.s.ExpireLeases(e.ctx, p, 10); err != nil || res.Processed != 1 {
		t.Fatalf("ExpireLeases = %+v, %v", res, err)
	}
	got := e.check(x.ID)
	if got.State.Public != StateFailed || got.FailureReason != "attempt timed out" || got.Reclaims != 0 {
		t.Fatalf("after the lease scanner: state %s, reclaims %d, failure %q; want failed, \"attempt timed out\" "+
			"(the attempt timed out 200 ms before the lease expired), as the late call made it",
			got.State.Public, got.Reclaims, got.FailureReason)
	}
	if res, err := e.s.TimeoutAttempts(e.ctx, p, 10); err != nil || res.Processed != 0 {
		t.Fatalf("TimeoutAttempts = %+v, %v; want nothing left", res, err)
	}
}

// TestTimeoutScannerExpiresDeadlinePassedFirst: the execution deadline
// passed before the attempt timed out. The timeout scanner, coming first,
// expires the execution as the deadline scanner (and the worker's late
// call, deadline_passed) would have, instead of failing it with "attempt
// timed out" on its last attempt.
func TestTimeoutScannerExpiresDeadlinePassedFirst(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	x := e.create(CreateRequest{Deadline: 100 * time.Millisecond, AttemptTimeout: 300 * time.Millisecond,
		Retry: RetryPolicy{Attempts: 1}})
	p, _ := x.ID.Partition()
	e.claim(x.ID, worker1, time.Minute)
	time.Sleep(350 * time.Millisecond)
	if res, err := e.s.TimeoutAttempts(e.ctx, p, 10); err != nil || res.Processed != 1 {
		t.Fatalf("TimeoutAttempts = %+v, %v", res, err)
	}
	got := e.check(x.ID)
	if got.State.Public != StateExpired || len(got.Attempts) != 1 || got.Attempts[0].Outcome != AttemptExpired {
		t.Fatalf("after the timeout scanner: state %s, failure %q, attempts %+v; want expired (the deadline passed "+
			"200 ms before the attempt timed out)", got.State.Public, got.FailureReason, got.Attempts)
	}
	if res, err := e.s.ExpireDeadlines(e.ctx, p, 10); err != nil || res.Processed != 0 {
		t.Fatalf("ExpireDeadlines = %+v, %v; want nothing left", res, err)
	}
}

// TestDeadlineScannerEndsAttemptFirst: the lease expired, or the attempt
// timed out, before the execution deadline passed. The deadline scanner
// first ends the attempt as that limit does (a reclaim, a charged
// timeout), then expires the execution: what the two scanners would have
// left had each run the moment its limit passed.
func TestDeadlineScannerEndsAttemptFirst(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		req      CreateRequest
		ttl      time.Duration
		outcome  AttemptOutcome
		reclaims int
	}{
		{"lease expiry", CreateRequest{Deadline: 300 * time.Millisecond, Retry: RetryPolicy{Attempts: 2}},
			LeaseTTLMin, AttemptLeaseExpired, 1},
		{"attempt timeout", CreateRequest{Deadline: 300 * time.Millisecond, AttemptTimeout: 100 * time.Millisecond,
			Retry: RetryPolicy{Attempts: 2}}, time.Minute, AttemptTimedOut, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			x := e.create(tc.req)
			p, _ := x.ID.Partition()
			e.claim(x.ID, worker1, tc.ttl)
			time.Sleep(350 * time.Millisecond)
			if res, err := e.s.ExpireDeadlines(e.ctx, p, 10); err != nil || res.Processed != 1 {
				t.Fatalf("ExpireDeadlines = %+v, %v", res, err)
			}
			got := e.check(x.ID)
			if got.State.Public != StateExpired || len(got.Attempts) != 1 || got.Attempts[0].Outcome != tc.outcome ||
				got.Reclaims != tc.reclaims || got.FailureReason != "execution deadline passed" {
				t.Fatalf("after the deadline scanner: state %s, reclaims %d, failure %q, attempts %+v; "+
					"want expired after one attempt ended %s", got.State.Public, got.Reclaims, got.FailureReason,
					got.Attempts, tc.outcome)
			}
			if res, err := e.s.ExpireLeases(e.ctx, p, 10); err != nil || res.Processed != 0 {
				t.Fatalf("ExpireLeases = %+v, %v; want nothing left", res, err)
			}
			if res, err := e.s.TimeoutAttempts(e.ctx, p, 10); err != nil || res.Processed != 0 {
				t.Fatalf("TimeoutAttempts = %+v, %v; want nothing left", res, err)
			}
		})
	}
}
