package server

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"
)

// A Stop of the subscription of the run notices or the lease watches
// after a Stop that returned before the subscription ended waits for it
// again, as does a Stop at the same time as one waiting: none returns nil
// while the subscription goroutine runs (the server stops them again
// before it closes the Valkey client they use). Closed is closed by the
// first.
func TestSubscriptionStopAfterTimedOutStopWaits(t *testing.T) {
	t.Parallel()
	entered, release := make(chan struct{}, 1), make(chan struct{})
	sub := newSubscription(slog.New(slog.DiscardHandler), "test", func(ctx context.Context, onReady func(), _ func(string)) error {
		onReady()
		entered <- struct{}{}
		<-ctx.Done()
		<-release // the release of a dedicated connection to a hung Valkey
		return nil
	}, func() {}, func(string) {})
	if err := sub.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	<-entered
	stopWithin := func(d time.Duration) error {
		ctx, cancel := context.WithTimeout(context.Background(), d)
		defer cancel()
		return sub.Stop(ctx)
	}
	if err := stopWithin(50 * time.Millisecond); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Stop while the subscription has not ended = %v, want the deadline", err)
	}
	select {
	case <-sub.Closed():
	default:
		t.Fatal("Closed is not closed after Stop")
	}
	errs := make(chan error, 2)
	for range 2 {
		go func() { errs <- stopWithin(100 * time.Millisecond) }()
	}
	for range 2 {
		if err := <-errs; !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("a later Stop while the subscription has not ended = %v, want the deadline (it waits for it)", err)
		}
	}
	close(release)
	if err := sub.Stop(context.Background()); err != nil {
		t.Fatalf("Stop once the subscription can end = %v", err)
	}
}
