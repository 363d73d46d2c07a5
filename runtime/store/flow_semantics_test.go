package store

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/flowfabric/ff/compiler/plan"
	"github.com/google/go-cmp/cmp"
)

// grantsByName claims every eligible member of partition 0 and returns
// them by name.
func (e *env) grantsByName(max int) map[string]Grant {
	e.t.Helper()
	out := map[string]Grant{}
	gs, err := e.s.Claim(e.ctx, ClaimRequest{Partition: 0, Lanes: []string{"default"}, Worker: worker1, Max: 100, LeaseTTL: time.Minute})
	if err != nil {
		e.t.Fatalf("Claim: %v", err)
	}
	for _, g := range gs {
		e.check(g.ExecutionID)
		out[g.FlowNode] = g
	}
	if max > 0 && len(out) > max {
		e.t.Fatalf("claimed %d, want at most %d", len(out), max)
	}
	return out
}

func (e *env) finishFail(g Grant, retryable bool) FinishResult {
	e.t.Helper()
	res, err := e.s.Fail(e.ctx, g.Lease, "boom "+g.FlowNode, retryable)
	if err != nil {
		e.t.Fatalf("Fail(%s) = %v", g.FlowNode, err)
	}
	return res
}

func (e *env) finishOKOne(g Grant, result string) {
	e.t.Helper()
	if err := e.s.Complete(e.ctx, g.Lease, []byte(result)); err != nil {
		e.t.Fatalf("Complete(%s) = %v", g.FlowNode, err)
	}
}

// join 2 of 3: once two upstreams failed the join can no longer be met;
// the member is skipped at once, while the third upstream still runs (the
// run does not wait for it to decide).
func TestJoinNSkippedWhileAnUpstreamRuns(t *testing.T) {
	t.Parallel()
	e := onePartition(t)
	x := execs("a", "b", "c", "d")
	x[3].Join = plan.Join{Kind: plan.JoinCount, N: 2}
	x[3].InputFrom = plan.InputNone
	r := e.stage(flowOf("n", x, "a->d", "b->d", "c->d"), "")
	gs := e.grantsByName(3)
	e.finishFail(gs["a"], false)
	if st := nodeStates(e.run(r.ID))["d"]; st != StatePending {
		t.Fatalf("d after one failure = %s, want pending", st)
	}
	e.finishFail(gs["b"], false)
	run := e.run(r.ID)
	want := map[string]PublicState{"a": StateFailed, "b": StateFailed, "c": StateActive, "d": StateSkipped}
	if diff := cmp.Diff(want, nodeStates(run)); diff != "" {
		t.Fatalf("states (-want +got):\n%s", diff)
	}
	if run.State != RunRunning || run.Done != 3 || run.Failed != 2 || run.Skipped != 1 {
		t.Fatalf("run = %+v", run)
	}
	e.finishOKOne(gs["c"], "1")
	run = e.run(r.ID)
	if run.State != RunFailed || run.Done != 4 || run.Succeeded != 1 {
		t.Fatalf("run at the end = %+v", run)
	}
}

// join any met by a's success; b failing later changes nothing for d
// (it fires once), and d's claim reports b's failure among its
// upstream errors.
func TestJoinAnyLaterFailureChangesNothing(t *testing.T) {
	t.Parallel()
	e := onePartition(t)
	x := execs("a", "b", "d")
	x[2].Join = plan.Join{Kind: plan.JoinAny}
	x[2].InputFrom = plan.InputNone
	r := e.stage(flowOf("any", x, "a->d", "b->d"), "")
	gs := e.grantsByName(2)
	e.finishOKOne(gs["a"], `"ra"`)
	if st := nodeStates(e.run(r.ID))["d"]; st != StateWaiting {
		t.Fatalf("d after a = %s, want waiting", st)
	}
	e.finishFail(gs["b"], false)
	if st := nodeStates(e.run(r.ID))["d"]; st != StateWaiting {
		t.Fatalf("d after b failed = %s, want still waiting", st)
	}
	d := e.claimOne("d")
	if string(d.Upstreams["a"]) != `"ra"` || d.UpstreamErrors["b"].State != StateFailed {
		t.Fatalf("d's grant: upstreams %q, errors %+v", d.Upstreams, d.UpstreamErrors)
	}
	e.finishOKOne(d, "1")
	run := e.run(r.ID)
	// b failed with no on failure/on done edge: the run fails.
	if run.State != RunFailed || run.Failed != 1 || run.Succeeded != 2 {
		t.Fatalf("run = %+v", run)
	}
}

