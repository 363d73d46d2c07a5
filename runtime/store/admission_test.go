package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flowfabric/ff/compiler/plan"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// claimAdm runs the admission-aware claim over every partition with the
// current breached budgets, as the scheduler does.
func (e *env) claimAdm(w WorkerIdentity, max int, ttl time.Duration) []Grant {
	e.t.Helper()
	breached, err := e.s.BreachedBudgets(e.ctx)
	if err != nil {
		e.t.Fatalf("BreachedBudgets: %v", err)
	}
	var out []Grant
	for p := range e.s.FlowPartitions() {
		if len(out) >= max {
			break
		}
		g, err := e.s.ClaimAdmitted(e.ctx, ClaimRequest{Partition: p, Lanes: []string{"default"}, Worker: w,
			Max: max - len(out), LeaseTTL: ttl, BreachedBudgets: breached})
		if err != nil {
			e.t.Fatalf("ClaimAdmitted: %v", err)
		}
		out = append(out, g...)
	}
	for _, g := range out {
		e.check(g.ExecutionID)
	}
	return out
}

// unblockAll runs the admission unblock over every partition, as one tick
// of the unblock scanner does (one quota room for the pass, and the env's
// cursor, kept across passes).
func (e *env) unblockAll() int {
	e.t.Helper()
	breached, err := e.s.BreachedBudgets(e.ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	n := 0
	room := &QuotaRoom{}
	for p := range e.s.FlowPartitions() {
		res, err := e.s.UnblockAdmission(e.ctx, AdmissionUnblock{Partition: p, Limit: 100, Breached: breached, BudgetsKnown: true,
			Room: room, Cursor: &e.cursor})
		if err != nil {
			e.t.Fatalf("UnblockAdmission: %v", err)
		}
		n += res.Processed
	}
	return n
}

// drain drains every partition's quota release queue.
func (e *env) drain() {
	e.t.Helper()
	for p := range e.s.FlowPartitions() {
		if _, err := e.s.DrainQuotaReleases(e.ctx, p, 100); err != nil {
			e.t.Fatalf("DrainQuotaReleases: %v", err)
		}
	}
}

func (e *env) quota(id string) *Quota {
	e.t.Helper()
	q, err := e.s.GetQuota(e.ctx, id)
	if err != nil {
		e.t.Fatalf("GetQuota(%s): %v", id, err)
	}
	return q
}

func (e *env) budget(id string) *Budget {
	e.t.Helper()
	b, err := e.s.GetBudget(e.ctx, id)
	if err != nil {
		e.t.Fatalf("GetBudget(%s): %v", id, err)
	}
	return b
}

func TestBudgetUpsertGet(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	spec := BudgetSpec{ID: "default/llm", Dimensions: []BudgetDimension{{Name: "tokens", Hard: 100, Soft: 80}, {Name: "usd", Hard: 5}},
		ResetInterval: time.Hour}
	created, err := e.s.UpsertBudget(e.ctx, spec)
	if err != nil || !created {
		t.Fatalf("UpsertBudget = %v, %v", created, err)
	}
	if _, err := e.s.ReportUsage(e.ctx, "default/llm", "tokens", 30, ""); err != nil {
		t.Fatal(err)
	}
	// Updating keeps usage; a dropped dimension goes.
	spec.Dimensions = []BudgetDimension{{Name: "tokens", Hard: 200}}
	spec.OnHardLimit = plan.OnHardLimitFail
	if created, err := e.s.UpsertBudget(e.ctx, spec); err != nil || created {
		t.Fatalf("second UpsertBudget = %v, %v", created, err)
	}
	b := e.budget("default/llm")
	want := &Budget{ID: "default/llm", Scope: plan.ScopeShared, OnHardLimit: plan.OnHardLimitFail, ResetInterval: time.Hour,
		Dimensions: []BudgetUsage{{Dimension: "tokens", Used: 30, Hard: 200}}}
	if diff := cmp.Diff(want, b, cmpopts.IgnoreFields(Budget{}, "NextResetAt", "CreatedAt", "UpdatedAt")); diff != "" {
		t.Fatalf("GetBudget (-want +got):\n%s", diff)
	}
	if b.NextResetAt.Before(time.Now().Add(50*time.Minute)) || b.CreatedAt.IsZero() {
		t.Fatalf("next reset %v created %v", b.NextResetAt, b.CreatedAt)
	}
	if _, err := e.s.GetBudget(e.ctx, "default/none"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("GetBudget of unknown = %v", err)
	}

	for _, tc := range []struct {
		name string
		spec BudgetSpec
	}{
		{"no namespace", BudgetSpec{ID: "llm", Dimensions: []BudgetDimension{{Name: "x", Hard: 1}}}},
		{"bad name", BudgetSpec{ID: "default/a b", Dimensions: []BudgetDimension{{Name: "x", Hard: 1}}}},
		{"bad run", BudgetSpec{ID: "default/a@run", Dimensions: []BudgetDimension{{Name: "x", Hard: 1}}}},
		{"no dimension", BudgetSpec{ID: "default/a"}},
		{"duplicate dimension", BudgetSpec{ID: "default/a", Dimensions: []BudgetDimension{{Name: "x"}, {Name: "x"}}}},
		{"negative", BudgetSpec{ID: "default/a", Dimensions: []BudgetDimension{{Name: "x", Hard: -1}}}},
		{"mode", BudgetSpec{ID: "default/a", Dimensions: []BudgetDimension{{Name: "x"}}, OnHardLimit: "explode"}},
		{"scope", BudgetSpec{ID: "default/a", Dimensions: []BudgetDimension{{Name: "x"}}, Scope: "galaxy"}},
	} {
		if _, err := e.s.UpsertBudget(e.ctx, tc.spec); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: UpsertBudget = %v, want ErrInvalid", tc.name, err)
		}
	}
	if _, err := e.s.GetBudget(e.ctx, "default/a"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("an invalid upsert wrote a budget: %v", err)
	}
}

