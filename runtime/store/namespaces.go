package store

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"

	"github.com/valkey-io/valkey-go"
)

// NamespaceSummary sums up one namespace: what its lanes hold, the flow
// runs it keeps and its connected workers.
type NamespaceSummary struct {
	Name string
	// Lanes are the namespace's lanes that hold an execution (and those
	// left empty since the retention scanner last pruned the lanes, with
	// zero counts), by name, with their counts summed over the flow
	// partitions (nil when not asked for).
	Lanes []LaneStats
	// Runs counts the flow runs kept (running, or ended and not yet
	// deleted by retention).
	Runs int64
	// Workers counts the connected worker instances.
	Workers int64
}

// NamespaceOptions choose what NamespaceSummaries reads.
type NamespaceOptions struct {
	// Namespace, when set, sums up that namespace only (none when it has
	// neither lanes nor workers).
	Namespace string
	// Lanes asks for the lanes' counts: seven counts per lane and
	// partition, the bulk of the cost.
	Lanes bool
}

// NamespaceSummaries returns every namespace that has lanes (see
// PruneLanes) or connected workers (see PruneNamespaces), by name (or only
// o.Namespace). Each figure is read by its own command: not one atomic
// picture. It costs the partitions' lane sets, then in one pipelined
// round a count per namespace and partition (runs) and per namespace
// (workers), and with o.Lanes seven per lane and partition.
func (s *Store) NamespaceSummaries(ctx context.Context, o NamespaceOptions) ([]NamespaceSummary, error) {
	if o.Namespace != "" {
		if err := checkName("namespace", o.Namespace); err != nil {
			return nil, err
		}
	}
	n := s.cfg.FlowPartitions
	all, workerNS, err := s.lanesAndNamespaces(ctx)
	if err != nil {
		return nil, fmt.Errorf("store: namespaces: %w", err)
	}
	lanes := map[string][]laneAt{} // namespace -> its lanes, over the partitions
	for _, l := range all {
		if o.Namespace == "" || l.ns == o.Namespace {
			lanes[l.ns] = append(lanes[l.ns], l)
		}
	}
	names := make([]string, 0, len(lanes)+len(workerNS))
	for ns := range lanes {
		names = append(names, ns)
	}
	for _, ns := range workerNS {
		if o.Namespace == "" || ns == o.Namespace {
			names = append(names, ns)
		}
	}
	slices.Sort(names)
	names = slices.Compact(names)
	if len(names) == 0 {
		return nil, nil
	}
	// TIME on its own: a cluster client refuses a pipeline that mixes a
	// keyless command with keys of several slots.
	now, err := timeOf(s.c.Do(ctx, s.c.B().Time().Build()))
	if err != nil {
		return nil, err
	}
	out := make([]NamespaceSummary, len(names))
	var cmds valkey.Commands
	var into []*int64 // where each count goes (nil: a lane's, summed below)
	for i, ns := range names {
		out[i].Name = ns
		for p := range n {
			cmds = append(cmds, s.c.B().Zcard().Key(s.k.runsByNamespace(p, ns)).Build())
			into = append(into, &out[i].Runs)
		}
		cmds = append(cmds, s.c.B().Zcount().Key(s.k.workers(ns)).Min("("+strconv.FormatInt(now, 10)).Max("+inf").Build())
		into = append(into, &out[i].Workers)
		if !o.Lanes {
			continue
		}
		seen := map[string]bool{} // a lane is on several partitions: one entry
		for _, l := range lanes[ns] {
			if !seen[l.ln] {
				seen[l.ln] = true
				out[i].Lanes = append(out[i].Lanes, LaneStats{Namespace: ns, Lane: l.ln})
			}
			for _, idx := range statIndexes {
				cmds = append(cmds, s.c.B().Zcard().Key(s.k.lane(l.p, ns, l.ln, idx)).Build())
				into = append(into, nil)
			}
		}
	}
	counts := make([]int64, len(cmds))
	for i, r := range s.c.DoMulti(ctx, cmds...) {
		if counts[i], err = r.AsInt64(); err != nil {
			return nil, fmt.Errorf("store: namespaces: count: %w", err)
		}
	}
	k := 0
	for i, ns := range names {
		for range n + 1 { // runs per partition, then workers
			*into[k] += counts[k]
			k++
		}
		if !o.Lanes {
			continue
		}
		byLane := map[string]int{}
		for j, l := range out[i].Lanes {
			byLane[l.Lane] = j
		}
		for _, l := range lanes[ns] {
			ls := &out[i].Lanes[byLane[l.ln]]
			for _, c := range ls.counts() {
				*c += counts[k]
				k++
			}
		}
		slices.SortFunc(out[i].Lanes, func(a, b LaneStats) int { return cmp.Compare(a.Lane, b.Lane) })
	}
	return out, nil
}

// PruneLanes drops from flow partition p's lane set the lanes that hold
// nothing (ff_prune_lanes): every index of the lane empty and no execution
// of it running. The lane set is what the scanners, the listings and the
// namespace summaries walk, so without it their cost would grow with every
// lane ever used; a lane used again is added back by the call that uses
// it. Each call looks at about limit lanes, from where the last call
// stopped; Processed counts the lanes dropped, and More is set when the
// pass is not over and this call dropped some. The retention scanner
// calls it after each partition's purge.
func (s *Store) PruneLanes(ctx context.Context, partition, limit int) (ScanResult, error) {
	return s.scan(ctx, "ff_prune_lanes", partition, limit)
}

// KnownNamespaces returns, sorted, the namespaces NamespaceSummaries
// lists (those with lanes or connected workers) without their figures: one
// pipelined read of the partitions' lane sets and the namespace set. A
// namespace whose workers all left stays known while its lanes hold
// something (its blocked executions, say).
func (s *Store) KnownNamespaces(ctx context.Context) ([]string, error) {
	lanes, names, err := s.lanesAndNamespaces(ctx)
	if err != nil {
		return nil, fmt.Errorf("store: namespaces: %w", err)
	}
	for _, l := range lanes {
		names = append(names, l.ns)
	}
	slices.Sort(names)
	return slices.Compact(names), nil
}
