package server

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/flowfabric/ff/runtime/store"
)

// laneCacheTTL is how long the lanes of a namespace's connected workers
// are reused for wait hints: a client watching a run reads it several
// times a second, and the registry costs a read per connected worker.
const laneCacheTTL = time.Second

// waitHints says why executions that wait for a worker may wait for ever:
// no worker is connected to their namespace, or none of those connected
// takes their lane. Reads of one execution or one run use it (a listing
// does not); it reads a namespace's registry at most once per
// laneCacheTTL.
type waitHints struct {
	st *store.Store

	mu      sync.Mutex
	byNS    map[string]laneEntry
	reading map[string]chan struct{} // closed when that namespace's read ends
}

type laneEntry struct {
	lanes [][]string // per connected worker
	at    time.Time
}

func newWaitHints(st *store.Store) *waitHints {
	return &waitHints{st: st, byNS: map[string]laneEntry{}, reading: map[string]chan struct{}{}}
}

// lanes returns the lanes of each connected worker of ns, or false when
// the registry cannot be read. One request reads it when the lanes kept
// are too old; the others that need them meanwhile wait for that read.
func (h *waitHints) lanes(ctx context.Context, ns string) ([][]string, bool) {
	h.mu.Lock()
	for {
		if e, ok := h.byNS[ns]; ok && time.Since(e.at) < laneCacheTTL {
			h.mu.Unlock()
			return e.lanes, true
		}
		done, busy := h.reading[ns]
		if !busy {
			break
		}
		h.mu.Unlock()
		select {
		case <-done: // read (or failed: then this request tries)
		case <-ctx.Done():
			return nil, false
		}
		h.mu.Lock()
	}
	done := make(chan struct{})
	h.reading[ns] = done
	h.mu.Unlock()

	ws, err := h.st.Workers(ctx, ns)
	var e laneEntry
	if err == nil {
		e = laneEntry{at: time.Now(), lanes: make([][]string, len(ws))}
		for i, w := range ws {
			e.lanes[i] = w.Lanes
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.reading, ns)
	close(done)
	if err != nil {
		return nil, false
	}
	if len(h.byNS) >= 1024 { // namespaces come from requests: keep the map bounded
		clear(h.byNS)
	}
	h.byNS[ns] = e
	return e.lanes, true
}

// hint returns why no worker claims an execution waiting in namespace ns
// and lane, or "" when a connected worker takes that lane (it may still
// lack the handler kind), or when the registry cannot be read: a hint is
// no reason to fail the read it is part of.
func (h *waitHints) hint(ctx context.Context, ns, lane string) string {
	ws, ok := h.lanes(ctx, ns)
	if !ok {
		return ""
	}
	if len(ws) == 0 {
		return fmt.Sprintf("no worker is connected to namespace %s", ns)
	}
	var all []string
	for _, lanes := range ws {
		if slices.Contains(lanes, lane) {
			return ""
		}
		all = append(all, lanes...)
	}
	slices.Sort(all)
	return fmt.Sprintf("no connected worker of namespace %s takes lane %s (they take %s)", ns, lane, strings.Join(slices.Compact(all), ", "))
}