// on failure and on done edges wait for the final outcome: a failure
// that is retried decides nothing; the last attempt's failure fires both;
// a success on the last retry skips the on failure branch.
func TestFailureEdgesWaitForTheLastAttempt(t *testing.T) {
	t.Parallel()
	for _, lastFails := range []bool{true, false} {
		e := onePartition(t)
		x := execs("a", "comp", "note")
		x[0].Retry = plan.Retry{Attempts: 3, DelayMs: 1}
		r := e.stage(flowOf("retry", x, "a->comp on failure", "a->note on done"), "")
		for attempt := 1; attempt <= 3; attempt++ {
			var g Grant
			waitUntil(t, 2*time.Second, "a eligible", func() bool {
				if _, err := e.s.PromoteDelayed(e.ctx, 0, 10); err != nil {
					t.Fatal(err)
				}
				gs := e.claimP0(worker1, time.Minute)
				if len(gs) == 1 {
					g = gs[0]
				}
				return len(gs) == 1
			})
			if g.FlowNode != "a" || g.Attempt != attempt {
				t.Fatalf("grant %s attempt %d, want a attempt %d", g.FlowNode, g.Attempt, attempt)
			}
			if attempt == 3 && !lastFails {
				e.finishOKOne(g, "1")
				break
			}
			e.finishFail(g, true)
			if attempt < 3 {
				st := nodeStates(e.run(r.ID))
				if st["comp"] != StatePending || st["note"] != StatePending {
					t.Fatalf("after attempt %d: %v", attempt, st)
				}
			}
		}
		st := nodeStates(e.run(r.ID))
		want := map[string]PublicState{"a": StateFailed, "comp": StateWaiting, "note": StateWaiting}
		if !lastFails {
			want = map[string]PublicState{"a": StateCompleted, "comp": StateSkipped, "note": StateWaiting}
		}
		if diff := cmp.Diff(want, st); diff != "" {
			t.Fatalf("last fails %v (-want +got):\n%s", lastFails, diff)
		}
	}
}

