package store

import "container/heap"

// flowOrder returns 0..n-1 in flow order: every member after its
// upstreams, and among the members ready at a time the lowest index
// first (callers number the members in name order). ups[i] are the
// indexes of i's upstreams. Plans are acyclic; members a cycle would
// leave out are appended in index order all the same.
func flowOrder(n int, ups [][]int) []int {
	waiting := make([]int, n)
	down := make([][]int, n)
	var ready intHeap
	for i := range n {
		waiting[i] = len(ups[i])
		for _, u := range ups[i] {
			down[u] = append(down[u], i)
		}
		if waiting[i] == 0 {
			ready = append(ready, i)
		}
	}
	heap.Init(&ready)
	out := make([]int, 0, n)
	placed := make([]bool, n)
	for ready.Len() > 0 {
		i := heap.Pop(&ready).(int)
		out = append(out, i)
		placed[i] = true
		for _, d := range down[i] {
			if waiting[d]--; waiting[d] == 0 {
				heap.Push(&ready, d)
			}
		}
	}
	for i := range n {
		if !placed[i] {
			out = append(out, i)
		}
	}
	return out
}

// intHeap is a min-heap of ints (container/heap).
type intHeap []int

func (h intHeap) Len() int           { return len(h) }
func (h intHeap) Less(i, j int) bool { return h[i] < h[j] }
func (h intHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *intHeap) Push(x any)        { *h = append(*h, x.(int)) }
func (h *intHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
