package scheduler_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/flowfabric/ff/runtime/internal/valkeytest"
	"github.com/flowfabric/ff/runtime/scheduler"
	"github.com/flowfabric/ff/runtime/store"
)

func TestMain(m *testing.M) {
	code := m.Run()
	valkeytest.StopShared()
	os.Exit(code)
}

type env struct {
	st    *store.Store
	sched *scheduler.Scheduler
}

func newEnv(t *testing.T, partitions, scanMax int) *env {
	t.Helper()
	ctx := context.Background()
	addr := valkeytest.Shared(t)
	vk := valkeytest.Client(t, addr)
	st, err := store.Open(ctx, store.Config{Client: vk, FlowPartitions: partitions, KeyPrefix: valkeytest.Prefix(t)})
	if err != nil {
		t.Fatal(err)
	}
	s, err := scheduler.New(scheduler.Config{
		Store: st, Subscribe: scheduler.ValkeySubscriber(vk, st.WakeChannel()),
		ScanMax: scanMax, ResyncInterval: time.Hour,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Stop(context.Background()) })
	return &env{st: st, sched: s}
}

func (e *env) create(t *testing.T, n int, lane string) map[store.ExecutionID]int {
	t.Helper()
	out := map[store.ExecutionID]int{}
	for range n {
		ex, _, err := e.st.CreateExecution(context.Background(), store.CreateRequest{Kind: "k", Lane: lane})
		if err != nil {
			t.Fatal(err)
		}
		out[ex.ID] = ex.Partition
	}
	return out
}

func req(lane string, max int, wait time.Duration) scheduler.Request {
	return scheduler.Request{
		Worker: store.WorkerIdentity{WorkerID: "w", InstanceID: "w-1", Namespace: "default"},
		Lanes:  []string{lane}, Max: max, LeaseTTL: time.Minute, Wait: wait,
	}
}

// TestBoundedScanReachesEveryPartition: one attempt claims from at most
// ScanMax partitions, and rotating attempts reach every partition within
// ceil(partitions/ScanMax) attempts once the hints are exact.
func TestBoundedScanReachesEveryPartition(t *testing.T) {
	t.Parallel()
	const partitions, scanMax = 8, 2
	e := newEnv(t, partitions, scanMax)
	ids := e.create(t, 64, "scan")
	remaining := map[store.ExecutionID]bool{}
	for id := range ids {
		remaining[id] = true
	}
	ctx := context.Background()
	attempts := 0
	for len(remaining) > 0 {
		attempts++
		if attempts > 64 {
			t.Fatalf("%d executions never claimed after %d attempts", len(remaining), attempts)
		}
		grants, err := e.sched.Claim(ctx, req("scan", 64, 0))
		if err != nil {
			t.Fatal(err)
		}
		parts := map[int]bool{}
		for _, g := range grants {
			if !remaining[g.ExecutionID] {
				t.Fatalf("granted %s twice or unknown", g.ExecutionID)
			}
			delete(remaining, g.ExecutionID)
			parts[ids[g.ExecutionID]] = true
		}
		if len(parts) > scanMax {
			t.Fatalf("attempt %d claimed from %d partitions, the bound is %d", attempts, len(parts), scanMax)
		}
	}
	if bound := (partitions+scanMax-1)/scanMax + 1; attempts > bound {
		t.Fatalf("took %d attempts to drain %d partitions, want at most %d", attempts, partitions, bound)
	}
	// Empty now: an attempt makes no claim call on partitions known empty
	// and returns nothing.
	grants, err := e.sched.Claim(ctx, req("scan", 8, 0))
	if err != nil || len(grants) != 0 {
		t.Fatalf("claim on empty lane: %v %v", grants, err)
	}
}

// TestWaitersAllServed: many parked claims of one group and a burst of work:
// the baton passes until every task is granted once.
func TestWaitersAllServed(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 4, 8)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	const waiters = 8
	var mu sync.Mutex
	got := map[store.ExecutionID]int{}
	var wg sync.WaitGroup
	for range waiters {
		wg.Go(func() {
			grants, err := e.sched.Claim(ctx, req("burst", 1, time.Minute))
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			for _, g := range grants {
				got[g.ExecutionID]++
			}
			mu.Unlock()
		})
	}
	time.Sleep(50 * time.Millisecond)
	ids := e.create(t, waiters, "burst")
	wg.Wait()
	if ctx.Err() != nil {
		t.Fatalf("waiters were not all served: %d of %d tasks granted", len(got), waiters)
	}
	for id := range ids {
		if got[id] != 1 {
			t.Errorf("%s granted %d times", id, got[id])
		}
	}
}

func TestStopReleasesWaiters(t *testing.T) {
	t.Parallel()
	e := newEnv(t, 2, 8)
	done := make(chan error, 1)
	go func() {
		grants, err := e.sched.Claim(context.Background(), req("quiet", 1, time.Minute))
		if err == nil && len(grants) != 0 {
			err = context.Canceled
		}
		done <- err
	}()
	time.Sleep(20 * time.Millisecond)
	if err := e.sched.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Stop did not release the waiting claim")
	}
	if err := e.sched.Stop(context.Background()); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
}

// TestRotationServesEveryPartition: single-task claims rotate their start,
// so with work everywhere every partition is served within `partitions`
// consecutive attempts (no partition starves behind another).
func TestRotationServesEveryPartition(t *testing.T) {
	t.Parallel()
	const partitions = 4
	e := newEnv(t, partitions, 8)
	// Fill every partition with at least two executions.
	ids := map[store.ExecutionID]int{}
	perPart := map[int]int{}
	for i := 0; len(perPart) < partitions || minCount(perPart) < 2; i++ {
		if i > 1000 {
			t.Fatalf("could not fill every partition: %v", perPart)
		}
		ex, _, err := e.st.CreateExecution(context.Background(), store.CreateRequest{Kind: "k", Lane: "rot", IdempotencyKey: fmt.Sprint("key-", i)})
		if err != nil {
			t.Fatal(err)
		}
		ids[ex.ID] = ex.Partition
		perPart[ex.Partition]++
	}
	served := map[int]bool{}
	for range partitions {
		grants, err := e.sched.Claim(context.Background(), req("rot", 1, 0))
		if err != nil || len(grants) != 1 {
			t.Fatalf("claim: %v %v", grants, err)
		}
		served[ids[grants[0].ExecutionID]] = true
	}
	if len(served) != partitions {
		t.Fatalf("%d consecutive claims served partitions %v, want all %d", partitions, served, partitions)
	}
}

func minCount(m map[int]int) int {
	least := -1
	for _, n := range m {
		if least < 0 || n < least {
			least = n
		}
	}
	return least
}
