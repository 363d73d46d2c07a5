package store

import (
	"testing"
	"time"

	"github.com/flowfabric/ff/compiler/plan"
)

// The breached entry, and so the detail of what it blocks, says the usage
// as it is after every report at or past the hard limit (it kept the
// usage of the report that crossed).
func TestBreachedFollowsUsage(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	if _, err := e.s.UpsertBudget(e.ctx, BudgetSpec{ID: "default/tok", Dimensions: []BudgetDimension{{Name: "tokens", Hard: 10}}}); err != nil {
		t.Fatal(err)
	}
	if r, err := e.s.ReportUsage(e.ctx, "default/tok", "tokens", 10, ""); err != nil || r.Status != UsageHardBreach {
		t.Fatalf("ReportUsage = %+v, %v", r, err)
	}
	if r, err := e.s.ReportUsage(e.ctx, "default/tok", "tokens", 5, ""); err != nil || r.Used != 15 {
		t.Fatalf("ReportUsage past the limit = %+v, %v", r, err)
	}
	if b := e.budget("default/tok"); b.Dimensions[0].Used != 15 {
		t.Fatalf("GetBudget used %d, want 15", b.Dimensions[0].Used)
	}
	x := e.create(CreateRequest{Budgets: []string{"tok"}})
	e.claimAdm(worker1, 1, time.Minute)
	got := e.wantState(x.ID, StateBlocked).State.BlockingDetail
	if want := "budget default/tok: tokens at hard limit (15 of 10)"; got != want {
		t.Fatalf("blocked detail %q, want %q (GetBudget says 15 used)", got, want)
	}
}

