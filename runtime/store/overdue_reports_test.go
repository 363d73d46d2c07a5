package store

import (
	"errors"
	"testing"
	"time"
)

// TestOverdueCompletionHandsNothingOff: a completion with a
// hand-off that comes after the attempt's timeout (last attempt) or the
// execution's deadline is refused and applies that limit. The member
// fails (or expires); what its failure fires is indexed for every worker,
// never granted to the late worker, and its success edges are skipped.
func TestOverdueCompletionHandsNothingOff(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name                  string
		timeoutMs, deadlineMs int64
		reason                string
		state                 PublicState
	}{
		{"attempt timeout", 100, 0, LeaseReasonTimedOut, StateFailed},
		{"deadline", 0, 100, LeaseReasonDeadline, StateExpired},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := onePartition(t)
			x := execs("a", "b", "c")
			x[0].TimeoutMs, x[0].DeadlineMs = tc.timeoutMs, tc.deadlineMs
			f := flow7("f", x, "a->b", "a->c on failure")
			r := e.stage(f, `{}`)
			ids := nodeIDs(r)
			g := e.claimP0(worker1, time.Minute)
			if len(g) != 1 || g[0].ExecutionID != ids["a"] {
				t.Fatalf("claim = %+v", g)
			}
			time.Sleep(150 * time.Millisecond)
			res, grants := e.finishHandoffOne(Finish{Lease: g[0].Lease, Result: []byte(`"late"`)}, handoff(2))
			wantLeaseErr(t, "late complete", res.Err, tc.reason, tc.state)
			if len(grants) != 0 {
				t.Fatalf("the late completion handed off %v", grantIDs(grants))
			}
			e.wantState(ids["a"], tc.state)
			e.wantState(ids["c"], StateWaiting)
			e.wantState(ids["b"], StateSkipped)
			// Another worker claims what the failure fired.
			if g := e.claimP0(worker2, time.Minute); len(g) != 1 || g[0].ExecutionID != ids["c"] {
				t.Fatalf("claim of c = %+v", g)
			}
			e.checkRunInvariants("after", f, r.ID, false)
			// The scanners find nothing left to do.
			if n, err := e.s.TimeoutAttempts(e.ctx, 0, 100); err != nil || n.Processed != 0 {
				t.Fatalf("TimeoutAttempts = %+v, %v", n, err)
			}
			if n, err := e.s.ExpireDeadlines(e.ctx, 0, 100); err != nil || n.Processed != 0 {
				t.Fatalf("ExpireDeadlines = %+v, %v", n, err)
			}
		})
	}
}

// TestOverdueAndTimelyInOneCall: one call reports a success in time
// and one after its attempt's timeout (a retry remains); in either order
// the timely success's downstream member is handed off, and the late one's
// is not: its member waits for its retry.
func TestOverdueAndTimelyInOneCall(t *testing.T) {
	t.Parallel()
	for _, lateFirst := range []bool{true, false} {
		t.Run(map[bool]string{true: "late first", false: "late last"}[lateFirst], func(t *testing.T) {
			t.Parallel()
			e := onePartition(t)
			x := execs("a", "y", "b", "d")
			x[0].TimeoutMs, x[0].Retry.Attempts = 100, 2
			f := flow7("f", x, "a->b", "y->d")
			r := e.stage(f, `{}`)
			ids := nodeIDs(r)
			by := e.claimByNode(2)
			time.Sleep(150 * time.Millisecond)
			items := []Finish{{Lease: by["a"].Lease, Result: []byte(`1`)}, {Lease: by["y"].Lease, Result: []byte(`2`)}}
			if !lateFirst {
				items[0], items[1] = items[1], items[0]
			}
			res, grants, err := e.s.FinishHandoff(e.ctx, items, handoff(2))
			if err != nil {
				t.Fatal(err)
			}
			late, timely := res[0], res[1]
			if !lateFirst {
				late, timely = timely, late
			}
			wantLeaseErr(t, "late complete", late.Err, LeaseReasonTimedOut, StateWaiting)
			if timely.Err != nil || timely.State != StateCompleted {
				t.Fatalf("timely complete = %+v", timely)
			}
			if len(grants) != 1 || grants[0].ExecutionID != ids["d"] {
				t.Fatalf("grants = %v, want d only", grantIDs(grants))
			}
			e.wantState(ids["b"], StatePending)
			a := e.wantState(ids["a"], StateWaiting)
			if len(a.Attempts) != 1 || a.Attempts[0].Outcome != AttemptTimedOut {
				t.Fatalf("a's attempts = %+v", a.Attempts)
			}
			e.checkRunInvariants("after", f, r.ID, false)
		})
	}
}

