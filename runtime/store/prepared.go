package store

import (
	"slices"
	"strings"
	"sync"

	"github.com/flowfabric/ff/compiler/plan"
)

// preparedFlow is what staging derives from a plan before it knows the
// run: the checked graph and each member's plan. Staging a run of it only
// adds the run's uuids, namespace and input.
type preparedFlow struct {
	g       *graph
	members []memberPlan // by position in the plan
	inOrder []int        // member positions in flow order (flowOrder; ties by name)
	execs   int
	upEdges int // the members' upstreams, all together
}

// prepareFlow checks plan f and derives its preparedFlow.
func prepareFlow(f *plan.Flow) (*preparedFlow, error) {
	g, err := newGraph(f)
	if err != nil {
		return nil, err
	}
	pf := &preparedFlow{g: g, members: make([]memberPlan, len(f.Execs)), execs: len(f.Execs)}
	for i, x := range f.Execs {
		if pf.members[i], err = prepareMember(f, x, i, g); err != nil {
			return nil, err
		}
	}
	// Each member's upstreams with the condition of their edge (what
	// GetRun reads from the records), copied into each run staged.
	for i := range pf.members {
		ups := pf.members[i].ups
		if len(ups) == 0 {
			continue
		}
		edges := make([]RunEdge, len(ups))
		for k, u := range ups {
			edges[k].Name = u.name
			for _, e := range pf.members[u.index].out {
				if e.to == i {
					edges[k].On = e.on
				}
			}
		}
		pf.members[i].upEdges = edges
		pf.upEdges += len(edges)
	}
	byName := make([]int, len(f.Execs))
	for i := range byName {
		byName[i] = i
	}
	slices.SortFunc(byName, func(a, b int) int { return strings.Compare(f.Execs[a].Name, f.Execs[b].Name) })
	rank := make([]int, len(f.Execs))
	for r, i := range byName {
		rank[i] = r
	}
	ups := make([][]int, len(f.Execs))
	for r, i := range byName {
		for _, u := range pf.members[i].ups {
			ups[r] = append(ups[r], rank[u.index])
		}
	}
	pf.inOrder = flowOrder(len(f.Execs), ups)
	for k, r := range pf.inOrder {
		pf.inOrder[k] = byName[r]
	}
	return pf, nil
}

// Bounds of the prepared plans a Store keeps.
const (
	preparedMaxFlows = 256
	preparedMaxExecs = 100_000 // members of all kept plans together
)

// preparedFlows keeps the preparedFlow of the shared plans staged lately
// (StageRequest.Shared), by plan: StageRequest.Flow is read only, and a
// shared plan is the same *plan.Flow for every run (the API's templates
// and plan cache), so what staging derives from it holds for every run. A
// kept pointer keeps its plan alive, so a new plan never takes its
// address. When a bound is reached, kept plans are dropped, whichever the
// map yields first, until the new one fits; invalid plans are not kept.
type preparedFlows struct {
	mu    sync.Mutex
	flows map[*plan.Flow]*preparedFlow
	execs int
}

// prepare returns the preparedFlow of f, derived once per kept plan;
// shared says f may be kept.
func (s *Store) prepare(f *plan.Flow, shared bool) (*preparedFlow, error) {
	if !shared {
		return prepareFlow(f)
	}
	c := &s.prepared
	c.mu.Lock()
	pf := c.flows[f]
	c.mu.Unlock()
	if pf != nil {
		return pf, nil
	}
	pf, err := prepareFlow(f)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.flows == nil {
		c.flows = make(map[*plan.Flow]*preparedFlow)
	}
	if _, ok := c.flows[f]; ok {
		return pf, nil
	}
	for k, v := range c.flows {
		if len(c.flows) < preparedMaxFlows && c.execs+pf.execs <= preparedMaxExecs {
			break
		}
		delete(c.flows, k)
		c.execs -= v.execs
	}
	c.flows[f] = pf
	c.execs += pf.execs
	return pf, nil
}
