package store

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/valkey-io/valkey-go"
)

// Stats is a snapshot of how much work the store holds, for metrics: each
// figure is read by its own command, so they are not one atomic picture.
type Stats struct {
	// Lanes counts the executions of each lane by index, summed over the
	// flow partitions, sorted by namespace then lane.
	Lanes []LaneStats
	// Running is the number of executions holding a lease.
	Running int64
	// Workers is the number of connected worker instances per namespace
	// with workers (and those whose workers left since PruneNamespaces
	// last ran), sorted by namespace.
	Workers []NamespaceWorkers
}

// LaneStats counts the executions of one lane of one namespace.
type LaneStats struct {
	Namespace, Lane string
	Eligible        int64 // waiting for a worker
	Delayed         int64 // waiting for a time (delay, retry backoff)
	Pending         int64 // flow members waiting for their upstreams
	BlockedRoute    int64 // waiting for a worker with the capabilities
	BlockedBudget   int64 // waiting for a budget
	BlockedQuota    int64 // waiting for a quota
	Terminal        int64 // ended, kept until retention
}

// NamespaceWorkers is the number of connected worker instances of a
// namespace.
type NamespaceWorkers struct {
	Namespace string
	Connected int64
}

// statIndexes are the lane indexes Stats counts, in LaneStats field order.
var statIndexes = []string{indexEligible, indexDelayed, indexPending, indexBlocked, indexBlockedBudget, indexBlockedQuota, indexTerminal}

func (l *LaneStats) counts() []*int64 {
	return []*int64{&l.Eligible, &l.Delayed, &l.Pending, &l.BlockedRoute, &l.BlockedBudget, &l.BlockedQuota, &l.Terminal}
}

// laneAt is a lane of a namespace on a flow partition.
type laneAt struct {
	p      int
	ns, ln string
}

// lanesAndNamespaces reads, in one pipelined round, the lanes of every
// flow partition (their lane sets) and the namespaces with workers,
// sorted.
func (s *Store) lanesAndNamespaces(ctx context.Context) ([]laneAt, []string, error) {
	n := s.cfg.FlowPartitions
	cmds := make(valkey.Commands, 0, n+1)
	for p := range n {
		cmds = append(cmds, s.c.B().Smembers().Key(s.k.anchor(p)).Build())
	}
	cmds = append(cmds, s.c.B().Smembers().Key(s.k.namespaces()).Build())
	resps := s.c.DoMulti(ctx, cmds...)
	var lanes []laneAt
	for p := range n {
		members, err := resps[p].AsStrSlice()
		if err != nil {
			return nil, nil, fmt.Errorf("lanes of partition %d: %w", p, err)
		}
		for _, m := range members {
			if ns, ln, ok := strings.Cut(m, ":"); ok {
				lanes = append(lanes, laneAt{p, ns, ln})
			}
		}
	}
	namespaces, err := resps[n].AsStrSlice()
	if err != nil {
		return nil, nil, fmt.Errorf("namespaces: %w", err)
	}
	slices.Sort(namespaces)
	return lanes, namespaces, nil
}

// Stats reads the snapshot in two pipelined rounds and a TIME between
// them: the lanes of every partition and the namespaces, then a count per
// index, partition's leases and namespace's live workers.
func (s *Store) Stats(ctx context.Context) (*Stats, error) {
	n := s.cfg.FlowPartitions
	lanes, namespaces, err := s.lanesAndNamespaces(ctx)
	if err != nil {
		return nil, fmt.Errorf("store: stats: %w", err)
	}
	// TIME on its own: a cluster client refuses a pipeline that mixes a
	// keyless command with keys of several slots.
	now, err := s.c.Do(ctx, s.c.B().Time().Build()).AsStrSlice()
	if err != nil || len(now) != 2 {
		return nil, fmt.Errorf("store: stats: TIME: %v", err)
	}
	sec, _ := strconv.ParseInt(now[0], 10, 64)
	usec, _ := strconv.ParseInt(now[1], 10, 64)
	nowMs := sec*1000 + usec/1000

	cmds := make(valkey.Commands, 0, len(lanes)*len(statIndexes)+n+len(namespaces))
	for _, l := range lanes {
		for _, idx := range statIndexes {
			cmds = append(cmds, s.c.B().Zcard().Key(s.k.lane(l.p, l.ns, l.ln, idx)).Build())
		}
	}
	for p := range n {
		cmds = append(cmds, s.c.B().Zcard().Key(s.k.leases(p)).Build())
	}
	for _, ns := range namespaces {
		cmds = append(cmds, s.c.B().Zcount().Key(s.k.workers(ns)).Min("("+strconv.FormatInt(nowMs, 10)).Max("+inf").Build())
	}
	counts := make([]int64, len(cmds))
	for i, r := range s.c.DoMulti(ctx, cmds...) {
		if counts[i], err = r.AsInt64(); err != nil {
			return nil, fmt.Errorf("store: stats: count: %w", err)
		}
	}

	st := &Stats{}
	byLane := map[[2]string]*LaneStats{}
	for i, l := range lanes {
		ls := byLane[[2]string{l.ns, l.ln}]
		if ls == nil {
			ls = &LaneStats{Namespace: l.ns, Lane: l.ln}
			byLane[[2]string{l.ns, l.ln}] = ls
		}
		for j, c := range ls.counts() {
			*c += counts[i*len(statIndexes)+j]
		}
	}
	for _, ls := range byLane {
		st.Lanes = append(st.Lanes, *ls)
	}
	slices.SortFunc(st.Lanes, func(a, b LaneStats) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Lane, b.Lane))
	})
	rest := counts[len(lanes)*len(statIndexes):]
	for p := range n {
		st.Running += rest[p]
	}
	for i, ns := range namespaces {
		st.Workers = append(st.Workers, NamespaceWorkers{Namespace: ns, Connected: rest[n+i]})
	}
	return st, nil
}