// TestReplayAfterOverdueReport: a run whose member failed because
// its report came after the attempt's timeout is replayed; the member's
// new attempt has a timeout of its own, and a report in time succeeds.
func TestReplayAfterOverdueReport(t *testing.T) {
	t.Parallel()
	e := onePartition(t)
	x := execs("a", "b")
	x[0].TimeoutMs = 300
	f := flow7("f", x, "a->b")
	r := e.stage(f, `{}`)
	ids := nodeIDs(r)
	g := e.claimP0(worker1, time.Minute)
	time.Sleep(350 * time.Millisecond)
	res, _ := e.finishHandoffOne(Finish{Lease: g[0].Lease, Result: []byte(`1`)}, handoff(1))
	wantLeaseErr(t, "late complete", res.Err, LeaseReasonTimedOut, StateFailed)
	if run := e.checkRunInvariants("failed", f, r.ID, false); run.State != RunFailed {
		t.Fatalf("run state %s, want failed", run.State)
	}
	if _, err := e.s.ReplayRun(e.ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	g = e.claimP0(worker1, time.Minute)
	if len(g) != 1 || g[0].ExecutionID != ids["a"] {
		t.Fatalf("claim after replay = %+v", g)
	}
	res, grants := e.finishHandoffOne(Finish{Lease: g[0].Lease, Result: []byte(`1`)}, handoff(1))
	if res.Err != nil || len(grants) != 1 || grants[0].ExecutionID != ids["b"] {
		t.Fatalf("complete in time after replay = %+v, grants %v", res, grantIDs(grants))
	}
	// b has no attempt timeout: a stale attempt_deadline_at never refuses
	// its renew.
	rr, err := e.s.Renew(e.ctx, []Lease{grants[0].Lease}, time.Minute)
	if err != nil || rr[0].Err != nil {
		t.Fatalf("renew of b = %+v, %v", rr, err)
	}
	res, _ = e.finishHandoffOne(Finish{Lease: grants[0].Lease, Result: []byte(`2`)}, nil)
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	if run := e.checkRunInvariants("replayed", f, r.ID, false); run.State != RunSucceeded {
		t.Fatalf("run state %s, want succeeded", run.State)
	}
}

// TestGiveBackAfterTimeout: a worker gives back (fenced revoke) an
// attempt whose timeout passed. The give-back is refused with the reason
// and applies the timeout, as a late report does: the attempt is charged
// as timed out, not turned into an uncharged revoke, and the scanner finds
// nothing left.
func TestGiveBackAfterTimeout(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	x := e.create(CreateRequest{AttemptTimeout: 50 * time.Millisecond, Retry: RetryPolicy{Attempts: 2}})
	g := e.claim(x.ID, worker1, time.Minute)
	time.Sleep(70 * time.Millisecond)
	_, err := e.s.RevokeLeaseOf(e.ctx, g.Lease, "shutdown")
	wantLeaseErr(t, "give back after the timeout", err, LeaseReasonTimedOut, StateWaiting)
	w := e.wantState(x.ID, StateWaiting)
	if len(w.Attempts) != 1 || w.Attempts[0].Outcome != AttemptTimedOut {
		t.Fatalf("attempts %+v, want one timed out", w.Attempts)
	}
	p, _ := x.ID.Partition()
	if n, err := e.s.TimeoutAttempts(e.ctx, p, 10); err != nil || n.Processed != 0 {
		t.Fatalf("TimeoutAttempts = %+v, %v; want nothing left", n, err)
	}
}

// TestGiveBackOfLostLeaseIsStale: a worker gives back (fenced revoke) a
// lease it lost meanwhile (the lease scanner requeued the execution, which
// no other worker claimed yet). Like a late report of the same lease, the
// give-back is refused with stale_lease not_active, not wrong_state, and
// changes nothing.
func TestGiveBackOfLostLeaseIsStale(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	x := e.create(CreateRequest{Retry: RetryPolicy{Attempts: 2}})
	p, _ := x.ID.Partition()
	g := e.claim(x.ID, worker1, LeaseTTLMin)
	time.Sleep(LeaseTTLMin + 50*time.Millisecond)
	if res, err := e.s.ExpireLeases(e.ctx, p, 10); err != nil || res.Processed != 1 {
		t.Fatalf("ExpireLeases = %+v, %v", res, err)
	}
	e.wantState(x.ID, StateWaiting)
	wantLeaseErr(t, "late Complete", e.s.Complete(e.ctx, g.Lease, nil), LeaseReasonNotActive, StateWaiting)
	_, err := e.s.RevokeLeaseOf(e.ctx, g.Lease, "shutdown")
	wantLeaseErr(t, "late RevokeLeaseOf", err, LeaseReasonNotActive, StateWaiting)
	w := e.wantState(x.ID, StateWaiting)
	if w.Reclaims != 1 || len(w.Attempts) != 1 || w.Attempts[0].Outcome != AttemptLeaseExpired {
		t.Fatalf("reclaims %d, attempts %+v; want the one lease expiry only", w.Reclaims, w.Attempts)
	}
	// Without a lease (an operator's revoke) it stays wrong_state.
	var se *StateError
	if _, err := e.s.RevokeLease(e.ctx, x.ID, "operator"); !errors.As(err, &se) || se.State != StateWaiting {
		t.Fatalf("RevokeLease of a waiting execution = %v, want a *StateError (waiting)", err)
	}
}
