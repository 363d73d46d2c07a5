package store

import (
	"fmt"
	"testing"
)

// TestNamespaceSummariesSumPartitions: a lane on several partitions is one
// entry whose counts are summed; one namespace can be asked for, and the
// lanes left out.
func TestNamespaceSummariesSumPartitions(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	parts := map[int]bool{}
	for i := range 12 {
		// Idempotency keys spread the executions over the partitions.
		x := e.create(CreateRequest{Namespace: "spread", Lane: "l", IdempotencyKey: fmt.Sprint("k", i)})
		p, _, _ := e.s.locate(x.ID)
		parts[p] = true
	}
	if len(parts) < 2 {
		t.Fatalf("12 executions on %d partition(s): the test needs several", len(parts))
	}
	e.create(CreateRequest{Namespace: "other", Lane: "m"})
	got, err := e.s.NamespaceSummaries(e.ctx, NamespaceOptions{Namespace: "spread", Lanes: true})
	if err != nil || len(got) != 1 || got[0].Name != "spread" || len(got[0].Lanes) != 1 || got[0].Lanes[0].Eligible != 12 {
		t.Fatalf("NamespaceSummaries(spread) = %+v, %v; want one lane with 12 eligible", got, err)
	}
	all, err := e.s.NamespaceSummaries(e.ctx, NamespaceOptions{})
	if err != nil || len(all) != 2 || all[0].Name != "other" || all[1].Name != "spread" || all[0].Lanes != nil {
		t.Fatalf("NamespaceSummaries() = %+v, %v; want other and spread, without lanes", all, err)
	}
	if _, err := e.s.NamespaceSummaries(e.ctx, NamespaceOptions{Namespace: "a b"}); err == nil {
		t.Fatal("a bad namespace was taken")
	}
}
