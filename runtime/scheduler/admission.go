package scheduler

import (
	"context"
	"fmt"
	"hash/fnv"
	"log/slog"
	"slices"
	"time"

	"github.com/flowfabric/ff/runtime/store"
)

// admission is what one scan cycle (one attempt) claims with: the budgets
// at a hard limit and the namespace's capability union.
type admission struct {
	breached []store.BudgetBreach
	route    bool     // union is known: park what no connected worker can run
	union    []string // capability union of the namespace (with the claimer's)
}

// unionEntry is a cached capability union.
type unionEntry struct {
	caps []string
	at   time.Time
}

// admission reads the admission state of one scan cycle. The budget read
// fails closed (an error means no claim: granting with an unknown budget
// state could overspend); the capability union fails open (an error turns
// route blocking off, so nothing is parked on a guess).
func (s *Scheduler) admission(ctx context.Context, req Request) (*admission, error) {
	breached, err := s.cfg.Store.BreachedBudgets(ctx)
	if err != nil {
		return nil, fmt.Errorf("read budgets at hard limit (not claiming): %w", err)
	}
	a := &admission{breached: breached}
	union, err := s.union(ctx, req.Worker.Namespace)
	if err != nil {
		s.log.WarnContext(ctx, "scheduler: capability union unavailable; claiming without route blocking",
			slog.String("namespace", req.Worker.Namespace), slog.Any("error", err))
		return a, nil
	}
	// The claimer is connected too, whether or not its heartbeat landed.
	union = append(slices.Clone(union), req.Worker.Capabilities...)
	slices.Sort(union)
	a.union, a.route = slices.Compact(union), true
	return a, nil
}

// union returns the namespace's capability union, cached for UnionTTL.
func (s *Scheduler) union(ctx context.Context, ns string) ([]string, error) {
	s.unionMu.Lock()
	e, ok := s.unions[ns]
	s.unionMu.Unlock()
	if ok && time.Since(e.at) < s.cfg.UnionTTL {
		return e.caps, nil
	}
	caps, err := s.cfg.Store.CapabilityUnion(ctx, ns)
	if err != nil {
		return nil, err
	}
	s.unionMu.Lock()
	s.unions[ns] = unionEntry{caps: caps, at: time.Now()}
	s.unionMu.Unlock()
	return caps, nil
}

// InvalidateCapabilities drops the cached capability union of a namespace:
// call it when a worker connects there, so that claims stop parking what
// the new worker can run.
func (s *Scheduler) InvalidateCapabilities(ns string) {
	s.unionMu.Lock()
	delete(s.unions, ns)
	s.unionMu.Unlock()
}

// startFor returns where a worker instance's next scan of g starts: where
// its previous one stopped, first a per-instance offset (jitter) so that
// concurrent workers do not all begin on the same partition.
func (s *Scheduler) startFor(g *group, instance string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := g.cursors[instance]; ok {
		return c
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(instance))
	return int(h.Sum32() % uint32(s.partitions))
}

// advance records where the instance's next scan of g starts.
func (s *Scheduler) advance(g *group, instance string, next int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if g.cursors == nil {
		g.cursors = map[string]int{}
	}
	if len(g.cursors) >= maxCursors {
		clear(g.cursors) // many short-lived instances: start over with jitter
	}
	g.cursors[instance] = next
}

// maxCursors bounds the per-instance cursors a group keeps.
const maxCursors = 4096
