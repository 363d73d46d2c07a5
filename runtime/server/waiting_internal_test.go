package server

import (
	"context"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/flowfabric/ff/runtime/internal/valkeytest"
	"github.com/flowfabric/ff/runtime/store"
)

// TestWaitHintsReadTheRegistryOnce: requests that need a namespace's
// lanes at the same moment share one read of the worker registry.
func TestWaitHintsReadTheRegistryOnce(t *testing.T) {
	t.Parallel()
	vk := valkeytest.Client(t, valkeytest.Start(t))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	st, err := store.Open(ctx, store.Config{Client: vk})
	if err != nil {
		t.Fatal(err)
	}
	// reads counts the registry listings (ZRANGEBYSCORE) the servers ran.
	calls := regexp.MustCompile(`cmdstat_zrangebyscore:calls=(\d+)`)
	reads := func() int {
		t.Helper()
		n := 0
		for _, node := range vk.Nodes() {
			info, err := node.Do(ctx, node.B().Info().Section("commandstats").Build()).ToString()
			if err != nil {
				t.Fatal(err)
			}
			if m := calls.FindStringSubmatch(info); m != nil {
				c, _ := strconv.Atoi(m[1])
				n += c
			}
		}
		return n
	}
	h := newWaitHints(st)
	before := reads()
	const requests = 20
	var wg sync.WaitGroup
	start := make(chan struct{})
	hints := make([]string, requests)
	for i := range requests {
		wg.Go(func() {
			<-start
			hints[i] = h.hint(ctx, "default", "gpu", "k", nil)
		})
	}
	close(start)
	wg.Wait()
	for i, got := range hints {
		if got != "no worker is connected to namespace default" {
			t.Fatalf("request %d: hint %q", i, got)
		}
	}
	if n := reads() - before; n != 1 {
		t.Fatalf("%d requests read the registry %d times, want once", requests, n)
	}
}
