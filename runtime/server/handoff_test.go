package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/flowfabric/ff/runtime/server/servertest"
	"github.com/flowfabric/ff/runtime/wire"
)

// TestCompleteHandoff: completing a with a hand-off returns b as a task
// of the same worker, with a's output as input; b completes with that
// lease and the run succeeds.
func TestCompleteHandoff(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	ctx := ctxT(t)
	run := stageTwoStep(t, env)
	a := claimOne(t, env, wire.ClaimRequest{WorkerID: "w", InstanceID: "w-1"})
	if !a.Downstream {
		t.Fatalf("task a = %+v, want Downstream", a)
	}
	res, tasks, err := env.Client.CompleteHandoff(ctx, wire.CompleteRequest{
		WorkerID:    "w",
		Completions: []wire.Completion{{Lease: leaseOf(a), Output: json.RawMessage(`{"s":"from a"}`)}},
		Handoff:     &wire.Handoff{InstanceID: "w-1", Max: 1},
	})
	if err != nil || len(res) != 1 || !res[0].OK {
		t.Fatalf("complete = %+v, %v", res, err)
	}
	if len(tasks) != 1 || tasks[0].Kind != "two.b" || string(tasks[0].Input) != `{"s":"from a"}` || tasks[0].Downstream {
		t.Fatalf("handed off %+v, want b with a's output", tasks)
	}
	b, err := env.Client.GetExecution(ctx, tasks[0].ExecutionID)
	if err != nil || b.State != "active" || b.Attempt != 1 {
		t.Fatalf("b = %+v, %v; want active in its first attempt", b, err)
	}
	res, err = env.Client.Complete(ctx, wire.CompleteRequest{Completions: []wire.Completion{{Lease: leaseOf(tasks[0]), Output: json.RawMessage(`{"s":"done"}`)}}})
	if err != nil || !res[0].OK {
		t.Fatalf("complete b = %+v, %v", res, err)
	}
	out, err := run.Result(ctx)
	if err != nil || string(out) != `{"s":"done"}` {
		t.Fatalf("result = %s, %v", out, err)
	}
}

// TestCompleteHandoffErrors: a bad hand-off is a 400 naming the field, and
// the completion it came with is not recorded.
func TestCompleteHandoffErrors(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	ctx := ctxT(t)
	stageTwoStep(t, env)
	a := claimOne(t, env, wire.ClaimRequest{WorkerID: "w"})
	lease, _ := json.Marshal(leaseOf(a))
	tests := []struct {
		name, body, field string
	}{
		{"no worker id", `{"completions":[%s],"handoff":{"max":1}}`, "worker_id"},
		{"max zero", `{"worker_id":"w","completions":[%s],"handoff":{"max":0}}`, "handoff.max"},
		{"max above completions", `{"worker_id":"w","completions":[%s],"handoff":{"max":2}}`, "handoff.max"},
		{"bad lane", `{"worker_id":"w","completions":[%s],"handoff":{"max":1,"lanes":["a b"]}}`, "handoff.lanes[0]"},
		{"bad capability", `{"worker_id":"w","completions":[%s],"handoff":{"max":1,"capabilities":["a,b"]}}`, "handoff.capabilities"},
		{"lease too short", `{"worker_id":"w","completions":[%s],"handoff":{"max":1,"lease_ms":1}}`, "handoff.lease_ms"},
		{"bad kind", `{"worker_id":"w","completions":[%s],"handoff":{"max":1,"kinds":["a b"]}}`, "handoff.kinds[0]"},
		{"unknown field", `{"worker_id":"w","completions":[%s],"handoff":{"max":1,"maxx":1}}`, "handoff.maxx"},
		// The store's rules for worker ids, checked by the API: no comma, 128 bytes.
		{"worker id with comma", `{"worker_id":"w,1","completions":[%s],"handoff":{"max":1}}`, "handoff.worker_id"},
		{"instance id too long", `{"worker_id":"w","completions":[%s],"handoff":{"max":1,"instance_id":"` + strings.Repeat("i", 129) + `"}}`, "handoff.instance_id"},
	}
	for _, tc := range tests {
		r := rawDo(t, env, http.MethodPost, "/v1/worker/complete", "", fmt.Sprintf(tc.body, lease))
		if r.status != http.StatusBadRequest || r.err.Details["field"] != tc.field {
			t.Errorf("%s: %d %+v, want 400 on field %s", tc.name, r.status, r.err, tc.field)
		}
	}
	x, err := env.Client.GetExecution(ctx, a.ExecutionID)
	if err != nil || x.State != "active" {
		t.Fatalf("a = %+v, %v; want still active", x, err)
	}
}

// TestUndeliveredHandoffRevoked: when the worker's request has ended by
// the time the hand-off is granted (its answer cannot reach it), the
// completion stands but the grant is revoked at once: the member is
// eligible again, its revoked attempt not charged, and the next claim
// runs it, without waiting for the lease to expire.
func TestUndeliveredHandoffRevoked(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	ctx := ctxT(t)
	run := stageTwoStep(t, env)
	a := claimOne(t, env, wire.ClaimRequest{WorkerID: "w", InstanceID: "w-1"})
	body, err := json.Marshal(wire.CompleteRequest{
		WorkerID:    "w",
		Completions: []wire.Completion{{Lease: leaseOf(a), Output: json.RawMessage(`{"s":"from a"}`)}},
		Handoff:     &wire.Handoff{InstanceID: "w-1", Max: 1, LeaseMs: 600_000},
	})
	if err != nil {
		t.Fatal(err)
	}
	// The request's context is over before the handler runs: as when the
	// worker hangs up while its completion is being recorded.
	gone, cancel := context.WithCancel(ctx)
	cancel()
	req := httptest.NewRequestWithContext(gone, http.MethodPost, "/v1/worker/complete", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	env.Server.API().ServeHTTP(httptest.NewRecorder(), req)

	got, err := env.Client.GetExecution(ctx, a.ExecutionID)
	if err != nil || got.State != "completed" {
		t.Fatalf("a = %+v, %v; want completed", got, err)
	}
	full, err := env.Client.GetRun(ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	var b wire.FlowExec
	for _, x := range full.Execs {
		if x.Name == "b" {
			b = x
		}
	}
	if b.State != "waiting" || b.Attempts != 1 {
		t.Fatalf("b = %+v; want waiting again after one revoked attempt", b)
	}
	// The 10-minute lease is gone: a claim gets b now.
	next := claimOne(t, env, wire.ClaimRequest{WorkerID: "w2"})
	if next.ExecutionID != b.ExecutionID || string(next.Input) != `{"s":"from a"}` || next.Attempt != 2 {
		t.Fatalf("claimed %+v, want b's second attempt with a's output", next)
	}
}
