package scheduler_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/flowfabric/ff/runtime/internal/valkeytest"
	"github.com/flowfabric/ff/runtime/scheduler"
	"github.com/flowfabric/ff/runtime/store"
)

// heldUnsubscribe is a SubscribeFunc that, once its ctx ends, returns only
// when release is closed: what ValkeySubscriber does when Valkey hangs
// (the release of its dedicated connection sends UNSUBSCRIBE and waits
// for the answer). entered receives once it is subscribed.
func heldUnsubscribe(entered chan<- struct{}, release <-chan struct{}) scheduler.SubscribeFunc {
	return func(ctx context.Context, onReady func(), _ func(string)) error {
		if onReady != nil {
			onReady()
		}
		entered <- struct{}{}
		<-ctx.Done()
		<-release
		return nil
	}
}

// startHeld starts a scheduler whose wake-up subscription is held at its
// end until release is closed.
func startHeld(t *testing.T, release <-chan struct{}) *scheduler.Scheduler {
	t.Helper()
	vk := valkeytest.Client(t, valkeytest.Shared(t))
	st, err := store.Open(context.Background(), store.Config{Client: vk, FlowPartitions: 2, KeyPrefix: valkeytest.Prefix(t)})
	if err != nil {
		t.Fatal(err)
	}
	entered := make(chan struct{}, 1)
	s, err := scheduler.New(scheduler.Config{Store: st, Subscribe: heldUnsubscribe(entered, release), ResyncInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	<-entered
	return s
}

// stopWithin stops s with a ctx that ends after d.
func stopWithin(s *scheduler.Scheduler, d time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return s.Stop(ctx)
}

// A Stop whose ctx ended before the background loops did returns ctx's
// error; a later Stop waits for those loops again rather than report nil
// while they run (the server stops the scheduler again before it closes
// the Valkey client the subscription uses). Once they end, Stop is nil.
func TestStopAfterTimedOutStopWaits(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	s := startHeld(t, release)
	if err := stopWithin(s, 50*time.Millisecond); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Stop while the subscription has not ended = %v, want the deadline", err)
	}
	if err := stopWithin(s, 50*time.Millisecond); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a second Stop while the subscription has not ended = %v, want the deadline (it waits for the loops)", err)
	}
	close(release)
	if err := s.Stop(context.Background()); err != nil {
		t.Fatalf("Stop once the subscription can end = %v", err)
	}
	if err := s.Start(context.Background()); err == nil {
		t.Fatal("Start after Stop = nil, want an error")
	}
}

// Of two Stops at once, neither returns nil while the loops still run.
func TestConcurrentStopsBothWait(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	defer close(release)
	s := startHeld(t, release)
	errs := make(chan error, 2)
	for range 2 {
		go func() { errs <- stopWithin(s, 200*time.Millisecond) }()
	}
	for range 2 {
		if err := <-errs; !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("one of two Stops at once, the subscription held = %v, want the deadline (both wait for the loops)", err)
		}
	}
}

// A Stop with a ctx that has ended releases the waiting claims at once,
// though the loops have not ended (how the server releases them before it
// stops taking connections, with Valkey hung).
func TestStopWithEndedContextReleasesWaiters(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	defer close(release)
	s := startHeld(t, release)
	claimed := make(chan error, 1)
	go func() {
		grants, err := s.Claim(context.Background(), req("quiet", 1, time.Minute))
		if err == nil && len(grants) != 0 {
			err = errors.New("granted work on an empty lane")
		}
		claimed <- err
	}()
	for s.Waiting() == 0 {
		select {
		case err := <-claimed:
			t.Fatalf("the claim returned (%v) before it waited", err)
		case <-time.After(5 * time.Millisecond):
		}
	}
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Stop(ended); !errors.Is(err, context.Canceled) {
		t.Fatalf("Stop with its ctx ended while the subscription has not ended = %v, want its ctx's error", err)
	}
	if err := <-claimed; err != nil {
		t.Fatalf("the waiting claim: %v", err)
	}
}
