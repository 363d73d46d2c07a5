package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flowfabric/ff/compiler/plan"
	"github.com/google/go-cmp/cmp"
)

// testRunID is a well-formed run id, distinct per n.
func testRunID(n int) RunID { return RunID(fmt.Sprintf("%d.00000000-0000-4000-8000-%012d", n%4, n)) }

func (e *env) upsertBudget(id, scope string) {
	e.t.Helper()
	if _, err := e.s.UpsertBudget(e.ctx, BudgetSpec{ID: id, Scope: scope,
		Dimensions: []BudgetDimension{{Name: "tokens", Hard: 100}}}); err != nil {
		e.t.Fatalf("UpsertBudget %s: %v", id, err)
	}
}

func (e *env) upsertQuota(id string, key string) {
	e.t.Helper()
	if _, err := e.s.UpsertQuota(e.ctx, QuotaSpec{ID: id, Rate: 5, Concurrency: 2, Key: key}); err != nil {
		e.t.Fatalf("UpsertQuota %s: %v", id, err)
	}
}

// listAllBudgets follows the cursors of ListBudgets to the end and returns
// the ids in the order listed, checking each page's size and that every
// budget listed is what GetBudget returns.
func (e *env) listAllBudgets(o ListBudgetsOptions) []string {
	e.t.Helper()
	return listAll(e, "budget", o.Limit, func(cursor string) ([]Budget, string, error) {
		o.Cursor = cursor
		p, err := e.s.ListBudgets(e.ctx, o)
		if err != nil {
			return nil, "", err
		}
		return p.Budgets, p.NextCursor, nil
	}, func(id string) (*Budget, error) { return e.s.GetBudget(e.ctx, id) }, func(b Budget) string { return b.ID })
}

// listAllQuotas is listAllBudgets for ListQuotas and GetQuota.
func (e *env) listAllQuotas(o ListQuotasOptions) []string {
	e.t.Helper()
	return listAll(e, "quota", o.Limit, func(cursor string) ([]Quota, string, error) {
		o.Cursor = cursor
		p, err := e.s.ListQuotas(e.ctx, o)
		if err != nil {
			return nil, "", err
		}
		return p.Quotas, p.NextCursor, nil
	}, func(id string) (*Quota, error) { return e.s.GetQuota(e.ctx, id) }, func(q Quota) string { return q.ID })
}

// listAll follows a listing's cursors (page) to the end and returns the
// ids (id) in the order listed, checking that no page holds more than
// limit (when set) and that every item listed is what get returns.
func listAll[T any](e *env, what string, limit int, page func(cursor string) ([]T, string, error),
	get func(id string) (*T, error), id func(T) string) []string {
	e.t.Helper()
	var ids []string
	cursor := ""
	for pages := 0; ; pages++ {
		if pages > 1000 {
			e.t.Fatalf("listing %ss: no end to the cursors", what)
		}
		items, next, err := page(cursor)
		if err != nil {
			e.t.Fatalf("listing %ss from %q: %v", what, cursor, err)
		}
		if limit > 0 && len(items) > limit {
			e.t.Fatalf("listing %ss: %d on a page, limit %d", what, len(items), limit)
		}
		for _, x := range items {
			one, err := get(id(x))
			if err != nil {
				e.t.Fatalf("get %s %s: %v", what, id(x), err)
			}
			if d := cmp.Diff(*one, x); d != "" {
				e.t.Fatalf("listed %s %s differs from its get (-get +list):\n%s", what, id(x), d)
			}
			ids = append(ids, id(x))
		}
		if next == "" {
			return ids
		}
		cursor = next
	}
}

func sorted(ids []string) []string {
	out := slices.Clone(ids)
	slices.Sort(out)
	return out
}

