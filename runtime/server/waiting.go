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
// no worker is connected to their namespace, none of those connected
// takes their lane, or none of those that take it has a handler for their
// kind. Reads of one execution or one run use it (a listing does not); it
// reads a namespace's registry at most once per laneCacheTTL.
type waitHints struct {
	st *store.Store

	mu      sync.Mutex
	byNS    map[string]laneEntry
	reading map[string]chan struct{} // closed when that namespace's read ends
}

type laneEntry struct {
	workers []workerWork // per connected worker
	at      time.Time
}

// workerWork is what a connected worker takes: its lanes, the kinds it
// has handlers for (none: it did not say, so any) and its capabilities.
type workerWork struct {
	lanes, kinds, caps []string
}

func newWaitHints(st *store.Store) *waitHints {
	return &waitHints{st: st, byNS: map[string]laneEntry{}, reading: map[string]chan struct{}{}}
}

// workers returns the lanes and kinds of each connected worker of ns, or
// false when the registry cannot be read. One request reads it when what
// is kept is too old; the others that need it meanwhile wait for that
// read.
func (h *waitHints) workers(ctx context.Context, ns string) ([]workerWork, bool) {
	h.mu.Lock()
	for {
		if e, ok := h.byNS[ns]; ok && time.Since(e.at) < laneCacheTTL {
			h.mu.Unlock()
			return e.workers, true
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
		e = laneEntry{at: time.Now(), workers: make([]workerWork, len(ws))}
		for i, w := range ws {
			e.workers[i] = workerWork{lanes: w.Lanes, kinds: w.Kinds, caps: w.Capabilities}
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
	return e.workers, true
}

// covers reports whether capabilities have holds every one of want.
func covers(have, want []string) bool {
	for _, c := range want {
		if !slices.Contains(have, c) {
			return false
		}
	}
	return true
}

// hintKindsShown is the most kinds a hint names.
const hintKindsShown = 5

// hint returns why no worker claims an execution of kind, requiring caps,
// waiting in namespace ns and lane, or "" when a connected worker takes
// that lane, has a handler for the kind (or did not say which kinds it
// has) and covers caps, or when the registry cannot be read: a hint is no
// reason to fail the read it is part of. (An execution no connected worker
// covers the capabilities of is parked, blocked, with its own reason; one
// waits here when some workers have the capabilities and others the
// handler, but none both.)
func (h *waitHints) hint(ctx context.Context, ns, lane, kind string, caps []string) string {
	ws, ok := h.workers(ctx, ns)
	if !ok {
		return ""
	}
	if len(ws) == 0 {
		return fmt.Sprintf("no worker is connected to namespace %s", ns)
	}
	var lanes, kinds []string
	inLane, handles := false, false
	for _, w := range ws {
		if !slices.Contains(w.lanes, lane) {
			lanes = append(lanes, w.lanes...)
			continue
		}
		inLane = true
		if len(w.kinds) == 0 || slices.Contains(w.kinds, kind) {
			handles = true
			if covers(w.caps, caps) {
				return ""
			}
			continue
		}
		kinds = append(kinds, w.kinds...)
	}
	if handles {
		return fmt.Sprintf("no connected worker of namespace %s that takes lane %s and handles kind %s has the capabilities it requires (%s): workers with them lack its handler",
			ns, lane, kind, strings.Join(caps, ", "))
	}
	if !inLane {
		slices.Sort(lanes)
		return fmt.Sprintf("no connected worker of namespace %s takes lane %s (they take %s)", ns, lane, strings.Join(slices.Compact(lanes), ", "))
	}
	slices.Sort(kinds)
	kinds = slices.Compact(kinds)
	they := strings.Join(kinds[:min(len(kinds), hintKindsShown)], ", ")
	if len(kinds) > hintKindsShown {
		they += fmt.Sprintf(" and %d more", len(kinds)-hintKindsShown)
	}
	return fmt.Sprintf("no connected worker of namespace %s that takes lane %s has a handler for kind %s (they handle %s)", ns, lane, kind, they)
}
