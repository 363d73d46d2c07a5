package store

import (
	"testing"
	"time"
)

// An upsert that repeats a budget's or quota's definition (a server start
// declaring it again) leaves updated_at alone; one that changes it moves
// it.
func TestUpsertRepeatKeepsUpdatedAt(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	pause := func() { time.Sleep(5 * time.Millisecond) } // timestamps are ms

	bspec := BudgetSpec{ID: "default/llm", ResetInterval: time.Hour,
		Dimensions: []BudgetDimension{{Name: "tokens", Hard: 100, Soft: 80}, {Name: "usd", Hard: 5}}}
	if _, err := e.s.UpsertBudget(e.ctx, bspec); err != nil {
		t.Fatal(err)
	}
	first := e.budget(bspec.ID).UpdatedAt
	pause()
	bspec.Dimensions = []BudgetDimension{bspec.Dimensions[1], bspec.Dimensions[0]} // the same, in another order
	if created, err := e.s.UpsertBudget(e.ctx, bspec); err != nil || created {
		t.Fatalf("repeated UpsertBudget = %v, %v", created, err)
	}
	if got := e.budget(bspec.ID); !got.UpdatedAt.Equal(first) || got.NextResetAt.IsZero() {
		t.Fatalf("after a repeat: updated_at %v (was %v), next reset %v", got.UpdatedAt, first, got.NextResetAt)
	}
	pause()
	bspec.Dimensions[0].Hard = 6 // usd
	if _, err := e.s.UpsertBudget(e.ctx, bspec); err != nil {
		t.Fatal(err)
	}
	if got := e.budget(bspec.ID); !got.UpdatedAt.After(first) || got.Dimensions[0] != (BudgetUsage{Dimension: "usd", Hard: 6}) {
		t.Fatalf("after a change: updated_at %v (was %v), dimensions %+v", got.UpdatedAt, first, got.Dimensions)
	}

	qspec := QuotaSpec{ID: "default/api", Rate: 5, Window: time.Second, Concurrency: 2}
	if _, err := e.s.UpsertQuota(e.ctx, qspec); err != nil {
		t.Fatal(err)
	}
	qfirst := e.quota(qspec.ID).UpdatedAt
	pause()
	if created, err := e.s.UpsertQuota(e.ctx, qspec); err != nil || created {
		t.Fatalf("repeated UpsertQuota = %v, %v", created, err)
	}
	if got := e.quota(qspec.ID).UpdatedAt; !got.Equal(qfirst) {
		t.Fatalf("quota updated_at after a repeat = %v, want %v", got, qfirst)
	}
	pause()
	qspec.Concurrency = 3
	if _, err := e.s.UpsertQuota(e.ctx, qspec); err != nil {
		t.Fatal(err)
	}
	if got := e.quota(qspec.ID); !got.UpdatedAt.After(qfirst) || got.Concurrency != 3 {
		t.Fatalf("quota after a change: updated_at %v (was %v), concurrency %d", got.UpdatedAt, qfirst, got.Concurrency)
	}
}
