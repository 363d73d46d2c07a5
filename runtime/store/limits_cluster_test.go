package store

import (
	"context"
	"fmt"
	"testing"

	"github.com/flowfabric/ff/compiler/plan"
	"github.com/flowfabric/ff/runtime/internal/valkeytest"
	"github.com/google/go-cmp/cmp"
)

// TestClusterListsAndBackfillsLimits: on a Valkey Cluster of three
// primaries, budgets and quotas on partitions of every node are listed in
// one id order, and the backfill scans every primary.
func TestClusterListsAndBackfillsLimits(t *testing.T) {
	t.Parallel()
	e, _ := clusterEnv(t)
	var budgets, quotas []string
	for i := range 40 {
		id := BudgetID("ns", fmt.Sprintf("b%02d", i))
		e.upsertBudget(id, plan.ScopeShared)
		budgets = append(budgets, id)
	}
	for i := range 20 {
		id := QuotaID("ns", fmt.Sprintf("q%02d", i))
		e.upsertQuota(id, "")
		quotas = append(quotas, id)
	}
	check := func(when string) {
		t.Helper()
		if d := cmp.Diff(budgets, e.listAllBudgets(ListBudgetsOptions{Limit: 7})); d != "" {
			t.Fatalf("%s: budgets (-want +got):\n%s", when, d)
		}
		if d := cmp.Diff(quotas, e.listAllQuotas(ListQuotasOptions{Limit: 6})); d != "" {
			t.Fatalf("%s: quotas (-want +got):\n%s", when, d)
		}
	}
	check("indexed at creation")
	e.dropIndexes()
	r, err := e.s.BackfillLimitIndexes(e.ctx)
	if err != nil || r != (LimitsBackfill{Budgets: len(budgets), Quotas: len(quotas), Done: true}) {
		t.Fatalf("BackfillLimitIndexes = %+v, %v", r, err)
	}
	check("after the backfill")
}

// clusterEnv is a store on a Valkey Cluster of three primaries of its own,
// with 16 budget and quota partitions (spread over the nodes), and the
// nodes' addresses.
func clusterEnv(t *testing.T) (*env, []string) {
	t.Helper()
	ctx := context.Background()
	addrs := valkeytest.StartCluster(t, 3)
	c := valkeytest.Client(t, addrs[0])
	cfg := Config{Client: c, KeyPrefix: valkeytest.Prefix(t), FlowPartitions: 4, BudgetPartitions: 16, QuotaPartitions: 16,
		Logger: testLogger(t)}
	s, err := Open(ctx, cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return &env{t: t, ctx: ctx, c: c, s: s, prefix: cfg.KeyPrefix}, addrs
}
