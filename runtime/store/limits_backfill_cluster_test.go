package store

import (
	"fmt"
	"testing"

	"github.com/flowfabric/ff/compiler/plan"
	"github.com/google/go-cmp/cmp"
	"github.com/valkey-io/valkey-go"
)

// TestBackfillNeedsEveryPrimary: a pass of the index backfill on a
// cluster one of whose nodes does not answer ROLE (denied by ACL here; a
// timeout or a reset in production) fails, and does not mark the
// deployment: marked, the keys of the node left out would never be
// indexed. The next pass, the node answering again, indexes them all.
func TestBackfillNeedsEveryPrimary(t *testing.T) {
	t.Parallel()
	e, addrs := clusterEnv(t)
	ctx, s := e.ctx, e.s
	var budgets []string
	for i := range 40 {
		id := BudgetID("ns", fmt.Sprintf("b%02d", i))
		e.upsertBudget(id, plan.ScopeShared)
		budgets = append(budgets, id)
	}
	e.dropIndexes() // as a release without indexes left it

	// One primary does not answer ROLE while the pass runs.
	node, err := valkey.NewClient(valkey.ClientOption{InitAddress: []string{addrs[1]}, DisableCache: true, ForceSingleClient: true})
	if err != nil {
		t.Fatal(err)
	}
	defer node.Close()
	acl := func(rule string) {
		t.Helper()
		if err := node.Do(ctx, node.B().AclSetuser().Username("default").Rule(rule).Build()).Error(); err != nil {
			t.Fatal(err)
		}
	}
	acl("-role")
	r, err := s.BackfillLimitIndexes(ctx)
	acl("+role")
	if err == nil || r.Done {
		t.Fatalf("BackfillLimitIndexes with a node not answering = %+v, %v; want an error and no mark", r, err)
	}
	r, err = s.BackfillLimitIndexes(ctx)
	if err != nil || !r.Done {
		t.Fatalf("the next pass = %+v, %v; want it done", r, err)
	}
	if d := cmp.Diff(budgets, e.listAllBudgets(ListBudgetsOptions{})); d != "" {
		t.Errorf("budgets listed after the backfill (-want +got):\n%s", d)
	}
}
