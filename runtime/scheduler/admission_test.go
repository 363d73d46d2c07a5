package scheduler_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flowfabric/ff/runtime/internal/valkeytest"
	"github.com/flowfabric/ff/runtime/scheduler"
	"github.com/flowfabric/ff/runtime/store"
)

// faultStore is the real store with switchable failures of the admission
// reads, and a count of those reads.
type faultStore struct {
	*store.Store
	budgetErr, unionErr atomic.Bool
	budgetReads         atomic.Int64 // ClaimBreaches
	versionReads        atomic.Int64 // BreachVersion
	claims              atomic.Int64
}

var errInjected = errors.New("injected transport error")

func (f *faultStore) ClaimBreaches(ctx context.Context) (store.BreachSet, error) {
	f.budgetReads.Add(1)
	if f.budgetErr.Load() {
		return store.BreachSet{}, errInjected
	}
	return f.Store.ClaimBreaches(ctx)
}

func (f *faultStore) BreachVersion(ctx context.Context) (string, error) {
	f.versionReads.Add(1)
	if f.budgetErr.Load() {
		return "", errInjected
	}
	return f.Store.BreachVersion(ctx)
}

func (f *faultStore) CapabilityUnion(ctx context.Context, ns string) ([]string, error) {
	if f.unionErr.Load() {
		return nil, errInjected
	}
	return f.Store.CapabilityUnion(ctx, ns)
}

func (f *faultStore) ClaimAdmitted(ctx context.Context, req store.ClaimRequest) ([]store.Grant, error) {
	f.claims.Add(1)
	return f.Store.ClaimAdmitted(ctx, req)
}

func newFaultEnv(t *testing.T, partitions, scanMax int) (*faultStore, *scheduler.Scheduler) {
	t.Helper()
	ctx := context.Background()
	vk := valkeytest.Client(t, valkeytest.Shared(t))
	st, err := store.Open(ctx, store.Config{Client: vk, FlowPartitions: partitions, KeyPrefix: valkeytest.Prefix(t)})
	if err != nil {
		t.Fatal(err)
	}
	fs := &faultStore{Store: st}
	s, err := scheduler.New(scheduler.Config{Store: fs, ScanMax: scanMax, ResyncInterval: time.Hour, UnionTTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Stop(context.Background()) })
	return fs, s
}

// Budgets fail closed: when the budgets at a hard limit cannot be read, no
// claim is made and nothing is granted; the read happens once per scan
// cycle, not once per partition.
func TestBudgetReadFailsClosed(t *testing.T) {
	t.Parallel()
	fs, s := newFaultEnv(t, 4, 8)
	ctx := context.Background()
	// Idempotency keys spread the executions over the partitions (without
	// one they would share the current placement streak's partition): the
	// scan below must cross several.
	parts := map[int]bool{}
	var ex *store.Execution
	for i := range 16 {
		e, _, err := fs.CreateExecution(ctx, store.CreateRequest{Kind: "k", Lane: "fc", IdempotencyKey: fmt.Sprintf("spread-%d", i)})
		if err != nil {
			t.Fatal(err)
		}
		if ex == nil {
			ex = e
		}
		parts[e.Partition] = true
	}
	if len(parts) < 2 {
		t.Fatalf("the 16 executions landed on %d partition(s), want several", len(parts))
	}
	fs.budgetErr.Store(true)
	grants, err := s.Claim(ctx, req("fc", 1, 0))
	if !errors.Is(err, errInjected) || len(grants) != 0 {
		t.Fatalf("claim with unreadable budgets: %v %v, want the injected error and no grant", grants, err)
	}
	if n := fs.claims.Load(); n != 0 {
		t.Fatalf("%d claim calls with unreadable budgets, want 0", n)
	}
	got, err := fs.GetExecution(ctx, ex.ID)
	if err != nil || got.State.Public != store.StateWaiting {
		t.Fatalf("execution after the refused claim: %v %v", got.State.Public, err)
	}
	fs.budgetErr.Store(false)
	before := fs.budgetReads.Load()
	grants, err = s.Claim(ctx, req("fc", 100, 0)) // scans every partition
	if err != nil || len(grants) != 16 {
		t.Fatalf("claim: %v %v", grants, err)
	}
	if reads := fs.budgetReads.Load() - before; reads != 1 || fs.claims.Load() < 2 {
		t.Fatalf("%d budget reads for one scan cycle of %d claim calls, want 1", reads, fs.claims.Load())
	}
}