func TestBudgetUsageDedupAndBreaches(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	if _, err := e.s.UpsertBudget(e.ctx, BudgetSpec{ID: "default/b", Dimensions: []BudgetDimension{{Name: "tokens", Hard: 100, Soft: 50}}}); err != nil {
		t.Fatal(err)
	}
	type step struct {
		delta int64
		dedup string
	}
	var got []UsageResult
	for _, s := range []step{{30, "r1"}, {30, "r1"}, {30, "r2"}, {30, "r3"}, {30, "r4"}, {0, ""}} {
		r, err := e.s.ReportUsage(e.ctx, "default/b", "tokens", s.delta, s.dedup)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, r)
	}
	u := func(st UsageStatus, used int64) UsageResult {
		return UsageResult{BudgetID: "default/b", Status: st, Used: used, Hard: 100, Soft: 50, OverHard: used >= 100}
	}
	want := []UsageResult{u(UsageApplied, 30), u(UsageDuplicate, 30), u(UsageSoftBreach, 60), u(UsageApplied, 90),
		u(UsageHardBreach, 120), u(UsageApplied, 120)}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("reports (-want +got):\n%s", diff)
	}
	b := e.budget("default/b")
	if b.SoftBreaches != 1 || b.LastSoftBreachDimension != "tokens" || b.LastSoftBreachAt.IsZero() ||
		b.HardBreaches != 1 || !b.HardLimited || b.HardLimitedDimension != "tokens" {
		t.Fatalf("breaches: %+v", b)
	}
	breached, err := e.s.BreachedBudgets(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	wantB := []BudgetBreach{{BudgetID: "default/b", Dimension: "tokens", Used: 120, Hard: 100, OnHardLimit: plan.OnHardLimitBlock}}
	if diff := cmp.Diff(wantB, breached); diff != "" {
		t.Fatalf("BreachedBudgets (-want +got):\n%s", diff)
	}
	// Errors: unknown budget, unknown dimension, negative delta.
	if _, err := e.s.ReportUsage(e.ctx, "default/none", "tokens", 1, ""); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown budget = %v", err)
	}
	if _, err := e.s.ReportUsage(e.ctx, "default/b", "usd", 1, ""); !errors.Is(err, ErrInvalid) {
		t.Errorf("unknown dimension = %v", err)
	}
	if _, err := e.s.ReportUsage(e.ctx, "default/b", "tokens", -1, ""); !errors.Is(err, ErrInvalid) {
		t.Errorf("negative delta = %v", err)
	}
	// Raising the limit clears the hard-limit state at once.
	if _, err := e.s.UpsertBudget(e.ctx, BudgetSpec{ID: "default/b", Dimensions: []BudgetDimension{{Name: "tokens", Hard: 1000, Soft: 50}}}); err != nil {
		t.Fatal(err)
	}
	if breached, _ := e.s.BreachedBudgets(e.ctx); len(breached) != 0 {
		t.Fatalf("still breached after raising: %+v", breached)
	}
}

