package server_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/flowfabric/ff/compiler/plan"
	"github.com/flowfabric/ff/runtime/client"
	"github.com/flowfabric/ff/runtime/server/servertest"
	"github.com/flowfabric/ff/runtime/store"
	"github.com/flowfabric/ff/runtime/wire"
)

// TestExecutionAttempts: the answer about one execution carries its
// attempt history (who ran each attempt, how it ended, its error), the
// running attempt included; listings leave it out.
func TestExecutionAttempts(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	ctx := ctxT(t)
	c := env.Client
	ex, _, err := c.CreateExecution(ctx, wire.CreateExecution{Kind: "sync", Input: json.RawMessage(`{}`),
		Retry: &plan.Retry{Attempts: 3, Backoff: plan.BackoffFixed}})
	if err != nil {
		t.Fatal(err)
	}
	if ex.Attempts != nil {
		t.Fatalf("a new execution has attempts: %+v", ex.Attempts)
	}
	claim := func(worker string) wire.Lease {
		t.Helper()
		tasks, err := c.Claim(ctx, wire.ClaimRequest{WorkerID: worker, Max: 1, WaitMs: 2000})
		if err != nil || len(tasks) != 1 {
			t.Fatalf("claim by %s: %+v, %v", worker, tasks, err)
		}
		return wire.Lease{ExecutionID: tasks[0].ExecutionID, LeaseID: tasks[0].LeaseID, Epoch: tasks[0].Epoch}
	}
	l := claim("alpha")
	if _, err := c.Fail(ctx, wire.FailRequest{WorkerID: "alpha", Failures: []wire.Failure{{Lease: l, Message: "upstream 502", Retryable: true}}}); err != nil {
		t.Fatal(err)
	}
	l = claim("beta")
	got, err := c.GetExecution(ctx, ex.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Attempts) != 2 {
		t.Fatalf("attempts while the second runs: %+v", got.Attempts)
	}
	a1, a2 := got.Attempts[0], got.Attempts[1]
	if a1.Index != 1 || a1.Type != "initial" || a1.WorkerID != "alpha" || a1.Outcome != "failed" || a1.Error != "upstream 502" ||
		a1.StartedAt == nil || a1.EndedAt == nil || a1.InstanceID == "" {
		t.Fatalf("first attempt %+v", a1)
	}
	if a2.Index != 2 || a2.Type != "retry" || a2.WorkerID != "beta" || a2.Outcome != "running" || a2.EndedAt != nil {
		t.Fatalf("second attempt %+v", a2)
	}
	if _, err := c.Complete(ctx, wire.CompleteRequest{WorkerID: "beta", Completions: []wire.Completion{{Lease: l, Output: json.RawMessage(`1`)}}}); err != nil {
		t.Fatal(err)
	}
	got, err = c.GetExecution(ctx, ex.ID)
	if err != nil || len(got.Attempts) != 2 || got.Attempts[1].Outcome != "success" || got.Attempts[1].EndedAt == nil {
		t.Fatalf("after the completion: %+v, %v", got, err)
	}
	list, err := c.ListExecutions(ctx, client.ListOptions{})
	if err != nil || len(list.Executions) != 1 || list.Executions[0].Attempts != nil {
		t.Fatalf("listing: %+v, %v", list, err)
	}
}

// TestRunInput: GET /v1/flows/{id} carries the run's input and each
// member's upstreams; its result answer and the runs list do not.
func TestRunInput(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	ctx := ctxT(t)
	run := stageTwoStep(t, env)
	got, err := env.Client.GetRun(ctx, run.ID)
	if err != nil || string(got.Input) != `{"s":"x"}` {
		t.Fatalf("run input %s, %v", got.Input, err)
	}
	// Each member says what it waits for.
	if len(got.Execs) != 2 || got.Execs[0].Upstreams != nil || len(got.Execs[1].Upstreams) != 1 ||
		got.Execs[1].Upstreams[0] != (wire.FlowUpstream{Exec: "a", On: "success"}) {
		t.Fatalf("members %+v", got.Execs)
	}
	// Before a runs, b has no input; once a succeeded, b's input is a's
	// output (the input it receives), though b stores no payload.
	bx, err := env.Client.GetExecution(ctx, got.Execs[1].ExecutionID)
	if err != nil || bx.Input != nil {
		t.Fatalf("b before a ran: %+v, %v", bx, err)
	}
	echoTwoStep(t, env)
	res, err := env.Client.RunResult(ctx, run.ID, 10*time.Second)
	if err != nil || res.State != wire.RunSucceeded || res.Input != nil {
		t.Fatalf("result answer %+v, %v", res, err)
	}
	list, err := env.Client.ListRuns(ctx, client.RunListOptions{})
	if err != nil || len(list.Runs) != 1 || list.Runs[0].Input != nil {
		t.Fatalf("list %+v, %v", list, err)
	}
	if bx, err = env.Client.GetExecution(ctx, got.Execs[1].ExecutionID); err != nil || string(bx.Input) != `{"s":"x"}` {
		t.Fatalf("b's input once a succeeded: %s, %v", bx.Input, err)
	}
}

// TestExecutionAttemptsKept: an execution revoked more often than the
// record keeps attempts (store.AttemptsKept) answers with the last ones
// only and says how many earlier ones were dropped.
func TestExecutionAttemptsKept(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	ctx := ctxT(t)
	c := env.Client
	ex, _, err := c.CreateExecution(ctx, wire.CreateExecution{Kind: "flaky", Input: json.RawMessage(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	const attempts = store.AttemptsKept + 5
	for i := range attempts {
		tasks, err := c.Claim(ctx, wire.ClaimRequest{WorkerID: "w", Max: 1, WaitMs: 2000})
		if err != nil || len(tasks) != 1 {
			t.Fatalf("claim %d: %+v, %v", i+1, tasks, err)
		}
		if i < attempts-1 {
			// Revoked: not charged, eligible again at once.
			if _, err := c.RevokeLease(ctx, ex.ID, "again"); err != nil {
				t.Fatal(err)
			}
		}
	}
	got, err := c.GetExecution(ctx, ex.ID)
	if err != nil || len(got.Attempts) != store.AttemptsKept || got.AttemptsDropped != 5 {
		t.Fatalf("after %d attempts: %d kept, %d dropped (%v); want %d and 5", attempts, len(got.Attempts), got.AttemptsDropped, err, store.AttemptsKept)
	}
	first, last := got.Attempts[0], got.Attempts[len(got.Attempts)-1]
	if first.Index != 6 || first.Outcome != "revoked" || last.Index != attempts || last.Outcome != "running" {
		t.Fatalf("kept attempts from %+v to %+v", first, last)
	}
}
