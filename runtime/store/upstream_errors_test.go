package store

import (
	"strings"
	"testing"
	"time"

	"github.com/flowfabric/ff/compiler/plan"
	"github.com/google/go-cmp/cmp"
)

// grantOf returns the grant of gs for id, failing the test when none.
func grantOf(t *testing.T, gs []Grant, id ExecutionID) Grant {
	t.Helper()
	for _, g := range gs {
		if g.ExecutionID == id {
			return g
		}
	}
	t.Fatalf("no grant of %s among %v", id, grantIDs(gs))
	return Grant{}
}

// TestEmptyFailureMessageStillReported: an upstream that failed
// with an empty message still ended without output; the member that runs
// on its failure is told it failed (with an empty error), not left to
// read it as an upstream that had not ended.
func TestEmptyFailureMessageStillReported(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *Config) { c.FlowPartitions = 1 })
	ids := nodeIDs(e.stage(flowOf("emptymsg", execs("a", "b"), "a->b on failure"), ""))
	g := e.claim(ids["a"], worker1, time.Minute)
	if _, err := e.s.Fail(e.ctx, g.Lease, "", false); err != nil {
		t.Fatal(err)
	}
	g = e.claim(ids["b"], worker1, time.Minute)
	want := map[string]UpstreamError{"a": {State: StateFailed, Error: ""}}
	if diff := cmp.Diff(want, g.UpstreamErrors); diff != "" {
		t.Fatalf("upstream errors (-want +got):\n%s", diff)
	}
}

// TestHandoffSameCallFailure: a hand-off grants a member in the
// call that failed one of its upstreams and completed the other: the grant
// carries the failure the same call recorded and the result it recorded.
func TestHandoffSameCallFailure(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *Config) { c.FlowPartitions = 1 })
	x := execs("a", "b", "d")
	x[2].InputFrom = plan.InputNone
	ids := nodeIDs(e.stage(flowOf("handerr", x, "a->d on failure", "b->d"), ""))
	gs := e.claimAll(worker1, 2, time.Minute)
	ga, gb := grantOf(t, gs, ids["a"]), grantOf(t, gs, ids["b"])
	res, grants, err := e.s.FinishHandoff(e.ctx, []Finish{
		{Lease: ga.Lease, Failed: true, Error: "a broke"},
		{Lease: gb.Lease, Result: []byte(`"B"`)},
	}, handoff(1))
	if err != nil || res[0].Err != nil || res[1].Err != nil {
		t.Fatalf("FinishHandoff = %+v, %v", res, err)
	}
	gd := grantOf(t, grants, ids["d"])
	want := map[string]UpstreamError{"a": {State: StateFailed, Error: "a broke"}}
	if diff := cmp.Diff(want, gd.UpstreamErrors); diff != "" || string(gd.Upstreams["b"]) != `"B"` || len(gd.Upstreams) != 1 {
		t.Fatalf("hand-off grant of d: upstream errors (-want +got):\n%s; upstreams %v", diff, gd.Upstreams)
	}
}

// TestHandoffEarlierFailure: the failure was recorded by an earlier
// call; the hand-off that completes the other upstream reads it.
func TestHandoffEarlierFailure(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *Config) { c.FlowPartitions = 1 })
	x := execs("a", "b", "d")
	x[2].InputFrom = plan.InputNone
	ids := nodeIDs(e.stage(flowOf("handerr2", x, "a->d on done", "b->d"), ""))
	gs := e.claimAll(worker1, 2, time.Minute)
	if _, err := e.s.Fail(e.ctx, grantOf(t, gs, ids["a"]).Lease, "earlier", false); err != nil {
		t.Fatal(err)
	}
	gd := grantOf(t, e.finishOK(grantOf(t, gs, ids["b"]), `"B"`, handoff(1)), ids["d"])
	want := map[string]UpstreamError{"a": {State: StateFailed, Error: "earlier"}}
	if diff := cmp.Diff(want, gd.UpstreamErrors); diff != "" || string(gd.Upstreams["b"]) != `"B"` {
		t.Fatalf("hand-off grant of d: upstream errors (-want +got):\n%s; upstreams %v", diff, gd.Upstreams)
	}
}

