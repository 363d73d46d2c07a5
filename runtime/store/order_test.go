package store

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestFlowOrder checks flowOrder against its definition, taken literally
// (the lowest member whose upstreams are all placed, again and again; the
// members of cycles last, by index), on random graphs with and without
// cycles.
func TestFlowOrder(t *testing.T) {
	t.Parallel()
	reference := func(n int, ups [][]int) []int {
		placed := make([]bool, n)
		out := []int{}
		for {
			next := -1
			for i := 0; i < n && next < 0; i++ {
				if !placed[i] && !slices.ContainsFunc(ups[i], func(u int) bool { return !placed[u] }) {
					next = i
				}
			}
			if next < 0 {
				break
			}
			placed[next] = true
			out = append(out, next)
		}
		for i := range n {
			if !placed[i] {
				out = append(out, i)
			}
		}
		return out
	}
	rnd := rand.New(rand.NewPCG(1, 2))
	for trial := range 500 {
		n := rnd.IntN(40)
		ups := make([][]int, n)
		for i := range n {
			for range rnd.IntN(4) {
				u := rnd.IntN(max(n, 1))
				// Mostly acyclic (upstreams of a higher index, as a
				// shuffled plan's are not); a cycle now and then.
				if u > i && trial%5 != 0 || u == i || slices.Contains(ups[i], u) {
					continue
				}
				ups[i] = append(ups[i], u)
			}
		}
		if diff := cmp.Diff(reference(n, ups), flowOrder(n, ups)); diff != "" {
			t.Fatalf("trial %d, ups %v (-reference +flowOrder):\n%s", trial, ups, diff)
		}
	}
}
