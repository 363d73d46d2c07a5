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

// laneCacheTTL is how long the summary of a namespace's connected workers
// is reused for wait hints: a client watching a run reads it several times
// a second, and the registry costs a read per connected worker.
const laneCacheTTL = time.Second

// waitHints says why executions that wait for a worker may wait for ever:
// no worker is connected to their namespace, none of those connected
// takes their lane, or none of those that take it has a handler for their
// kind. Reads of one execution or one run use it (a listing does not); it
// reads a namespace's registry at most once per laneCacheTTL.
type waitHints struct {
	st *store.Store

	mu      sync.Mutex
	byNS    map[string]*workerSummary
	reading map[string]chan struct{} // closed when that namespace's read ends
}

// workerSummary is what a namespace's connected workers take, with the
// instances that take the same collapsed into one: what a hint depends
// on, whatever the size of the fleet. It is not changed once built.
type workerSummary struct {
	at        time.Time
	connected bool                 // some worker is
	lanes     []string             // every lane some worker takes, sorted
	byLane    map[string]*laneWork // by lane taken
	capSets   [][]string           // the distinct capability sets, which laneWork indexes
}

// laneWork is what the workers that take one lane handle.
type laneWork struct {
	anyKind []int            // capability sets of those that did not say their kinds (any)
	byKind  map[string][]int // kind → capability sets of those with a handler for it
	kinds   []string         // every kind some of them handle, sorted
}

func newWaitHints(st *store.Store) *waitHints {
	return &waitHints{st: st, byNS: map[string]*workerSummary{}, reading: map[string]chan struct{}{}}
}

// summarize builds the summary of a namespace's worker profiles (ordered
// by capabilities, as Store.WorkerProfiles returns them).
func summarize(ps []store.WorkerProfile) *workerSummary {
	s := &workerSummary{at: time.Now(), connected: len(ps) > 0, byLane: map[string]*laneWork{}}
	// add appends capability set c to list unless it is there already: a
	// list is built in profile order, so a repeat is its last entry.
	add := func(list []int, c int) []int {
		if n := len(list); n > 0 && list[n-1] == c {
			return list
		}
		return append(list, c)
	}
	for i, p := range ps {
		if i == 0 || !slices.Equal(p.Capabilities, ps[i-1].Capabilities) {
			s.capSets = append(s.capSets, p.Capabilities)
		}
		c := len(s.capSets) - 1
		s.lanes = append(s.lanes, p.Lanes...)
		for _, l := range p.Lanes {
			lw := s.byLane[l]
			if lw == nil {
				lw = &laneWork{byKind: map[string][]int{}}
				s.byLane[l] = lw
			}
			if len(p.Kinds) == 0 {
				lw.anyKind = add(lw.anyKind, c)
				continue
			}
			for _, k := range p.Kinds {
				lw.byKind[k] = add(lw.byKind[k], c)
			}
			lw.kinds = append(lw.kinds, p.Kinds...)
		}
	}
	slices.Sort(s.lanes)
	s.lanes = slices.Compact(s.lanes)
	for _, lw := range s.byLane {
		slices.Sort(lw.kinds)
		lw.kinds = slices.Compact(lw.kinds)
	}
	return s
}

// workers returns the summary of the connected workers of ns, or nil when
// the registry cannot be read. One request reads it when what is kept is
// too old; the others that need it meanwhile wait for that read.
func (h *waitHints) workers(ctx context.Context, ns string) *workerSummary {
	h.mu.Lock()
	for {
		if s, ok := h.byNS[ns]; ok && time.Since(s.at) < laneCacheTTL {
			h.mu.Unlock()
			return s
		}
		done, busy := h.reading[ns]
		if !busy {
			break
		}
		h.mu.Unlock()
		select {
		case <-done: // read (or failed: then this request tries)
		case <-ctx.Done():
			return nil
		}
		h.mu.Lock()
	}
	done := make(chan struct{})
	h.reading[ns] = done
	h.mu.Unlock()

	ps, err := h.st.WorkerProfiles(ctx, ns)
	var s *workerSummary
	if err == nil {
		s = summarize(ps)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.reading, ns)
	close(done)
	if err != nil {
		return nil
	}
	if len(h.byNS) >= 1024 { // namespaces come from requests: keep the map bounded
		clear(h.byNS)
	}
	h.byNS[ns] = s
	return s
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

// nsHints gives the hints of one read (of an execution, or of a run's
// members) in one namespace: the registry is summarized once, and each
// distinct (lane, kind, capabilities) is worded once.
type nsHints struct {
	h    *waitHints
	ctx  context.Context
	ns   string
	read bool
	sum  *workerSummary // nil: the registry cannot be read
	memo map[hintKey]string
}

type hintKey struct{ lane, kind, caps string }

// namespace returns the hints of one read in namespace ns; it reads the
// registry (or its summary kept) when the first hint is asked for.
func (h *waitHints) namespace(ctx context.Context, ns string) *nsHints {
	return &nsHints{h: h, ctx: ctx, ns: ns}
}

// hint is nsHints.hint for a single execution.
func (h *waitHints) hint(ctx context.Context, ns, lane, kind string, caps []string) string {
	return h.namespace(ctx, ns).hint(lane, kind, caps)
}

// hint returns why no worker claims an execution of kind, requiring caps,
// waiting in the namespace and lane, or "" when a connected worker takes
// that lane, has a handler for the kind (or did not say which kinds it
// has) and covers caps, or when the registry cannot be read: a hint is no
// reason to fail the read it is part of. (An execution no connected worker
// covers the capabilities of is parked, blocked, with its own reason; one
// waits here when some workers have the capabilities and others the
// handler, but none both.)
func (n *nsHints) hint(lane, kind string, caps []string) string {
	if !n.read {
		n.sum, n.read = n.h.workers(n.ctx, n.ns), true
	}
	if n.sum == nil {
		return ""
	}
	k := hintKey{lane, kind, strings.Join(caps, ",")}
	if s, ok := n.memo[k]; ok {
		return s
	}
	s := n.sum.hint(n.ns, lane, kind, caps)
	if n.memo == nil {
		n.memo = map[hintKey]string{}
	}
	n.memo[k] = s
	return s
}

// hint words the hint of nsHints.hint from the summary of namespace ns.
func (s *workerSummary) hint(ns, lane, kind string, caps []string) string {
	if !s.connected {
		return fmt.Sprintf("no worker is connected to namespace %s", ns)
	}
	lw := s.byLane[lane]
	if lw == nil {
		return fmt.Sprintf("no connected worker of namespace %s takes lane %s (they take %s)", ns, lane, strings.Join(s.lanes, ", "))
	}
	handles := false
	for _, sets := range [][]int{lw.anyKind, lw.byKind[kind]} {
		for _, c := range sets {
			handles = true
			if covers(s.capSets[c], caps) {
				return ""
			}
		}
	}
	if handles {
		return fmt.Sprintf("no connected worker of namespace %s that takes lane %s and handles kind %s has the capabilities it requires (%s): workers with them lack its handler",
			ns, lane, kind, strings.Join(caps, ", "))
	}
	// No worker of the lane has a handler for the kind, and each said its kinds.
	they := strings.Join(lw.kinds[:min(len(lw.kinds), hintKindsShown)], ", ")
	if len(lw.kinds) > hintKindsShown {
		they += fmt.Sprintf(" and %d more", len(lw.kinds)-hintKindsShown)
	}
	return fmt.Sprintf("no connected worker of namespace %s that takes lane %s has a handler for kind %s (they handle %s)", ns, lane, kind, they)
}