// TestReplayClearsUpstreamErrors: after a replay, a member granted
// while a replayed upstream runs again does not see the upstream's error
// of the first run.
func TestReplayClearsUpstreamErrors(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *Config) { c.FlowPartitions = 1 })
	x := execs("a", "b", "d")
	x[2].Join = plan.Join{Kind: plan.JoinAny}
	x[2].InputFrom = plan.InputNone
	r := e.stage(flowOf("replayerr", x, "a->d", "b->d"), "")
	ids := nodeIDs(r)
	gs := e.claimAll(worker1, 2, time.Minute)
	if _, err := e.s.Fail(e.ctx, grantOf(t, gs, ids["a"]).Lease, "first run", false); err != nil {
		t.Fatal(err)
	}
	if err := e.s.Complete(e.ctx, grantOf(t, gs, ids["b"]).Lease, []byte(`"B"`)); err != nil {
		t.Fatal(err)
	}
	gd := e.claim(ids["d"], worker1, time.Minute)
	if diff := cmp.Diff(map[string]UpstreamError{"a": {State: StateFailed, Error: "first run"}}, gd.UpstreamErrors); diff != "" {
		t.Fatalf("first grant of d (-want +got):\n%s", diff)
	}
	if _, err := e.s.Fail(e.ctx, gd.Lease, "d failed", false); err != nil {
		t.Fatal(err)
	}
	if run := e.run(r.ID); run.State != RunFailed {
		t.Fatalf("run %s, want failed", run.State)
	}
	if _, err := e.s.ReplayRun(e.ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	// a and d are eligible again (d at once: b's success is kept); a runs
	// while d is granted.
	gs = e.claimAll(worker1, 2, time.Minute)
	gd = grantOf(t, gs, ids["d"])
	grantOf(t, gs, ids["a"])
	if len(gd.UpstreamErrors) != 0 || string(gd.Upstreams["b"]) != `"B"` || gd.AttemptType != AttemptReplay {
		t.Fatalf("grant of d after the replay: %+v", gd)
	}
}

// TestCancelledAndPendingUpstreams: under join any, a cancelled
// upstream is reported with its reason, and one that failed an attempt but
// waits for its retry (not ended) is not reported.
func TestCancelledAndPendingUpstreams(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *Config) { c.FlowPartitions = 1 })
	x := execs("a", "b", "c", "d")
	x[1].Retry = plan.Retry{Attempts: 3, Backoff: plan.BackoffFixed, DelayMs: 60_000}
	x[3].Join = plan.Join{Kind: plan.JoinAny}
	x[3].InputFrom = plan.InputNone
	ids := nodeIDs(e.stage(flowOf("mixed", x, "a->d", "b->d", "c->d"), ""))
	if _, err := e.s.Cancel(e.ctx, ids["a"], "operator said \"no\"\nfor now"); err != nil {
		t.Fatal(err)
	}
	gs := e.claimAll(worker1, 2, time.Minute)
	if _, err := e.s.Fail(e.ctx, grantOf(t, gs, ids["b"]).Lease, "transient", true); err != nil {
		t.Fatal(err)
	}
	e.wantState(ids["b"], StateDelayed)
	if err := e.s.Complete(e.ctx, grantOf(t, gs, ids["c"]).Lease, []byte(`"C"`)); err != nil {
		t.Fatal(err)
	}
	gd := e.claim(ids["d"], worker1, time.Minute)
	want := map[string]UpstreamError{"a": {State: StateCancelled, Error: "operator said \"no\"\nfor now"}}
	if diff := cmp.Diff(want, gd.UpstreamErrors); diff != "" || string(gd.Upstreams["c"]) != `"C"` || len(gd.Upstreams) != 1 {
		t.Fatalf("grant of d: upstream errors (-want +got):\n%s; upstreams %v", diff, gd.Upstreams)
	}
}

// TestGiveBackAfterDeadlineExpiresUpstream: a fenced revoke after a
// member's deadline expires it in the same call (no scanner runs here), and
// the member that runs on its failure is told it expired and why.
func TestGiveBackAfterDeadlineExpiresUpstream(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *Config) { c.FlowPartitions = 1 })
	x := execs("a", "b")
	x[0].DeadlineMs = 300
	ids := nodeIDs(e.stage(flowOf("expired", x, "a->b on failure"), ""))
	g := e.claim(ids["a"], worker1, time.Minute)
	time.Sleep(400 * time.Millisecond)
	_, err := e.s.RevokeLeaseOf(e.ctx, g.Lease, "shutdown")
	wantLeaseErr(t, "give back after the deadline", err, LeaseReasonDeadline, StateExpired)
	gb := e.claim(ids["b"], worker1, time.Minute)
	want := map[string]UpstreamError{"a": {State: StateExpired, Error: "execution deadline passed"}}
	if diff := cmp.Diff(want, gb.UpstreamErrors); diff != "" {
		t.Fatalf("grant of b (-want +got):\n%s", diff)
	}
}

