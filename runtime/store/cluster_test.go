package store

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flowfabric/ff/lua"
	"github.com/flowfabric/ff/runtime/internal/valkeytest"
	"github.com/valkey-io/valkey-go"
)

// TestClusterOfThreePrimaries: on a Valkey Cluster of three primaries the
// library is loaded on each one and Ready checks each one; a primary that
// lost it (FUNCTION FLUSH, as after a restart without persistence) gets it
// back at the first call that finds it missing; and plain tasks under a
// budget and a quota, spread over partitions of every node, are admitted,
// counted and released; and an idle library version is deleted from each.
func TestClusterOfThreePrimaries(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	addrs := valkeytest.StartCluster(t, 3)
	c := valkeytest.Client(t, addrs[0])
	cfg := Config{Client: c, KeyPrefix: valkeytest.Prefix(t), FlowPartitions: 16, Logger: testLogger(t)}
	s, err := Open(ctx, cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	e := &env{t: t, ctx: ctx, c: c, s: s, prefix: cfg.KeyPrefix}
	nodes := make([]valkey.Client, len(addrs))
	for i, addr := range addrs {
		n, err := valkey.NewClient(valkey.ClientOption{InitAddress: []string{addr}, DisableCache: true, ForceSingleClient: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(n.Close)
		nodes[i] = n
		if v, err := n.Do(ctx, n.B().Fcall().Function(lua.Function("ff_version")).Numkeys(0).Build()).ToString(); err != nil || v != lua.Version() {
			t.Fatalf("node %s after Open: ff_version = %q, %v; want %s on every primary", addr, v, err, lua.Version())
		}
	}
	if err := s.Ready(ctx); err != nil {
		t.Fatalf("Ready: %v", err)
	}

	if err := nodes[1].Do(ctx, nodes[1].B().FunctionFlush().Build()).Error(); err != nil {
		t.Fatal(err)
	}
	if err := s.Ready(ctx); err == nil || !strings.Contains(err.Error(), addrs[1]) {
		t.Fatalf("Ready with the library gone from %s: %v, want an error naming that node", addrs[1], err)
	}

	if _, err := s.UpsertBudget(ctx, BudgetSpec{ID: "default/spend", Dimensions: []BudgetDimension{{Name: "units", Hard: 1000}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.UpsertQuota(ctx, QuotaSpec{ID: "default/cap", Concurrency: 100}); err != nil {
		t.Fatal(err)
	}
	// Idempotency keys spread the tasks over the partitions.
	const n = 24
	created := map[ExecutionID]bool{}
	for i := range n {
		x := e.create(CreateRequest{IdempotencyKey: "task-" + strconv.Itoa(i), Budgets: []string{"spend"}, Quotas: []string{"cap"}})
		created[x.ID] = true
	}
	var grants []Grant
	for len(grants) < n {
		g := e.claimAdm(worker1, n-len(grants), time.Minute)
		if len(g) == 0 {
			t.Fatalf("claimed %d of %d tasks", len(grants), n)
		}
		grants = append(grants, g...)
	}
	if q := e.quota("default/cap"); q.Subjects[0].Active != n {
		t.Fatalf("quota slots held while running: %d, want %d", q.Subjects[0].Active, n)
	}
	for _, g := range grants {
		if !created[g.ExecutionID] {
			t.Fatalf("granted %s, which this test did not create", g.ExecutionID)
		}
		if _, err := s.ReportExecutionUsage(ctx, g.ExecutionID, "units", 1, "k-"+string(g.ExecutionID)); err != nil {
			t.Fatal(err)
		}
		if err := s.Complete(ctx, g.Lease, []byte("ok")); err != nil {
			t.Fatal(err)
		}
		e.wantState(g.ExecutionID, StateCompleted)
	}
	e.drain()
	if q := e.quota("default/cap"); q.Subjects[0].Active != 0 {
		t.Errorf("quota slots held after completion: %d, want 0", q.Subjects[0].Active)
	}
	if b := e.budget("default/spend"); b.Dimensions[0].Used != n {
		t.Errorf("budget used %d, want %d", b.Dimensions[0].Used, n)
	}
	if err := s.Ready(ctx); err != nil {
		t.Errorf("Ready after the reload: %v", err)
	}

	// The tasks' partitions live on every node.
	holders := map[int]bool{}
	for id := range created {
		p, _ := id.Partition()
		slot, err := nodes[0].Do(ctx, nodes[0].B().ClusterKeyslot().Key(e.s.k.anchor(p)).Build()).AsInt64()
		if err != nil {
			t.Fatal(err)
		}
		for i, n := range nodes {
			if k, err := n.Do(ctx, n.B().ClusterCountkeysinslot().Slot(slot).Build()).AsInt64(); err == nil && k > 0 {
				holders[i] = true
			}
		}
	}
	if len(holders) != len(nodes) {
		t.Errorf("tasks stored on nodes %v, want all %d: create more or other keys", holders, len(nodes))
	}

	// An idle library version is deleted from every primary.
	for _, n := range nodes {
		loadOtherVersion(t, n)
	}
	idle := strconv.FormatInt(time.Now().Add(-LibraryIdleAfter-time.Minute).UnixMilli(), 10)
	c.Do(ctx, c.B().Hset().Key(s.k.libraries()).FieldValue().FieldValue(otherVersion, idle).Build())
	if k, err := s.KeepLibrary(ctx); err != nil || k != 1 {
		t.Fatalf("KeepLibrary with an idle version on every primary = %d, %v", k, err)
	}
	for i, n := range nodes {
		if got := loadedLibraries(t, n); len(got) != 1 || got[0] != lua.Library() {
			t.Errorf("node %s: libraries %v, want only %s", addrs[i], got, lua.Library())
		}
	}
}
