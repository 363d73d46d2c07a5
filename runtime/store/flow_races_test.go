package store

import (
	"errors"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/flowfabric/ff/compiler/plan"
)

// Races around flow runs: a worker's late calls (complete, fail, renew,
// hand-off) interleaved with run cancel, replay, lease expiry and the
// scanners, as production interleaves them. Every transition is one FCALL,
// so each test orders whole calls; what it checks is that the fences
// (lease id and epoch) and the state checks of each call hold whatever
// came before, and that the run's counters always match its members.

// claimByNode claims n executions for worker1 and returns them by exec
// name; fewer than n fails the test.
func (e *env) claimByNode(n int) map[string]Grant {
	e.t.Helper()
	g := e.claimAll(worker1, n, time.Minute)
	if len(g) != n {
		e.t.Fatalf("claim = %+v, want %d grants", g, n)
	}
	by := map[string]Grant{}
	for _, x := range g {
		by[x.FlowNode] = x
	}
	return by
}

// nodeIDs maps the exec names of run r to their execution ids.
func nodeIDs(r *Run) map[string]ExecutionID {
	ids := map[string]ExecutionID{}
	for _, n := range r.Nodes {
		ids[n.Name] = n.ExecutionID
	}
	return ids
}

// flow7 is flowOf with every exec's Upstreams filled in from the edges,
// as the compiler fills them (checkRunInvariants reads them).
func flow7(name string, x []plan.Exec, edges ...string) *plan.Flow {
	f := flowOf(name, x, edges...)
	for i := range f.Execs {
		for _, ed := range f.Edges {
			if ed.To == f.Execs[i].Name {
				f.Execs[i].Upstreams = append(f.Execs[i].Upstreams, ed.From)
			}
		}
		slices.Sort(f.Execs[i].Upstreams)
	}
	return f
}

// wantLeaseErr fails unless err is a *LeaseError with reason and state.
func wantLeaseErr(t *testing.T, what string, err error, reason string, st PublicState) {
	t.Helper()
	var le *LeaseError
	if !errors.As(err, &le) || le.Reason != reason || le.State != st {
		t.Fatalf("%s = %v, want a stale lease (%s, state %s)", what, err, reason, st)
	}
}

// finishHandoffOne finishes one item under hand-off h and returns its
// result and the grants; a transport or request error fails the test.
func (e *env) finishHandoffOne(f Finish, h *Handoff) (FinishResult, []Grant) {
	e.t.Helper()
	res, grants, err := e.s.FinishHandoff(e.ctx, []Finish{f}, h)
	if err != nil {
		e.t.Fatalf("FinishHandoff: %v", err)
	}
	for _, g := range grants {
		e.check(g.ExecutionID)
	}
	return res[0], grants
}

// claimP0 claims at most one execution of partition 0 for w.
func (e *env) claimP0(w WorkerIdentity, ttl time.Duration) []Grant {
	e.t.Helper()
	g, err := e.s.Claim(e.ctx, ClaimRequest{Partition: 0, Lanes: []string{"default"}, Worker: w, Max: 1, LeaseTTL: ttl})
	if err != nil {
		e.t.Fatalf("Claim: %v", err)
	}
	for _, x := range g {
		e.check(x.ExecutionID)
	}
	return g
}