// TestGiveBackAfterLeaseExpiry: a fenced revoke after the lease
// expired applies the expiry (a reclaim), and the lease scanner finds
// nothing left.
func TestGiveBackAfterLeaseExpiry(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	x := e.create(CreateRequest{Retry: RetryPolicy{Attempts: 2}})
	g := e.claim(x.ID, worker1, 100*time.Millisecond)
	time.Sleep(150 * time.Millisecond)
	_, err := e.s.RevokeLeaseOf(e.ctx, g.Lease, "shutdown")
	wantLeaseErr(t, "give back after the lease expiry", err, LeaseReasonExpired, StateWaiting)
	w := e.wantState(x.ID, StateWaiting)
	if len(w.Attempts) != 1 || w.Attempts[0].Outcome != AttemptLeaseExpired {
		t.Fatalf("attempts %+v, want one with an expired lease", w.Attempts)
	}
	p, _ := x.ID.Partition()
	if n, err := e.s.ExpireLeases(e.ctx, p, 10); err != nil || n.Processed != 0 {
		t.Fatalf("ExpireLeases = %+v, %v; want nothing left", n, err)
	}
	// The give-back of a live lease is still a plain revoke.
	g = e.claim(x.ID, worker1, time.Minute)
	if got, err := e.s.RevokeLeaseOf(e.ctx, g.Lease, "shutdown"); err != nil || got.State.Public != StateWaiting {
		t.Fatalf("RevokeLeaseOf(live) = %+v, %v", got, err)
	}
}

// TestLongErrorClipped: an upstream's error is the recorded
// failure reason, clipped on a character boundary like it.
func TestLongErrorClipped(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *Config) { c.FlowPartitions = 1 })
	ids := nodeIDs(e.stage(flowOf("long", execs("a", "b"), "a->b on failure"), ""))
	g := e.claim(ids["a"], worker1, time.Minute)
	if _, err := e.s.Fail(e.ctx, g.Lease, "x"+strings.Repeat("é", 3000), false); err != nil {
		t.Fatal(err)
	}
	gb := e.claim(ids["b"], worker1, time.Minute)
	got := gb.UpstreamErrors["a"].Error
	if want := "x" + strings.Repeat("é", (MaxErrorBytes-1)/2); got != want {
		t.Fatalf("error of %d bytes, want %d", len(got), len(want))
	}
	if fr := e.get(ids["a"]).FailureReason; fr != got {
		t.Fatalf("upstream error differs from a's failure reason (%d and %d bytes)", len(got), len(fr))
	}
}

// TestStandaloneGrantHasNoUpstreams: a standalone execution is
// granted without upstreams or their errors.
func TestStandaloneGrantHasNoUpstreams(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	x := e.create(CreateRequest{})
	g := e.claim(x.ID, worker1, time.Minute)
	if g.Upstreams != nil || g.UpstreamErrors != nil {
		t.Fatalf("standalone grant: upstreams %v, errors %v", g.Upstreams, g.UpstreamErrors)
	}
}

// TestSkippedInputUpstreamInHandoff: under join any, a member whose
// feeding upstream was skipped runs after its other upstream, here handed
// off by that upstream's completion: it has no input, and its grant says
// why the feeding upstream has no output.
func TestSkippedInputUpstreamInHandoff(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *Config) { c.FlowPartitions = 1 })
	x := execs("a", "b", "c", "d")
	x[3].Join = plan.Join{Kind: plan.JoinAny}
	x[3].InputFrom, x[3].InputExec = plan.InputExec, "b"
	ids := nodeIDs(e.stage(flowOf("skipin", x, "a->b", "a->c on failure", "b->d", "c->d"), ""))
	g := e.claim(ids["a"], worker1, time.Minute)
	if _, err := e.s.Fail(e.ctx, g.Lease, "a broke", false); err != nil {
		t.Fatal(err)
	}
	e.wantState(ids["b"], StateSkipped)
	gc := e.claim(ids["c"], worker1, time.Minute)
	if diff := cmp.Diff(map[string]UpstreamError{"a": {State: StateFailed, Error: "a broke"}}, gc.UpstreamErrors); diff != "" {
		t.Fatalf("grant of c (-want +got):\n%s", diff)
	}
	gd := grantOf(t, e.finishOK(gc, `"C"`, handoff(1)), ids["d"])
	want := map[string]UpstreamError{"b": {State: StateSkipped, Error: "its join can no longer be satisfied"}}
	if diff := cmp.Diff(want, gd.UpstreamErrors); diff != "" || len(gd.Payload) != 0 || string(gd.Upstreams["c"]) != `"C"` {
		t.Fatalf("hand-off grant of d: upstream errors (-want +got):\n%s; payload %q, upstreams %v", diff, gd.Payload, gd.Upstreams)
	}
}

