package server_test

import (
	"encoding/json"
	"testing"

	"github.com/flowfabric/ff/runtime/server/servertest"
	"github.com/flowfabric/ff/runtime/wire"
)

// TestRaceLateCompleteAcrossCancelAndReplay: through HTTP, a worker
// holds a's lease while the run is cancelled and then replayed. Its late
// complete with a hand-off is refused each time (cancelled, then a stale
// lease once the replay put a back and once another worker holds it) and
// hands nothing off; the run stays as cancel and replay left it, and the
// new worker's completions finish it with their outputs.
func TestRaceLateCompleteAcrossCancelAndReplay(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	ctx := ctxT(t)
	run := stageTwoStep(t, env)
	old := claimOne(t, env, wire.ClaimRequest{WorkerID: "old", InstanceID: "old-1"})
	late := func(step, code, reason, state string) {
		t.Helper()
		res, tasks, err := env.Client.CompleteHandoff(ctx, wire.CompleteRequest{
			WorkerID:    "old",
			Completions: []wire.Completion{{Lease: leaseOf(old), Output: json.RawMessage(`{"s":"late"}`)}},
			Handoff:     &wire.Handoff{InstanceID: "old-1", Max: 1},
		})
		if err != nil || len(res) != 1 || res[0].OK || res[0].Error == nil {
			t.Fatalf("%s: late complete = %+v, %v", step, res, err)
		}
		if e := res[0].Error; e.Code != code || e.Details["reason"] != reason || e.Details["state"] != state {
			t.Fatalf("%s: late complete error %+v, want %s (%s, state %s)", step, e, code, reason, state)
		}
		if len(tasks) != 0 {
			t.Fatalf("%s: late complete handed off %+v", step, tasks)
		}
	}
	wantRun := func(step, state string, done int) {
		t.Helper()
		r, err := env.Client.GetRun(ctx, run.ID)
		if err != nil || r.State != state || r.Done != done {
			t.Fatalf("%s: run = %+v, %v; want %s with %d done", step, r, err, state, done)
		}
	}

	if _, err := env.Client.CancelRun(ctx, run.ID, "stop"); err != nil {
		t.Fatal(err)
	}
	late("after cancel", wire.CodeCancelled, "not_active", "cancelled")
	wantRun("after cancel", "cancelled", 2)

	if _, err := env.Client.ReplayRun(ctx, run.ID); err != nil {
		t.Fatal(err)
	}
	late("after replay", wire.CodeStaleLease, "not_active", "waiting")
	wantRun("after replay", "running", 0)

	cur := claimOne(t, env, wire.ClaimRequest{WorkerID: "new", InstanceID: "new-1"})
	if cur.ExecutionID != old.ExecutionID || cur.Epoch <= old.Epoch {
		t.Fatalf("re-claim = %+v, old %+v", cur, old)
	}
	late("after re-claim", wire.CodeStaleLease, "lease_mismatch", "active")
	wantRun("after re-claim", "running", 0)

	res, tasks, err := env.Client.CompleteHandoff(ctx, wire.CompleteRequest{
		WorkerID:    "new",
		Completions: []wire.Completion{{Lease: leaseOf(cur), Output: json.RawMessage(`{"s":"new"}`)}},
		Handoff:     &wire.Handoff{InstanceID: "new-1", Max: 1},
	})
	if err != nil || !res[0].OK || len(tasks) != 1 || string(tasks[0].Input) != `{"s":"new"}` {
		t.Fatalf("complete a = %+v, %+v, %v", res, tasks, err)
	}
	late("after a completed", wire.CodeStaleLease, "not_active", "completed")
	res, err = env.Client.Complete(ctx, wire.CompleteRequest{Completions: []wire.Completion{{Lease: leaseOf(tasks[0]), Output: json.RawMessage(`{"s":"done"}`)}}})
	if err != nil || !res[0].OK {
		t.Fatalf("complete b = %+v, %v", res, err)
	}
	out, err := run.Result(ctx)
	if err != nil || string(out) != `{"s":"done"}` {
		t.Fatalf("result = %s, %v", out, err)
	}
	wantRun("done", "succeeded", 2)
}