// A result exec that is skipped fails the run, also when the failure that
// skipped it was handled; the result route reads it as failed with no
// result.
func TestSkippedResultExecFailsRun(t *testing.T) {
	t.Parallel()
	e := onePartition(t)
	f := flowOf("res", execs("a", "r", "comp"), "a->r", "a->comp on failure")
	f.Result = "r"
	r := e.stage(f, "")
	e.drive(func(g Grant) outcome { return outcome{fail: g.FlowNode == "a", result: []byte(`1`)} })
	out, err := e.s.GetRunOutcome(e.ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if out.State != RunFailed || out.Result != nil || out.ResultNode != "r" || out.Skipped != 1 || out.Failed != 1 {
		t.Fatalf("outcome = %+v", out)
	}
	if out.ResultState != StateSkipped {
		t.Fatalf("r = %v", out.ResultState)
	}
}

// Cancel, replay, cancel, replay: each cancel ends the run cancelled with
// the counters its members say; the last replay completes.
func TestCancelReplayCancelReplay(t *testing.T) {
	t.Parallel()
	e := onePartition(t)
	x := execs("a", "b", "c")
	x[1].Retry = plan.Retry{Attempts: 2, DelayMs: time.Hour.Milliseconds()}
	f := flowOf("crc", x, "a->b", "b->c")
	f.Result = "c"
	r := e.stage(f, "")
	e.finishOKOne(e.claimOne("a"), "1")
	b := e.claimOne("b")
	if res := e.finishFail(b, true); res.State != StateDelayed {
		t.Fatalf("b after a retryable failure = %s", res.State)
	}
	for round := 0; round < 2; round++ {
		c, err := e.s.CancelRun(e.ctx, r.ID, "stop")
		if err != nil {
			t.Fatal(err)
		}
		if c.State != RunCancelled || c.Cancelled != 2 || c.Succeeded != 1 || c.Done != 3 {
			t.Fatalf("round %d: cancelled run = %+v", round, c)
		}
		rp, err := e.s.ReplayRun(e.ctx, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		if rp.State != RunRunning || rp.Done != 1 || rp.Cancelled != 0 || rp.Replays != round+1 {
			t.Fatalf("round %d: replayed run = %+v", round, rp)
		}
		if diff := cmp.Diff(map[string]PublicState{"a": StateCompleted, "b": StateWaiting, "c": StatePending}, nodeStates(rp)); diff != "" {
			t.Fatalf("round %d (-want +got):\n%s", round, diff)
		}
	}
	// b's retry budget started again: two attempts after the replay.
	b = e.claimOne("b")
	if b.AttemptType != AttemptReplay {
		t.Fatalf("b's grant after replay = %+v", b)
	}
	if res := e.finishFail(b, true); res.State != StateDelayed {
		t.Fatalf("b after the replayed attempt failed = %s, want delayed (a new retry budget)", res.State)
	}
	if _, err := e.s.CancelRun(e.ctx, r.ID, "again"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.s.ReplayRun(e.ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	e.drive(func(Grant) outcome { return outcome{result: []byte(`"x"`)} })
	done := e.run(r.ID)
	if done.State != RunSucceeded || string(done.Result) != `"x"` || done.Replays != 3 {
		t.Fatalf("run = %+v", done)
	}
}

// A member whose deadline passes while its upstream runs expires at once;
// the upstream's later success decides nothing; the run ends when the
// upstream ends.
func TestDeadlineWhileUpstreamRuns(t *testing.T) {
	t.Parallel()
	e := onePartition(t)
	x := execs("a", "b", "c")
	x[1].DeadlineMs = 20
	r := e.stage(flowOf("dl", x, "a->b", "b->c on failure"), "")
	a := e.claimOne("a")
	time.Sleep(40 * time.Millisecond)
	if res, err := e.s.ExpireDeadlines(e.ctx, 0, 10); err != nil || res.Processed != 1 {
		t.Fatalf("ExpireDeadlines = %+v, %v", res, err)
	}
	want := map[string]PublicState{"a": StateActive, "b": StateExpired, "c": StateWaiting}
	if diff := cmp.Diff(want, nodeStates(e.run(r.ID))); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
	e.finishOKOne(a, "1")
	e.finishOKOne(e.claimOne("c"), "1")
	run := e.run(r.ID)
	// b's expiry is handled by its on failure edge.
	if run.State != RunSucceeded || run.Failed != 1 || run.Succeeded != 2 {
		t.Fatalf("run = %+v", run)
	}
}

// An idempotency key whose run retention deleted stages a new run.
func TestIdempotencyKeyAfterRetention(t *testing.T) {
	t.Parallel()
	e := onePartition(t)
	f := flowOf("idem", execs("a"))
	first, created, err := e.s.StageFlow(e.ctx, StageRequest{Flow: f, IdempotencyKey: "k"})
	if err != nil || !created {
		t.Fatal(created, err)
	}
	// Running: a repeat returns it.
	if again, created, err := e.s.StageFlow(e.ctx, StageRequest{Flow: f, IdempotencyKey: "k"}); err != nil || created || again.ID != first.ID {
		t.Fatalf("repeat while running = %v %v %v", again, created, err)
	}
	e.drive(func(Grant) outcome { return outcome{result: []byte(`1`)} })
	if again, created, err := e.s.StageFlow(e.ctx, StageRequest{Flow: f, IdempotencyKey: "k"}); err != nil || created || again.ID != first.ID || again.State != RunSucceeded {
		t.Fatalf("repeat once ended = %v %v %v", again, created, err)
	}
	time.Sleep(5 * time.Millisecond)
	e.purgeAll(100)
	if _, err := e.s.GetRun(e.ctx, first.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("GetRun after retention = %v", err)
	}
	second, created, err := e.s.StageFlow(e.ctx, StageRequest{Flow: f, IdempotencyKey: "k"})
	if err != nil || !created || second.ID == first.ID {
		t.Fatalf("stage after retention = %v %v %v", second, created, err)
	}
}

// A run that ended cancelled because a member was cancelled on its own,
// whose only upstream then succeeded over an on failure edge: a replay
// runs nothing (the member's edge can never hold), turns the member
// skipped and ends the run again at once, succeeded (it was refused as a
// run in a state replay does not take).
func TestReplayOfRunWhoseOnlyCancelledMemberCanNoLongerRun(t *testing.T) {
	t.Parallel()
	e := onePartition(t)
	r := e.stage(flowOf("comp", execs("a", "c"), "a->c on failure"), "")
	a := e.claimOne("a")
	ids := nodeIDs(r)
	if _, err := e.s.Cancel(e.ctx, ids["c"], "not needed"); err != nil {
		t.Fatal(err)
	}
	e.finishOKOne(a, "1")
	run := e.run(r.ID)
	if run.State != RunCancelled {
		t.Fatalf("run = %+v, want cancelled (a member was cancelled on its own)", run)
	}
	replayed, err := e.s.ReplayRun(e.ctx, r.ID)
	if err != nil {
		t.Fatalf("ReplayRun of a cancelled run = %v, want it replayed (c becomes skipped, the run ends)", err)
	}
	if st := nodeStates(replayed)["c"]; st != StateSkipped {
		t.Fatalf("c after the replay = %s, want skipped", st)
	}
	if replayed.State != RunSucceeded || replayed.Replays != 1 || replayed.Done != replayed.Total {
		t.Fatalf("replayed run = %+v, want it ended again, succeeded, one replay counted", replayed)
	}
}

// A run staged in chunks comes to exist at its commit: its members'
// deadlines run from then (the run's created_at, its roots'), not from the
// writing of their chunks, or a stager slowed down (up to StagingTTL)
// would commit members already past their deadlines.
func TestChunkedStagingDeadlineFromCreation(t *testing.T) {
	t.Parallel()
	e := onePartition(t)
	names := []string{"root"}
	var edges []string
	for i := range StageChunkExecs + 1 {
		m := fmt.Sprintf("m%04d", i)
		names = append(names, m)
		edges = append(edges, "root->"+m)
	}
	x := execs(names...)
	const deadline = 300 * time.Millisecond
	for i := range x {
		x[i].DeadlineMs = deadline.Milliseconds()
	}
	f := flowOf("wide", x, edges...)
	// The chunks are written; the stager is slow before its commit.
	e.s.hook = func(point, _ string) {
		if point == "stage" {
			time.Sleep(2 * deadline)
		}
	}
	run, created, err := e.s.StageFlow(e.ctx, StageRequest{Flow: f})
	e.s.hook = nil
	if err != nil || !created {
		t.Fatal(created, err)
	}
	ids := nodeIDs(run)
	if root := e.get(ids["root"]); !root.CreatedAt.Equal(run.CreatedAt) {
		t.Errorf("root created %v, run %v: want the commit's time", root.CreatedAt, run.CreatedAt)
	}
	for _, name := range []string{"root", "m0000"} {
		x := e.get(ids[name])
		if got := x.DeadlineAt.Sub(run.CreatedAt); got != deadline {
			t.Errorf("%s: deadline %v after the run's creation (member written %v, run created %v), want %v", name, got,
				x.CreatedAt.Format(time.StampMilli), run.CreatedAt.Format(time.StampMilli), deadline)
		}
	}
	if res, err := e.s.ExpireDeadlines(e.ctx, 0, 1000); err != nil || res.Processed != 0 {
		t.Fatalf("right after the commit, ExpireDeadlines expired %d members (%v)", res.Processed, err)
	}
}

// A keyed quota's key value is read from the member's own input. A
// replay that runs the feeding upstream again, which then returns another
// key value, keys the member's next attempt by its new input (the
// deferred reference is restored), not by the value read before.
func TestReplayRereadsDeferredQuotaKey(t *testing.T) {
	t.Parallel()
	e := onePartition(t)
	x := execs("x", "a", "b")
	x[1].InputFrom = plan.InputNone
	x[2].Quotas = []string{"per_tenant"}
	f := flowOf("q", x, "x->a on done", "a->b")
	f.QuotaDefs = []plan.Quota{{Name: "per_tenant", Concurrency: 1, Key: "tenant"}}
	f.Result = "x"
	r := e.stage(f, `{}`)
	ids := nodeIDs(r)
	step := func(name string, out string, fail bool) {
		t.Helper()
		gs := e.claimAdm(worker1, 10, time.Minute)
		if len(gs) != 1 || gs[0].ExecutionID != ids[name] {
			t.Fatalf("granted %v, want %s", grantIDs(gs), name)
		}
		res, err := e.s.FinishMany(e.ctx, []Finish{{Lease: gs[0].Lease, Result: []byte(out), Failed: fail, Error: "no"}})
		if err != nil || res[0].Err != nil {
			t.Fatalf("finish %s: %v %+v", name, err, res)
		}
	}
	step("x", "", true)
	step("a", `{"tenant":"acme"}`, false)
	step("b", `1`, false)
	if got := e.get(ids["b"]).Quotas; !cmp.Equal(got, []string{"default/per_tenant=acme"}) {
		t.Fatalf("b's quotas in the first run: %v", got)
	}
	if run := e.run(r.ID); run.State != RunFailed {
		t.Fatalf("run = %+v", run)
	}
	if _, err := e.s.ReplayRun(e.ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	// x succeeds now; a (fired by x's end) runs again and names another
	// tenant.
	step("x", `1`, false)
	step("a", `{"tenant":"globex"}`, false)
	// b's first attempt released its slot (the quota scanner's work).
	if _, err := e.s.DrainQuotaReleases(e.ctx, 0, 100); err != nil {
		t.Fatal(err)
	}
	gs := e.claimAdm(worker1, 10, time.Minute)
	if len(gs) != 1 || gs[0].ExecutionID != ids["b"] || string(gs[0].Payload) != `{"tenant":"globex"}` {
		xb := e.get(ids["b"])
		t.Fatalf("grants %+v, want b with a's new output; b = %+v quotas %v; subjects %+v", gs, xb.State, xb.Quotas, e.quota("default/per_tenant").Subjects)
	}
	if got := e.get(ids["b"]).Quotas; !cmp.Equal(got, []string{"default/per_tenant=globex"}) {
		t.Fatalf("b's quotas after the replay: %v, want keyed by its input of this run (globex)", got)
	}
}

// A flow without a result exec whose members all succeeded is a clean
// success too: GetRunOutcome does not read its members, and the finish
// that ended it returns RunEnded (it published a notice instead, and
// local waiters paid a pub/sub hop and a read).
func TestCleanRunWithoutResultExecOutcome(t *testing.T) {
	t.Parallel()
	e := onePartition(t)
	r := e.stage(flowOf("noout", execs("a", "b"), "a->b"), "")
	e.drive(func(Grant) outcome { return outcome{result: []byte(`1`)} })
	out, err := e.s.GetRunOutcome(e.ctx, r.ID)
	if err != nil || out.State != RunSucceeded {
		t.Fatalf("outcome = %+v, %v", out, err)
	}
	if out.Nodes != nil {
		t.Errorf("a clean success without result exec: GetRunOutcome read its %d members", len(out.Nodes))
	}
	if len(e.ended) != 1 {
		t.Errorf("the finish that ended the run cleanly returned %d RunEnded, want 1", len(e.ended))
	}
}

// A failed run none of whose members would run again (`a -> r on
// failure; result r` where a succeeded: r stays skipped) is refused with
// the reason nothing_to_replay, and left as it is (it was refused as if
// failed were a state replay does not take).
func TestReplayOfFailedRunWithNothingToRerun(t *testing.T) {
	t.Parallel()
	e := onePartition(t)
	f := flowOf("onfail", execs("a", "r"), "a->r on failure")
	f.Result = "r"
	r := e.stage(f, "")
	e.drive(func(Grant) outcome { return outcome{result: []byte(`1`)} })
	if run := e.run(r.ID); run.State != RunFailed || nodeStates(run)["r"] != StateSkipped {
		t.Fatalf("run = %+v %v", run, nodeStates(run))
	}
	_, err := e.s.ReplayRun(e.ctx, r.ID)
	var se *StateError
	if !errors.As(err, &se) || se.Reason != ReasonNothingToReplay || string(se.State) != string(RunFailed) ||
		!strings.Contains(err.Error(), "nothing to replay") {
		t.Fatalf("ReplayRun of a failed run with nothing to run again = %v, want refused with the reason", err)
	}
	if run := e.run(r.ID); run.State != RunFailed || run.Replays != 0 {
		t.Fatalf("run after the refused replay = %+v, want it unchanged", run)
	}
}