// The capability union fails open: when it cannot be read, a candidate the
// worker cannot run is passed over, never parked; when it can, a candidate
// no connected worker can run is parked as waiting_for_capable_worker.
func TestCapabilityUnionFailsOpen(t *testing.T) {
	t.Parallel()
	fs, s := newFaultEnv(t, 1, 8)
	ctx := context.Background()
	ex, _, err := fs.CreateExecution(ctx, store.CreateRequest{Kind: "k", Lane: "caps", RequiredCapabilities: []string{"gpu"}})
	if err != nil {
		t.Fatal(err)
	}
	fs.unionErr.Store(true)
	grants, err := s.Claim(ctx, req("caps", 1, 0))
	if err != nil || len(grants) != 0 {
		t.Fatalf("claim with no union: %v %v", grants, err)
	}
	got, _ := fs.GetExecution(ctx, ex.ID)
	if got.State.Public != store.StateWaiting {
		t.Fatalf("with the union unreadable the execution is %s, want waiting (fail open)", got.State.Public)
	}
	fs.unionErr.Store(false)
	// Another group (the first claim marked the partition as holding
	// nothing for its group).
	cpu := req("caps", 1, 0)
	cpu.Worker.Capabilities = []string{"cpu"}
	if _, err := s.Claim(ctx, cpu); err != nil {
		t.Fatal(err)
	}
	got, _ = fs.GetExecution(ctx, ex.ID)
	if got.State.Public != store.StateBlocked || got.State.BlockingReason != store.WaitingForCapableWorker {
		t.Fatalf("with the union known the execution is %s/%s, want blocked/waiting_for_capable_worker", got.State.Public, got.State.BlockingReason)
	}
	// A gpu worker connecting, its capabilities added to the union, lets it run.
	w := store.WorkerIdentity{WorkerID: "g", InstanceID: "g-1", Namespace: "default", Capabilities: []string{"gpu"}}
	if _, err := fs.Heartbeat(ctx, store.Registration{Worker: w, Lanes: []string{"caps"}}); err != nil {
		t.Fatal(err)
	}
	if union, added, err := s.Connected(ctx, "default", w.Capabilities); err != nil || !added || !slices.Equal(union, []string{"gpu"}) {
		t.Fatalf("Connected = %v, %v, %v; want [gpu], added", union, added, err)
	}
	if _, err := fs.UnblockRoute(ctx, 0, "default", []string{"gpu"}, 10, nil); err != nil {
		t.Fatal(err)
	}
	gr := req("caps", 1, 0)
	gr.Worker = w
	grants, err = s.Claim(ctx, gr)
	if err != nil || len(grants) != 1 || grants[0].ExecutionID != ex.ID {
		t.Fatalf("gpu worker claim: %v %v", grants, err)
	}
}

// Different worker instances start their scans on different partitions
// (jitter), and each instance's scans continue where its last one stopped.
func TestPerWorkerCursor(t *testing.T) {
	t.Parallel()
	const partitions = 8
	fs, s := newFaultEnv(t, partitions, 1)
	ctx := context.Background()
	// Two executions per partition.
	ids := map[store.ExecutionID]int{}
	seen := map[int]int{}
	for i := 0; len(seen) < partitions || minCount(seen) < 2; i++ {
		if i > 2000 {
			t.Fatal("could not fill every partition")
		}
		ex, _, err := fs.CreateExecution(ctx, store.CreateRequest{Kind: "k", Lane: "cur", IdempotencyKey: "k" + string(rune('a'+i%26)) + string(rune('a'+i/26%26)) + string(rune('a'+i/676))})
		if err != nil {
			t.Fatal(err)
		}
		if seen[ex.Partition] >= 2 {
			if _, err := fs.Cancel(ctx, ex.ID, "extra"); err != nil {
				t.Fatal(err)
			}
			continue
		}
		seen[ex.Partition]++
		ids[ex.ID] = ex.Partition
	}
	first := map[string]int{}
	served := map[string]map[int]bool{}
	for round := range partitions {
		for _, inst := range []string{"alpha-1", "beta-7"} {
			r := req("cur", 1, 0)
			r.Worker.InstanceID = inst
			grants, err := s.Claim(ctx, r)
			if err != nil || len(grants) != 1 {
				t.Fatalf("round %d %s: %v %v", round, inst, grants, err)
			}
			p := ids[grants[0].ExecutionID]
			if round == 0 {
				first[inst] = p
				served[inst] = map[int]bool{}
			}
			served[inst][p] = true
		}
	}
	if first["alpha-1"] == first["beta-7"] {
		t.Errorf("both instances started on partition %d: no per-worker jitter", first["alpha-1"])
	}
	for inst, got := range served {
		if len(got) != partitions {
			t.Errorf("%s: %d claims served partitions %v, want all %d", inst, partitions, got, partitions)
		}
	}
}
