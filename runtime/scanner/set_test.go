package scanner

import (
	"context"
	"errors"
	"runtime/pprof"
	"testing"
	"time"

	"github.com/flowfabric/ff/runtime/internal/goroutinetest"
	"github.com/flowfabric/ff/runtime/store"
)

// A Set whose Start fails partway (its last scanner's tick outlived a
// Stop, and Start's ctx ended first) stops the scanners it started: a
// failed Start leaves none running, and the caller, which stops the
// scanners it started, need not know which of the Set's did.
func TestSetFailedStartLeavesNoneRunning(t *testing.T) {
	t.Parallel()
	set, err := NewSet(SetConfig{Store: openStore(t, 1), Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	all := set.runners()
	last := all[len(all)-1]
	entered, hold := make(chan struct{}, 1), make(chan struct{})
	defer close(hold)
	last.step = func(context.Context, int) (store.ScanResult, error) {
		select {
		case entered <- struct{}{}:
			<-hold // the first tick outlives the Stop below
		default:
		}
		return store.ScanResult{}, nil
	}
	if err := set.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	last.Kick()
	<-entered
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	if err := set.Stop(ended); !errors.Is(err, context.Canceled) {
		t.Fatalf("Stop with its ctx ended during a tick = %v, want its ctx's error", err)
	}
	for _, r := range all[:len(all)-1] { // the others' loops have ended
		if err := r.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	pprof.Do(context.Background(), pprof.Labels("set", "failed-start"), func(context.Context) {
		if err := set.Start(ended); !errors.Is(err, context.Canceled) {
			t.Fatalf("Start while the last scanner's stopped tick runs, its ctx ended = %v, want its ctx's error", err)
		}
	})
	goroutinetest.WaitNone(t, "set", "failed-start", 10*time.Second, "the Set's Start failed")
}
