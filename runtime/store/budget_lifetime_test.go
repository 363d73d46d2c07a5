package store

import (
	"testing"
	"time"
)

// A run-scoped budget goes away RunBudgetTTL after its run stops using it
// (nothing else deletes it: retention does not). Scheduled resets do not
// renew its lifetime; were they to, a run-scoped budget declared with
// `reset D` (D < RunBudgetTTL) would never expire: every run would leave a
// definition, a usage hash and a resets entry behind forever.
func TestRunBudgetLifetimeNotRenewedByResets(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	x := e.create(CreateRequest{}) // any valid id serves as the run id
	id := RunBudgetID("default", "per_run", RunID(x.ID))
	if _, err := e.s.UpsertBudget(e.ctx, BudgetSpec{ID: id, Scope: "run", ResetInterval: 50 * time.Millisecond,
		Dimensions: []BudgetDimension{{Name: "n", Hard: 10}}}); err != nil {
		t.Fatal(err)
	}
	key := e.s.k.budget(e.s.budgetPart(id), id)
	pttl := func() int64 {
		n, err := e.c.Do(e.ctx, e.c.B().Pttl().Key(key).Build()).AsInt64()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	first := pttl()
	time.Sleep(300 * time.Millisecond) // the run is over: nobody upserts or reports any more
	resets := 0
	waitUntil(t, 5*time.Second, "scheduled resets", func() bool {
		for m := range e.s.BudgetPartitions() {
			r, err := e.s.ResetDueBudgets(e.ctx, m, 10)
			if err != nil {
				t.Fatal(err)
			}
			resets += r.Processed
		}
		return resets > 0
	})
	if after := pttl(); after > first-250 {
		t.Fatalf("a scheduled reset renewed the run-scoped budget's lifetime (pttl %d ms, was %d ms 300 ms earlier): "+
			"with a reset interval below %v it never expires", after, first, RunBudgetTTL)
	}
	// A report renews it: the run still uses its budget.
	if _, err := e.s.ReportUsage(e.ctx, id, "n", 1, ""); err != nil {
		t.Fatal(err)
	}
	if got := pttl(); got < RunBudgetTTL.Milliseconds()-5000 {
		t.Fatalf("pttl %d ms after a report, want about %d", got, RunBudgetTTL.Milliseconds())
	}
}