func TestListBudgetsPagesAcrossPartitions(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *Config) { c.BudgetPartitions = 5 })
	var shared, run, nsA []string
	for i := range 23 {
		ns := []string{"a", "b", "a/sub"}[i%3]
		id := BudgetID(ns, fmt.Sprintf("bud%02d", i))
		e.upsertBudget(id, plan.ScopeShared)
		shared = append(shared, id)
		if ns == "a" {
			nsA = append(nsA, id)
		}
	}
	for i := range 17 {
		id := RunBudgetID("a", "per_run", testRunID(i))
		e.upsertBudget(id, plan.ScopeRun)
		run = append(run, id)
		nsA = append(nsA, id)
	}
	// A report makes usage differ between budgets: the listed objects are
	// the budgets' current state.
	if _, err := e.s.ReportUsage(e.ctx, shared[3], "tokens", 42, ""); err != nil {
		t.Fatal(err)
	}
	all := sorted(append(slices.Clone(shared), run...))
	// Several partitions hold budgets.
	parts := map[int]bool{}
	for _, id := range all {
		parts[e.s.budgetPart(id)] = true
	}
	if len(parts) < 3 {
		t.Fatalf("budgets on %d partitions only", len(parts))
	}
	for _, tc := range []struct {
		name string
		o    ListBudgetsOptions
		want []string
	}{
		{"all by 7", ListBudgetsOptions{Limit: 7}, all},
		{"all by 1", ListBudgetsOptions{Limit: 1}, all},
		{"all default", ListBudgetsOptions{}, all},
		{"exactly all", ListBudgetsOptions{Limit: len(all)}, all},
		{"namespace a", ListBudgetsOptions{Namespace: "a", Limit: 4}, sorted(nsA)},
		{"namespace a/sub", ListBudgetsOptions{Namespace: "a/sub", Limit: 3}, sorted(slices.DeleteFunc(slices.Clone(shared),
			func(id string) bool { return !strings.HasPrefix(id, "a/sub/") }))},
		{"shared", ListBudgetsOptions{Scope: plan.ScopeShared, Limit: 6}, sorted(shared)},
		{"run", ListBudgetsOptions{Scope: plan.ScopeRun, Limit: 5}, sorted(run)},
		{"run of b", ListBudgetsOptions{Scope: plan.ScopeRun, Namespace: "b"}, nil},
		{"no such namespace", ListBudgetsOptions{Namespace: "zzz"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := e.listAllBudgets(tc.o)
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Fatalf("listed ids (-want +got):\n%s", d)
			}
		})
	}

	// One page of everything: no cursor. A page of all but one: a cursor
	// whose page holds the last one.
	p, err := e.s.ListBudgets(e.ctx, ListBudgetsOptions{Limit: LimitListMax})
	if err != nil || len(p.Budgets) != len(all) || p.NextCursor != "" {
		t.Fatalf("one page of all = %d budgets, cursor %q, %v", len(p.Budgets), p.NextCursor, err)
	}
	p, err = e.s.ListBudgets(e.ctx, ListBudgetsOptions{Limit: len(all) - 1})
	if err != nil || len(p.Budgets) != len(all)-1 || p.NextCursor == "" {
		t.Fatalf("page of all but one = %d budgets, cursor %q, %v", len(p.Budgets), p.NextCursor, err)
	}
	p, err = e.s.ListBudgets(e.ctx, ListBudgetsOptions{Limit: 10, Cursor: p.NextCursor})
	if err != nil || len(p.Budgets) != 1 || p.Budgets[0].ID != all[len(all)-1] || p.NextCursor != "" {
		t.Fatalf("last page = %+v, %v", p, err)
	}
	if p.Budgets[0].ID == shared[3] && p.Budgets[0].Dimensions[0].Used != 42 {
		t.Fatalf("usage not listed: %+v", p.Budgets[0])
	}
}