func TestBudgetHardLimitBlocksAndResetUnblocks(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	if _, err := e.s.UpsertBudget(e.ctx, BudgetSpec{ID: "default/gpu", Dimensions: []BudgetDimension{{Name: "seconds", Hard: 10}},
		ResetInterval: 200 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	a := e.create(CreateRequest{Budgets: []string{"gpu"}})
	if diff := cmp.Diff([]string{"default/gpu"}, a.Budgets); diff != "" {
		t.Fatalf("stored budget refs (-want +got):\n%s", diff)
	}
	if got := e.get(a.ID).Budgets; !cmp.Equal(got, []string{"default/gpu"}) {
		t.Fatalf("record budgets = %v", got)
	}
	g := e.claimAdm(worker1, 1, time.Minute)
	if len(g) != 1 {
		t.Fatalf("granted %v", grantIDs(g))
	}
	// The attempt reports usage through its execution: the budget is now
	// at its hard limit.
	res, err := e.s.ReportExecutionUsage(e.ctx, a.ID, "seconds", 10, "a-1")
	if err != nil || len(res) != 1 || res[0].Status != UsageHardBreach {
		t.Fatalf("ReportExecutionUsage = %+v, %v", res, err)
	}
	if err := e.s.Complete(e.ctx, g[0].Lease, nil); err != nil {
		t.Fatal(err)
	}
	// The rest waits for the budget, with a detail saying which.
	b := e.create(CreateRequest{Budgets: []string{"default/gpu"}})
	free := e.create(CreateRequest{})
	g = e.claimAdm(worker1, 5, time.Minute)
	if diff := cmp.Diff([]ExecutionID{free.ID}, grantIDs(g)); diff != "" {
		t.Fatalf("grants (-want +got):\n%s", diff)
	}
	x := e.wantState(b.ID, StateBlocked)
	if x.State.BlockingReason != WaitingForBudget || x.State.Eligibility != BlockedByBudget ||
		x.State.BlockingDetail != "budget default/gpu: seconds at hard limit (10 of 10)" {
		t.Fatalf("blocked vector %+v", x.State)
	}
	// The scheduled reset (scanner step) clears it; the unblock step
	// promotes it.
	waitUntil(t, 2*time.Second, "scheduled reset", func() bool {
		n := 0
		for m := range e.s.BudgetPartitions() {
			r, err := e.s.ResetDueBudgets(e.ctx, m, 10)
			if err != nil {
				t.Fatal(err)
			}
			n += r.Processed
		}
		return n > 0
	})
	if bud := e.budget("default/gpu"); bud.Dimensions[0].Used != 0 || bud.Resets < 1 || bud.HardLimited {
		t.Fatalf("after reset: %+v", bud)
	}
	if n := e.unblockAll(); n != 1 {
		t.Fatalf("unblocked %d, want 1", n)
	}
	e.wantState(b.ID, StateWaiting)
	if g := e.claimAdm(worker1, 5, time.Minute); len(g) != 1 || g[0].ExecutionID != b.ID {
		t.Fatalf("after reset granted %v", grantIDs(g))
	}

	// Reaching the limit again, then raising it (or an API reset) unblocks.
	if _, err := e.s.ReportUsage(e.ctx, "default/gpu", "seconds", 50, ""); err != nil {
		t.Fatal(err)
	}
	c := e.create(CreateRequest{Budgets: []string{"gpu"}})
	e.claimAdm(worker1, 5, time.Minute)
	e.wantState(c.ID, StateBlocked)
	if n := e.unblockAll(); n != 0 {
		t.Fatalf("unblocked %d while still at the limit", n)
	}
	if _, err := e.s.ResetBudget(e.ctx, "default/gpu"); err != nil {
		t.Fatal(err)
	}
	if n := e.unblockAll(); n != 1 {
		t.Fatalf("unblocked %d after ResetBudget, want 1", n)
	}
	e.wantState(c.ID, StateWaiting)
	e.claimAdm(worker1, 5, time.Minute)

	// Raising the hard limit unblocks too; usage is kept.
	if _, err := e.s.ReportUsage(e.ctx, "default/gpu", "seconds", 10, ""); err != nil {
		t.Fatal(err)
	}
	d := e.create(CreateRequest{Budgets: []string{"gpu"}})
	e.claimAdm(worker1, 5, time.Minute)
	e.wantState(d.ID, StateBlocked)
	if _, err := e.s.UpsertBudget(e.ctx, BudgetSpec{ID: "default/gpu", Dimensions: []BudgetDimension{{Name: "seconds", Hard: 20}}}); err != nil {
		t.Fatal(err)
	}
	if n := e.unblockAll(); n != 1 {
		t.Fatalf("unblocked %d after raising the limit, want 1", n)
	}
	e.wantState(d.ID, StateWaiting)
	if bud := e.budget("default/gpu"); bud.Dimensions[0].Used != 10 || bud.ResetInterval != 0 || !bud.NextResetAt.IsZero() {
		t.Fatalf("after raising: %+v", bud)
	}
}

func TestBudgetOnHardLimitFail(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	if _, err := e.s.UpsertBudget(e.ctx, BudgetSpec{ID: "default/strict", Dimensions: []BudgetDimension{{Name: "calls", Hard: 1}},
		OnHardLimit: plan.OnHardLimitFail}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.s.ReportUsage(e.ctx, "default/strict", "calls", 1, ""); err != nil {
		t.Fatal(err)
	}
	x := e.create(CreateRequest{Budgets: []string{"strict"}})
	if g := e.claimAdm(worker1, 5, time.Minute); len(g) != 0 {
		t.Fatalf("granted %v", grantIDs(g))
	}
	f := e.wantState(x.ID, StateFailed)
	if f.FailureReason != "budget_exceeded: budget default/strict: calls at hard limit (1 of 1)" || f.State.AttemptState != AttemptNone {
		t.Fatalf("failed: %q %+v", f.FailureReason, f.State)
	}
}

func TestRunScopedBudgetPerRun(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	f := flowOf("x", execs("a", "b"), "a->b")
	f.Budgets = []string{"tokens_per_run", "daily"}
	f.BudgetDefs = []plan.Budget{
		{Name: "daily", Dimensions: []plan.Dimension{{Name: "tokens", Hard: 1000}}, OnHardLimit: plan.OnHardLimitBlock, Scope: plan.ScopeShared},
		{Name: "tokens_per_run", Dimensions: []plan.Dimension{{Name: "tokens", Hard: 10}}, OnHardLimit: plan.OnHardLimitBlock, Scope: plan.ScopeRun},
	}
	var runs []*Run
	for range 2 {
		r, _, err := e.s.StageFlow(e.ctx, StageRequest{Flow: f, Input: []byte(`{}`)})
		if err != nil {
			t.Fatal(err)
		}
		runs = append(runs, r)
	}
	for _, r := range runs {
		want := []string{RunBudgetID("default", "tokens_per_run", r.ID), "default/daily"}
		for _, n := range r.Nodes {
			if got := e.get(n.ExecutionID).Budgets; !cmp.Equal(want, got) {
				t.Fatalf("member %s budgets = %v, want %v", n.Name, got, want)
			}
		}
		if b := e.budget(want[0]); b.Scope != plan.ScopeRun || b.Dimensions[0].Hard != 10 {
			t.Fatalf("run budget %+v", b)
		}
	}
	// Usage of run 0's members counts against run 0's budget and the
	// shared one only.
	root0 := runs[0].Nodes[0].ExecutionID
	res, err := e.s.ReportExecutionUsage(e.ctx, root0, "tokens", 10, "")
	if err != nil || len(res) != 2 {
		t.Fatalf("ReportExecutionUsage = %+v, %v", res, err)
	}
	used := func(id string) int64 { return e.budget(id).Dimensions[0].Used }
	if u0, u1, d := used(RunBudgetID("default", "tokens_per_run", runs[0].ID)), used(RunBudgetID("default", "tokens_per_run", runs[1].ID)), used("default/daily"); u0 != 10 || u1 != 0 || d != 10 {
		t.Fatalf("usage run0 %d run1 %d shared %d", u0, u1, d)
	}
	// Run 0's root is blocked, run 1's is granted.
	g := e.claimAdm(worker1, 5, time.Minute)
	if diff := cmp.Diff([]ExecutionID{runs[1].Nodes[0].ExecutionID}, grantIDs(g)); diff != "" {
		t.Fatalf("grants (-want +got):\n%s", diff)
	}
	e.wantState(root0, StateBlocked)

	// Run-scoped budgets expire (RunBudgetTTL after their last use); a
	// shared one does not. An expired one leaves the breached list at the
	// next reset scan.
	runBudget := RunBudgetID("default", "tokens_per_run", runs[0].ID)
	m := e.s.budgetPart(runBudget)
	pttl := func(key string) int64 {
		n, err := e.c.Do(e.ctx, e.c.B().Pttl().Key(key).Build()).AsInt64()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if ttl := pttl(e.s.k.budget(m, runBudget)); ttl <= 0 || ttl > RunBudgetTTL.Milliseconds() {
		t.Fatalf("run budget PTTL %d", ttl)
	}
	if ttl := pttl(e.s.k.budget(m, runBudget) + ":usage"); ttl <= 0 {
		t.Fatalf("run budget usage PTTL %d", ttl)
	}
	if ttl := pttl(e.s.k.budget(e.s.budgetPart("default/daily"), "default/daily")); ttl != -1 {
		t.Fatalf("shared budget PTTL %d", ttl)
	}
	if err := e.c.Do(e.ctx, e.c.B().Del().Key(e.s.k.budget(m, runBudget), e.s.k.budget(m, runBudget)+":usage").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	if _, err := e.s.ResetDueBudgets(e.ctx, m, 10); err != nil {
		t.Fatal(err)
	}
	if breached, _ := e.s.BreachedBudgets(e.ctx); len(breached) != 0 {
		t.Fatalf("expired budget still breached: %+v", breached)
	}

	// A name without a definition is refused and stages nothing.
	bad := flowOf("y", execs("a"))
	bad.Budgets = []string{"nope"}
	if _, _, err := e.s.StageFlow(e.ctx, StageRequest{Flow: bad}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("undeclared budget = %v", err)
	}
}

func TestQuotaUpsertGetAndWindow(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	created, err := e.s.UpsertQuota(e.ctx, QuotaSpec{ID: "default/api", Rate: 5, Window: 300 * time.Millisecond})
	if err != nil || !created {
		t.Fatalf("UpsertQuota = %v, %v", created, err)
	}
	id := func(i int) ExecutionID { return ExecutionID(fmt.Sprintf("0.%08d-0000-4000-8000-000000000000", i)) }
	admitted := 0
	for i := range 10 {
		r, err := e.s.AdmitQuota(e.ctx, "default/api", Admitted{ExecutionID: id(i), Attempt: 1})
		if err != nil {
			t.Fatal(err)
		}
		if r.Admitted {
			admitted++
		} else if r.Cause != QuotaDeniedRate || r.RetryAfter <= 0 || r.RetryAfter > 300*time.Millisecond {
			t.Fatalf("denial %+v", r)
		}
	}
	if admitted != 5 {
		t.Fatalf("admitted %d of 10 in one window, want 5", admitted)
	}
	// A repeat of an admitted attempt is idempotent.
	if r, err := e.s.AdmitQuota(e.ctx, "default/api", Admitted{ExecutionID: id(0), Attempt: 1}); err != nil || !r.Admitted || r.InWindow != 5 {
		t.Fatalf("repeat = %+v, %v", r, err)
	}
	want := &Quota{ID: "default/api", Rate: 5, Window: 300 * time.Millisecond, Subjects: []QuotaSubject{{InWindow: 5, Active: 5}}}
	if diff := cmp.Diff(want, e.quota("default/api"), cmpopts.IgnoreFields(Quota{}, "CreatedAt", "UpdatedAt")); diff != "" {
		t.Fatalf("GetQuota (-want +got):\n%s", diff)
	}
	// Once the window slid, five more.
	time.Sleep(320 * time.Millisecond)
	admitted = 0
	for i := 10; i < 20; i++ {
		if r, _ := e.s.AdmitQuota(e.ctx, "default/api", Admitted{ExecutionID: id(i), Attempt: 1}); r.Admitted {
			admitted++
		}
	}
	if admitted != 5 {
		t.Fatalf("admitted %d in the second window, want 5", admitted)
	}
	if r, err := e.s.AdmitQuota(e.ctx, "default/none", Admitted{ExecutionID: id(1), Attempt: 1}); err != nil || r.Admitted || r.Cause != QuotaUndefined {
		t.Fatalf("undefined quota = %+v, %v", r, err)
	}
	for _, spec := range []QuotaSpec{{ID: "default/x"}, {ID: "x", Rate: 1}, {ID: "default/x", Rate: -1}, {ID: "default/x", Rate: 1, Key: "a..b"}} {
		if _, err := e.s.UpsertQuota(e.ctx, spec); !errors.Is(err, ErrInvalid) {
			t.Errorf("UpsertQuota(%+v) = %v, want ErrInvalid", spec, err)
		}
	}
}

func TestQuotaConcurrencyCapUnderConcurrentAdmits(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	if _, err := e.s.UpsertQuota(e.ctx, QuotaSpec{ID: "default/c", Concurrency: 3}); err != nil {
		t.Fatal(err)
	}
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for i := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := ExecutionID(fmt.Sprintf("0.%08d-0000-4000-8000-000000000000", i))
			r, err := e.s.AdmitQuota(e.ctx, "default/c", Admitted{ExecutionID: id, Attempt: 1})
			if err != nil {
				t.Error(err)
			}
			if r.Admitted {
				admitted.Add(1)
			} else if r.Cause != QuotaDeniedConcurrency {
				t.Errorf("denial %+v", r)
			}
		}()
	}
	wg.Wait()
	if admitted.Load() != 3 {
		t.Fatalf("admitted %d concurrently, want 3", admitted.Load())
	}
	if q := e.quota("default/c"); q.Subjects[0].Active != 3 {
		t.Fatalf("active %d", q.Subjects[0].Active)
	}
}

// TestConcurrencyCapNeverExceededByWorkers runs 16 workers through the
// admission claim against a quota with a cap of 3 while one worker dies:
// the number of running attempts never exceeds the cap, every execution
// completes exactly once, and no slot is left held.
func TestConcurrencyCapNeverExceededByWorkers(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	if _, err := e.s.UpsertQuota(e.ctx, QuotaSpec{ID: "default/cap", Concurrency: 3}); err != nil {
		t.Fatal(err)
	}
	const n = 40
	for range n {
		e.create(CreateRequest{Quotas: []string{"cap"}})
	}
	var running, peak atomic.Int64
	var completed sync.Map
	var wg sync.WaitGroup
	stop := make(chan struct{})
	// Background: lease expiry, release queue, unblock.
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			for p := range e.s.FlowPartitions() {
				e.s.ExpireLeases(e.ctx, p, 100)
				e.s.DrainQuotaReleases(e.ctx, p, 100)
				e.s.UnblockAdmission(e.ctx, AdmissionUnblock{Partition: p, Limit: 100, BudgetsKnown: true})
			}
		}
	}()
	var done atomic.Int64
	for w := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			wi := WorkerIdentity{WorkerID: "w", InstanceID: fmt.Sprintf("w-%d", w), Namespace: "default"}
			deadline := time.Now().Add(20 * time.Second)
			for done.Load() < n && time.Now().Before(deadline) {
				var got []Grant
				for p := range e.s.FlowPartitions() {
					g, err := e.s.ClaimAdmitted(e.ctx, ClaimRequest{Partition: p, Lanes: []string{"default"}, Worker: wi, Max: 1, LeaseTTL: 200 * time.Millisecond})
					if err != nil {
						t.Error(err)
						return
					}
					if got = g; len(got) > 0 {
						break
					}
				}
				if len(got) == 0 {
					time.Sleep(5 * time.Millisecond)
					continue
				}
				r := running.Add(1)
				for {
					pk := peak.Load()
					if r <= pk || peak.CompareAndSwap(pk, r) {
						break
					}
				}
				time.Sleep(2 * time.Millisecond)
				running.Add(-1)
				if w == 0 && got[0].Attempt == 1 {
					continue // worker 0 "dies" on first attempts: its leases expire
				}
				if err := e.s.Complete(e.ctx, got[0].Lease, nil); err != nil {
					if errors.Is(err, ErrStaleLease) {
						continue
					}
					t.Error(err)
					return
				}
				if _, dup := completed.LoadOrStore(got[0].ExecutionID, true); dup {
					t.Errorf("%s completed twice", got[0].ExecutionID)
				}
				done.Add(1)
			}
		}()
	}
	wg.Wait()
	close(stop)
	if done.Load() != n {
		t.Fatalf("completed %d of %d", done.Load(), n)
	}
	if peak.Load() > 3 {
		t.Fatalf("peak running %d exceeds the cap of 3", peak.Load())
	}
	e.drain()
	if q := e.quota("default/cap"); q.Subjects[0].Active != 0 {
		t.Fatalf("%d slots leaked", q.Subjects[0].Active)
	}
}

