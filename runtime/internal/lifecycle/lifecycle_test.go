package lifecycle_test

import (
	"context"
	"errors"
	"runtime/pprof"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flowfabric/ff/runtime/internal/goroutinetest"
	"github.com/flowfabric/ff/runtime/internal/lifecycle"
)

// held returns a run that tells entered once it runs and, once its ctx
// ended, returns only when release is closed: a loop whose last call
// outlives its Stop (with Valkey hung, the release of a subscription's
// connection waits for it).
func held(entered chan<- struct{}, release <-chan struct{}) func(context.Context) {
	return func(ctx context.Context) {
		entered <- struct{}{}
		<-ctx.Done()
		<-release
	}
}

// timedOut stops b with a ctx that has ended, which returns its error as
// the run has not ended.
func timedOut(t *testing.T, b *lifecycle.Background) {
	t.Helper()
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	if err := b.Stop(ended); !errors.Is(err, context.Canceled) {
		t.Fatalf("Stop with its ctx ended while the run has not ended = %v, want its ctx's error", err)
	}
}

// A Stop after a Stop that returned before the run ended waits for the
// run again: it does not return nil while the run goes on.
func TestStopAfterTimedOutStopWaits(t *testing.T) {
	t.Parallel()
	var b lifecycle.Background
	entered, release := make(chan struct{}, 1), make(chan struct{})
	if err := b.Start(context.Background(), held(entered, release)); err != nil {
		t.Fatal(err)
	}
	<-entered
	timedOut(t, &b)
	timedOut(t, &b) // again: the run still goes on
	stopped := make(chan error, 1)
	go func() { stopped <- b.Stop(context.Background()) }()
	close(release)
	if err := <-stopped; err != nil {
		t.Fatalf("Stop once the run can end = %v", err)
	}
	if err := b.Stop(context.Background()); err != nil {
		t.Fatalf("Stop of a stopped Background = %v", err)
	}
}

// Of two Stops at once, neither returns before the run ended.
func TestConcurrentStopsBothWait(t *testing.T) {
	t.Parallel()
	var b lifecycle.Background
	entered, release := make(chan struct{}, 1), make(chan struct{})
	var ended atomic.Bool
	run := held(entered, release)
	if err := b.Start(context.Background(), func(ctx context.Context) { run(ctx); ended.Store(true) }); err != nil {
		t.Fatal(err)
	}
	<-entered
	first, second := make(chan bool, 1), make(chan bool, 1)
	go func() { _ = b.Stop(context.Background()); first <- ended.Load() }()
	go func() { _ = b.Stop(context.Background()); second <- ended.Load() }()
	close(release)
	if !<-first || !<-second {
		t.Fatal("a Stop returned before the run ended")
	}
}

// Start on a running Background runs nothing more; Stop ends what the one
// Start ran.
func TestStartTwiceRunsOnce(t *testing.T) {
	t.Parallel()
	var b lifecycle.Background
	var runs atomic.Int32
	pprof.Do(context.Background(), pprof.Labels("lifecycle", "twice"), func(ctx context.Context) {
		for range 2 {
			if err := b.Start(ctx, func(ctx context.Context) { runs.Add(1); <-ctx.Done() }); err != nil {
				t.Fatal(err)
			}
		}
	})
	if err := b.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := runs.Load(); n != 1 {
		t.Fatalf("two Starts ran %d runs, want 1", n)
	}
	goroutinetest.WaitNone(t, "lifecycle", "twice", 10*time.Second, "Stop returned")
}

// A Start after a Stop that returned before the run ended waits for that
// run, within its ctx: two runs never overlap.
func TestStartAfterTimedOutStopWaitsForTheRun(t *testing.T) {
	t.Parallel()
	var b lifecycle.Background
	entered, release := make(chan struct{}, 1), make(chan struct{})
	var running, overlaps atomic.Int32
	run := func(ctx context.Context) {
		if running.Add(1) > 1 {
			overlaps.Add(1)
		}
		defer running.Add(-1)
		held(entered, release)(ctx)
	}
	if err := b.Start(context.Background(), run); err != nil {
		t.Fatal(err)
	}
	<-entered
	timedOut(t, &b)
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	if err := b.Start(ended, run); !errors.Is(err, context.Canceled) {
		t.Fatalf("Start while the last run goes on, its ctx ended = %v, want its ctx's error", err)
	}
	started := make(chan error, 1)
	go func() { started <- b.Start(context.Background(), run) }()
	close(release)
	if err := <-started; err != nil {
		t.Fatal(err)
	}
	<-entered // the second run
	if err := b.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := overlaps.Load(); n != 0 {
		t.Fatalf("%d run(s) began while another went on", n)
	}
}

// Stop of a Background never started does nothing.
func TestStopNeverStarted(t *testing.T) {
	t.Parallel()
	var b lifecycle.Background
	if err := b.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
}
