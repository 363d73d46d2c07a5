package scheduler_test

import (
	"context"
	"testing"
	"time"

	"github.com/flowfabric/ff/runtime/scheduler"
	"github.com/flowfabric/ff/runtime/store"
)

// Quota-denied work at the head of a lane does not hide the work behind
// it: the claim that blocks it claims again (the scheduler took the empty
// claim for an empty partition until the next resync).
func TestQuotaDeniedHeadDoesNotHideWorkBehind(t *testing.T) {
	t.Parallel()
	// One partition; no wake-up subscription and a resynchronisation every
	// hour, so that only the claims decide (a wake-up delivered late would
	// hint the partition again).
	fs, sched := newFaultEnv(t, 1, 8)
	e := struct {
		st    *store.Store
		sched *scheduler.Scheduler
	}{fs.Store, sched}
	ctx := context.Background()
	if _, err := e.st.UpsertQuota(ctx, store.QuotaSpec{ID: "default/q", Concurrency: 1}); err != nil {
		t.Fatal(err)
	}
	// The one slot is held (an admission of another execution).
	if r, err := e.st.AdmitQuota(ctx, "default/q", store.Admitted{
		ExecutionID: "0.00000000-0000-4000-8000-000000000001", Attempt: 1, Token: "held"}); err != nil || !r.Admitted {
		t.Fatalf("AdmitQuota = %+v, %v", r, err)
	}
	limited, _, err := e.st.CreateExecution(ctx, store.CreateRequest{Kind: "k", Lane: "qh", Quotas: []string{"q"}})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Millisecond) // the unlimited one is younger: behind in line
	free, _, err := e.st.CreateExecution(ctx, store.CreateRequest{Kind: "k", Lane: "qh"})
	if err != nil {
		t.Fatal(err)
	}
	grants, err := e.sched.Claim(ctx, req("qh", 1, 1500*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if x, _ := e.st.GetExecution(ctx, limited.ID); x.State.BlockingReason != store.WaitingForQuota {
		t.Fatalf("the quota-limited execution is %+v, want blocked for its quota", x.State)
	}
	if len(grants) != 1 || grants[0].ExecutionID != free.ID {
		ids := []store.ExecutionID{}
		for _, g := range grants {
			ids = append(ids, g.ExecutionID)
		}
		t.Fatalf("a 1.5 s claim granted %v; want the eligible unlimited execution %s behind the quota-denied one", ids, free.ID)
	}
}