func TestQuotaReleasedOnEveryEnding(t *testing.T) {
	t.Parallel()
	// scanned ends the attempt by a scanner pass once one is due.
	scanned := func(what string, scan func(s *Store, ctx context.Context, p, limit int) (ScanResult, error)) func(e *env, g Grant) {
		return func(e *env, g Grant) {
			p, _ := g.ExecutionID.Partition()
			waitUntil(e.t, 2*time.Second, what, func() bool {
				r, _ := scan(e.s, e.ctx, p, 10)
				return r.Processed == 1
			})
		}
	}
	for _, tc := range []struct {
		name string
		req  CreateRequest
		end  func(e *env, g Grant)
		want PublicState
	}{
		{"complete", CreateRequest{}, func(e *env, g Grant) { e.s.Complete(e.ctx, g.Lease, nil) }, StateCompleted},
		{"fail", CreateRequest{}, func(e *env, g Grant) { e.s.Fail(e.ctx, g.Lease, "x", false) }, StateFailed},
		{"fail and retry", CreateRequest{Retry: RetryPolicy{Attempts: 2}}, func(e *env, g Grant) { e.s.Fail(e.ctx, g.Lease, "x", true) }, StateWaiting},
		{"cancel", CreateRequest{}, func(e *env, g Grant) { e.s.Cancel(e.ctx, g.ExecutionID, "stop") }, StateCancelled},
		{"revoke", CreateRequest{}, func(e *env, g Grant) { e.s.RevokeLease(e.ctx, g.ExecutionID, "") }, StateWaiting},
		{"lease expiry", CreateRequest{}, scanned("lease expiry", (*Store).ExpireLeases), StateWaiting},
		{"attempt timeout", CreateRequest{AttemptTimeout: 20 * time.Millisecond}, scanned("attempt timeout", (*Store).TimeoutAttempts), StateFailed},
		{"deadline", CreateRequest{Deadline: 100 * time.Millisecond}, scanned("deadline", (*Store).ExpireDeadlines), StateExpired},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			if _, err := e.s.UpsertQuota(e.ctx, QuotaSpec{ID: "default/one", Concurrency: 1}); err != nil {
				t.Fatal(err)
			}
			tc.req.Quotas = []string{"one"}
			x := e.create(tc.req)
			g := e.claimAdm(worker1, 1, 100*time.Millisecond)
			if len(g) != 1 || g[0].ExecutionID != x.ID {
				t.Fatalf("granted %v", grantIDs(g))
			}
			if q := e.quota("default/one"); q.Subjects[0].Active != 1 {
				t.Fatalf("active %d while running", q.Subjects[0].Active)
			}
			tc.end(e, g[0])
			e.wantState(x.ID, tc.want)
			e.drain()
			if q := e.quota("default/one"); q.Subjects[0].Active != 0 {
				t.Fatalf("active %d after %s", q.Subjects[0].Active, tc.name)
			}
			if tc.want == StateWaiting {
				// The next attempt is admitted again.
				if g := e.claimAdm(worker2, 1, time.Minute); len(g) != 1 || g[0].Attempt != 2 {
					t.Fatalf("next attempt granted %+v", g)
				}
			}
		})
	}
}

