package server_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/flowfabric/ff/runtime/server"
	"github.com/flowfabric/ff/runtime/wire"
)

// spec/api.md: a worker's usage report is fenced; "when the lease is not
// the execution's current one (wrong id or epoch, expired, revoked,
// finished) the answer is 409 stale_lease and nothing is counted". A lease
// that expired but that the lease-expiry scanner has not swept yet (the
// record still reads active) is refused as renew and finish refuse it, and
// the report applies the expiry on the spot as they do: the execution is
// eligible again (a reclaim).
func TestUsageFromExpiredLeaseRefused(t *testing.T) {
	flows := compileFlows(t, budgetFF)
	env := startAdmission(t, flows, func(c *server.Config) { c.DisableScanners = true })
	ctx := context.Background()
	c := env.Client
	if _, err := c.StageFlow(ctx, flows["spend"], map[string]any{"tenant": "acme"}); err != nil {
		t.Fatal(err)
	}
	tasks, err := c.Claim(ctx, wire.ClaimRequest{WorkerID: "raw", Max: 1, WaitMs: 2000, LeaseMs: wire.LeaseMsMin})
	if err != nil || len(tasks) != 1 {
		t.Fatalf("claim: %v %v", tasks, err)
	}
	task := tasks[0]
	time.Sleep(time.Duration(3*wire.LeaseMsMin) * time.Millisecond) // the lease expired
	res, err := c.ReportExecutionUsage(ctx, task.ExecutionID, wire.ExecutionUsageReport{
		LeaseID: task.LeaseID, Epoch: task.Epoch, Dimension: "tokens", Delta: 3, DedupKey: "late"})
	b, gerr := c.GetBudget(ctx, "default/tokens")
	if gerr != nil {
		t.Fatal(gerr)
	}
	if err == nil {
		t.Fatalf("usage from a lease that expired %v ago was accepted: %+v (budget used %d); want 409 stale_lease, nothing counted",
			time.Duration(2*wire.LeaseMsMin)*time.Millisecond, res, b.Dimensions[0].Used)
	}
	ae := apiErr(t, err)
	if ae.Status != http.StatusConflict || ae.Code != wire.CodeStaleLease || b.Dimensions[0].Used != 0 {
		t.Fatalf("expired lease: %v, used %d; want 409 stale_lease and nothing counted", err, b.Dimensions[0].Used)
	}
	if ae.Details["reason"] != "lease_expired" || ae.Details["state"] != "waiting" {
		t.Errorf("details %v, want reason lease_expired and state waiting (the expiry applied)", ae.Details)
	}
	ex, err := c.GetExecution(ctx, task.ExecutionID)
	if err != nil {
		t.Fatal(err)
	}
	if ex.State != "waiting" {
		t.Errorf("execution %s after the refused report, want waiting (reclaimed, as the lease-expiry scanner would)", ex.State)
	}
}
