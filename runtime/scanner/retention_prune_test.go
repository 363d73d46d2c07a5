package scanner

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/flowfabric/ff/runtime/internal/valkeytest"
	"github.com/flowfabric/ff/runtime/store"
)

// The cost of a scanner tick on an idle deployment does not grow with the
// lanes and namespaces seen since it began: the retention scanner drops
// the lanes left holding nothing and the namespaces left without a worker
// from the registries the scanners walk. Here: a deployment with no work
// and no connected worker, before and after 60 one-off lanes and 30
// vanished namespaces whose every execution retention deleted; one tick of
// the unblock scanner and of the delayed promoter costs the same on both.
func TestIdleTickCostDoesNotGrowWithLanesAndNamespacesSeen(t *testing.T) {
	c := valkeytest.Client(t, valkeytest.Start(t))
	ctx := context.Background()
	s, err := store.Open(ctx, store.Config{Client: c, KeyPrefix: valkeytest.Prefix(t), FlowPartitions: 4})
	if err != nil {
		t.Fatal(err)
	}
	unblock, err := NewUnblock(UnblockConfig{Store: s})
	if err != nil {
		t.Fatal(err)
	}
	delayed, err := NewDelayed(DelayedConfig{Store: s})
	if err != nil {
		t.Fatal(err)
	}
	cost := func() (int64, int64) {
		t.Helper()
		a := valkeytest.CommandCalls(t, c)
		if _, _, err := unblock.RunOnce(ctx); err != nil {
			t.Fatal(err)
		}
		b := valkeytest.CommandCalls(t, c)
		if _, _, err := delayed.RunOnce(ctx); err != nil {
			t.Fatal(err)
		}
		return b - a, valkeytest.CommandCalls(t, c) - b
	}
	for i := range 4 {
		runOneOff(t, s, "default", "default", i)
	}
	purgeEvery(t, s)
	u0, d0 := cost()

	for i := range 60 {
		runOneOff(t, s, fmt.Sprintf("ns-%d", i%30), fmt.Sprintf("lane-%d", i), i)
	}
	for i := range 30 {
		w := store.WorkerIdentity{WorkerID: "w", InstanceID: "i" + strconv.Itoa(i), Namespace: fmt.Sprintf("ns-%d", i)}
		if _, err := s.Heartbeat(ctx, store.Registration{Worker: w, TTL: store.LeaseTTLMin}); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(store.LeaseTTLMin + 50*time.Millisecond)
	purgeEvery(t, s)
	u1, d1 := cost()
	if u1 > u0 || d1 > d0 {
		t.Errorf("commands of one idle tick, no work and no worker anywhere: unblock %d, delayed %d; "+
			"the same after 60 one-off lanes and 30 vanished namespaces were deleted by retention: unblock %d, delayed %d "+
			"(want no growth)", u0, d0, u1, d1)
	}
}

// runOneOff creates one execution in ns and lane, runs it to success.
func runOneOff(t testing.TB, s *store.Store, ns, lane string, i int) {
	t.Helper()
	ctx := context.Background()
	x, _, err := s.CreateExecution(ctx, store.CreateRequest{Namespace: ns, Lane: lane, Kind: "k"})
	if err != nil {
		t.Fatal(err)
	}
	w := store.WorkerIdentity{WorkerID: "w", InstanceID: "w-" + strconv.Itoa(i), Namespace: ns}
	for p := range s.FlowPartitions() {
		g, err := s.Claim(ctx, store.ClaimRequest{Partition: p, Lanes: []string{lane}, Worker: w, Max: 1, LeaseTTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if len(g) == 1 {
			if g[0].ExecutionID != x.ID {
				t.Fatalf("granted %s, want %s", g[0].ExecutionID, x.ID)
			}
			if err := s.Complete(ctx, g[0].Lease, nil); err != nil {
				t.Fatal(err)
			}
			return
		}
	}
	t.Fatalf("%s not granted", x.ID)
}

// purgeEvery runs the retention scanner (age 1 ms) until nothing is due.
func purgeEvery(t testing.TB, s *store.Store) {
	t.Helper()
	sc, err := NewRetention(RetentionConfig{Store: s, Age: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Millisecond)
	for range 1000 {
		_, more, err := sc.RunOnce(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if !more {
			return
		}
	}
	t.Fatal("retention does not converge")
}