func TestQuotaBlocksAndUnblocksAndReconciles(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *Config) { c.FlowPartitions = 1 })
	if _, err := e.s.UpsertQuota(e.ctx, QuotaSpec{ID: "default/one", Concurrency: 1}); err != nil {
		t.Fatal(err)
	}
	a := e.create(CreateRequest{Quotas: []string{"one"}})
	b := e.create(CreateRequest{Quotas: []string{"one"}})
	g := e.claimAdm(worker1, 2, time.Minute)
	if len(g) != 1 {
		t.Fatalf("granted %v, want one", grantIDs(g))
	}
	if g[0].ExecutionID == b.ID { // created in the same millisecond: either may go first
		a, b = b, a
	}
	e.wantState(a.ID, StateActive) // holds the one slot
	x := e.wantState(b.ID, StateBlocked)
	if x.State.BlockingReason != WaitingForQuota || x.State.BlockingDetail != "quota default/one: concurrency limit reached (1 running)" {
		t.Fatalf("blocked vector %+v", x.State)
	}
	if n := e.unblockAll(); n != 0 {
		t.Fatalf("unblocked %d while the slot is held", n)
	}
	if err := e.s.Complete(e.ctx, g[0].Lease, nil); err != nil {
		t.Fatal(err)
	}
	e.drain()
	if n := e.unblockAll(); n != 1 {
		t.Fatalf("unblocked %d after the release, want 1", n)
	}
	g = e.claimAdm(worker1, 2, time.Minute)
	if diff := cmp.Diff([]ExecutionID{b.ID}, grantIDs(g)); diff != "" {
		t.Fatalf("grants (-want +got):\n%s", diff)
	}

	// A scheduler that admitted and died before claiming leaks nothing: the
	// reconciler frees the slot of a holder that is not running.
	c := e.create(CreateRequest{Quotas: []string{"one"}})
	if err := e.s.Complete(e.ctx, g[0].Lease, nil); err != nil {
		t.Fatal(err)
	}
	e.drain()
	if r, err := e.s.AdmitQuota(e.ctx, "default/one", Admitted{ExecutionID: c.ID, Attempt: 1, Token: "dead"}); err != nil || !r.Admitted {
		t.Fatalf("AdmitQuota = %+v, %v", r, err)
	}
	// Within the grace period it is left alone; past it, freed.
	total := func(grace time.Duration) int {
		n := 0
		for q := range e.s.QuotaPartitions() {
			r, err := e.s.ReconcileQuotaSlots(e.ctx, q, grace, 100)
			if err != nil {
				t.Fatal(err)
			}
			n += r.Processed
		}
		return n
	}
	if n := total(time.Minute); n != 0 {
		t.Fatalf("reconciled %d within grace", n)
	}
	if n := total(0); n != 1 {
		t.Fatalf("reconciled %d, want the orphan admission freed", n)
	}
	// A running holder is never freed.
	g = e.claimAdm(worker1, 1, time.Minute)
	if len(g) != 1 || g[0].ExecutionID != c.ID {
		t.Fatalf("granted %v", grantIDs(g))
	}
	if n := total(0); n != 0 {
		t.Fatalf("reconciled %d slots of a running attempt", n)
	}
	if q := e.quota("default/one"); q.Subjects[0].Active != 1 {
		t.Fatalf("active %d while running", q.Subjects[0].Active)
	}
	if err := e.s.Complete(e.ctx, g[0].Lease, nil); err != nil {
		t.Fatal(err)
	}
	e.drain()
	if q := e.quota("default/one"); q.Subjects[0].Active != 0 {
		t.Fatalf("active %d after reconcile", q.Subjects[0].Active)
	}
}

