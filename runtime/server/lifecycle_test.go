package server_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flowfabric/ff/runtime/server/servertest"
	"github.com/flowfabric/ff/runtime/wire"
)

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestLifecycleThroughClient(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	ctx := ctxT(t)
	c := env.Client

	ex, created, err := c.CreateExecution(ctx, wire.CreateExecution{Kind: "email.send", Input: json.RawMessage(`{"to":"a@b"}`), Tags: map[string]string{"k": "v"}})
	if err != nil {
		t.Fatal(err)
	}
	if !created || ex.State != "waiting" || ex.Namespace != "default" || ex.Lane != "default" {
		t.Fatalf("create: created=%v %+v", created, ex)
	}
	tasks, err := c.Claim(ctx, wire.ClaimRequest{WorkerID: "w1", Max: 4, WaitMs: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if len(tasks) != 1 {
		t.Fatalf("claimed %d tasks, want 1", len(tasks))
	}
	task := tasks[0]
	if diff := cmp.Diff(ex.ID, task.ExecutionID); diff != "" {
		t.Fatalf("claimed id (-want +got):\n%s", diff)
	}
	if string(task.Input) != `{"to":"a@b"}` || task.Attempt != 1 || task.Kind != "email.send" {
		t.Fatalf("task %+v", task)
	}
	got, err := c.GetExecution(ctx, ex.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != "active" {
		t.Fatalf("state after claim = %q, want active", got.State)
	}
	if _, err := c.ExecutionResult(ctx, ex.ID); err == nil {
		t.Fatal("result of an active execution: want not_terminal error")
	} else if ae := apiErr(t, err); ae.Code != wire.CodeNotTerminal || ae.Status != 409 {
		t.Fatalf("result before end: %v", err)
	}
	lease := wire.Lease{ExecutionID: task.ExecutionID, LeaseID: task.LeaseID, Epoch: task.Epoch}
	res, err := c.Complete(ctx, wire.CompleteRequest{WorkerID: "w1", Completions: []wire.Completion{{Lease: lease, Output: json.RawMessage(`{"ok":true}`)}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 1 || !res[0].OK || res[0].State != "completed" {
		t.Fatalf("complete results %+v", res)
	}
	r, err := c.ExecutionResult(ctx, ex.ID)
	if err != nil {
		t.Fatal(err)
	}
	want := &wire.ExecutionResult{ID: ex.ID, State: "completed", Result: json.RawMessage(`{"ok":true}`)}
	if diff := cmp.Diff(want, r); diff != "" {
		t.Fatalf("result (-want +got):\n%s", diff)
	}
	// The same completion again (a retry after a lost answer) is answered
	// as recorded; one with another output is stale: 409, nothing changes.
	if again, err := c.CompleteOne(ctx, lease, json.RawMessage(`{"ok":true}`)); err != nil || !again.OK {
		t.Fatalf("the same complete again: %+v, %v", again, err)
	}
	_, err = c.CompleteOne(ctx, lease, json.RawMessage(`{"ok":false}`))
	if ae := apiErr(t, err); ae.Status != 409 || ae.Code != wire.CodeStaleLease {
		t.Fatalf("second complete: %v", err)
	}
	r2, err := c.ExecutionResult(ctx, ex.ID)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, r2); diff != "" {
		t.Fatalf("result after stale complete (-want +got):\n%s", diff)
	}
}
