package store

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/valkey-io/valkey-go"
)

// NamespaceSummary sums up one namespace: what its lanes hold, the flow runs it
// keeps and its connected workers.
type NamespaceSummary struct {
	Name string
	// Lanes are the namespace's lanes that ever held an execution, by
	// name, with their counts summed over the flow partitions.
	Lanes []LaneStats
	// Runs counts the flow runs kept (running, or ended and not yet
	// deleted by retention).
	Runs int64
	// Workers counts the connected worker instances.
	Workers int64
}

// NamespaceSummaries returns every namespace that has lanes (an execution or a
// flow run was created in it) or had a worker, by name. Like Stats, each
// figure is read by its own command: not one atomic picture. It costs a
// count per lane index, per namespace and partition, and per namespace's
// workers, in three pipelined rounds.
func (s *Store) NamespaceSummaries(ctx context.Context) ([]NamespaceSummary, error) {
	st, err := s.Stats(ctx)
	if err != nil {
		return nil, fmt.Errorf("store: namespaces: %w", err)
	}
	byName := map[string]*NamespaceSummary{}
	var out []*NamespaceSummary
	get := func(name string) *NamespaceSummary {
		ns := byName[name]
		if ns == nil {
			ns = &NamespaceSummary{Name: name}
			byName[name] = ns
			out = append(out, ns)
		}
		return ns
	}
	for _, l := range st.Lanes { // sorted by namespace, then lane
		ns := get(l.Namespace)
		ns.Lanes = append(ns.Lanes, l)
	}
	for _, w := range st.Workers {
		get(w.Namespace).Workers = w.Connected
	}
	slices.SortFunc(out, func(a, b *NamespaceSummary) int { return cmp.Compare(a.Name, b.Name) })
	n := s.cfg.FlowPartitions
	cmds := make(valkey.Commands, 0, len(out)*n)
	for _, ns := range out {
		for p := range n {
			cmds = append(cmds, s.c.B().Zcard().Key(s.k.runsByNamespace(p, ns.Name)).Build())
		}
	}
	for i, r := range s.c.DoMulti(ctx, cmds...) {
		c, err := r.AsInt64()
		if err != nil {
			return nil, fmt.Errorf("store: namespaces: count the runs of %s: %w", out[i/n].Name, err)
		}
		out[i/n].Runs += c
	}
	res := make([]NamespaceSummary, len(out))
	for i, ns := range out {
		res[i] = *ns
	}
	return res, nil
}
