package store

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// A run cancelled while its members are in every non-terminal state
// (running, delayed by a retry backoff, blocked by budget, quota and
// route, pending) ends cancelled with every member cancelled and out of
// every index but the terminal one; the lost lease is fenced; a replay
// then puts every member back (roots eligible, the join pending), an
// unblock finds nothing to unblock, and the run completes.
func TestFlowCancelRunInEveryState(t *testing.T) {
	t.Parallel()
	e := onePartition(t)
	x := execs("run", "delay", "budget", "quota", "route", "join")
	x[1].Retry.Attempts, x[1].Retry.DelayMs = 2, time.Hour.Milliseconds()
	f := flowOf("every", x, "run->join", "delay->join", "budget->join", "quota->join", "route->join")
	r := e.stage(f, "")
	ids := map[string]ExecutionID{}
	for _, n := range r.Nodes {
		ids[n.Name] = n.ExecutionID
	}
	for _, name := range []string{"budget", "quota", "route"} {
		reason := map[string]BlockingReason{"budget": WaitingForBudget, "quota": WaitingForQuota, "route": WaitingForCapableWorker}[name]
		if err := e.s.Block(e.ctx, ids[name], reason, "test", time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	g := e.claimAll(worker1, 2, time.Minute)
	if len(g) != 2 {
		t.Fatalf("claimed %v", grantIDs(g))
	}
	var running Grant
	for _, x := range g {
		if x.FlowNode == "delay" {
			res, err := e.s.Fail(e.ctx, x.Lease, "later", true)
			if err != nil || res.State != StateDelayed {
				t.Fatalf("Fail = %+v, %v", res, err)
			}
		} else {
			running = x
		}
	}
	want := map[string]PublicState{"run": StateActive, "delay": StateDelayed, "budget": StateBlocked, "quota": StateBlocked,
		"route": StateBlocked, "join": StatePending}
	if diff := cmp.Diff(want, nodeStates(e.run(r.ID))); diff != "" {
		t.Fatalf("before cancel (-want +got):\n%s", diff)
	}
	cancelled, err := e.s.CancelRun(e.ctx, r.ID, "stop")
	if err != nil {
		t.Fatal(err)
	}
	for name := range want {
		want[name] = StateCancelled
	}
	if diff := cmp.Diff(want, nodeStates(e.run(r.ID))); diff != "" || cancelled.State != RunCancelled || cancelled.Cancelled != 6 {
		t.Fatalf("cancelled run %+v (-want +got):\n%s", cancelled, diff)
	}
	if err := e.s.Complete(e.ctx, running.Lease, []byte(`1`)); !errors.Is(err, ErrStaleLease) {
		t.Fatalf("Complete after cancel = %v, want ErrStaleLease", err)
	}
	if _, err := e.s.ReplayRun(e.ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	want = map[string]PublicState{"run": StateWaiting, "delay": StateWaiting, "budget": StateWaiting, "quota": StateWaiting,
		"route": StateWaiting, "join": StatePending}
	if diff := cmp.Diff(want, nodeStates(e.run(r.ID))); diff != "" {
		t.Fatalf("after replay (-want +got):\n%s", diff)
	}
	if n, err := e.s.Unblock(e.ctx, 0, WaitingForBudget, []ExecutionID{ids["budget"]}); err != nil || n != 0 {
		t.Fatalf("Unblock after replay = %d, %v", n, err)
	}
	e.drive(func(Grant) outcome { return outcome{result: []byte(`1`)} })
	if done := e.run(r.ID); done.State != RunSucceeded || done.Succeeded != 6 {
		t.Fatalf("run after replay = %+v", done)
	}
}