// Scenario 1: a member runs under a lease when its run is cancelled; the
// worker then completes it and asks for a hand-off. The completion is
// refused (not_active, the member is cancelled), nothing is handed off,
// no downstream becomes eligible, and the run stays cancelled with its
// counters unchanged; a late fail and renew are refused the same way.
func TestRaceCancelWhileLeasedThenLateComplete(t *testing.T) {
	t.Parallel()
	e := onePartition(t)
	f := flow7("chain", execs("a", "b", "c"), "a->b", "b->c")
	f.Result = "c"
	r := e.stage(f, `{}`)
	g := e.claimP0(worker1, time.Minute)
	if len(g) != 1 || g[0].FlowNode != "a" || !g[0].Downstream {
		t.Fatalf("claim = %+v, want a with Downstream", g)
	}
	e.checkRunInvariants("running", f, r.ID, false)
	if _, err := e.s.CancelRun(e.ctx, r.ID, "stop"); err != nil {
		t.Fatal(err)
	}
	before := e.checkRunInvariants("cancelled", f, r.ID, true)
	if before.State != RunCancelled || before.Cancelled != 3 {
		t.Fatalf("run after cancel = %+v", before)
	}
	res, grants := e.finishHandoffOne(Finish{Lease: g[0].Lease, Result: []byte(`1`)}, handoff(4))
	wantLeaseErr(t, "late complete", res.Err, LeaseReasonNotActive, StateCancelled)
	if len(grants) != 0 || res.RunEnded != nil {
		t.Fatalf("late complete handed off %v, ended %+v", grantIDs(grants), res.RunEnded)
	}
	_, err := e.s.Fail(e.ctx, g[0].Lease, "late", true)
	wantLeaseErr(t, "late fail", err, LeaseReasonNotActive, StateCancelled)
	rr, err := e.s.Renew(e.ctx, []Lease{g[0].Lease}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	wantLeaseErr(t, "late renew", rr[0].Err, LeaseReasonNotActive, StateCancelled)
	after := e.checkRunInvariants("after late calls", f, r.ID, true)
	if after.State != RunCancelled || after.Done != before.Done || after.Cancelled != before.Cancelled ||
		after.Succeeded != 0 || !after.EndedAt.Equal(before.EndedAt) {
		t.Fatalf("run after late calls = %+v, before %+v", after, before)
	}
	if n := eligibleCount(e, "default"); n != 0 {
		t.Fatalf("%d executions eligible after the late complete", n)
	}
	if x := e.get(g[0].ExecutionID); len(x.Result) != 0 {
		t.Fatalf("a cancelled member stored the late result %q", x.Result)
	}
}

// Scenario 2: the run is cancelled, then replayed, while the old worker
// still holds the old lease of a member. Its late complete, fail and renew
// are fenced both before the member is claimed again (not active) and
// after (another epoch): the replayed attempt stands, `left` is counted
// once, and the run then succeeds from the new worker's completions.
func TestRaceReplayFencesOldLease(t *testing.T) {
	t.Parallel()
	e := onePartition(t)
	f := flow7("chain", execs("a", "b"), "a->b")
	f.Result = "b"
	r := e.stage(f, `{}`)
	ids := nodeIDs(r)
	old := e.claimP0(worker1, time.Minute)
	if len(old) != 1 || old[0].FlowNode != "a" {
		t.Fatalf("claim = %+v", old)
	}
	if _, err := e.s.CancelRun(e.ctx, r.ID, "stop"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.s.ReplayRun(e.ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	e.checkRunInvariants("replayed", f, r.ID, false)
	e.wantState(ids["a"], StateWaiting)

	// Late, before the replayed member is claimed: not active.
	res, grants := e.finishHandoffOne(Finish{Lease: old[0].Lease, Result: []byte(`old`)}, handoff(1))
	wantLeaseErr(t, "late complete before re-claim", res.Err, LeaseReasonNotActive, StateWaiting)
	if len(grants) != 0 {
		t.Fatalf("late complete handed off %v", grantIDs(grants))
	}
	_, err := e.s.Fail(e.ctx, old[0].Lease, "late", false)
	wantLeaseErr(t, "late fail before re-claim", err, LeaseReasonNotActive, StateWaiting)
	e.wantState(ids["a"], StateWaiting)
	e.checkRunInvariants("after late calls", f, r.ID, false)

	// Claimed again by another worker: a new epoch fences the old lease.
	cur := e.claimP0(worker2, time.Minute)
	if len(cur) != 1 || cur[0].ExecutionID != ids["a"] || cur[0].AttemptType != AttemptReplay || cur[0].Epoch <= old[0].Epoch {
		t.Fatalf("re-claim = %+v (old epoch %d)", cur, old[0].Epoch)
	}
	res, grants = e.finishHandoffOne(Finish{Lease: old[0].Lease, Result: []byte(`old`)}, handoff(1))
	wantLeaseErr(t, "late complete after re-claim", res.Err, LeaseReasonMismatch, StateActive)
	if len(grants) != 0 {
		t.Fatalf("late complete handed off %v", grantIDs(grants))
	}
	_, err = e.s.Fail(e.ctx, old[0].Lease, "late", false)
	wantLeaseErr(t, "late fail after re-claim", err, LeaseReasonMismatch, StateActive)
	rr, err := e.s.Renew(e.ctx, []Lease{old[0].Lease}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	wantLeaseErr(t, "late renew after re-claim", rr[0].Err, LeaseReasonMismatch, StateActive)
	// The same lease id with the old epoch, or the old id with the new
	// epoch, is no better.
	for _, l := range []Lease{
		{ExecutionID: ids["a"], ID: cur[0].ID, Epoch: old[0].Epoch},
		{ExecutionID: ids["a"], ID: old[0].ID, Epoch: cur[0].Epoch},
	} {
		wantLeaseErr(t, "mixed lease", e.s.Complete(e.ctx, l, []byte(`x`)), LeaseReasonMismatch, StateActive)
	}
	e.wantState(ids["a"], StateActive)
	run := e.checkRunInvariants("re-claimed", f, r.ID, false)
	if run.State != RunRunning || run.Done != 0 {
		t.Fatalf("run = %+v", run)
	}

	// The new worker's completion stands and hands b off.
	b := e.finishOK(cur[0], `new`, &Handoff{Worker: worker2, Lanes: []string{"default"}, Max: 1, LeaseTTL: time.Minute})
	if len(b) != 1 || b[0].FlowNode != "b" || string(b[0].Payload) != `new` {
		t.Fatalf("hand-off = %+v", b)
	}
	res, _ = e.finishHandoffOne(Finish{Lease: old[0].Lease, Result: []byte(`old`)}, nil)
	wantLeaseErr(t, "late complete after the new one", res.Err, LeaseReasonNotActive, StateCompleted)
	res, _ = e.finishHandoffOne(Finish{Lease: b[0].Lease, Result: []byte(`done`)}, nil)
	if res.Err != nil || res.RunEnded == nil || string(res.RunEnded.Result) != `done` {
		t.Fatalf("finish b = %+v", res)
	}
	run = e.checkRunInvariants("succeeded", f, r.ID, false)
	if run.State != RunSucceeded || run.Succeeded != 2 || run.Done != 2 || e.runRecord(r.ID)["left"] != "0" {
		t.Fatalf("run = %+v, record %v", run, e.runRecord(r.ID))
	}
	if x := e.get(ids["a"]); string(x.Result) != `new` {
		t.Fatalf("a's result %q, want the replayed attempt's", x.Result)
	}
}

// Scenario 3: a member's lease expires and the scanner requeues it; it is
// granted to another worker; the first worker's late completion (with a
// hand-off) is refused as another lease and hands nothing off. When the
// late completion comes before the scanner, it applies the expiry itself
// and the scanner then finds nothing to do.
func TestRaceExpiredLeaseRegrantedThenLateComplete(t *testing.T) {
	t.Parallel()
	for _, scanner := range []bool{true, false} {
		name := map[bool]string{true: "scanner first", false: "late call first"}[scanner]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := onePartition(t)
			f := flow7("chain", execs("a", "b"), "a->b")
			r := e.stage(f, `{}`)
			ids := nodeIDs(r)
			first := e.claimP0(worker1, LeaseTTLMin)
			if len(first) != 1 {
				t.Fatalf("claim = %+v", first)
			}
			time.Sleep(LeaseTTLMin + 30*time.Millisecond)
			if scanner {
				if n, err := e.s.ExpireLeases(e.ctx, 0, 100); err != nil || n.Processed != 1 {
					t.Fatalf("ExpireLeases = %+v, %v", n, err)
				}
			} else {
				res, grants := e.finishHandoffOne(Finish{Lease: first[0].Lease, Result: []byte(`late`)}, handoff(1))
				wantLeaseErr(t, "late complete", res.Err, LeaseReasonExpired, StateWaiting)
				if len(grants) != 0 {
					t.Fatalf("expired lease handed off %v", grantIDs(grants))
				}
				if n, err := e.s.ExpireLeases(e.ctx, 0, 100); err != nil || n.Processed != 0 {
					t.Fatalf("ExpireLeases after the late call = %+v, %v", n, err)
				}
			}
			x := e.wantState(ids["a"], StateWaiting)
			if x.Reclaims != 1 {
				t.Fatalf("reclaims %d, want 1", x.Reclaims)
			}
			e.checkRunInvariants("requeued", f, r.ID, false)
			second := e.claimP0(worker2, time.Minute)
			if len(second) != 1 || second[0].AttemptType != AttemptReclaim || second[0].Epoch != first[0].Epoch+1 {
				t.Fatalf("re-grant = %+v", second)
			}
			res, grants := e.finishHandoffOne(Finish{Lease: first[0].Lease, Result: []byte(`late`)}, handoff(1))
			wantLeaseErr(t, "late complete after re-grant", res.Err, LeaseReasonMismatch, StateActive)
			if len(grants) != 0 {
				t.Fatalf("late complete handed off %v", grantIDs(grants))
			}
			e.wantState(ids["b"], StatePending)
			if n, err := e.s.ExpireLeases(e.ctx, 0, 100); err != nil || n.Processed != 0 {
				t.Fatalf("ExpireLeases with a live lease = %+v, %v", n, err)
			}
			b := e.finishOK(second[0], `ok`, &Handoff{Worker: worker2, Lanes: []string{"default"}, Max: 1, LeaseTTL: time.Minute})
			if len(b) != 1 || string(b[0].Payload) != `ok` {
				t.Fatalf("hand-off = %+v", b)
			}
			if err := e.s.Complete(e.ctx, b[0].Lease, []byte(`1`)); err != nil {
				t.Fatal(err)
			}
			run := e.checkRunInvariants("done", f, r.ID, false)
			if run.State != RunSucceeded || run.Succeeded != 2 {
				t.Fatalf("run = %+v", run)
			}
			if x := e.get(ids["a"]); string(x.Result) != `ok` || len(x.Attempts) != 2 {
				t.Fatalf("a: result %q, %d attempts", x.Result, len(x.Attempts))
			}
		})
	}
}

// Scenario 4: a hand-off finish that ends the run, and a cancel, in both
// orders; and a cancel that comes between a hand-off and the handed-off
// member's completion.
func TestRaceHandoffFinishVersusCancel(t *testing.T) {
	t.Parallel()
	stageAndWalk := func(t *testing.T) (*env, *plan.Flow, *Run, Grant) {
		e := onePartition(t)
		f := flow7("chain", execs("a", "b"), "a->b")
		f.Result = "b"
		r := e.stage(f, `{}`)
		a := e.claimP0(worker1, time.Minute)
		b := e.finishOK(a[0], `1`, handoff(1))
		if len(b) != 1 || b[0].FlowNode != "b" {
			t.Fatalf("hand-off = %+v", b)
		}
		return e, f, r, b[0]
	}
	t.Run("finish then cancel", func(t *testing.T) {
		t.Parallel()
		e, f, r, b := stageAndWalk(t)
		res, grants := e.finishHandoffOne(Finish{Lease: b.Lease, Result: []byte(`2`)}, handoff(1))
		if res.Err != nil || res.RunEnded == nil || res.RunEnded.State != RunSucceeded || len(grants) != 0 {
			t.Fatalf("finish = %+v, grants %v", res, grantIDs(grants))
		}
		run, err := e.s.CancelRun(e.ctx, r.ID, "too late")
		if err != nil {
			t.Fatal(err)
		}
		if run.State != RunSucceeded || run.Cancelled != 0 || run.Succeeded != 2 {
			t.Fatalf("cancel after the end = %+v", run)
		}
		if rec := e.runRecord(r.ID); rec["cancelling"] != "" || rec["cancel_reason"] != "" {
			t.Fatalf("a cancel of an ended run wrote %v", rec)
		}
		e.checkRunInvariants("ended", f, r.ID, false)
	})
	t.Run("cancel then finish", func(t *testing.T) {
		t.Parallel()
		e, f, r, b := stageAndWalk(t)
		if _, err := e.s.CancelRun(e.ctx, r.ID, "stop"); err != nil {
			t.Fatal(err)
		}
		res, grants := e.finishHandoffOne(Finish{Lease: b.Lease, Result: []byte(`2`)}, handoff(1))
		wantLeaseErr(t, "finish after cancel", res.Err, LeaseReasonNotActive, StateCancelled)
		if res.RunEnded != nil || len(grants) != 0 {
			t.Fatalf("finish after cancel ended %+v, granted %v", res.RunEnded, grantIDs(grants))
		}
		run := e.checkRunInvariants("cancelled", f, r.ID, true)
		if run.State != RunCancelled || run.Succeeded != 1 || run.Cancelled != 1 || len(run.Result) != 0 {
			t.Fatalf("run = %+v", run)
		}
		// An undelivered grant revoked after the cancel is left alone.
		if n, err := e.s.RevokeGrants(e.ctx, []Lease{b.Lease}, "undelivered"); err != nil || n != 0 {
			t.Fatalf("RevokeGrants after cancel = %d, %v", n, err)
		}
		e.checkRunInvariants("after revoke", f, r.ID, true)
	})
	t.Run("member cancelled alone under a hand-off grant", func(t *testing.T) {
		t.Parallel()
		e, f, r, b := stageAndWalk(t)
		if _, err := e.s.Cancel(e.ctx, b.ExecutionID, "not needed"); err != nil {
			t.Fatal(err)
		}
		res, _ := e.finishHandoffOne(Finish{Lease: b.Lease, Result: []byte(`2`)}, handoff(1))
		wantLeaseErr(t, "finish after member cancel", res.Err, LeaseReasonNotActive, StateCancelled)
		run := e.checkRunInvariants("member cancelled", f, r.ID, false)
		if run.State != RunFailed || run.Cancelled != 1 || run.Succeeded != 1 {
			t.Fatalf("run = %+v (result exec cancelled: failed)", run)
		}
	})
}

// Scenario 5: a replay is refused while members still run (the run is
// running even though its result exec already failed), and changes
// nothing; once the last member ends the run fails and the replay goes
// through.
func TestRaceReplayRefusedWhileMembersRun(t *testing.T) {
	t.Parallel()
	e := onePartition(t)
	f := flow7("two", execs("a", "b"))
	f.Result = "a"
	r := e.stage(f, `{}`)
	g := e.claimAll(worker1, 2, time.Minute)
	if len(g) != 2 {
		t.Fatalf("claim = %+v", g)
	}
	var a, b Grant
	for _, x := range g {
		if x.FlowNode == "a" {
			a = x
		} else {
			b = x
		}
	}
	if _, err := e.s.Fail(e.ctx, a.Lease, "boom", false); err != nil {
		t.Fatal(err)
	}
	before := e.runRecord(r.ID)
	_, err := e.s.ReplayRun(e.ctx, r.ID)
	var se *StateError
	if !errors.As(err, &se) || !se.Run || se.State != PublicState(RunRunning) {
		t.Fatalf("ReplayRun while b runs = %v, want a wrong_state running", err)
	}
	e.wantState(b.ExecutionID, StateActive)
	e.wantState(a.ExecutionID, StateFailed)
	if after := e.runRecord(r.ID); after["updated_at"] != before["updated_at"] || after["left"] != "1" {
		t.Fatalf("refused replay changed the run: %v -> %v", before, after)
	}
	e.checkRunInvariants("refused replay", f, r.ID, false)
	if err := e.s.Complete(e.ctx, b.Lease, []byte(`1`)); err != nil {
		t.Fatal(err)
	}
	if run := e.checkRunInvariants("ended", f, r.ID, false); run.State != RunFailed {
		t.Fatalf("run = %+v", run)
	}
	if _, err := e.s.ReplayRun(e.ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	run := e.checkRunInvariants("replayed", f, r.ID, false)
	if run.State != RunRunning || run.Succeeded != 1 || nodeStates(run)["a"] != StateWaiting {
		t.Fatalf("replayed run = %+v", run)
	}
}

// Scenario 6: the deadline and attempt-timeout scanners on a member whose
// upstream just failed. Whichever comes first decides the member once: a
// member skipped by its upstream's failure is not expired by a later
// deadline sweep; a member expired first is not skipped later; a member
// already running under a join any is not skipped by a failing second
// upstream, and its attempt timeout then fails it. The counters always
// match the members.
func TestRaceScannersVersusUpstreamFailure(t *testing.T) {
	t.Parallel()
	t.Run("skip then deadline", func(t *testing.T) {
		t.Parallel()
		e := onePartition(t)
		x := execs("a", "b")
		x[1].DeadlineMs = 150
		f := flow7("f", x, "a->b")
		r := e.stage(f, `{}`)
		a := e.claimP0(worker1, time.Minute)
		if _, err := e.s.Fail(e.ctx, a[0].Lease, "boom", false); err != nil {
			t.Fatal(err)
		}
		e.checkRunInvariants("a failed", f, r.ID, false)
		time.Sleep(200 * time.Millisecond)
		if n, err := e.s.ExpireDeadlines(e.ctx, 0, 100); err != nil || n.Processed != 0 {
			t.Fatalf("ExpireDeadlines = %+v, %v", n, err)
		}
		run := e.checkRunInvariants("after sweep", f, r.ID, false)
		if nodeStates(run)["b"] != StateSkipped || run.Skipped != 1 || run.Failed != 1 || run.State != RunFailed {
			t.Fatalf("run = %+v", run)
		}
	})
	t.Run("deadline then upstream failure", func(t *testing.T) {
		t.Parallel()
		e := onePartition(t)
		x := execs("a", "b")
		x[1].DeadlineMs = 100
		f := flow7("f", x, "a->b")
		r := e.stage(f, `{}`)
		a := e.claimP0(worker1, time.Minute)
		time.Sleep(150 * time.Millisecond)
		if n, err := e.s.ExpireDeadlines(e.ctx, 0, 100); err != nil || n.Processed != 1 {
			t.Fatalf("ExpireDeadlines = %+v, %v", n, err)
		}
		e.checkRunInvariants("b expired", f, r.ID, false)
		if _, err := e.s.Fail(e.ctx, a[0].Lease, "boom", false); err != nil {
			t.Fatal(err)
		}
		run := e.checkRunInvariants("a failed", f, r.ID, false)
		if nodeStates(run)["b"] != StateExpired || run.Failed != 2 || run.Skipped != 0 || run.State != RunFailed {
			t.Fatalf("run = %+v", run)
		}
	})
	t.Run("running join any, then upstream failure, then timeout", func(t *testing.T) {
		t.Parallel()
		e := onePartition(t)
		x := execs("a1", "a2", "b")
		x[2].Join = plan.Join{Kind: plan.JoinAny}
		x[2].TimeoutMs = 100
		f := flow7("f", x, "a1->b", "a2->b")
		f.Result = "b"
		r := e.stage(f, `{}`)
		g := e.claimAll(worker1, 2, time.Minute)
		var a1, a2 Grant
		for _, x := range g {
			if x.FlowNode == "a1" {
				a1 = x
			} else {
				a2 = x
			}
		}
		b := e.finishOK(a1, `1`, handoff(1))
		if len(b) != 1 || b[0].FlowNode != "b" || b[0].AttemptDeadline.IsZero() {
			t.Fatalf("hand-off = %+v", b)
		}
		if _, err := e.s.Fail(e.ctx, a2.Lease, "boom", false); err != nil {
			t.Fatal(err)
		}
		run := e.checkRunInvariants("a2 failed", f, r.ID, false)
		if nodeStates(run)["b"] != StateActive || run.State != RunRunning {
			t.Fatalf("run = %+v", run)
		}
		time.Sleep(150 * time.Millisecond)
		if n, err := e.s.TimeoutAttempts(e.ctx, 0, 100); err != nil || n.Processed != 1 {
			t.Fatalf("TimeoutAttempts = %+v, %v", n, err)
		}
		run = e.checkRunInvariants("b timed out", f, r.ID, false)
		if nodeStates(run)["b"] != StateFailed || run.State != RunFailed || run.Failed != 2 {
			t.Fatalf("run = %+v", run)
		}
		wantLeaseErr(t, "late complete of the timed-out b", e.s.Complete(e.ctx, b[0].Lease, []byte(`x`)),
			LeaseReasonNotActive, StateFailed)
	})
}

// Extra: one finish call carrying the same completion twice, with a
// hand-off, counts the member once and hands its downstream off once.
func TestRaceDuplicateItemInOneFinish(t *testing.T) {
	t.Parallel()
	e := onePartition(t)
	f := flow7("chain", execs("a", "b"), "a->b")
	r := e.stage(f, `{}`)
	a := e.claimP0(worker1, time.Minute)
	item := Finish{Lease: a[0].Lease, Result: []byte(`1`)}
	res, grants, err := e.s.FinishHandoff(e.ctx, []Finish{item, item}, handoff(2))
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Err != nil {
		t.Fatalf("first item = %+v", res[0])
	}
	// The same success twice: recorded once, answered alike.
	if res[1].Err != nil || res[1].State != StateCompleted {
		t.Fatalf("second item = %+v", res[1])
	}
	if len(grants) != 1 || grants[0].FlowNode != "b" {
		t.Fatalf("grants = %+v", grants)
	}
	run := e.checkRunInvariants("after", f, r.ID, false)
	if run.Done != 1 || e.runRecord(r.ID)["left"] != "1" {
		t.Fatalf("run = %+v", run)
	}
}

// Extra: a run that fails because a member lost its lease too often is
// replayed; the lease of the last lost attempt, and that of an attempt of
// the replay that lost its lease in turn, are fenced when their workers
// report late.
func TestRaceLostLeasesAcrossReplay(t *testing.T) {
	t.Parallel()
	e := onePartition(t)
	x := execs("a", "b")
	f := flow7("f", x, "a->b")
	r := e.stage(f, `{}`)
	var last Grant
	for range MaxReclaimsDefault + 1 {
		g := e.claimP0(worker1, LeaseTTLMin)
		if len(g) != 1 {
			t.Fatalf("claim = %+v", g)
		}
		last = g[0]
		time.Sleep(LeaseTTLMin + 30*time.Millisecond)
		if _, err := e.s.ExpireLeases(e.ctx, 0, 100); err != nil {
			t.Fatal(err)
		}
	}
	run := e.checkRunInvariants("reclaims exhausted", f, r.ID, false)
	if run.State != RunFailed || nodeStates(run)["b"] != StateSkipped {
		t.Fatalf("run = %+v", run)
	}
	wantLeaseErr(t, "late complete", e.s.Complete(e.ctx, last.Lease, []byte(`x`)), LeaseReasonNotActive, StateFailed)
	if _, err := e.s.ReplayRun(e.ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	g := e.claimP0(worker2, LeaseTTLMin)
	if len(g) != 1 || g[0].AttemptType != AttemptReplay {
		t.Fatalf("claim after replay = %+v", g)
	}
	time.Sleep(LeaseTTLMin + 30*time.Millisecond)
	// The old worker's late call comes first: another lease is a
	// mismatch, which changes nothing (only the holder's own late call, or
	// the scanner, applies the expiry of the current lease).
	wantLeaseErr(t, "late complete of the old lease", e.s.Complete(e.ctx, last.Lease, []byte(`x`)), LeaseReasonMismatch, StateActive)
	wantLeaseErr(t, "late complete of the replay's lease", e.s.Complete(e.ctx, g[0].Lease, []byte(`x`)), LeaseReasonExpired, StateWaiting)
	run = e.checkRunInvariants("replay lease lost", f, r.ID, false)
	if run.State != RunRunning || run.Skipped != 0 {
		t.Fatalf("run = %+v", run)
	}
	e.drive(func(Grant) outcome { return outcome{result: []byte(`1`)} })
	if run := e.checkRunInvariants("done", f, r.ID, false); run.State != RunSucceeded || run.Succeeded != 2 {
		t.Fatalf("run = %+v", run)
	}
}

// Extra: the members of a fan-in finish at the same time from many
// goroutines, each asking for a hand-off, while another goroutine cancels
// the run (in half of the rounds). Whatever the interleaving, the join
// member is granted at most once (exactly once without a cancel that came
// first), a grant made before the cancel is fenced after it, every
// completion is either applied or refused as a stale lease, and the run's
// counters match its members.
func TestRaceConcurrentFanInHandoffAndCancel(t *testing.T) {
	t.Parallel()
	const width = 8
	names := []string{"root"}
	var edges []string
	for i := range width {
		m := "m" + strconv.Itoa(i)
		names = append(names, m)
		edges = append(edges, "root->"+m, m+"->join")
	}
	names = append(names, "join")
	for round := range 6 {
		cancel := round%2 == 1
		e := onePartition(t)
		f := flow7("fan", execs(names...), edges...)
		f.Result = "join"
		r := e.stage(f, `{}`)
		root := e.claimP0(worker1, time.Minute)
		if len(root) != 1 {
			t.Fatalf("claim = %+v", root)
		}
		if err := e.s.Complete(e.ctx, root[0].Lease, []byte(`0`)); err != nil {
			t.Fatal(err)
		}
		ms := e.claimAll(worker1, width, time.Minute)
		if len(ms) != width {
			t.Fatalf("claimed %d of %d", len(ms), width)
		}
		type out struct {
			res    FinishResult
			grants []Grant
			err    error
		}
		outs := make([]out, width)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i, g := range ms {
			wg.Go(func() {
				<-start
				w := WorkerIdentity{WorkerID: "w" + strconv.Itoa(i), InstanceID: "i" + strconv.Itoa(i), Namespace: "default"}
				res, grants, err := e.s.FinishHandoff(e.ctx, []Finish{{Lease: g.Lease, Result: []byte(`1`)}},
					&Handoff{Worker: w, Lanes: []string{"default"}, Max: 1, LeaseTTL: time.Minute})
				outs[i] = out{grants: grants, err: err}
				if err == nil {
					outs[i].res = res[0]
				}
			})
		}
		var cancelErr error
		if cancel {
			wg.Go(func() {
				<-start
				_, cancelErr = e.s.CancelRun(e.ctx, r.ID, "race")
			})
		}
		close(start)
		wg.Wait()
		if cancelErr != nil {
			t.Fatal(cancelErr)
		}
		var grants []Grant
		applied := 0
		for i, o := range outs {
			if o.err != nil {
				t.Fatalf("round %d: finish %d: %v", round, i, o.err)
			}
			switch {
			case o.res.Err == nil:
				applied++
			case !errors.Is(o.res.Err, ErrStaleLease):
				t.Fatalf("round %d: finish %d: %v", round, i, o.res.Err)
			}
			grants = append(grants, o.grants...)
		}
		run := e.checkRunInvariants("after the race", f, r.ID, cancel)
		if len(grants) > 1 || (!cancel && len(grants) != 1) {
			t.Fatalf("round %d: join granted %d times", round, len(grants))
		}
		if !cancel && applied != width {
			t.Fatalf("round %d: %d of %d completions applied without a cancel", round, applied, width)
		}
		if cancel && run.State != RunCancelled {
			t.Fatalf("round %d: run %s after a cancel", round, run.State)
		}
		for _, g := range grants {
			if g.FlowNode != "join" || applied != width {
				t.Fatalf("round %d: granted %s with %d of %d upstreams applied", round, g.FlowNode, applied, width)
			}
			err := e.s.Complete(e.ctx, g.Lease, []byte(`done`))
			if cancel && !errors.Is(err, ErrStaleLease) || !cancel && err != nil {
				t.Fatalf("round %d: completion of the join (cancel %v) = %v", round, cancel, err)
			}
		}
		run = e.checkRunInvariants("ended", f, r.ID, cancel)
		want := RunSucceeded
		if cancel {
			want = RunCancelled
		}
		if run.State != want {
			t.Fatalf("round %d: run %+v, want %s", round, run, want)
		}
	}
}

// Extra: a hand-off grants only what the call's successes make eligible
// (spec/api.md: "the downstream members that the completions make
// eligible"). A late completion whose lease expired applies the expiry;
// when that fails the member (reclaims exhausted) and its failure fires a
// downstream member, that member goes to the eligible index for any
// worker: it is not handed to the worker whose completion was refused.
// The same holds for a failure reported in a finish with a hand-off.
func TestRaceHandoffOnlyFromSuccesses(t *testing.T) {
	t.Parallel()
	t.Run("late completion, reclaims exhausted", func(t *testing.T) {
		t.Parallel()
		e := onePartition(t)
		f := flow7("f", execs("a", "b"), "a->b on failure")
		r := e.stage(f, `{}`)
		ids := nodeIDs(r)
		var last Grant
		for i := range MaxReclaimsDefault + 1 {
			g := e.claimP0(worker1, LeaseTTLMin)
			if len(g) != 1 || g[0].ExecutionID != ids["a"] {
				t.Fatalf("claim %d = %+v", i, g)
			}
			last = g[0]
			time.Sleep(LeaseTTLMin + 30*time.Millisecond)
			if i < MaxReclaimsDefault {
				if _, err := e.s.ExpireLeases(e.ctx, 0, 100); err != nil {
					t.Fatal(err)
				}
			}
		}
		res, grants := e.finishHandoffOne(Finish{Lease: last.Lease, Result: []byte(`late`)}, handoff(1))
		wantLeaseErr(t, "late complete", res.Err, LeaseReasonExpired, StateFailed)
		if len(grants) != 0 {
			t.Fatalf("a refused completion handed off %+v", grants)
		}
		e.wantState(ids["b"], StateWaiting)
		e.checkRunInvariants("a failed", f, r.ID, false)
	})
	t.Run("failure in a finish with a hand-off", func(t *testing.T) {
		t.Parallel()
		e := onePartition(t)
		f := flow7("f", execs("a", "b"), "a->b on failure")
		r := e.stage(f, `{}`)
		ids := nodeIDs(r)
		a := e.claimP0(worker1, time.Minute)
		res, grants := e.finishHandoffOne(Finish{Lease: a[0].Lease, Failed: true, Error: "boom"}, handoff(1))
		if res.Err != nil || res.State != StateFailed {
			t.Fatalf("fail = %+v", res)
		}
		if len(grants) != 0 {
			t.Fatalf("a failure handed off %+v", grants)
		}
		e.wantState(ids["b"], StateWaiting)
		e.checkRunInvariants("a failed", f, r.ID, false)
	})
}

// Extra: two workers walk a chain by hand-offs with leases as short as
// allowed and handlers that sometimes outlive them, while a scanner
// goroutine expires leases and times out attempts as fast as it can.
// Whatever the interleaving: every member succeeds at most once (one
// success in its history), each lost lease is one lease_expired attempt
// and one reclaim, only the holder of the current lease ever completes,
// and the run's counters match its members when it ends.
func TestRaceChainUnderExpiryScanner(t *testing.T) {
	t.Parallel()
	const n = 6
	var names, edges []string
	for i := range n {
		names = append(names, "s"+strconv.Itoa(i))
		if i > 0 {
			edges = append(edges, names[i-1]+"->"+names[i])
		}
	}
	e := onePartition(t)
	f := flow7("chain", execs(names...), edges...)
	f.Result = names[n-1]
	r := e.stage(f, `{}`)
	stop := make(chan struct{})
	var scans sync.WaitGroup
	scans.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := e.s.ExpireLeases(e.ctx, 0, 100); err != nil {
				t.Error(err)
				return
			}
			time.Sleep(3 * time.Millisecond)
		}
	})
	ended := func() bool {
		st, err := e.s.RunState(e.ctx, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		return st != RunRunning
	}
	var workers sync.WaitGroup
	completed := make([][]ExecutionID, 2)
	for wi, w := range []WorkerIdentity{worker1, worker2} {
		workers.Go(func() {
			// Hold times around the lease: some finish in time, some late.
			holds := []time.Duration{10 * time.Millisecond, 60 * time.Millisecond, 140 * time.Millisecond, 30 * time.Millisecond}
			var mine []Grant
			for k := 0; k < 400; k++ {
				if len(mine) == 0 {
					g, err := e.s.Claim(e.ctx, ClaimRequest{Partition: 0, Lanes: []string{"default"}, Worker: w, Max: 1, LeaseTTL: LeaseTTLMin})
					if err != nil {
						t.Error(err)
						return
					}
					if len(g) == 0 {
						st, err := e.s.RunState(e.ctx, r.ID)
						if err != nil || st != RunRunning {
							return
						}
						time.Sleep(5 * time.Millisecond)
						continue
					}
					mine = g
				}
				g := mine[0]
				mine = nil
				time.Sleep(holds[(k+wi)%len(holds)])
				res, grants, err := e.s.FinishHandoff(e.ctx, []Finish{{Lease: g.Lease, Result: []byte(`1`)}},
					&Handoff{Worker: w, Lanes: []string{"default"}, Max: 1, LeaseTTL: LeaseTTLMin})
				if err != nil {
					t.Error(err)
					return
				}
				switch {
				case res[0].Err == nil:
					completed[wi] = append(completed[wi], g.ExecutionID)
				case !errors.Is(res[0].Err, ErrStaleLease):
					t.Error(res[0].Err)
					return
				}
				mine = grants
			}
		})
	}
	workers.Wait()
	close(stop)
	scans.Wait()
	if t.Failed() {
		return
	}
	if !ended() {
		t.Fatalf("run still running: %v", nodeStates(e.run(r.ID)))
	}
	run := e.checkRunInvariants("ended", f, r.ID, false)
	accepted := map[ExecutionID]int{}
	for _, ids := range completed {
		for _, id := range ids {
			accepted[id]++
		}
	}
	totalLost := 0
	for _, node := range run.Nodes {
		x := e.get(node.ExecutionID)
		successes, lost := 0, 0
		for _, a := range x.Attempts {
			switch a.Outcome {
			case AttemptSucceeded:
				successes++
			case AttemptLeaseExpired:
				lost++
			}
		}
		want := 0
		if x.State.Public == StateCompleted {
			want = 1
		}
		if successes != want || accepted[node.ExecutionID] != want {
			t.Fatalf("%s (%s): %d successes in its history, %d completions accepted, want %d", node.Name, x.State.Public, successes, accepted[node.ExecutionID], want)
		}
		totalLost += lost
		if x.Reclaims != lost {
			t.Fatalf("%s: %d reclaims, %d lost leases", node.Name, x.Reclaims, lost)
		}
		if x.State.Public == StateFailed && lost != MaxReclaimsDefault+1 {
			t.Fatalf("%s failed (%q) with %d lost leases", node.Name, x.FailureReason, lost)
		}
	}
	t.Logf("run %s after %d lost leases: %v", run.State, totalLost, nodeStates(run))
}

// Extra: replays and cancels of one run requested at the same time.
// Exactly one of concurrent replays of a failed run goes through (the
// others find it running); concurrent cancels all answer with the
// cancelled run, and count each member once.
func TestRaceConcurrentReplaysAndCancels(t *testing.T) {
	t.Parallel()
	e := onePartition(t)
	f := flow7("f", execs("a", "b", "c"), "a->c", "b->c")
	r := e.stage(f, `{}`)
	e.drive(func(g Grant) outcome { return outcome{result: []byte(`1`), fail: g.FlowNode == "a"} })
	if run := e.checkRunInvariants("failed", f, r.ID, false); run.State != RunFailed {
		t.Fatalf("run = %+v", run)
	}
	const k = 6
	errs := make([]error, k)
	var wg sync.WaitGroup
	for i := range k {
		wg.Go(func() { _, errs[i] = e.s.ReplayRun(e.ctx, r.ID) })
	}
	wg.Wait()
	ok := 0
	for _, err := range errs {
		var se *StateError
		switch {
		case err == nil:
			ok++
		case !errors.As(err, &se) || se.State != PublicState(RunRunning):
			t.Fatalf("concurrent replay: %v", err)
		}
	}
	if ok != 1 {
		t.Fatalf("%d of %d concurrent replays went through, want 1", ok, k)
	}
	run := e.checkRunInvariants("replayed", f, r.ID, false)
	if run.State != RunRunning || run.Succeeded != 1 {
		t.Fatalf("run = %+v", run)
	}
	g := e.claimP0(worker1, time.Minute) // a runs again
	if len(g) != 1 || g[0].FlowNode != "a" {
		t.Fatalf("claim after replay = %+v", g)
	}
	runs := make([]*Run, k)
	for i := range k {
		wg.Go(func() { runs[i], errs[i] = e.s.CancelRun(e.ctx, r.ID, "stop") })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil || runs[i].State != RunCancelled {
			t.Fatalf("concurrent cancel %d = %+v, %v", i, runs[i], err)
		}
	}
	run = e.checkRunInvariants("cancelled", f, r.ID, true)
	if run.Cancelled != 2 || run.Succeeded != 1 || e.runRecord(r.ID)["left"] != "0" {
		t.Fatalf("run = %+v, record %v", run, e.runRecord(r.ID))
	}
	wantLeaseErr(t, "late complete", e.s.Complete(e.ctx, g[0].Lease, []byte(`1`)), LeaseReasonNotActive, StateCancelled)
}

// Extra: in one finish with a hand-off, a member whose join needs a
// success and a failure of the call is handed off whichever item comes
// first (a success of the call helps fire it); one that only the call's
// failure fires is indexed for any worker.
func TestRaceHandoffMixedItems(t *testing.T) {
	t.Parallel()
	for _, okFirst := range []bool{true, false} {
		t.Run(map[bool]string{true: "success first", false: "failure first"}[okFirst], func(t *testing.T) {
			t.Parallel()
			e := onePartition(t)
			// j needs a's success and x's failure; c needs only x's failure.
			f := flow7("f", execs("a", "x", "j", "c"), "a->j", "x->j on failure", "x->c on failure")
			r := e.stage(f, `{}`)
			ids := nodeIDs(r)
			by := e.claimByNode(2)
			items := []Finish{{Lease: by["a"].Lease, Result: []byte(`1`)}, {Lease: by["x"].Lease, Failed: true, Error: "boom"}}
			if !okFirst {
				items[0], items[1] = items[1], items[0]
			}
			res, grants, err := e.s.FinishHandoff(e.ctx, items, handoff(2))
			if err != nil || res[0].Err != nil || res[1].Err != nil {
				t.Fatalf("finish = %+v, %v", res, err)
			}
			if len(grants) != 1 || grants[0].ExecutionID != ids["j"] {
				t.Fatalf("grants = %+v, want j only", grants)
			}
			e.wantState(ids["j"], StateActive)
			e.wantState(ids["c"], StateWaiting)
			e.checkRunInvariants("after", f, r.ID, false)
		})
	}
}

// Extra: the attempt-timeout scanner (a retry) or an operator's revoke (a
// reclaim) takes a's attempt from its worker; the worker's late
// completion with a hand-off is refused and hands nothing off, before and
// after a is claimed again, and b waits for the new attempt.
func TestRaceTimeoutOrRevokeThenLateComplete(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		take func(e *env, id ExecutionID)
		next AttemptType
	}{
		{"attempt timeout", func(e *env, id ExecutionID) {
			time.Sleep(150 * time.Millisecond)
			if n, err := e.s.TimeoutAttempts(e.ctx, 0, 100); err != nil || n.Processed != 1 {
				e.t.Fatalf("TimeoutAttempts = %+v, %v", n, err)
			}
		}, AttemptRetry},
		{"revoke", func(e *env, id ExecutionID) {
			if _, err := e.s.RevokeLease(e.ctx, id, "operator"); err != nil {
				e.t.Fatal(err)
			}
		}, AttemptReclaim},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := onePartition(t)
			x := execs("a", "b")
			x[0].TimeoutMs = 100
			x[0].Retry.Attempts = 2
			f := flow7("f", x, "a->b")
			r := e.stage(f, `{}`)
			ids := nodeIDs(r)
			old := e.claimP0(worker1, time.Minute)
			if len(old) != 1 || old[0].ExecutionID != ids["a"] {
				t.Fatalf("claim = %+v", old)
			}
			tc.take(e, ids["a"])
			e.wantState(ids["a"], StateWaiting)
			res, grants := e.finishHandoffOne(Finish{Lease: old[0].Lease, Result: []byte(`late`)}, handoff(1))
			wantLeaseErr(t, "late complete", res.Err, LeaseReasonNotActive, StateWaiting)
			if len(grants) != 0 {
				t.Fatalf("late complete handed off %v", grantIDs(grants))
			}
			cur := e.claimP0(worker2, time.Minute)
			if len(cur) != 1 || cur[0].AttemptType != tc.next || cur[0].Epoch != old[0].Epoch+1 {
				t.Fatalf("re-claim = %+v", cur)
			}
			res, grants = e.finishHandoffOne(Finish{Lease: old[0].Lease, Result: []byte(`late`)}, handoff(1))
			wantLeaseErr(t, "late complete after re-claim", res.Err, LeaseReasonMismatch, StateActive)
			if len(grants) != 0 {
				t.Fatalf("late complete handed off %v", grantIDs(grants))
			}
			e.wantState(ids["b"], StatePending)
			run := e.checkRunInvariants("re-claimed", f, r.ID, false)
			if run.Done != 0 {
				t.Fatalf("run = %+v", run)
			}
		})
	}
}
