package server_test

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flowfabric/ff/compiler/plan"
	"github.com/flowfabric/ff/runtime/client"
	"github.com/flowfabric/ff/runtime/server"
	"github.com/flowfabric/ff/runtime/server/servertest"
	"github.com/flowfabric/ff/runtime/wire"
)

func leaseOf(t wire.Task) wire.Lease {
	return wire.Lease{ExecutionID: t.ExecutionID, LeaseID: t.LeaseID, Epoch: t.Epoch}
}

func claimOne(t *testing.T, env *servertest.Env, req wire.ClaimRequest) wire.Task {
	t.Helper()
	if req.WorkerID == "" {
		req.WorkerID = "w"
	}
	req.WaitMs = max(req.WaitMs, 2000)
	tasks, err := env.Client.Claim(ctxT(t), req)
	if err != nil {
		t.Fatal(err)
	}
	if len(tasks) != 1 {
		t.Fatalf("claimed %d tasks, want 1", len(tasks))
	}
	return tasks[0]
}

// TestStaleLeaseChangesNothing: after an operator revokes a lease and
// another worker claims, every call with the old lease is a 409 and the
// execution stays as the new lease holder left it.
func TestStaleLeaseChangesNothing(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	ctx := ctxT(t)
	c := env.Client
	ex, _, err := c.CreateExecution(ctx, wire.CreateExecution{Kind: "k", Retry: &plan.Retry{Attempts: 3}})
	if err != nil {
		t.Fatal(err)
	}
	first := claimOne(t, env, wire.ClaimRequest{WorkerID: "old"})
	revoked, err := c.RevokeLease(ctx, ex.ID, "operator test")
	if err != nil {
		t.Fatal(err)
	}
	if revoked.State != "waiting" {
		t.Fatalf("after revoke: state %q, want waiting", revoked.State)
	}
	second := claimOne(t, env, wire.ClaimRequest{WorkerID: "new"})
	if second.Epoch <= first.Epoch {
		t.Fatalf("epoch did not grow: %d then %d", first.Epoch, second.Epoch)
	}
	before, err := c.GetExecution(ctx, ex.ID)
	if err != nil {
		t.Fatal(err)
	}
	old := leaseOf(first)
	_, err = c.CompleteOne(ctx, old, json.RawMessage(`"stale"`))
	checkCode(t, "complete", err, 409, wire.CodeStaleLease)
	_, err = c.FailOne(ctx, old, "stale", false)
	checkCode(t, "fail", err, 409, wire.CodeStaleLease)
	_, err = c.RenewOne(ctx, old, time.Second)
	checkCode(t, "renew", err, 409, wire.CodeStaleLease)
	// A worker giving back a lease it no longer holds takes nothing from
	// the new holder.
	_, err = c.GiveBack(ctx, old, "stale hand-back")
	checkCode(t, "give back", err, 409, wire.CodeStaleLease)
	r := rawDo(t, env, "POST", "/v1/executions/"+ex.ID+"/revoke-lease", "", `{"lease_id": "x"}`)
	if r.status != 400 || r.err.Details["field"] != "epoch" {
		t.Fatalf("revoke with half a lease: %d %s", r.status, r.body)
	}
	wrongEpoch := leaseOf(second)
	wrongEpoch.Epoch++
	_, err = c.CompleteOne(ctx, wrongEpoch, nil)
	checkCode(t, "complete with a future epoch", err, 409, wire.CodeStaleLease)
	// Batched: per-item results, HTTP 200.
	res, err := c.Complete(ctx, wire.CompleteRequest{Completions: []wire.Completion{{Lease: old, Output: json.RawMessage(`1`)}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 1 || res[0].OK || res[0].Error == nil || res[0].Error.Code != wire.CodeStaleLease {
		t.Fatalf("batched stale complete: %+v", res)
	}
	after, err := c.GetExecution(ctx, ex.ID)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(before, after); diff != "" {
		t.Fatalf("stale calls changed the execution (-before +after):\n%s", diff)
	}
	// The current lease still works.
	if _, err := c.CompleteOne(ctx, leaseOf(second), json.RawMessage(`"fresh"`)); err != nil {
		t.Fatal(err)
	}
}

func checkCode(t *testing.T, what string, err error, status int, code string) {
	t.Helper()
	var ae *client.APIError
	if !errors.As(err, &ae) || ae.Status != status || ae.Code != code {
		t.Errorf("%s: %v, want %d %s", what, err, status, code)
	}
}

func TestBatchedRenewAndFail(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	ctx := ctxT(t)
	c := env.Client
	reqs := []wire.CreateExecution{
		{Kind: "k", Retry: &plan.Retry{Attempts: 2, DelayMs: 60_000}},
		{Kind: "k", Retry: &plan.Retry{Attempts: 2, DelayMs: 60_000}},
		{Kind: "k", Retry: &plan.Retry{Attempts: 2}},
	}
	created, err := c.CreateExecutions(ctx, reqs)
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.Claim(ctx, wire.ClaimRequest{WorkerID: "w", Max: 10, WaitMs: 1000})
	if err != nil || len(got) != 3 {
		t.Fatalf("claim: %d tasks, %v", len(got), err)
	}
	// Put the tasks in creation order (claims come partition by partition).
	byID := map[string]wire.Task{}
	for _, tk := range got {
		byID[tk.ExecutionID] = tk
	}
	tasks := make([]wire.Task, len(created))
	for i, r := range created {
		tasks[i] = byID[r.ID]
	}
	leases := []wire.Lease{leaseOf(tasks[0]), leaseOf(tasks[1]), leaseOf(tasks[2]),
		{ExecutionID: "0.00000000-0000-4000-8000-000000000000", LeaseID: "x", Epoch: 1}}
	rr, err := c.Renew(ctx, wire.RenewRequest{WorkerID: "w", LeaseMs: 5000, Leases: leases})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if !rr[i].OK || rr[i].LeaseExpiresAt == nil || time.Until(*rr[i].LeaseExpiresAt) < 3*time.Second {
			t.Errorf("renew %d: %+v", i, rr[i])
		}
	}
	if rr[3].OK || rr[3].Error == nil || rr[3].Error.Code != wire.CodeNotFound {
		t.Errorf("renew of an unknown execution: %+v", rr[3])
	}
	fr, err := c.Fail(ctx, wire.FailRequest{Failures: []wire.Failure{
		{Lease: leases[0], Message: "try again", Retryable: true},
		{Lease: leases[1], Message: "give up", Retryable: false},
	}})
	if err != nil {
		t.Fatal(err)
	}
	states := []string{fr[0].State, fr[1].State}
	if diff := cmp.Diff([]string{"delayed", "failed"}, states); diff != "" {
		t.Fatalf("states after fail (-want +got):\n%s", diff)
	}
	res, err := c.ExecutionResult(ctx, tasks[1].ExecutionID)
	if err != nil || res.State != "failed" || res.Error != "give up" {
		t.Fatalf("failed result: %+v %v", res, err)
	}
}

func TestDelayedAndDeadline(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	ctx := ctxT(t)
	c := env.Client
	delayed, _, err := c.CreateExecution(ctx, wire.CreateExecution{Kind: "k", Lane: "later", DelayMs: 300})
	if err != nil {
		t.Fatal(err)
	}
	if delayed.State != "delayed" || delayed.DelayUntil == nil {
		t.Fatalf("delayed create: state %q delay_until %v", delayed.State, delayed.DelayUntil)
	}
	none, err := c.Claim(ctx, wire.ClaimRequest{WorkerID: "w", Lanes: []string{"later"}})
	if err != nil || len(none) != 0 {
		t.Fatalf("claim before the delay: %+v %v", none, err)
	}
	task := claimOne(t, env, wire.ClaimRequest{Lanes: []string{"later"}, WaitMs: 10_000})
	if task.ExecutionID != delayed.ID {
		t.Fatalf("claimed %s, want %s", task.ExecutionID, delayed.ID)
	}
	if now := time.Now(); now.Before(*delayed.DelayUntil) {
		t.Fatalf("claimed at %s, before delay_until %s", now, delayed.DelayUntil)
	}

	// A deadline ends an execution nobody runs, with outcome expired.
	doomed, _, err := c.CreateExecution(ctx, wire.CreateExecution{Kind: "k", Lane: "nobody", DeadlineMs: 150})
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.WaitResult(ctx, doomed.ID, 20*time.Millisecond)
	if err != nil || res.State != "expired" {
		t.Fatalf("deadline: %+v %v", res, err)
	}
	// An attempt timeout fails the running attempt; with no retry left it fails.
	slow, _, err := c.CreateExecution(ctx, wire.CreateExecution{Kind: "k", Lane: "slow", TimeoutMs: 150})
	if err != nil {
		t.Fatal(err)
	}
	tk := claimOne(t, env, wire.ClaimRequest{Lanes: []string{"slow"}})
	if tk.DeadlineAt == nil {
		t.Fatal("task of an execution with a timeout has no deadline_at")
	}
	res, err = c.WaitResult(ctx, slow.ID, 20*time.Millisecond)
	if err != nil || res.State != "failed" {
		t.Fatalf("attempt timeout: %+v %v", res, err)
	}
	_, err = c.CompleteOne(ctx, leaseOf(tk), nil)
	checkCode(t, "complete after timeout", err, 409, wire.CodeStaleLease)
}

func TestListFiltersAndPages(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	ctx := ctxT(t)
	c := env.Client
	var reqs []wire.CreateExecution
	for range 7 {
		reqs = append(reqs, wire.CreateExecution{Kind: "k", Lane: "a"})
	}
	for range 3 {
		reqs = append(reqs, wire.CreateExecution{Kind: "k", Lane: "b"})
	}
	reqs = append(reqs, wire.CreateExecution{Kind: "k", Namespace: "other"})
	if _, err := c.CreateExecutions(ctx, reqs); err != nil {
		t.Fatal(err)
	}
	claimOne(t, env, wire.ClaimRequest{Lanes: []string{"b"}})

	seen := map[string]bool{}
	cursor, pages := "", 0
	for {
		page, err := c.ListExecutions(ctx, client.ListOptions{Lane: "a", Limit: 3, Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, e := range page.Executions {
			if e.Lane != "a" || seen[e.ID] {
				t.Fatalf("page %d: unexpected %s (lane %s, seen %v)", pages, e.ID, e.Lane, seen[e.ID])
			}
			seen[e.ID] = true
		}
		if page.NextCursor == "" {
			break
		}
		cursor = page.NextCursor
		if pages > 10 {
			t.Fatal("pagination does not end")
		}
	}
	if len(seen) != 7 || pages < 3 {
		t.Fatalf("lane a: %d executions over %d pages, want 7 over at least 3", len(seen), pages)
	}
	active, err := c.ListExecutions(ctx, client.ListOptions{State: "active"})
	if err != nil || len(active.Executions) != 1 || active.Executions[0].Lane != "b" {
		t.Fatalf("active: %+v %v", active, err)
	}
	// Running executions are listed from the partition's lease index,
	// which holds every lane and namespace: each listing keeps its own.
	claimOne(t, env, wire.ClaimRequest{Namespace: "other"})
	for _, tc := range []struct {
		opts client.ListOptions
		want int
	}{
		{client.ListOptions{State: "active", Lane: "a"}, 0},
		{client.ListOptions{State: "active", Lane: "b"}, 1},
		{client.ListOptions{State: "active"}, 1},
		{client.ListOptions{State: "active", Namespace: "other"}, 1},
		{client.ListOptions{Namespace: "other"}, 1},
	} {
		l, err := c.ListExecutions(ctx, tc.opts)
		if err != nil || len(l.Executions) != tc.want {
			t.Fatalf("list %+v: %+v %v, want %d", tc.opts, l, err, tc.want)
		}
		for _, e := range l.Executions {
			if e.State != "active" && tc.opts.State == "active" {
				t.Fatalf("list %+v: %s is %s", tc.opts, e.ID, e.State)
			}
		}
	}
}

// TestPriorityOrderAndChange uses one partition: priority order is exact
// within a partition, approximate across partitions (spec/api.md).
func TestPriorityOrderAndChange(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t, func(c *server.Config) { c.FlowPartitions = 1 })
	ctx := ctxT(t)
	c := env.Client
	low, _, _ := c.CreateExecution(ctx, wire.CreateExecution{Kind: "k", Priority: ptr(10)})
	mid, _, _ := c.CreateExecution(ctx, wire.CreateExecution{Kind: "k", Priority: ptr(50)})
	if _, err := c.SetPriority(ctx, low.ID, 900); err != nil {
		t.Fatal(err)
	}
	first := claimOne(t, env, wire.ClaimRequest{})
	if first.ExecutionID != low.ID {
		t.Fatalf("first claim %s, want the raised %s", first.ExecutionID, low.ID)
	}
	_, err := c.SetPriority(ctx, low.ID, 1)
	checkCode(t, "priority of a running execution", err, 409, wire.CodeConflict)
	second := claimOne(t, env, wire.ClaimRequest{})
	if second.ExecutionID != mid.ID {
		t.Fatalf("second claim %s, want %s", second.ExecutionID, mid.ID)
	}
	_, err = c.CancelExecution(ctx, "0.00000000-0000-4000-8000-000000000000", "")
	checkCode(t, "cancel unknown", err, 404, wire.CodeNotFound)
}

func ptr[T any](v T) *T { return &v }
