package store

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// ReportAttemptUsage is fenced as Renew is (lease_check): a wrong lease, an
// expired one, a passed attempt timeout or deadline count nothing, and a
// limit found passed is applied on the spot. A report the fence accepted
// passes it again when retried with the same dedup key (the charges may
// have failed), even after the lease ended, and counts once.
func TestReportAttemptUsageFenced(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	if _, err := e.s.UpsertBudget(e.ctx, BudgetSpec{ID: "default/f", Dimensions: []BudgetDimension{{Name: "n", Hard: 100}}}); err != nil {
		t.Fatal(err)
	}
	used := func() int64 { t.Helper(); return e.budget("default/f").Dimensions[0].Used }
	wantLeaseError := func(what string, err error, reason string, state PublicState) {
		t.Helper()
		var le *LeaseError
		if !errors.As(err, &le) || le.Reason != reason || le.State != state {
			t.Fatalf("%s: %v, want a lease error %s (state %s)", what, err, reason, state)
		}
	}

	x := e.create(CreateRequest{Budgets: []string{"f"}})
	g := e.claimAdm(worker1, 1, LeaseTTLMin)
	if len(g) != 1 {
		t.Fatalf("granted %v", grantIDs(g))
	}
	res, err := e.s.ReportAttemptUsage(e.ctx, g[0].Lease, "n", 5, "k1")
	if err != nil || len(res) != 1 || res[0].Status != UsageApplied || res[0].Used != 5 {
		t.Fatalf("report under the lease: %+v, %v", res, err)
	}
	other := g[0].Lease
	other.Epoch++
	_, err = e.s.ReportAttemptUsage(e.ctx, other, "n", 5, "k9")
	wantLeaseError("another epoch", err, LeaseReasonMismatch, StateActive)
	if _, err := e.s.ReportAttemptUsage(e.ctx, g[0].Lease, "n", -1, "k8"); !errors.Is(err, ErrInvalid) {
		t.Fatalf("negative delta: %v, want ErrInvalid", err)
	}

	time.Sleep(LeaseTTLMin + 50*time.Millisecond) // the lease expired; no scanner runs
	res, err = e.s.ReportAttemptUsage(e.ctx, g[0].Lease, "n", 5, "k1")
	if err != nil || len(res) != 1 || res[0].Status != UsageDuplicate || res[0].Used != 5 {
		t.Fatalf("retry of an accepted report after the lease expired: %+v, %v; want it to pass, counted once", res, err)
	}
	_, err = e.s.ReportAttemptUsage(e.ctx, g[0].Lease, "n", 6, "k1") // same key, another report
	wantLeaseError("expired lease", err, LeaseReasonExpired, StateWaiting)
	e.wantState(x.ID, StateWaiting) // the expiry was applied: reclaimed
	_, err = e.s.ReportAttemptUsage(e.ctx, g[0].Lease, "n", 1, "k2")
	wantLeaseError("after the reclaim", err, LeaseReasonNotActive, StateWaiting)
	if u := used(); u != 5 {
		t.Fatalf("used %d, want 5 (only the accepted report)", u)
	}

	// A deadline that passed ends the execution (expired), as the deadline
	// scanner would.
	y := e.create(CreateRequest{Budgets: []string{"f"}, Deadline: 150 * time.Millisecond})
	g = e.claimAdm(worker1, 5, time.Minute)
	var lease Lease
	for _, gr := range g {
		if gr.ExecutionID == y.ID {
			lease = gr.Lease
		}
	}
	if lease.ID == "" {
		t.Fatalf("granted %v, want %s", grantIDs(g), y.ID)
	}
	time.Sleep(200 * time.Millisecond)
	_, err = e.s.ReportAttemptUsage(e.ctx, lease, "n", 1, "k3")
	wantLeaseError("deadline passed", err, LeaseReasonDeadline, StateExpired)
	e.wantState(y.ID, StateExpired)
	if u := used(); u != 5 {
		t.Fatalf("used %d, want 5", u)
	}
}

// An attempt's usage report is remembered as long as the fence needs it:
// each budget keeps its dedup key for UsageFenceTTL (an operator's report
// to a budget, for UsageDedupTTL), and an execution that counts against no
// budget leaves no fence record at all.
func TestAttemptUsageRememberedForTheFence(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	if _, err := e.s.UpsertBudget(e.ctx, BudgetSpec{ID: "default/m", Dimensions: []BudgetDimension{{Name: "n", Hard: 100}}}); err != nil {
		t.Fatal(err)
	}
	ttls := func(substr string) []time.Duration {
		t.Helper()
		var out []time.Duration
		for _, k := range e.keys() {
			if strings.Contains(k, substr) {
				ms, err := e.c.Do(e.ctx, e.c.B().Pttl().Key(k).Build()).AsInt64()
				if err != nil {
					t.Fatal(err)
				}
				out = append(out, time.Duration(ms)*time.Millisecond)
			}
		}
		return out
	}
	e.create(CreateRequest{Budgets: []string{"m"}})
	g := e.claimAdm(worker1, 1, time.Minute)
	if len(g) != 1 {
		t.Fatalf("granted %v", grantIDs(g))
	}
	if _, err := e.s.ReportAttemptUsage(e.ctx, g[0].Lease, "n", 1, "a1"); err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{":usagefence:", ":usagededup:"} {
		got := ttls(kind)
		if len(got) != 1 || got[0] <= 0 || got[0] > UsageFenceTTL {
			t.Fatalf("%s keys' lifetimes %v, want one of at most %s", kind, got, UsageFenceTTL)
		}
	}
	if _, err := e.s.ReportUsage(e.ctx, "default/m", "n", 1, "op1"); err != nil {
		t.Fatal(err)
	}
	if got := ttls(":usagededup:"); len(got) != 2 || max(got[0], got[1]) <= UsageFenceTTL {
		t.Fatalf("dedup keys' lifetimes %v, want the operator's report's past %s", got, UsageFenceTTL)
	}
	if err := e.s.Complete(e.ctx, g[0].Lease, nil); err != nil {
		t.Fatal(err)
	}

	e.create(CreateRequest{})
	g = e.claimAdm(worker1, 1, time.Minute)
	if len(g) != 1 {
		t.Fatalf("granted %v", grantIDs(g))
	}
	before := len(ttls(":usagefence:"))
	if res, err := e.s.ReportAttemptUsage(e.ctx, g[0].Lease, "n", 1, "b1"); err != nil || len(res) != 0 {
		t.Fatalf("report of an execution without budgets: %+v, %v", res, err)
	}
	if after := len(ttls(":usagefence:")); after != before {
		t.Fatalf("an execution without budgets left a fence record (%d -> %d)", before, after)
	}
}
