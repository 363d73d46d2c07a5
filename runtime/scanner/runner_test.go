package scanner

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flowfabric/ff/runtime/store"
)

// A Stop whose ctx ends while a tick runs returns, leaving the tick to
// end; a Start then does not run a second loop beside it (two loops of one
// scanner tick at once: the unblock scanner's per-tick state raced). It
// waits for the tick within its ctx, and the scanner ticks again once the
// tick ended, one loop at a time.
func TestStartAfterTimedOutStopRunsOneLoop(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var in atomic.Int32       // steps running
	var overlaps atomic.Int32 // steps that began while another ran
	entered := make(chan int, 16)
	release := make(chan struct{})
	var calls atomic.Int32
	r := newRunner("test", openStore(t, 1), IntervalMin, testLogger(t), func(context.Context, int) (store.ScanResult, error) {
		if in.Add(1) > 1 {
			overlaps.Add(1)
		}
		defer in.Add(-1)
		n := int(calls.Add(1))
		entered <- n
		if n == 1 {
			<-release // the first tick lasts until the test lets it end
		}
		return store.ScanResult{}, nil
	})
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	r.Kick()
	<-entered
	ended, cancel := context.WithCancel(ctx)
	cancel()
	if err := r.Stop(ended); !errors.Is(err, context.Canceled) {
		t.Fatalf("Stop with its ctx ended during a tick = %v, want its ctx's error", err)
	}
	if err := r.Start(ended); !errors.Is(err, context.Canceled) {
		t.Fatalf("Start while the stopped loop's tick runs, its ctx ended = %v; want its ctx's error (no second loop)", err)
	}
	started := make(chan error, 1)
	go func() { started <- r.Start(ctx) }()
	close(release)
	if err := <-started; err != nil {
		t.Fatal(err)
	}
	r.Kick()
	if n := <-entered; n != 2 {
		t.Fatalf("the tick after the second Start is call %d", n)
	}
	if err := r.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := r.Stop(ctx); err != nil { // twice is fine
		t.Fatal(err)
	}
	if n := overlaps.Load(); n != 0 {
		t.Fatalf("%d step(s) began while another ran", n)
	}
}

// The catch-up tick never comes later than a normal one: with an interval
// shorter than CatchUpInterval, a tick that left work behind is followed
// after the interval.
func TestCatchUpNeverLaterThanInterval(t *testing.T) {
	t.Parallel()
	s := openStore(t, 1)
	for _, iv := range []time.Duration{IntervalMin, CatchUpInterval - time.Millisecond, CatchUpInterval, time.Second} {
		r := newRunner("test", s, iv, nil, nil)
		if got, want := r.next(true), min(iv, CatchUpInterval); got != want {
			t.Errorf("interval %s: the pause after a tick that left work behind is %s, want %s", iv, got, want)
		}
		if got := r.next(false); got != iv {
			t.Errorf("interval %s: the pause after a tick is %s, want the interval", iv, got)
		}
	}
}
