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

// breachEntry is the cached set of budgets at a hard limit.
type breachEntry struct {
	set store.BreachSet
	at  time.Time // when it was read; zero: never
}

// BreachMaxAge is how long the scheduler claims with a set of budgets at
// a hard limit whose version has not moved before reading it again: the
// version moves when a budget reaches or leaves its hard limit, not when
// a run starts running again (a replay) or only the usage changes, so a
// replayed run's budget at its limit is known to claims within it, and
// the detail given to executions it blocks is that late at most.
const BreachMaxAge = time.Second

// admission reads the admission state of one scan cycle. The budget read
// fails closed (an error means no claim: granting with an unknown budget
// state could overspend); the capability union fails open (an error turns
// route blocking off, so nothing is parked on a guess).
func (s *Scheduler) admission(ctx context.Context, req Request) (*admission, error) {
	breached, err := s.breached(ctx)
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

// breached returns the budgets at a hard limit a scan cycle claims with.
// Reading them all (Store.ClaimBreaches: every budget partition's breached
// hash, and the state of the runs of run-scoped ones) on every cycle made
// each claim's cost grow with the budgets at their limit; the set is
// cached instead, and each cycle reads only its version (one small GET per
// budget partition): a budget that reached its limit since the set was
// read moves the version, so the cycle reads the set again, and the next
// claim knows it as before. The set is read again anyway once it is
// BreachMaxAge old. Any read error fails the cycle (fail closed): a cached
// set is never used without its version checked.
func (s *Scheduler) breached(ctx context.Context) ([]store.BudgetBreach, error) {
	s.breachMu.Lock()
	e := s.breach
	s.breachMu.Unlock()
	if !e.at.IsZero() && time.Since(e.at) < BreachMaxAge {
		v, err := s.cfg.Store.BreachVersion(ctx)
		if err != nil {
			return nil, err
		}
		if v == e.set.Version {
			return e.set.Breaches, nil
		}
	}
	at := time.Now()
	set, err := s.cfg.Store.ClaimBreaches(ctx)
	if err != nil {
		return nil, err
	}
	s.breachMu.Lock()
	if at.After(s.breach.at) {
		s.breach = breachEntry{set: set, at: at}
	}
	s.breachMu.Unlock()
	return set.Breaches, nil
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
	return s.keepUnion(ns, caps), nil
}

// keepUnion caches caps, just read, as the union of ns and returns what
// is kept: caps, with those of an entry still fresh (a connect merged
// into it while the union was read) added.
func (s *Scheduler) keepUnion(ns string, caps []string) []string {
	s.unionMu.Lock()
	defer s.unionMu.Unlock()
	if e, ok := s.unions[ns]; ok && time.Since(e.at) < s.cfg.UnionTTL {
		caps = merge(caps, e.caps)
	}
	s.unions[ns] = unionEntry{caps: caps, at: time.Now()}
	return caps
}

// merge returns the sorted union of union (sorted, without repeats) and
// caps; union itself when it has them all.
func merge(union, caps []string) []string {
	for i, c := range caps {
		if !slices.Contains(union, c) {
			out := append(slices.Clone(union), caps[i:]...)
			slices.Sort(out)
			return slices.Compact(out)
		}
	}
	return union
}

// Connected adds the capabilities of a worker instance that just connected
// to namespace ns (and is listed already) to the namespace's capability
// union, so that claims stop parking what it can run. It returns the union
// with them, and whether they added some the union lacked: only then can
// executions parked for a capable worker have become runnable. A connect
// only adds; instances that leave drop out when the union is read again,
// UnionTTL after the last read, so a fleet connecting costs one read of
// the registry per UnionTTL, not one per instance. Without a fresh union
// it reads it, and reports an addition when the instance has capabilities.
func (s *Scheduler) Connected(ctx context.Context, ns string, caps []string) ([]string, bool, error) {
	s.unionMu.Lock()
	if e, ok := s.unions[ns]; ok && time.Since(e.at) < s.cfg.UnionTTL {
		union := merge(e.caps, caps)
		added := len(union) > len(e.caps)
		if added {
			s.unions[ns] = unionEntry{caps: union, at: e.at} // expires on time: leavers drop out
		}
		s.unionMu.Unlock()
		return union, added, nil
	}
	s.unionMu.Unlock()
	union, err := s.cfg.Store.CapabilityUnion(ctx, ns)
	if err != nil {
		return nil, false, err
	}
	return s.keepUnion(ns, union), len(caps) > 0, nil
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