func TestListBudgetsValidation(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.upsertBudget("default/x", plan.ScopeShared)
	for _, tc := range []struct {
		o     ListBudgetsOptions
		field string
	}{
		{ListBudgetsOptions{Limit: LimitListMax + 1}, "limit"},
		{ListBudgetsOptions{Limit: -1}, "limit"},
		{ListBudgetsOptions{Cursor: "!!"}, "cursor"},
		{ListBudgetsOptions{Cursor: encodeLimitCursor("no-slash")}, "cursor"},
		{ListBudgetsOptions{Scope: "global"}, "scope"},
		{ListBudgetsOptions{Namespace: "a b"}, "namespace"},
	} {
		_, err := e.s.ListBudgets(e.ctx, tc.o)
		var ve *ValidationError
		if !errors.As(err, &ve) || ve.Field != tc.field {
			t.Errorf("ListBudgets(%+v) = %v, want a validation error of %s", tc.o, err, tc.field)
		}
	}
	if _, err := e.s.ListQuotas(e.ctx, ListQuotasOptions{Cursor: encodeLimitCursor("default/x@" + string(testRunID(1)))}); err == nil {
		t.Error("ListQuotas took a run-scoped budget id as cursor")
	}
}

func TestListBudgetsDropsExpired(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *Config) { c.BudgetPartitions = 2 })
	keep := BudgetID("default", "kept")
	e.upsertBudget(keep, plan.ScopeShared)
	var gone []string
	for i := range 6 {
		id := RunBudgetID("default", "per_run", testRunID(i))
		e.upsertBudget(id, plan.ScopeRun)
		gone = append(gone, id)
	}
	inIndex := func(id string) bool {
		m := e.s.budgetPart(id)
		err := e.c.Do(e.ctx, e.c.B().Zscore().Key(e.s.k.budgetIndex(m)).Member(id).Build()).Error()
		return err == nil
	}
	for _, id := range gone {
		if !inIndex(id) {
			t.Fatalf("%s not indexed", id)
		}
		// As RunBudgetTTL would, sooner.
		key := e.s.k.budget(e.s.budgetPart(id), id)
		for _, k := range []string{key, key + ":usage"} {
			if err := e.c.Do(e.ctx, e.c.B().Pexpire().Key(k).Milliseconds(1).Build()).Error(); err != nil {
				t.Fatal(err)
			}
		}
	}
	time.Sleep(20 * time.Millisecond)
	// The sweep of the budget reset scanner drops those of its partition
	// without any listing...
	m := e.s.budgetPart(gone[0])
	if _, err := e.s.ResetDueBudgets(e.ctx, m, 100); err != nil {
		t.Fatal(err)
	}
	for _, id := range gone {
		if inIndex(id) != (e.s.budgetPart(id) != m) {
			t.Fatalf("after a sweep of partition %d: %s (partition %d) indexed = %v", m, id, e.s.budgetPart(id), inIndex(id))
		}
	}
	// ... and a listing drops those it meets.
	if got := e.listAllBudgets(ListBudgetsOptions{Limit: 2}); !slices.Equal(got, []string{keep}) {
		t.Fatalf("listed %v, want only %s", got, keep)
	}
	for _, id := range gone {
		if inIndex(id) {
			t.Fatalf("expired %s still indexed after a listing", id)
		}
	}
	if !inIndex(keep) {
		t.Fatalf("%s left the index", keep)
	}

	// Sweeps go round the whole index and start again.
	for i := range 3 {
		id := RunBudgetID("default", "later", testRunID(i))
		e.upsertBudget(id, plan.ScopeRun)
		key := e.s.k.budget(e.s.budgetPart(id), id)
		if err := e.c.Do(e.ctx, e.c.B().Pexpire().Key(key).Milliseconds(1).Build()).Error(); err != nil {
			t.Fatal(err)
		}
		gone = append(gone, id)
	}
	time.Sleep(20 * time.Millisecond)
	for range 10 {
		for m := range 2 {
			if _, err := e.s.ResetDueBudgets(e.ctx, m, 1); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, id := range gone {
		if inIndex(id) {
			t.Fatalf("expired %s still indexed after the sweeps", id)
		}
	}
	if !inIndex(keep) {
		t.Fatalf("%s left the index", keep)
	}
}

func TestListQuotas(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *Config) { c.QuotaPartitions = 3 })
	var all, nsB []string
	for i := range 14 {
		ns := []string{"a", "b"}[i%2]
		id := QuotaID(ns, fmt.Sprintf("q%02d", i))
		key := ""
		if i%4 == 0 {
			key = "tenant"
		}
		e.upsertQuota(id, key)
		all = append(all, id)
		if ns == "b" {
			nsB = append(nsB, id)
		}
	}
	// A keyed quota with subjects and a pause: listed as GetQuota shows it.
	if err := e.s.PauseQuota(e.ctx, all[0], QuotaPause{Key: "acme", For: time.Minute, Reason: "429"}); err != nil {
		t.Fatal(err)
	}
	all = sorted(all)
	for _, tc := range []struct {
		o    ListQuotasOptions
		want []string
	}{
		{ListQuotasOptions{Limit: 3}, all},
		{ListQuotasOptions{}, all},
		{ListQuotasOptions{Namespace: "b", Limit: 2}, sorted(nsB)},
		{ListQuotasOptions{Namespace: "c"}, nil},
	} {
		if d := cmp.Diff(tc.want, e.listAllQuotas(tc.o)); d != "" {
			t.Errorf("ListQuotas(%+v) (-want +got):\n%s", tc.o, d)
		}
	}
	p, err := e.s.ListQuotas(e.ctx, ListQuotasOptions{Limit: 1})
	if err != nil || len(p.Quotas) != 1 || p.Quotas[0].ID != all[0] || len(p.Quotas[0].Subjects) != 1 ||
		p.Quotas[0].Subjects[0].Key != "acme" || p.Quotas[0].Subjects[0].PauseReason != "429" || p.Quotas[0].SubjectsMore != 0 {
		t.Fatalf("first page = %+v, %v", p, err)
	}
	// A keyed quota with more key values than a listing reads: the first
	// QuotaListSubjectsMax, and the count of the others; GetQuota has all.
	for i := range QuotaListSubjectsMax + 5 {
		if err := e.s.PauseQuota(e.ctx, all[0], QuotaPause{Key: fmt.Sprintf("t%02d", i), For: time.Minute}); err != nil {
			t.Fatal(err)
		}
	}
	p, err = e.s.ListQuotas(e.ctx, ListQuotasOptions{Limit: 1})
	if err != nil || len(p.Quotas[0].Subjects) != QuotaListSubjectsMax || p.Quotas[0].SubjectsMore != 6 ||
		p.Quotas[0].Subjects[0].Key != "acme" {
		t.Fatalf("a quota of %d key values listed with %d subjects and %d more (%v); want %d and 6",
			QuotaListSubjectsMax+6, len(p.Quotas[0].Subjects), p.Quotas[0].SubjectsMore, err, QuotaListSubjectsMax)
	}
	if q, err := e.s.GetQuota(e.ctx, all[0]); err != nil || len(q.Subjects) != QuotaListSubjectsMax+6 || q.SubjectsMore != 0 {
		t.Fatalf("GetQuota of it: %d subjects, %v", len(q.Subjects), err)
	}
}

