package plan

import "math/bits"

// UnsureInput is an exec that takes its input from an upstream (its
// InputExec, over a success edge) but whose join any or join N can be met
// before that upstream has succeeded; it would then start without input.
type UnsureInput struct {
	Exec int // index in Flow.Execs
	// Edges are indexes in Flow.Edges of edges into the exec that can
	// hold while its InputExec has not succeeded: enough of them to meet
	// the join, in the order of Flow.Edges.
	Edges []int
}

// UnsureInputs returns the execs whose input is not guaranteed when they
// start, in the order of Flow.Execs. An exec that takes its input from
// upstream X is safe when every way its join can be met implies that X
// succeeded: with join all (X's success edge must hold), or with join any
// or join N when the edges that can hold without X having succeeded are
// fewer than the join needs. An edge from U implies that X succeeded when
// it is X's success edge, or when U itself runs only after X succeeded: U
// has join all and one of its edges implies it, or U has join any or
// join N and fewer of its edges than the join needs do not. Failure and
// done edges of X imply nothing about X's success. A failure or done edge
// from an exec with a deadline implies nothing at all: a member whose
// deadline passes expires even while pending, before its upstreams ended,
// and an expiry satisfies those edges (spec/runtime.md, Resolution).
// Every exec is assumed
// able to run and any edges to hold together (contradictory requirements
// are not used), so the answer errs on the side of reporting
// (input_oracle_test.go compares it with every outcome of small flows).
//
// The flow must have unique exec names, edges between known execs and no
// cycle; otherwise UnsureInputs returns nil. It costs O(k log k) word
// operations per exec of k upstreams, with one bit per distinct input
// checked.
func (f *Flow) UnsureInputs() []UnsureInput {
	n := len(f.Execs)
	index := make(map[string]int, n)
	for i, x := range f.Execs {
		if _, dup := index[x.Name]; dup {
			return nil
		}
		index[x.Name] = i
	}
	ups := make([][]int, n) // edge indexes into each exec
	downs := make([][]int, n)
	for i, e := range f.Edges {
		from, okF := index[e.From]
		to, okT := index[e.To]
		if !okF || !okT {
			return nil
		}
		ups[to] = append(ups[to], i)
		downs[from] = append(downs[from], i)
	}
	// The execs to check, and the distinct upstreams feeding them: each
	// such upstream X gets one bit.
	var checked []int
	bit := map[int]int{} // exec index of X -> bit
	for i, x := range f.Execs {
		if x.InputFrom != InputExec || x.Join.Kind == JoinAll {
			continue
		}
		from, ok := index[x.InputExec]
		if !ok || !hasEdge(f, ups[i], x.InputExec, OnSuccess) {
			continue // reported by Validate as another problem
		}
		checked = append(checked, i)
		if _, ok := bit[from]; !ok {
			bit[from] = len(bit)
		}
	}
	if len(checked) == 0 {
		return nil
	}
	order := topoOrder(n, ups, downs, f.Edges, index)
	if order == nil {
		return nil
	}
	words := (len(bit) + 63) / 64
	// runs[v] holds the bits of the upstreams X that must have succeeded
	// whenever v runs; nil is the empty set.
	runs := make([]bitset, n)
	edgeSet := func(ei int) bitset {
		e := f.Edges[ei]
		u := index[e.From]
		if e.On != OnSuccess && f.Execs[u].DeadlineMs > 0 {
			return nil // u can expire while pending, before anything ran
		}
		b, tracked := bit[u]
		if !tracked || e.On != OnSuccess {
			return runs[u]
		}
		s := make(bitset, words)
		copy(s, runs[u])
		s.set(b)
		return s
	}
	for _, v := range order {
		in := ups[v]
		if len(in) == 0 {
			continue
		}
		sets := make([]bitset, len(in))
		for k, ei := range in {
			sets[k] = edgeSet(ei)
		}
		runs[v] = joinSet(sets, need(f.Execs[v].Join, len(in)), words)
	}
	var out []UnsureInput
	for _, i := range checked {
		x := f.Execs[i]
		b := bit[index[x.InputExec]]
		var without []int
		for _, ei := range ups[i] {
			if !edgeSet(ei).has(b) {
				without = append(without, ei)
			}
		}
		if k := need(x.Join, len(ups[i])); len(without) >= k {
			out = append(out, UnsureInput{Exec: i, Edges: without[:k]})
		}
	}
	return out
}

// need returns how many of an exec's k incoming edges its join needs.
func need(j Join, k int) int {
	switch j.Kind {
	case JoinAny:
		return 1
	case JoinCount:
		return max(1, min(j.N, k))
	}
	return k
}

// hasEdge reports whether one of the edges ei of f comes from
// exec from with condition on.
func hasEdge(f *Flow, edges []int, from, on string) bool {
	for _, ei := range edges {
		if f.Edges[ei].From == from && f.Edges[ei].On == on {
			return true
		}
	}
	return false
}

// topoOrder returns the execs in an order where every edge goes forward,
// or nil when the edges form a cycle.
func topoOrder(n int, ups, downs [][]int, edges []Edge, index map[string]int) []int {
	indeg := make([]int, n)
	for i := range n {
		indeg[i] = len(ups[i])
	}
	order := make([]int, 0, n)
	for i := range n {
		if indeg[i] == 0 {
			order = append(order, i)
		}
	}
	for k := 0; k < len(order); k++ {
		for _, ei := range downs[order[k]] {
			to := index[edges[ei].To]
			indeg[to]--
			if indeg[to] == 0 {
				order = append(order, to)
			}
		}
	}
	if len(order) != n {
		return nil
	}
	return order
}

// bitset is a set of small integers; nil is the empty set.
type bitset []uint64

func (s bitset) set(i int)      { s[i/64] |= 1 << (i % 64) }
func (s bitset) has(i int) bool { return i/64 < len(s) && s[i/64]&(1<<(i%64)) != 0 }

// joinSet returns the bits present whenever need of the k = len(sets)
// edges hold: the bits missing from fewer than need sets, that is present
// in at least k-need+1 of them. It counts each bit's occurrences with
// bit-sliced binary counters, so it costs O(k log k) word operations per
// word of the sets.
func joinSet(sets []bitset, need, words int) bitset {
	k := len(sets)
	t := k - need + 1 // occurrences a bit needs
	if t <= 0 {
		return nil
	}
	nonEmpty := 0
	for _, s := range sets {
		if s != nil {
			nonEmpty++
		}
	}
	if nonEmpty < t {
		return nil
	}
	out := make(bitset, words)
	cnt := make([]uint64, bits.Len(uint(k)))
	empty := true
	for w := range words {
		clear(cnt)
		for _, s := range sets {
			if s == nil {
				continue
			}
			carry := s[w]
			for i := 0; carry != 0 && i < len(cnt); i++ {
				cnt[i], carry = cnt[i]^carry, cnt[i]&carry
			}
		}
		// Compare each bit's count with t, from the most significant
		// counter bit: gt collects bits already above t, eq those equal
		// so far.
		var gt uint64
		eq := ^uint64(0)
		for i := len(cnt) - 1; i >= 0; i-- {
			if t>>i&1 == 1 {
				eq &= cnt[i]
			} else {
				gt |= eq & cnt[i]
				eq &^= cnt[i]
			}
		}
		out[w] = gt | eq
		empty = empty && out[w] == 0
	}
	if empty {
		return nil
	}
	return out
}
