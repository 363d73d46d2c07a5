package store

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/valkey-io/valkey-go"
)

// breachIDs returns the budget ids of list.
func breachIDs(list []BudgetBreach) []string {
	var out []string
	for _, b := range list {
		out = append(out, b.BudgetID)
	}
	return out
}

// Claims are made with the budgets at a hard limit that can count against
// what they may grant (ClaimBreaches): every shared budget's, and a
// run-scoped budget's only while its run is running. A run that ended
// keeps its budget's breach (a replay runs it again under it: the breach
// is back in the claims' set as soon as it runs); retention deleting the
// run deletes its run-scoped budgets, breach and all. The version of the
// breached hashes (BreachVersion) moves whenever a budget reaches or
// leaves its hard limit, and not when a report only rewrites the usage of
// one at its limit.
func TestClaimBreachesFollowRuns(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *Config) { c.FlowPartitions = 1 })
	version := func() string {
		t.Helper()
		v, err := e.s.BreachVersion(e.ctx)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	claimSet := func() BreachSet {
		t.Helper()
		set, err := e.s.ClaimBreaches(e.ctx)
		if err != nil {
			t.Fatal(err)
		}
		return set
	}
	r, _, err := e.s.StageFlow(e.ctx, StageRequest{Flow: budgetFlow(), Input: []byte(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	shared, runBudget := BudgetID("default", "daily"), RunBudgetID("default", "per_run", r.ID)
	v0 := version()
	for _, id := range []string{shared, runBudget} {
		if _, err := e.s.ReportUsage(e.ctx, id, "tokens", 1000, ""); err != nil {
			t.Fatal(err)
		}
	}
	v1 := version()
	if v1 == v0 {
		t.Fatal("two budgets reached their hard limit and the version did not move")
	}
	if _, err := e.s.ReportUsage(e.ctx, runBudget, "tokens", 5, ""); err != nil {
		t.Fatal(err)
	}
	set := claimSet()
	if v := version(); v != v1 || set.Version != v1 {
		t.Fatalf("a report past the limit moved the version: %q -> %q (set read at %q)", v1, v, set.Version)
	}
	if got, want := breachIDs(set.Breaches), []string{shared, runBudget}; !slices.Equal(got, want) {
		t.Fatalf("claims' breaches with the run running: %v, want %v", got, want)
	}
	if set.Breaches[1].Used != 1005 {
		t.Fatalf("breach of the run budget says %d used, want 1005", set.Breaches[1].Used)
	}

	if _, err := e.s.CancelRun(e.ctx, r.ID, "stop"); err != nil {
		t.Fatal(err)
	}
	if got, want := breachIDs(claimSet().Breaches), []string{shared}; !slices.Equal(got, want) {
		t.Fatalf("claims' breaches once the run ended: %v, want %v", got, want)
	}
	if all, err := e.s.BreachedBudgets(e.ctx); err != nil || !slices.Equal(breachIDs(all), []string{shared, runBudget}) {
		t.Fatalf("BreachedBudgets once the run ended: %v, %v; want both (a replay runs it again under its budget)", breachIDs(all), err)
	}
	if _, err := e.s.ReplayRun(e.ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	if got, want := breachIDs(claimSet().Breaches), []string{shared, runBudget}; !slices.Equal(got, want) {
		t.Fatalf("claims' breaches once the run was replayed: %v, want %v", got, want)
	}
	// Its member is blocked by the run's budget, as before it ended.
	e.claimAllBudgeted(worker1)
	if _, err := e.s.CancelRun(e.ctx, r.ID, "stop"); err != nil {
		t.Fatal(err)
	}

	v2 := version()
	time.Sleep(5 * time.Millisecond)
	e.purgeAll(ScanLimitMax)
	if _, err := e.s.GetRun(e.ctx, r.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("run after retention: %v, want deleted", err)
	}
	if _, err := e.s.GetBudget(e.ctx, runBudget); !errors.Is(err, ErrNotFound) {
		t.Fatalf("run budget after retention deleted its run: %v, want deleted", err)
	}
	if all, err := e.s.BreachedBudgets(e.ctx); err != nil || !slices.Equal(breachIDs(all), []string{shared}) {
		t.Fatalf("BreachedBudgets once the run was deleted: %v, %v; want the shared one", breachIDs(all), err)
	}
	if version() == v2 {
		t.Fatal("the deleted run's budget left the breached hash and the version did not move")
	}
	if b, err := e.s.GetBudget(e.ctx, shared); err != nil || !b.HardLimited {
		t.Fatalf("shared budget after retention: %+v, %v; want kept, at its limit", b, err)
	}
	idx := e.s.k.budgetIndex(e.s.budgetPart(runBudget))
	if err := e.c.Do(e.ctx, e.c.B().Zscore().Key(idx).Member(runBudget).Build()).Error(); !valkey.IsValkeyNil(err) {
		t.Fatalf("the deleted run's budget in its partition's index: %v, want no entry", err)
	}
}

// claimAllBudgeted claims with the claims' breaches and fails unless
// nothing is granted and the run's member is blocked by a budget.
func (e *env) claimAllBudgeted(w WorkerIdentity) {
	e.t.Helper()
	set, err := e.s.ClaimBreaches(e.ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	g, err := e.s.ClaimAdmitted(e.ctx, ClaimRequest{Partition: 0, Worker: w, Lanes: []string{"default"}, Max: 10,
		LeaseTTL: time.Minute, BreachedBudgets: set.Breaches})
	if err != nil || len(g) != 0 {
		e.t.Fatalf("claim under the run's budget at its limit: %v, %v; want nothing granted", grantIDs(g), err)
	}
}
