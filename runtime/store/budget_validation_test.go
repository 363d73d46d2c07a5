package store

import (
	"errors"
	"math"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Usage and limits are int64 in Go but Lua numbers are doubles, exact only
// below 2^53: the usage a report answers must be the stored one, a hard
// limit just above 2^53 must be compared exactly, and a report that would
// take the usage past 2^63-1 must saturate (not fail with a raw script
// error, a 500 at the API, on this and every later report).
func TestUsageExactAndSaturatesAtMaxInt64(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const big = int64(1)<<53 + 1 // a double rounds it to 2^53
	if _, err := e.s.UpsertBudget(e.ctx, BudgetSpec{ID: "default/big", Dimensions: []BudgetDimension{
		{Name: "n", Hard: 10}, {Name: "m", Hard: big, Soft: big - 1}}}); err != nil {
		t.Fatal(err)
	}
	report := func(dim string, delta int64) UsageResult {
		t.Helper()
		r, err := e.s.ReportUsage(e.ctx, "default/big", dim, delta, "")
		if err != nil {
			t.Fatalf("report %s +%d: %v", dim, delta, err)
		}
		return r
	}
	want := UsageResult{BudgetID: "default/big", Status: UsageHardBreach, Used: math.MaxInt64 - 1, Hard: 10, OverHard: true}
	if diff := cmp.Diff(want, report("n", math.MaxInt64-1)); diff != "" {
		t.Errorf("report near 2^63 (-want +got):\n%s", diff)
	}
	want.Status, want.Used = UsageApplied, math.MaxInt64
	if diff := cmp.Diff(want, report("n", 2)); diff != "" {
		t.Errorf("report past 2^63-1, saturated (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want, report("n", math.MaxInt64)); diff != "" {
		t.Errorf("report at the saturated usage (-want +got):\n%s", diff)
	}
	// 2^53 is below the hard limit 2^53+1 (equal as doubles), and crosses
	// the soft limit 2^53.
	want = UsageResult{BudgetID: "default/big", Status: UsageSoftBreach, Used: 1 << 53, Hard: big, Soft: big - 1}
	if diff := cmp.Diff(want, report("m", 1<<53)); diff != "" {
		t.Errorf("report of 2^53 under a hard limit of 2^53+1 (-want +got):\n%s", diff)
	}
	want.Status, want.Used, want.OverHard = UsageHardBreach, big, true
	if diff := cmp.Diff(want, report("m", 1)); diff != "" {
		t.Errorf("report reaching the hard limit 2^53+1 (-want +got):\n%s", diff)
	}
	b := e.budget("default/big")
	got := []int64{b.Dimensions[0].Used, b.Dimensions[1].Used}
	if diff := cmp.Diff([]int64{math.MaxInt64, big}, got); diff != "" {
		t.Errorf("GetBudget usage (-want +got):\n%s", diff)
	}
	br, err := e.s.BreachedBudgets(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	wantBr := []BudgetBreach{{BudgetID: "default/big", Dimension: "n", Used: math.MaxInt64, Hard: 10, OnHardLimit: "block"}}
	if diff := cmp.Diff(wantBr, br); diff != "" {
		t.Errorf("breached budgets (-want +got):\n%s", diff)
	}
}

// spec/runtime.md, Principles: every function "reads what it needs,
// validates, and only then writes". ff_budget_upsert called with a bad
// argument refuses (invalid, naming the field) and leaves the definition
// as it was: no dimension dropped, no field written.
func TestLuaBudgetUpsertValidatesBeforeWriting(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	id := "default/partial"
	if _, err := e.s.UpsertBudget(e.ctx, BudgetSpec{ID: id, Dimensions: []BudgetDimension{{Name: "tokens", Hard: 10}, {Name: "usd", Hard: 5}}}); err != nil {
		t.Fatal(err)
	}
	key := e.s.k.budget(e.s.budgetPart(id), id)
	before, err := e.c.Do(e.ctx, e.c.B().Hgetall().Key(key).Build()).AsStrMap()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, field string
		args        []string
	}{
		{"reset interval not a number", "reset_interval", []string{"shared", "block", "soon", "0", "0", "tokens", "10", "0"}},
		{"negative reset interval", "reset_interval", []string{"shared", "block", "-5", "0", "0", "tokens", "10", "0"}},
		{"lifetime not a number", "ttl", []string{"shared", "block", "0", "0", "1.5", "tokens", "10", "0"}},
		{"unknown scope", "scope", []string{"global", "block", "0", "0", "0", "tokens", "10", "0"}},
		{"unknown on_hard_limit", "on_hard_limit", []string{"shared", "stop", "0", "0", "0", "tokens", "10", "0"}},
		{"negative hard limit", "dimensions", []string{"shared", "block", "0", "0", "0", "tokens", "-1", "0"}},
		{"soft limit past 2^63-1", "dimensions", []string{"shared", "block", "0", "0", "0", "tokens", "10", "9223372036854775808"}},
		{"limit with a leading zero", "dimensions", []string{"shared", "block", "0", "0", "0", "tokens", "010", "0"}},
		{"bad dimension name", "dimensions", []string{"shared", "block", "0", "0", "0", "a,b", "10", "0"}},
		{"dimension twice", "dimensions", []string{"shared", "block", "0", "0", "0", "tokens", "10", "0", "tokens", "5", "0"}},
		{"incomplete triple", "dimensions", []string{"shared", "block", "0", "0", "0", "tokens", "10"}},
		{"no dimension", "dimensions", []string{"shared", "block", "0", "0", "0"}},
	} {
		msg, err := e.s.fcall(e.ctx, call{fn: "ff_budget_upsert", keys: []string{key}, args: tc.args})
		if err != nil {
			t.Errorf("%s: %v, want a refusal", tc.name, err)
			continue
		}
		_, ref, err := envelope(msg)
		if err != nil || ref == nil || ref.code != "invalid" || len(ref.detail) == 0 || ref.detail[0] != tc.field {
			t.Errorf("%s: refusal %+v (%v), want invalid %s", tc.name, ref, err, tc.field)
		}
		after, err := e.c.Do(e.ctx, e.c.B().Hgetall().Key(key).Build()).AsStrMap()
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(before, after); diff != "" {
			t.Errorf("%s: a refused upsert wrote (-before +after):\n%s", tc.name, diff)
		}
	}
}

// ff_budget_report validates its own arguments: a delta that is not an
// integer 0..2^63-1 (a negative one would lower the usage and leave a
// budget below its hard limit in the breached hash) is refused and nothing
// is written.
func TestLuaBudgetReportRefusesBadDelta(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	id := "default/neg"
	if _, err := e.s.UpsertBudget(e.ctx, BudgetSpec{ID: id, Dimensions: []BudgetDimension{{Name: "n", Hard: 10}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.s.ReportUsage(e.ctx, id, "n", 10, ""); err != nil {
		t.Fatal(err)
	}
	key := e.s.k.budget(e.s.budgetPart(id), id)
	for _, delta := range []string{"-7", "1.5", "1e3", "x", "", "9223372036854775808"} {
		msg, err := e.s.fcall(e.ctx, call{fn: "ff_budget_report", keys: []string{key, key}, args: []string{"n", delta, "1000"}})
		if err != nil {
			t.Errorf("delta %q: %v, want a refusal", delta, err)
			continue
		}
		_, ref, err := envelope(msg)
		if err != nil || ref == nil || ref.code != "invalid" || len(ref.detail) == 0 || ref.detail[0] != "delta" {
			t.Errorf("delta %q: refusal %+v (%v), want invalid delta", delta, ref, err)
		}
	}
	b := e.budget(id)
	if b.Dimensions[0].Used != 10 || !b.HardLimited {
		t.Fatalf("after refused reports: used %d, hard_limited %v; want 10, true", b.Dimensions[0].Used, b.HardLimited)
	}
	// Through the store the refusal is a validation error.
	if _, err := e.s.ReportUsage(e.ctx, id, "n", -1, ""); !errors.Is(err, ErrInvalid) {
		t.Errorf("ReportUsage(-1) = %v, want ErrInvalid", err)
	}
	if got := strconv.FormatInt(e.budget(id).Dimensions[0].Used, 10); got != "10" {
		t.Errorf("used %s, want 10", got)
	}
}