func TestKeyedQuotaIsolation(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *Config) { c.FlowPartitions = 1 })
	if _, err := e.s.UpsertQuota(e.ctx, QuotaSpec{ID: "default/per_tenant", Concurrency: 1, Key: "tenant.id"}); err != nil {
		t.Fatal(err)
	}
	mk := func(tenant string) *Execution {
		return e.create(CreateRequest{Quotas: []string{"per_tenant"}, Payload: []byte(`{"tenant":{"id":"` + tenant + `"},"n":1}`)})
	}
	// Tenant A's work is ahead in line; B's one must not wait behind it.
	a1, a2, a3 := mk("a"), mk("a"), mk("a")
	b1 := mk("b")
	if got := e.get(a1.ID).Quotas; !cmp.Equal(got, []string{"default/per_tenant=a"}) {
		t.Fatalf("stored quota subjects %v", got)
	}
	g := e.claimAdm(worker1, 4, time.Minute)
	grantedA := 0
	var blockedA []*Execution
	for _, x := range []*Execution{a1, a2, a3} {
		if slices.Contains(grantIDs(g), x.ID) {
			grantedA++
		} else {
			blockedA = append(blockedA, x)
		}
	}
	if len(g) != 2 || grantedA != 1 || !slices.Contains(grantIDs(g), b1.ID) {
		t.Fatalf("grants %v: want one of tenant a's and b's", grantIDs(g))
	}
	for _, x := range blockedA {
		v := e.wantState(x.ID, StateBlocked).State
		if !strings.Contains(v.BlockingDetail, "default/per_tenant=a") {
			t.Fatalf("detail %q does not name the key", v.BlockingDetail)
		}
	}
	q := e.quota("default/per_tenant")
	want := []QuotaSubject{{Key: "a", InWindow: 0, Active: 1}, {Key: "b", InWindow: 0, Active: 1}}
	if diff := cmp.Diff(want, q.Subjects); diff != "" {
		t.Fatalf("per-key state (-want +got):\n%s", diff)
	}
	// B finishing frees B's slot only: A's stay blocked.
	for _, gr := range g {
		if gr.ExecutionID == b1.ID {
			if err := e.s.Complete(e.ctx, gr.Lease, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	e.drain()
	if n := e.unblockAll(); n != 0 {
		t.Fatalf("B's release unblocked %d of A's", n)
	}

	// Missing key field, bad JSON, undefined quota: clear errors, nothing written.
	before := e.keys()
	for _, req := range []CreateRequest{
		{Kind: "k", Quotas: []string{"per_tenant"}, Payload: []byte(`{"n":1}`)},
		{Kind: "k", Quotas: []string{"per_tenant"}, Payload: []byte(`not json`)},
		{Kind: "k", Quotas: []string{"per_tenant"}, Payload: []byte(`{"tenant":{"id":{"x":1}}}`)},
		{Kind: "k", Quotas: []string{"undefined_quota"}},
		{Kind: "k", Quotas: []string{"per_tenant=has space"}},
	} {
		if _, _, err := e.s.CreateExecution(e.ctx, req); !errors.Is(err, ErrInvalid) {
			t.Errorf("CreateExecution(%s) = %v, want ErrInvalid", req.Payload, err)
		}
	}
	if diff := cmp.Diff(before, e.keys()); diff != "" {
		t.Fatalf("invalid creates wrote keys (-before +after):\n%s", diff)
	}
	// An explicit key value of a keyed quota is taken as given.
	x := e.create(CreateRequest{Quotas: []string{"per_tenant=c"}})
	if !cmp.Equal(x.Quotas, []string{"default/per_tenant=c"}) {
		t.Fatalf("explicit key: %v", x.Quotas)
	}

	// Once b holds nothing, the reconciler forgets key value b; a's stays.
	for q := range e.s.QuotaPartitions() {
		if _, err := e.s.ReconcileQuotaSlots(e.ctx, q, time.Minute, 100); err != nil {
			t.Fatal(err)
		}
	}
	var keys []string
	for _, sub := range e.quota("default/per_tenant").Subjects {
		keys = append(keys, sub.Key)
	}
	if diff := cmp.Diff([]string{"a"}, keys); diff != "" {
		t.Fatalf("key values after reconcile (-want +got):\n%s", diff)
	}
}

func TestUnblockNeverCrossesNamespaces(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *Config) { c.FlowPartitions = 1 })
	var held []Grant
	blocked := map[string]ExecutionID{}
	for _, ns := range []string{"tenant-a", "tenant-b"} {
		if _, err := e.s.UpsertQuota(e.ctx, QuotaSpec{ID: ns + "/q", Concurrency: 1}); err != nil {
			t.Fatal(err)
		}
		x1 := e.create(CreateRequest{Namespace: ns, Quotas: []string{"q"}})
		x := e.create(CreateRequest{Namespace: ns, Quotas: []string{"q"}})
		w := WorkerIdentity{WorkerID: "w", InstanceID: "w-" + ns, Namespace: ns}
		g, err := e.s.ClaimAdmitted(e.ctx, ClaimRequest{Partition: 0, Lanes: []string{"default"}, Worker: w, Max: 2, LeaseTTL: time.Minute})
		if err != nil || len(g) != 1 {
			t.Fatalf("%s: granted %v, %v", ns, grantIDs(g), err)
		}
		if g[0].ExecutionID == x.ID { // same millisecond: either goes first
			x = x1
		}
		held = append(held, g[0])
		e.wantState(x.ID, StateBlocked)
		blocked[ns] = x.ID
	}
	// Tenant A's slot frees: only A's blocked execution is promoted.
	if err := e.s.Complete(e.ctx, held[0].Lease, nil); err != nil {
		t.Fatal(err)
	}
	e.drain()
	if n := e.unblockAll(); n != 1 {
		t.Fatalf("unblocked %d, want 1", n)
	}
	e.wantState(blocked["tenant-a"], StateWaiting)
	e.wantState(blocked["tenant-b"], StateBlocked)
}