// dropIndexes makes the deployment look as a release without the indexes
// left it: no index keys, no mark.
func (e *env) dropIndexes() {
	e.t.Helper()
	var del []string
	for m := range e.s.cfg.BudgetPartitions {
		del = append(del, e.s.k.budgetIndex(m))
	}
	for q := range e.s.cfg.QuotaPartitions {
		del = append(del, e.s.k.quotaIndex(q))
	}
	for _, k := range del {
		if err := e.c.Do(e.ctx, e.c.B().Del().Key(k).Build()).Error(); err != nil {
			e.t.Fatal(err)
		}
	}
	if err := e.c.Do(e.ctx, e.c.B().Hdel().Key(e.s.k.config()).Field(limitsIndexedField).Build()).Error(); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) indexed() bool {
	e.t.Helper()
	ok, err := e.c.Do(e.ctx, e.c.B().Hexists().Key(e.s.k.config()).Field(limitsIndexedField).Build()).AsBool()
	if err != nil {
		e.t.Fatal(err)
	}
	return ok
}

func TestBackfillLimitIndexes(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *Config) { c.BudgetPartitions = 3; c.QuotaPartitions = 2 })
	if !e.indexed() {
		t.Fatal("a new deployment is not marked as indexed")
	}
	var budgets, quotas []string
	for i := range 12 {
		id := BudgetID("ns", fmt.Sprintf("b%02d", i))
		e.upsertBudget(id, plan.ScopeShared)
		budgets = append(budgets, id)
	}
	run := RunBudgetID("ns", "per_run", testRunID(7))
	e.upsertBudget(run, plan.ScopeRun)
	budgets = append(budgets, run)
	for i := range 5 {
		id := QuotaID("ns", fmt.Sprintf("q%d", i))
		e.upsertQuota(id, "k")
		quotas = append(quotas, id)
	}
	// Subjects, usage and pauses make more hashes for the scan to skip.
	if _, err := e.s.ReportUsage(e.ctx, budgets[0], "tokens", 100, ""); err != nil {
		t.Fatal(err)
	}
	if err := e.s.PauseQuota(e.ctx, quotas[0], QuotaPause{Key: "x", For: time.Minute}); err != nil {
		t.Fatal(err)
	}
	e.dropIndexes()
	if got := e.listAllBudgets(ListBudgetsOptions{}); len(got) != 0 {
		t.Fatalf("listed %v without indexes", got)
	}

	// Another library version in use (a rolling upgrade): the pass indexes
	// everything but does not mark the deployment.
	if err := e.c.Do(e.ctx, e.c.B().Hset().Key(e.s.k.libraries()).FieldValue().FieldValue("0123456789abcdef", "1").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	r, err := e.s.BackfillLimitIndexes(e.ctx)
	if err != nil || r != (LimitsBackfill{Budgets: len(budgets), Quotas: len(quotas)}) {
		t.Fatalf("BackfillLimitIndexes = %+v, %v", r, err)
	}
	if e.indexed() {
		t.Fatal("marked as indexed while another version is in use")
	}
	if d := cmp.Diff(sorted(budgets), e.listAllBudgets(ListBudgetsOptions{Limit: 4})); d != "" {
		t.Fatalf("budgets after the backfill (-want +got):\n%s", d)
	}
	if d := cmp.Diff(sorted(quotas), e.listAllQuotas(ListQuotasOptions{Limit: 4})); d != "" {
		t.Fatalf("quotas after the backfill (-want +got):\n%s", d)
	}

	// The other version gone: the next pass finds nothing new and marks;
	// but not while another process makes a pass (its lock held).
	if err := e.c.Do(e.ctx, e.c.B().Hdel().Key(e.s.k.libraries()).Field("0123456789abcdef").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	lock := e.s.k.prefix + limitsBackfillLock
	if err := e.c.Do(e.ctx, e.c.B().Set().Key(lock).Value("other").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	if r, err := e.s.BackfillLimitIndexes(e.ctx); err != nil || r != (LimitsBackfill{Skipped: true}) || e.indexed() {
		t.Fatalf("BackfillLimitIndexes while another holds the lock = %+v, %v (marked: %v)", r, err, e.indexed())
	}
	if err := e.c.Do(e.ctx, e.c.B().Del().Key(lock).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	if r, err := e.s.BackfillLimitIndexes(e.ctx); err != nil || r != (LimitsBackfill{Done: true}) {
		t.Fatalf("second BackfillLimitIndexes = %+v, %v", r, err)
	}
	if !e.indexed() {
		t.Fatal("not marked as indexed")
	}
	if n, err := e.c.Do(e.ctx, e.c.B().Exists().Key(lock).Build()).AsInt64(); err != nil || n != 0 {
		t.Fatalf("the pass left its lock: exists = %d, %v", n, err)
	}
	// Marked: no scan, even with the indexes gone.
	e.dropIndexes()
	if err := e.c.Do(e.ctx, e.c.B().Hset().Key(e.s.k.config()).FieldValue().FieldValue(limitsIndexedField, "1").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	if r, err := e.s.BackfillLimitIndexes(e.ctx); err != nil || r != (LimitsBackfill{Done: true}) {
		t.Fatalf("BackfillLimitIndexes when marked = %+v, %v", r, err)
	}

	// An upsert of this release indexes a budget or quota again.
	e.upsertBudget(budgets[1], plan.ScopeShared)
	e.upsertQuota(quotas[1], "k")
	if got := e.listAllBudgets(ListBudgetsOptions{}); !slices.Equal(got, budgets[1:2]) {
		t.Fatalf("listed %v after an upsert, want %v", got, budgets[1:2])
	}
	if got := e.listAllQuotas(ListQuotasOptions{}); !slices.Equal(got, quotas[1:2]) {
		t.Fatalf("listed %v after an upsert, want %v", got, quotas[1:2])
	}
}

// TestOpenBackfillsInBackground: a store opened on a deployment of an
// older release backfills the indexes by itself, and Wait stops it.
func TestOpenBackfillsInBackground(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *Config) { c.BudgetPartitions = 3 })
	var want []string
	for i := range 9 {
		id := BudgetID("ns", fmt.Sprintf("b%d", i))
		e.upsertBudget(id, plan.ScopeShared)
		want = append(want, id)
	}
	e.dropIndexes()
	s2, err := Open(context.Background(), Config{Client: e.c, KeyPrefix: e.prefix, FlowPartitions: 4, BudgetPartitions: 3,
		Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s2.Wait)
	waitUntil(t, 10*time.Second, "the backfill", func() bool {
		p, err := s2.ListBudgets(e.ctx, ListBudgetsOptions{})
		return err == nil && len(p.Budgets) == len(want) && e.indexed()
	})
	s2.Wait()
	s2.Wait() // safe twice
}

func TestLimitRecord(t *testing.T) {
	t.Parallel()
	s := &Store{cfg: Config{BudgetPartitions: 4, QuotaPartitions: 4}, k: keys{prefix: "p:"}}
	b := "default/gpu"
	q := "default/api"
	run := RunBudgetID("default", "per_run", testRunID(3))
	for _, tc := range []struct {
		key, index, id string
	}{
		{s.k.budget(s.budgetPart(b), b), s.k.budgetIndex(s.budgetPart(b)), b},
		{s.k.budget(s.budgetPart(run), run), s.k.budgetIndex(s.budgetPart(run)), run},
		{s.k.quota(s.quotaPart(q), q), s.k.quotaIndex(s.quotaPart(q)), q},
		{s.k.budget(s.budgetPart(b), b) + ":usage", "", ""},
		{s.k.budget((s.budgetPart(b)+1)%4, b), "", ""}, // another partition
		{s.k.quota(s.quotaPart(q), q+"=acme") + ":paused", "", ""},
		{s.k.breached(1), "", ""},
		{"q:" + s.k.budget(s.budgetPart(b), b)[2:], "", ""}, // another prefix
		{s.k.quota(s.quotaPart(q), q)[:len("p:ff:{q:")] + "x}:quota:" + q, "", ""},
	} {
		index, id, ok := s.limitRecord(tc.key)
		if ok != (tc.id != "") || index != tc.index || id != tc.id {
			t.Errorf("limitRecord(%q) = %q, %q, %v; want %q, %q", tc.key, index, id, ok, tc.index, tc.id)
		}
	}
	if got := globEscape(`a*b?c[d]e\`); got != `a\*b\?c\[d\]e\\` {
		t.Errorf("globEscape = %q", got)
	}
}

// TestListBudgetsFilterReadsBounded: a filter that skips most entries does
// not read a partition's whole index per page: pages may come back short,
// even empty, with a cursor, until the listing reaches the end.
func TestListBudgetsFilterReadsBounded(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *Config) { c.BudgetPartitions = 1 })
	for i := range 250 {
		e.upsertBudget(RunBudgetID("a", "per_run", testRunID(i)), plan.ScopeRun)
	}
	e.upsertBudget("a/zz", plan.ScopeShared)
	p, err := e.s.ListBudgets(e.ctx, ListBudgetsOptions{Scope: plan.ScopeShared, Limit: 1})
	if err != nil || len(p.Budgets) != 0 || p.NextCursor == "" {
		t.Fatalf("first page = %d budgets, cursor %q, %v; want none and a cursor", len(p.Budgets), p.NextCursor, err)
	}
	if got := e.listAllBudgets(ListBudgetsOptions{Scope: plan.ScopeShared, Limit: 1}); !slices.Equal(got, []string{"a/zz"}) {
		t.Fatalf("listed %v", got)
	}
	if got := e.listAllBudgets(ListBudgetsOptions{Scope: plan.ScopeRun, Limit: 1000}); len(got) != 250 {
		t.Fatalf("listed %d run-scoped budgets, want 250", len(got))
	}
}

// TestLimitListMalformed: ff_limit_list and ff_limit_index refuse bad
// arguments before they read or write anything.
func TestLimitListMalformed(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *Config) { c.BudgetPartitions = 1 })
	e.upsertBudget("default/x", plan.ScopeShared)
	gone := RunBudgetID("default", "r", testRunID(1))
	e.upsertBudget(gone, plan.ScopeRun)
	if err := e.c.Do(e.ctx, e.c.B().Del().Key(e.s.k.budget(0, gone)).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	index := e.s.k.budgetIndex(0)
	for _, tc := range []struct {
		fn    string
		key   string
		args  []string
		field string
	}{
		{"ff_limit_list", index, []string{"x", "+", "10", "", ""}, "bounds"},
		{"ff_limit_list", index, []string{"-", "+", "0", "", ""}, "limit"},
		{"ff_limit_list", index, []string{"-", "+", "1001", "", ""}, "limit"},
		{"ff_limit_list", index, []string{"-", "+", "1.5", "", ""}, "limit"},
		{"ff_limit_list", index, []string{"-", "+", "10", "", "global"}, "scope"},
		{"ff_limit_list", e.s.k.resets(0), []string{"-", "+", "10", "", ""}, "index"},
		{"ff_limit_index", e.s.k.breached(0), []string{"default/x"}, "index"},
	} {
		_, err := e.s.single(e.ctx, call{fn: tc.fn, keys: []string{tc.key}, args: tc.args}, "", "test")
		var ve *ValidationError
		if !errors.As(err, &ve) || ve.Field != tc.field {
			t.Errorf("%s %v = %v, want invalid %s", tc.fn, tc.args, err, tc.field)
		}
	}
	// Nothing was dropped by the refused calls: the gone id is still there
	// until a listing meets it.
	n, err := e.c.Do(e.ctx, e.c.B().Zcard().Key(index).Build()).AsInt64()
	if err != nil || n != 2 {
		t.Fatalf("index holds %d ids, %v; want 2", n, err)
	}
	if got := e.listAllBudgets(ListBudgetsOptions{}); !slices.Equal(got, []string{"default/x"}) {
		t.Fatalf("listed %v", got)
	}
	if n, err := e.c.Do(e.ctx, e.c.B().Zcard().Key(index).Build()).AsInt64(); err != nil || n != 1 {
		t.Fatalf("index holds %d ids after the listing, %v; want 1", n, err)
	}
}

// BenchmarkListBudgets: one page of 100 budgets out of 5,000 shared and
// 5,000 run-scoped ones on the default partition counts, filtered and not.
func BenchmarkListBudgets(b *testing.B) {
	e := newEnv(b)
	for i := range 5000 {
		e.upsertBudget(BudgetID("ns", fmt.Sprintf("b%05d", i)), plan.ScopeShared)
		e.upsertBudget(RunBudgetID("ns", "per_run", testRunID(i)), plan.ScopeRun)
	}
	for _, o := range []ListBudgetsOptions{{Limit: 100}, {Limit: 100, Scope: plan.ScopeShared}, {Limit: 1000}} {
		b.Run(fmt.Sprintf("limit=%d,scope=%s", o.Limit, o.Scope), func(b *testing.B) {
			for b.Loop() {
				p, err := e.s.ListBudgets(e.ctx, o)
				if err != nil || p.NextCursor == "" {
					b.Fatalf("ListBudgets = %v", err)
				}
			}
		})
	}
}

// TestGetQuotaSubjectsBounded: GetQuota reads at most QuotaGetSubjectsMax
// key values of a keyed quota (the first by key), counts the others, and
// GetQuotaKey reads any one of them. The key values are read in several
// SSCAN steps (more than quotaKeysStep of them).
func TestGetQuotaSubjectsBounded(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	id := QuotaID("big", "per_tenant")
	e.upsertQuota(id, "tenant")
	p := e.s.quotaPart(id)
	n := max(QuotaGetSubjectsMax, 2*quotaKeysStep) + 3
	keys := make([]string, 0, n)
	for i := range n {
		keys = append(keys, fmt.Sprintf("t%05d", i))
	}
	if err := e.c.Do(e.ctx, e.c.B().Sadd().Key(e.s.k.quota(p, id)+":keys").Member(keys...).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	q, err := e.s.GetQuota(e.ctx, id)
	if err != nil || len(q.Subjects) != QuotaGetSubjectsMax || q.SubjectsMore != n-QuotaGetSubjectsMax ||
		q.Subjects[0].Key != "t00000" || q.Subjects[QuotaGetSubjectsMax-1].Key != keys[QuotaGetSubjectsMax-1] {
		t.Fatalf("GetQuota: %d subjects, %d more, %v; want the first %d by key and %d more",
			len(q.Subjects), q.SubjectsMore, err, QuotaGetSubjectsMax, n-QuotaGetSubjectsMax)
	}
	last := keys[len(keys)-1]
	if q, err := e.s.GetQuotaKey(e.ctx, id, last); err != nil || len(q.Subjects) != 1 || q.Subjects[0].Key != last {
		t.Fatalf("GetQuotaKey(%s) = %+v, %v", last, q, err)
	}
}

// A lock is released only by its holder: a pass that outlived its lock
// leaves the next holder's alone.
func TestUnlockOnlyByHolder(t *testing.T) {
	e := newEnv(t)
	lock := e.s.k.prefix + limitsBackfillLock
	if err := e.c.Do(e.ctx, e.c.B().Set().Key(lock).Value("next").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	unlock := func(token string) int64 {
		t.Helper()
		items, err := e.s.single(e.ctx, call{fn: "ff_unlock", keys: []string{lock}, args: []string{token}}, "", "unlock")
		if err != nil {
			t.Fatal(err)
		}
		n, err := items[0].AsInt64()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := unlock("earlier"); n != 0 {
		t.Fatalf("unlock by another token = %d, want 0", n)
	}
	if v, err := e.c.Do(e.ctx, e.c.B().Get().Key(lock).Build()).ToString(); err != nil || v != "next" {
		t.Fatalf("lock after another's unlock = %q, %v; want it kept", v, err)
	}
	if n := unlock("next"); n != 1 {
		t.Fatalf("unlock by the holder = %d, want 1", n)
	}
	if n := unlock("next"); n != 0 {
		t.Fatalf("unlock of a free lock = %d, want 0", n)
	}
}
