package store

import (
	"slices"
	"testing"
)

// A claim of partition p is sent the shared budgets at their limit and
// the run-scoped ones of runs on p only.
func TestBreachedOn(t *testing.T) {
	list := []BudgetBreach{
		{BudgetID: "default/shared"},
		{BudgetID: RunBudgetID("default", "llm", RunID(makeID(0, "0b0b0b0b-0000-4000-8000-000000000000")))},
		{BudgetID: RunBudgetID("default", "llm", RunID(makeID(3, "0b0b0b0b-0000-4000-8000-000000000000")))},
		{BudgetID: "default/odd@not-a-run"}, // unreadable: kept
	}
	ids := func(bs []BudgetBreach) []string {
		var out []string
		for _, b := range bs {
			out = append(out, b.BudgetID)
		}
		return out
	}
	if got, want := ids(breachedOn(3, list)), []string{list[0].BudgetID, list[2].BudgetID, list[3].BudgetID}; !slices.Equal(got, want) {
		t.Fatalf("breachedOn(3) = %v, want %v", got, want)
	}
	if got, want := ids(breachedOn(1, list)), []string{list[0].BudgetID, list[3].BudgetID}; !slices.Equal(got, want) {
		t.Fatalf("breachedOn(1) = %v, want %v", got, want)
	}
}