func TestStagedFlowQuotaRefs(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	f := flowOf("x", execs("a", "b"), "a->b")
	f.Execs[0].Quotas = []string{"per_tenant"}
	f.Execs[1].Quotas = []string{"global"}
	f.QuotaDefs = []plan.Quota{{Name: "global", Rate: 10, WindowMs: 1000}, {Name: "per_tenant", Concurrency: 2, Key: "tenant"}}
	r, _, err := e.s.StageFlow(e.ctx, StageRequest{Flow: f, Input: []byte(`{"tenant":"acme"}`)})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]string{}
	for _, n := range r.Nodes {
		got[n.Name] = e.get(n.ExecutionID).Quotas
	}
	want := map[string][]string{"a": {"default/per_tenant=acme"}, "b": {"default/global"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("member quotas (-want +got):\n%s", diff)
	}
	// Staging registered the quotas it uses (absent before).
	if q := e.quota("default/per_tenant"); q.Key != "tenant" || q.Concurrency != 2 {
		t.Fatalf("registered quota %+v", q)
	}
	// Without the key field in the run input: refused.
	if _, _, err := e.s.StageFlow(e.ctx, StageRequest{Flow: f, Input: []byte(`{}`)}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("missing key field = %v", err)
	}
}

// TestRateQuotaUnderLoad runs 8 concurrent schedulers against a rate quota
// of 5 per 200 ms for about a second: no more than 5 admissions fall in any
// window of 200 ms.
//
// An admission is not observable after the fact, but each lies between the
// start of the ClaimAdmitted call that made it (this process's clock) and
// its attempt's start (the server's clock, taken by the claim that follows
// the admission in the same call). Six attempts whose calls all began, and
// whose starts all came, within less than 200 ms were certainly admitted
// within that span: that is a limiter admitting one too many. A loaded
// machine stretches the calls, which widens the spans and cannot make the
// check fail; a fixed margin for the admission-to-claim lag could (a
// scheduler goroutine preempted between its admission and its claim).
func TestRateQuotaUnderLoad(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *Config) { c.FlowPartitions = 2 })
	if _, err := e.s.UpsertQuota(e.ctx, QuotaSpec{ID: "default/r", Rate: 5, Window: 200 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	var ids []ExecutionID
	for range 60 {
		ids = append(ids, e.create(CreateRequest{Quotas: []string{"r"}}).ID)
	}
	stop := time.Now().Add(time.Second)
	var wg sync.WaitGroup
	var mu sync.Mutex
	called := map[string]time.Time{} // "<id>#<attempt>" -> start of the call that granted it
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			wi := WorkerIdentity{WorkerID: "w", InstanceID: fmt.Sprintf("w-%d", w), Namespace: "default"}
			for time.Now().Before(stop) {
				p := w % 2
				if w == 0 {
					e.s.UnblockAdmission(e.ctx, AdmissionUnblock{Partition: 0, Limit: 100, BudgetsKnown: true})
					e.s.UnblockAdmission(e.ctx, AdmissionUnblock{Partition: 1, Limit: 100, BudgetsKnown: true})
				}
				// Server times are whole milliseconds: truncate alike.
				call := time.Now().Truncate(time.Millisecond)
				g, err := e.s.ClaimAdmitted(e.ctx, ClaimRequest{Partition: p, Lanes: []string{"default"}, Worker: wi, Max: 2, LeaseTTL: time.Minute})
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				for _, gr := range g {
					called[fmt.Sprintf("%s#%d", gr.ExecutionID, gr.Attempt)] = call
				}
				mu.Unlock()
				for _, gr := range g {
					if err := e.s.Complete(e.ctx, gr.Lease, nil); err != nil {
						t.Error(err)
					}
				}
				time.Sleep(2 * time.Millisecond)
			}
		}()
	}
	wg.Wait()
	// Each admission lies in [call, started].
	type span struct{ call, started time.Time }
	var spans []span
	for _, id := range ids {
		for _, a := range e.get(id).Attempts {
			call, ok := called[fmt.Sprintf("%s#%d", id, a.Index)]
			if !ok {
				t.Fatalf("attempt %d of %s started but no ClaimAdmitted granted it", a.Index, id)
			}
			spans = append(spans, span{call, a.StartedAt})
		}
	}
	slices.SortFunc(spans, func(a, b span) int { return a.call.Compare(b.call) })
	if len(spans) < 10 {
		t.Fatalf("only %d attempts started in a second", len(spans))
	}
	var lag time.Duration // the longest call-to-start span, for the log
	for _, s := range spans {
		lag = max(lag, s.started.Sub(s.call))
	}
	for i, first := range spans {
		// The spans that begin at or after first's and end less than a
		// window after it began: their admissions are within < 200 ms.
		n := 0
		for _, s := range spans[i:] {
			if s.started.Sub(first.call) < 200*time.Millisecond {
				n++
			}
		}
		if n > 5 {
			t.Fatalf("%d attempts admitted within 200ms from %v (calls begun and attempts started in that span)", n, first.call.Format(time.StampMilli))
		}
	}
	t.Logf("%d attempts started in about a second under a rate of 5 per 200ms; longest call-to-start %s", len(spans), lag)
}