// Two schedulers admit the same attempt: the one denied by the other's
// slot for that very attempt leaves the candidate eligible (contended),
// and the other's claim grants it (it was blocked with nothing running
// until an unblock tick).
func TestSecondSchedulerDoesNotBlockAdmittedCandidate(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *Config) { c.FlowPartitions = 1 })
	if _, err := e.s.UpsertQuota(e.ctx, QuotaSpec{ID: "default/one", Concurrency: 1}); err != nil {
		t.Fatal(err)
	}
	x := e.create(CreateRequest{Quotas: []string{"one"}})
	// Scheduler B: its first claim returned x as a candidate, and it admits
	// x's first attempt.
	b := Admitted{ExecutionID: x.ID, Attempt: 1, Token: "schedB"}
	if r, err := e.s.AdmitQuota(e.ctx, "default/one", b); err != nil || !r.Admitted {
		t.Fatalf("AdmitQuota = %+v, %v", r, err)
	}
	// Scheduler A runs its whole grant cycle meanwhile.
	ga, err := e.s.ClaimAdmitted(e.ctx, ClaimRequest{Partition: 0, Lanes: []string{"default"}, Worker: worker1, Max: 1, LeaseTTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	// Scheduler B's second claim, with its admission.
	gb, err := e.s.Claim(e.ctx, ClaimRequest{Partition: 0, Lanes: []string{"default"}, Worker: worker2, Max: 1, LeaseTTL: time.Minute,
		Admitted: []Admitted{b}})
	if err != nil {
		t.Fatal(err)
	}
	if len(gb) == 0 {
		if err := e.s.ReleaseQuota(e.ctx, "default/one", b, true); err != nil {
			t.Fatal(err)
		}
	}
	if len(ga)+len(gb) != 1 {
		st := e.get(x.ID).State
		t.Fatalf("granted %d by A and %d by B; x is %s (%s: %s) with nothing running under the cap",
			len(ga), len(gb), st.Public, st.BlockingReason, st.BlockingDetail)
	}
}

// A run stopped by its run-scoped budget does not start again, without
// limits, when the budget would expire: the unblock pass keeps the budget
// of blocked members alive, and a member whose run budget is gone stays
// blocked (its breached entry was dropped with the budget, and the member
// was unblocked and granted).
func TestRunBudgetExpiryDoesNotFreeBlockedRun(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *Config) { c.FlowPartitions = 1 })
	f := flowOf("x", execs("a", "b"), "a->b")
	f.Budgets = []string{"per_run"}
	f.BudgetDefs = []plan.Budget{{Name: "per_run", Dimensions: []plan.Dimension{{Name: "tokens", Hard: 10}},
		OnHardLimit: plan.OnHardLimitBlock, Scope: plan.ScopeRun}}
	r, _, err := e.s.StageFlow(e.ctx, StageRequest{Flow: f, Input: []byte(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	a, b := r.Nodes[0].ExecutionID, r.Nodes[1].ExecutionID
	g := e.claimAdm(worker1, 1, time.Minute)
	if len(g) != 1 || g[0].ExecutionID != a {
		t.Fatalf("granted %v", grantIDs(g))
	}
	if res, err := e.s.ReportAttemptUsage(e.ctx, g[0].Lease, "tokens", 10, "k1"); err != nil || len(res) != 1 || res[0].Status != UsageHardBreach {
		t.Fatalf("ReportAttemptUsage = %+v, %v", res, err)
	}
	if err := e.s.Complete(e.ctx, g[0].Lease, []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	if g := e.claimAdm(worker1, 1, time.Minute); len(g) != 0 {
		t.Fatalf("granted %v past the run's hard limit", grantIDs(g))
	}
	e.wantState(b, StateBlocked)

	// Seven days later: nobody reported or upserted (the run is blocked).
	id := RunBudgetID("default", "per_run", r.ID)
	m := e.s.budgetPart(id)
	for _, k := range []string{e.s.k.budget(m, id), e.s.k.budget(m, id) + ":usage"} {
		if err := e.c.Do(e.ctx, e.c.B().Pexpire().Key(k).Milliseconds(1).Build()).Error(); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(10 * time.Millisecond)
	if _, err := e.s.ResetDueBudgets(e.ctx, m, 10); err != nil { // the budget_reset scanner
		t.Fatal(err)
	}
	e.unblockAll() // the unblock scanner
	if g := e.claimAdm(worker1, 1, time.Minute); len(g) != 0 {
		res, _ := e.s.ReportAttemptUsage(e.ctx, g[0].Lease, "tokens", 1000, "k2")
		t.Fatalf("the member blocked by its run's budget was granted once the budget expired; its usage counts against %d budgets", len(res))
	}
}

// A rate raised while work waits for it is noticed within PauseRecheck:
// every quota recheck is cut to it (the blocked entries waited until the
// window would have slid, up to an hour here).
func TestRaisedRateUnblocks(t *testing.T) {
	t.Parallel()
	const recheck = 100 * time.Millisecond
	e := newEnv(t, func(c *Config) { c.FlowPartitions = 1; c.PauseRecheck = recheck })
	if _, err := e.s.UpsertQuota(e.ctx, QuotaSpec{ID: "default/hourly", Rate: 1, Window: time.Hour}); err != nil {
		t.Fatal(err)
	}
	e.create(CreateRequest{Quotas: []string{"hourly"}})
	if g := e.claimAdm(worker1, 1, time.Minute); len(g) != 1 {
		t.Fatalf("granted %d, want the first", len(g))
	}
	x := e.create(CreateRequest{Quotas: []string{"hourly"}})
	if g := e.claimAdm(worker1, 1, time.Minute); len(g) != 0 {
		t.Fatalf("granted %v past the rate", grantIDs(g))
	}
	e.wantState(x.ID, StateBlocked)
	// The operator raises the rate: the quota has room for 99 more now.
	if _, err := e.s.UpsertQuota(e.ctx, QuotaSpec{ID: "default/hourly", Rate: 100, Window: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if q := e.quota("default/hourly"); q.Subjects[0].InWindow != 1 {
		t.Fatalf("window count %d", q.Subjects[0].InWindow)
	}
	time.Sleep(recheck + 20*time.Millisecond) // rechecked within PauseRecheck, not an hour later
	e.unblockAll()
	if g := e.claimAdm(worker1, 1, time.Minute); len(g) != 1 || g[0].ExecutionID != x.ID {
		st := e.get(x.ID).State
		t.Fatalf("after raising the rate to 100/h (1 used), the blocked execution is %s (%s) past PauseRecheck",
			st.Public, st.BlockingDetail)
	}
}

// A concurrency denial has no retry after (jitter spreads rate and pause
// denials only): with jitter_ms of an hour, the blocked execution was not
// looked at again for up to an hour after the slot was freed.
func TestConcurrencyDenialNotDelayedByJitter(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *Config) { c.FlowPartitions = 1 })
	if _, err := e.s.UpsertQuota(e.ctx, QuotaSpec{ID: "default/one", Concurrency: 1, Jitter: time.Hour}); err != nil {
		t.Fatal(err)
	}
	e.create(CreateRequest{Quotas: []string{"one"}})
	running := e.claimAdm(worker1, 1, time.Minute)
	if len(running) != 1 {
		t.Fatalf("granted %d", len(running))
	}
	x := e.create(CreateRequest{Quotas: []string{"one"}})
	if g := e.claimAdm(worker1, 1, time.Minute); len(g) != 0 {
		t.Fatalf("granted %v past the cap", grantIDs(g))
	}
	e.wantState(x.ID, StateBlocked)
	if err := e.s.Complete(e.ctx, running[0].Lease, nil); err != nil {
		t.Fatal(err)
	}
	e.drain()
	if q := e.quota("default/one"); q.Subjects[0].Active != 0 {
		t.Fatalf("active %d after the release", q.Subjects[0].Active)
	}
	if n := e.unblockAll(); n != 1 {
		st := e.get(x.ID).State
		t.Fatalf("unblocked %d with the slot free; the execution stays %s (%s) until a random share of the hour of jitter", n, st.Public, st.BlockingDetail)
	}
}
