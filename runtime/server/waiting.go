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

	mu   sync.Mutex
	byNS map[string]laneEntry
}

type laneEntry struct {
	lanes [][]string // per connected worker
	at    time.Time
}

func newWaitHints(st *store.Store) *waitHints {
	return &waitHints{st: st, byNS: map[string]laneEntry{}}
}

// lanes returns the lanes of each connected worker of ns, or false when
// the registry cannot be read.
func (h *waitHints) lanes(ctx context.Context, ns string) ([][]string, bool) {
	h.mu.Lock()
	e, ok := h.byNS[ns]
	h.mu.Unlock()
	if ok && time.Since(e.at) < laneCacheTTL {
		return e.lanes, true
	}
	ws, err := h.st.Workers(ctx, ns)
	if err != nil {
		return nil, false
	}
	e = laneEntry{at: time.Now(), lanes: make([][]string, len(ws))}
	for i, w := range ws {
		e.lanes[i] = w.Lanes
	}
	h.mu.Lock()
	defer h.mu.Unlock()
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