// TestFlowBudgetHardLimitMidFlow: a chain whose first exec spends the
// flow's budget: the rest waits, and a reset resumes it.
func TestFlowBudgetHardLimitMidFlow(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *Config) { c.FlowPartitions = 1 })
	f := flowOf("x", execs("a", "b", "c"), "a->b", "b->c")
	f.Budgets = []string{"tokens"}
	f.BudgetDefs = []plan.Budget{{Name: "tokens", Dimensions: []plan.Dimension{{Name: "t", Hard: 100}}, OnHardLimit: plan.OnHardLimitBlock, Scope: plan.ScopeShared}}
	r, _, err := e.s.StageFlow(e.ctx, StageRequest{Flow: f, Input: []byte(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	g := e.claimAdm(worker1, 1, time.Minute)
	if len(g) != 1 || g[0].FlowNode != "a" {
		t.Fatalf("granted %+v", g)
	}
	if _, err := e.s.ReportExecutionUsage(e.ctx, g[0].ExecutionID, "t", 150, "a"); err != nil {
		t.Fatal(err)
	}
	if err := e.s.Complete(e.ctx, g[0].Lease, []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	if g := e.claimAdm(worker1, 1, time.Minute); len(g) != 0 {
		t.Fatalf("granted past the hard limit: %+v", g)
	}
	run, _ := e.s.GetRun(e.ctx, r.ID)
	states := map[string]PublicState{}
	for _, n := range run.Nodes {
		states[n.Name] = n.State.Public
	}
	if diff := cmp.Diff(map[string]PublicState{"a": StateCompleted, "b": StateBlocked, "c": StatePending}, states); diff != "" {
		t.Fatalf("run states (-want +got):\n%s", diff)
	}
	if _, err := e.s.ResetBudget(e.ctx, "default/tokens"); err != nil {
		t.Fatal(err)
	}
	e.unblockAll()
	for _, name := range []string{"b", "c"} {
		g := e.claimAdm(worker1, 1, time.Minute)
		if len(g) != 1 || g[0].FlowNode != name {
			t.Fatalf("granted %+v, want %s", g, name)
		}
		if err := e.s.Complete(e.ctx, g[0].Lease, []byte(`{}`)); err != nil {
			t.Fatal(err)
		}
	}
	if run, _ := e.s.GetRun(e.ctx, r.ID); run.State != RunSucceeded {
		t.Fatalf("run %s", run.State)
	}
}

// A claim reports at most max candidates waiting for a quota admission:
// they count as found, so it does not read further down the lane (its
// deep lookahead is for work other workers can run).
func TestClaimNeedsAtMostMax(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *Config) { c.FlowPartitions = 1 })
	if _, err := e.s.UpsertQuota(e.ctx, QuotaSpec{ID: "default/q", Concurrency: 100}); err != nil {
		t.Fatal(err)
	}
	for range 60 {
		e.create(CreateRequest{Quotas: []string{"q"}})
	}
	var needs []Candidate
	g, err := e.s.claim(e.ctx, ClaimRequest{Partition: 0, Lanes: []string{"default"}, Worker: worker1, Max: 4}, &needs)
	if err != nil || len(g) != 0 {
		t.Fatalf("claim without admissions = %v, %v", grantIDs(g), err)
	}
	if len(needs) != 4 {
		t.Fatalf("%d candidates need an admission, want 4 (max)", len(needs))
	}
}
