package scheduler

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/flowfabric/ff/runtime/internal/valkeytest"
	"github.com/flowfabric/ff/runtime/store"
)

// These tests drive the scheduler's internals (the re-arm hook, the group's
// cursor, its waiters) against the real store. The scheduler is not
// started: no subscription and no resync loop, so the only wake-ups are
// those the test delivers through wake, at exact points.

func newUnstarted(t *testing.T, partitions, scanMax int, resync time.Duration) (*store.Store, *Scheduler) {
	t.Helper()
	ctx := context.Background()
	vk := valkeytest.Client(t, valkeytest.Shared(t))
	st, err := store.Open(ctx, store.Config{Client: vk, FlowPartitions: partitions, KeyPrefix: valkeytest.Prefix(t)})
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(Config{Store: st, ScanMax: scanMax, ResyncInterval: resync, UnionTTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	return st, s
}

func kindReq(lane, kind string, wait time.Duration) Request {
	return Request{
		Worker: store.WorkerIdentity{WorkerID: "w", InstanceID: "w-1", Namespace: "default"},
		Lanes:  []string{lane}, Max: 1, LeaseTTL: time.Minute, Wait: wait, Kinds: []string{kind},
	}
}

type claimResult struct {
	grants []store.Grant
	err    error
}

func claimAsync(ctx context.Context, s *Scheduler, req Request) <-chan claimResult {
	ch := make(chan claimResult, 1)
	go func() {
		grants, err := s.Claim(ctx, req)
		ch <- claimResult{grants, err}
	}()
	return ch
}

// waitParked returns once g has one waiter and it is parked (idle).
func waitParked(t *testing.T, s *Scheduler, g *group) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		s.mu.Lock()
		parked := len(g.waiters) == 1 && g.waiters[0].idle
		s.mu.Unlock()
		if parked {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the claim did not park")
		}
		time.Sleep(time.Millisecond)
	}
}

// otherKindEverywhere creates a task of kind "y" on every partition and
// then one of kind "x", and returns the x task's id and partition.
func otherKindEverywhere(t *testing.T, st *store.Store, lane string) (store.ExecutionID, int) {
	t.Helper()
	ctx := context.Background()
	covered := map[int]bool{}
	for i := 0; len(covered) < st.FlowPartitions(); i++ {
		if i > 1000 {
			t.Fatalf("could not cover every partition: %v", covered)
		}
		ex, _, err := st.CreateExecution(ctx, store.CreateRequest{Kind: "y", Lane: lane, IdempotencyKey: fmt.Sprint("y-", i)})
		if err != nil {
			t.Fatal(err)
		}
		covered[ex.Partition] = true
	}
	ex, _, err := st.CreateExecution(ctx, store.CreateRequest{Kind: "x", Lane: lane})
	if err != nil {
		t.Fatal(err)
	}
	return ex.ID, ex.Partition
}

// TestWakeUpWhileRearmingKeepsWaiterWakeable: a wake-up that reaches a
// waiter while it re-arms for an attempt is answered by that attempt, and
// the waiter still hears the next wake-up. (When the pending flag was
// cleared under the lock but the channel drained after it, a wake-up in
// between was drained while the flag stayed set, and every later wake-up
// skipped the waiter until its wait ran out.)
func TestWakeUpWhileRearmingKeepsWaiterWakeable(t *testing.T) {
	t.Parallel()
	st, s := newUnstarted(t, 1, 8, time.Hour)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req := kindReq("rearm", "k", time.Minute) // far longer than ctx: only a wake-up can serve it
	g := s.group(req)
	wake := store.Wake{Partition: 0, Namespace: "default", Lane: "rearm"}.String()
	var once sync.Once
	s.rearmed = func() { once.Do(func() { s.wake(wake) }) } // nothing behind this one
	got := claimAsync(ctx, s, req)
	waitParked(t, s, g)
	ex, _, err := st.CreateExecution(ctx, store.CreateRequest{Kind: "k", Lane: "rearm"})
	if err != nil {
		t.Fatal(err)
	}
	s.wake(wake)
	r := <-got
	if r.err != nil {
		t.Fatal(r.err)
	}
	if len(r.grants) != 1 || r.grants[0].ExecutionID != ex.ID {
		t.Fatalf("claim returned %v (ctx: %v), want %s: the wake-up did not reach the parked claim", r.grants, ctx.Err(), ex.ID)
	}
}

// TestEmptyAttemptGoesOnPastScanMax: every partition is hinted (other
// kinds' work) and the one holding the claim's kind comes last in its
// scan. ScanMax 1 lets each attempt try one partition; the claim must not
// answer empty (no wait), nor park (a wait with no wake-up to come), while
// hinted partitions are left untried.
func TestEmptyAttemptGoesOnPastScanMax(t *testing.T) {
	t.Parallel()
	for _, wait := range []time.Duration{0, time.Minute} {
		t.Run(fmt.Sprint("wait=", wait), func(t *testing.T) {
			t.Parallel()
			const partitions = 8
			st, s := newUnstarted(t, partitions, 1, time.Hour)
			lane := fmt.Sprint("past", wait.Milliseconds())
			id, p := otherKindEverywhere(t, st, lane)
			req := kindReq(lane, "x", wait)
			s.advance(s.group(req), req.Worker.InstanceID, (p+1)%partitions)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			grants, err := s.Claim(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			if len(grants) != 1 || grants[0].ExecutionID != id {
				t.Fatalf("claim returned %v (ctx: %v), want %s from partition %d, the last of its scan", grants, ctx.Err(), id, p)
			}
		})
	}
}

// TestLastAttemptGoesOnPastScanMax: work of other kinds on every partition
// and of the claim's kind on the last one of its scan appears while the
// claim waits, announced by no wake-up. The attempt at the end of the wait
// (its hints stale by then, so re-read) must try every hinted partition,
// not only ScanMax of them.
func TestLastAttemptGoesOnPastScanMax(t *testing.T) {
	t.Parallel()
	const partitions = 8
	st, s := newUnstarted(t, partitions, 1, 10*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req := kindReq("last", "x", 2*time.Second)
	g := s.group(req)
	got := claimAsync(ctx, s, req)
	waitParked(t, s, g) // its first attempt found every partition empty
	id, p := otherKindEverywhere(t, st, "last")
	s.advance(g, req.Worker.InstanceID, (p+1)%partitions)
	r := <-got
	if r.err != nil {
		t.Fatal(r.err)
	}
	if len(r.grants) != 1 || r.grants[0].ExecutionID != id {
		t.Fatalf("claim returned %v (ctx: %v), want %s from partition %d, the last of its scan", r.grants, ctx.Err(), id, p)
	}
}