// TestReplaySkippedSuccessLosesItsResult: a replay that turns a success
// into a skip (it consumed an outcome the replay changes, and the kept
// members make its join impossible) clears its result and hand-off
// prefix, so that a downstream member that runs again is told it was
// skipped instead of getting its old output; the run's counters count it
// skipped. u waits on a on failure and expires while a runs; that fires
// m, which succeeds and hands off d (join any of m and a, input from m);
// d fails, a succeeds: the run fails. The replay keeps a, so u stays
// skipped and m, which consumed u's expiry, becomes skipped; d runs
// again. Replayed in one call and by steps.
func TestReplaySkippedSuccessLosesItsResult(t *testing.T) {
	t.Parallel()
	e := onePartition(t)
	for _, st := range []*Store{e.s, e.stepped(1)} {
		x := execs("a", "u", "m", "d")
		x[1].DeadlineMs = 1
		x[3].Join = plan.Join{Kind: plan.JoinAny}
		x[3].InputFrom, x[3].InputExec = plan.InputExec, "m"
		r := e.stage(flow7("consumed", x, "a->u on failure", "u->m on failure", "m->d", "a->d"), "")
		ids := nodeIDs(r)
		ga := e.claim(ids["a"], worker1, time.Minute)
		time.Sleep(5 * time.Millisecond) // u's deadline passes
		if _, err := e.s.ExpireDeadlines(e.ctx, 0, 100); err != nil {
			t.Fatal(err)
		}
		e.wantState(ids["u"], StateExpired)
		gm := e.claim(ids["m"], worker1, time.Minute)
		gd := grantOf(t, e.finishOK(gm, `"M"`, handoff(1)), ids["d"])
		if string(gd.Payload) != `"M"` {
			t.Fatalf("d's input before the replay = %q, want m's output", gd.Payload)
		}
		if _, err := e.s.Fail(e.ctx, gd.Lease, "d broke", false); err != nil {
			t.Fatal(err)
		}
		if err := e.s.Complete(e.ctx, ga.Lease, []byte(`"A"`)); err != nil {
			t.Fatal(err)
		}
		if run := e.run(r.ID); run.State != RunFailed {
			t.Fatalf("run before the replay = %s, want failed", run.State)
		}
		if _, err := st.ReplayRun(e.ctx, r.ID); err != nil {
			t.Fatal(err)
		}
		e.wantState(ids["u"], StateSkipped)
		e.wantState(ids["m"], StateSkipped)
		p, um, _ := splitID(string(ids["m"]))
		v, err := e.c.Do(e.ctx, e.c.B().Hmget().Key(e.s.k.core(p, um)).Field("result", "handoff_prefix").Build()).ToArray()
		if err != nil {
			t.Fatal(err)
		}
		for i, f := range []string{"result", "handoff_prefix"} {
			if s, err := v[i].ToString(); err == nil {
				t.Errorf("m, skipped by the replay, keeps its %s %q", f, s)
			}
		}
		rec := e.runRecord(r.ID)
		if rec["state"] != "running" || rec["left"] != "1" || rec["skipped"] != "2" || rec["failed"] != "0" {
			t.Errorf("run record after the replay: state %s, left %s, skipped %s, failed %s; want running, 1, 2, 0",
				rec["state"], rec["left"], rec["skipped"], rec["failed"])
		}
		gd = e.claim(ids["d"], worker1, time.Minute)
		want := map[string]UpstreamError{"m": {State: StateSkipped, Error: "its join can no longer be satisfied"}}
		if diff := cmp.Diff(want, gd.UpstreamErrors); diff != "" {
			t.Errorf("d's upstream errors after the replay (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(map[string][]byte{"a": []byte(`"A"`)}, gd.Upstreams); diff != "" || len(gd.Payload) != 0 {
			t.Errorf("d after the replay: input %q, upstreams (-want +got):\n%s", gd.Payload, diff)
		}
		if err := e.s.Complete(e.ctx, gd.Lease, []byte(`"D"`)); err != nil {
			t.Fatal(err)
		}
		if run := e.run(r.ID); run.State != RunSucceeded || run.Succeeded != 2 || run.Skipped != 2 {
			t.Errorf("run after d: %s, %d succeeded, %d skipped; want succeeded, 2, 2", run.State, run.Succeeded, run.Skipped)
		}
	}
}
