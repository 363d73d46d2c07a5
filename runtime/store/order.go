package store

// flowOrder returns 0..n-1 in flow order: every member after its
// upstreams, and among the members ready at a time the lowest index
// first (callers number the members in name order). ups[i] are the
// indexes of i's upstreams. Plans are acyclic; members a cycle would
// leave out are appended in index order all the same.
func flowOrder(n int, ups [][]int) []int {
	waiting := make([]int, n)
	// down lists the downstream members of each member: downs[start[u]:
	// start[u+1]] (one allocation for the run, not one per member).
	start := make([]int, n+1)
	for i := range n {
		waiting[i] = len(ups[i])
		for _, u := range ups[i] {
			start[u+1]++
		}
	}
	for u := range n {
		start[u+1] += start[u]
	}
	downs := make([]int, start[n])
	fill := make([]int, n)
	copy(fill, start[:n])
	ready := make(intHeap, 0, n)
	for i := range n {
		for _, u := range ups[i] {
			downs[fill[u]] = i
			fill[u]++
		}
		if waiting[i] == 0 {
			ready.push(i)
		}
	}
	out := make([]int, 0, n)
	placed := make([]bool, n)
	for len(ready) > 0 {
		i := ready.pop()
		out = append(out, i)
		placed[i] = true
		for _, d := range downs[start[i]:start[i+1]] {
			if waiting[d]--; waiting[d] == 0 {
				ready.push(d)
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

// intHeap is a min-heap of ints (typed: container/heap would box every
// int it is given).
type intHeap []int

func (h *intHeap) push(x int) {
	*h = append(*h, x)
	a := *h
	for i := len(a) - 1; i > 0; {
		parent := (i - 1) / 2
		if a[parent] <= a[i] {
			break
		}
		a[parent], a[i] = a[i], a[parent]
		i = parent
	}
}

func (h *intHeap) pop() int {
	a := *h
	top := a[0]
	last := len(a) - 1
	a[0] = a[last]
	a = a[:last]
	for i := 0; ; {
		least, l, r := i, 2*i+1, 2*i+2
		if l < len(a) && a[l] < a[least] {
			least = l
		}
		if r < len(a) && a[r] < a[least] {
			least = r
		}
		if least == i {
			break
		}
		a[i], a[least] = a[least], a[i]
		i = least
	}
	*h = a
	return top
}
