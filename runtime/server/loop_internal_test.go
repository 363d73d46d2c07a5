package server

import (
	"context"
	"errors"
	"runtime/pprof"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flowfabric/ff/runtime/internal/goroutinetest"
)

// Starting a running loop (the park log, the schedule runner) runs no
// second goroutine, which Stop would then never end.
func TestLoopStartTwiceRunsOneLoop(t *testing.T) {
	t.Parallel()
	l := &loop{name: "test", interval: 10 * time.Millisecond, tick: func(context.Context) {}}
	pprof.Do(context.Background(), pprof.Labels("loop", "twice"), func(ctx context.Context) {
		for range 2 {
			if err := l.Start(ctx); err != nil {
				t.Fatal(err)
			}
		}
	})
	if err := l.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	goroutinetest.WaitNone(t, "loop", "twice", 10*time.Second, "Stop returned (Start was called twice)")
}

// After a Stop that returned before the tick in progress ended (its ctx
// ended first), a Start waits for that tick, within its ctx, rather than
// run a second loop beside the first: two ticks of the park log or the
// schedule runner never run at once.
func TestLoopStartAfterTimedOutStopRunsOneTickAtOnce(t *testing.T) {
	t.Parallel()
	var running, overlaps, calls atomic.Int32
	entered := make(chan int32, 1)
	hold := make(chan struct{})
	l := &loop{name: "test", interval: 10 * time.Millisecond, tick: func(context.Context) {
		if running.Add(1) > 1 {
			overlaps.Add(1)
		}
		defer running.Add(-1)
		n := calls.Add(1)
		select {
		case entered <- n:
		default:
		}
		if n == 1 {
			<-hold // the first tick outlives the Stop below
		}
	}}
	if err := l.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	<-entered
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	if err := l.Stop(ended); !errors.Is(err, context.Canceled) {
		t.Fatalf("Stop with its ctx ended during a tick = %v, want its ctx's error", err)
	}
	if err := l.Start(ended); !errors.Is(err, context.Canceled) {
		t.Fatalf("Start while the stopped loop's tick runs, its ctx ended = %v, want its ctx's error (no second loop)", err)
	}
	started := make(chan error, 1)
	go func() { started <- l.Start(context.Background()) }()
	close(hold)
	if err := <-started; err != nil {
		t.Fatal(err)
	}
	if n := <-entered; n != 2 {
		t.Fatalf("the tick after the second Start is call %d, want 2", n)
	}
	if err := l.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := overlaps.Load(); n != 0 {
		t.Fatalf("%d tick(s) began while another ran", n)
	}
}
