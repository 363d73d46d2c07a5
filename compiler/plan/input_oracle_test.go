package plan

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// oracleComponent is one small random flow in graphFlow's notation.
type oracleComponent struct{ execs, edges string }

// randomComponent draws a DAG of 2 to 7 execs named prefix+"a"... in a
// random declaration and edge order: each forward pair linked with a probability
// drawn per flow, on success, failure or done; joins all, any or N; and
// most execs with a success upstream taking their input from one of them.
func randomComponent(seed uint64, prefix string) oracleComponent {
	r := rand.New(rand.NewPCG(seed, 0x0309))
	n := 2 + r.IntN(6)
	density := []float64{0.3, 0.5, 0.8}[r.IntN(3)]
	perm := r.Perm(n) // exec i of the topological order is named letter perm[i]
	name := func(i int) string { return prefix + string(rune('a'+perm[i])) }
	var edges []string
	ups := make([][]int, n)   // upstreams of each exec
	okUps := make([][]int, n) // upstreams over a success edge
	for j := 1; j < n; j++ {
		for i := range j {
			if r.Float64() >= density {
				continue
			}
			op := ">"
			switch c := r.IntN(10); {
			case c >= 8:
				op = "~"
			case c >= 6:
				op = "!"
			}
			edges = append(edges, name(i)+op+name(j))
			ups[j] = append(ups[j], i)
			if op == ">" {
				okUps[j] = append(okUps[j], i)
			}
		}
	}
	// Deadlines come from a stream of their own, so that the rest of
	// each flow stays what its seed drew before deadlines were drawn.
	dl := rand.New(rand.NewPCG(seed, 0xdead))
	decl := make([]string, n)
	for j := range n {
		d := name(j)
		if dl.IntN(6) == 0 {
			d += "@"
		}
		if k := len(ups[j]); k > 0 {
			switch c := r.IntN(12); {
			case c < 3: // join all
			case c < 7:
				d += ":any"
			default:
				d += fmt.Sprintf(":%d", 1+r.IntN(k))
			}
			if len(okUps[j]) > 0 && r.IntN(10) < 8 {
				d += "<" + name(okUps[j][r.IntN(len(okUps[j]))])
			}
		}
		decl[j] = d
	}
	r.Shuffle(n, func(i, j int) { decl[i], decl[j] = decl[j], decl[i] })
	r.Shuffle(len(edges), func(i, j int) { edges[i], edges[j] = edges[j], edges[i] })
	return oracleComponent{execs: strings.Join(decl, " "), edges: strings.Join(edges, " ")}
}

// Outcomes of an exec in one world of the oracle.
const (
	worldSkipped = iota
	worldSucceeded
	worldFailed
	worldExpired
)

// oracleUnsure decides by brute force which execs with input from an
// exec can start while that exec has not succeeded. It enumerates every
// world the runtime can produce (lua/flow.lua: an exec whose join is met
// runs and then succeeds or fails; one whose join cannot be met is
// skipped, and a skipped exec satisfies no edge; on done holds for
// success or failure; an exec with a deadline may also expire, its join
// met or not, which satisfies its failure and done edges) and flags E
// taking input from X when some world has E running while X did not
// succeed. Final outcomes suffice for the
// timing too: if E's join is met while X is still running, the execs that
// met it ended before X did and owe nothing to X's outcome, so the world
// where X then fails exists. It returns the flagged exec indexes and the
// number of worlds.
func oracleUnsure(t *testing.T, f *Flow) (map[int]bool, int) {
	t.Helper()
	n := len(f.Execs)
	index := map[string]int{}
	for i, x := range f.Execs {
		index[x.Name] = i
	}
	type in struct {
		from int
		on   string
	}
	ins := make([][]in, n)
	for _, e := range f.Edges {
		ins[index[e.To]] = append(ins[index[e.To]], in{index[e.From], e.On})
	}
	// A topological order by repeated passes: the flows are tiny.
	var order []int
	placed := make([]bool, n)
	for len(order) < n {
		progress := false
		for v := range n {
			if placed[v] || !allOf(ins[v], func(e in) bool { return placed[e.from] }) {
				continue
			}
			placed[v], progress = true, true
			order = append(order, v)
		}
		if !progress {
			t.Fatalf("oracle: cycle in %v", f.Edges)
		}
	}
	needOf := func(v int) int {
		switch j := f.Execs[v].Join; j.Kind {
		case JoinAny:
			return 1
		case JoinCount:
			return j.N
		}
		return len(ins[v])
	}
	unsure := map[int]bool{}
	worlds := 0
	out := make([]int, n)
	ran := make([]bool, n) // the exec's join was met: it started
	var walk func(k int)
	walk = func(k int) {
		if k == n {
			worlds++
			for e, x := range f.Execs {
				if x.InputFrom == InputExec && ran[e] && out[index[x.InputExec]] != worldSucceeded {
					unsure[e] = true
				}
			}
			return
		}
		v := order[k]
		held := 0
		for _, e := range ins[v] {
			switch o := out[e.from]; {
			case o == worldSkipped:
			case e.on == OnDone, e.on == OnSuccess && o == worldSucceeded, e.on == OnFailure && (o == worldFailed || o == worldExpired):
				held++
			}
		}
		// An exec with a deadline may also expire, whether its join is
		// met or not: while pending, before its upstreams ended.
		expires := f.Execs[v].DeadlineMs > 0
		if len(ins[v]) > 0 && held < needOf(v) {
			ran[v] = false
			for _, o := range []int{worldSkipped, worldExpired} {
				if o == worldExpired && !expires {
					continue
				}
				out[v] = o
				walk(k + 1)
			}
			return
		}
		ran[v] = true
		for _, o := range []int{worldSucceeded, worldFailed, worldExpired} {
			if o == worldExpired && !expires {
				continue
			}
			out[v] = o
			walk(k + 1)
		}
	}
	walk(0)
	return unsure, worlds
}

func allOf[T any](s []T, ok func(T) bool) bool {
	for _, v := range s {
		if !ok(v) {
			return false
		}
	}
	return true
}

// checkUnsure checks the shape of UnsureInputs' answer for f: each entry
// an exec with input from an upstream and join any or N, in the order of
// Flow.Execs, with as many distinct edges into it as its join needs, none
// of them the success edge of its input exec, in the order of Flow.Edges.
func checkUnsure(t *testing.T, what string, f *Flow, got []UnsureInput) {
	t.Helper()
	for k, u := range got {
		x := f.Execs[u.Exec]
		if k > 0 && got[k-1].Exec >= u.Exec {
			t.Errorf("%s: execs out of order: %v", what, got)
		}
		if x.InputFrom != InputExec || x.Join.Kind == JoinAll {
			t.Errorf("%s: %q reported with input_from %q and %s", what, x.Name, x.InputFrom, JoinString(x.Join))
		}
		k := 0
		for _, e := range f.Edges {
			if e.To == x.Name {
				k++
			}
		}
		want := k
		switch x.Join.Kind {
		case JoinAny:
			want = 1
		case JoinCount:
			want = x.Join.N
		}
		if len(u.Edges) != want || !slices.IsSorted(u.Edges) || len(slices.Compact(slices.Clone(u.Edges))) != want {
			t.Errorf("%s: %q reported with edges %v, want %d distinct ones in order", what, x.Name, u.Edges, want)
		}
		for _, ei := range u.Edges {
			if e := f.Edges[ei]; e.To != x.Name || e.From == x.InputExec && e.On == OnSuccess {
				t.Errorf("%s: %q reported with edge %v", what, x.Name, e)
			}
		}
	}
}

// TestUnsureInputsOracle compares UnsureInputs with the brute-force
// oracle on random small flows. A miss (an exec the oracle shows can
// start without its input) fails; a false alarm (an exec flagged whose
// bad worlds are all impossible, which the analysis does not look for)
// is counted and the smallest ones logged. Each batch also joins its
// flows into one, with more than 64 distinct inputs, whose answer must be
// the flows' answers side by side.
func TestUnsureInputsOracle(t *testing.T) {
	const batches, perBatch = 120, 100
	var flows, worlds, checked, unsafe, alarms int
	var smallest []string // false alarms with the fewest edges
	widest := 0           // most distinct inputs checked in one joined flow
	smallestEdges := 1 << 30
	for b := range batches {
		var union struct{ execs, edges []string }
		var want []string // "exec: from, ..." over the whole batch
		for c := range perBatch {
			seed := uint64(b*perBatch + c + 1)
			comp := randomComponent(seed, fmt.Sprintf("c%d", c))
			f := graphFlow(t, comp.execs, comp.edges)
			flows++
			oracle, nw := oracleUnsure(t, f)
			worlds += nw
			got := f.UnsureInputs()
			// Validate refuses the flow for exactly these joins.
			var problems []string
			if err := f.Validate(); err != nil {
				problems = strings.Split(err.Error(), "\n")
			}
			if len(problems) != len(got) || !allOf(problems, func(p string) bool { return strings.Contains(p, ".join: ") }) {
				t.Fatalf("seed %d: flow %q / %q: Validate says %q, UnsureInputs %v", seed, comp.execs, comp.edges, problems, got)
			}
			checkUnsure(t, fmt.Sprintf("seed %d", seed), f, got)
			flagged := map[int]bool{}
			for _, u := range got {
				flagged[u.Exec] = true
				want = append(want, unsureString(f, u))
			}
			for e, x := range f.Execs {
				if x.InputFrom != InputExec {
					continue
				}
				if x.Join.Kind != JoinAll {
					checked++
				}
				if oracle[e] {
					unsafe++
				}
				switch {
				case oracle[e] && x.Join.Kind == JoinAll:
					t.Errorf("seed %d: the oracle says %q with join all can start without input in %q / %q", seed, x.Name, comp.execs, comp.edges)
				case oracle[e] && !flagged[e]:
					t.Errorf("seed %d: UnsureInputs misses %q, which can start before %q succeeded: graphFlow(t, %q, %q)",
						seed, x.Name, x.InputExec, comp.execs, comp.edges)
				case !oracle[e] && flagged[e]:
					alarms++
					if ne := len(f.Edges); ne < smallestEdges {
						smallestEdges, smallest = ne, nil
					}
					if ne := len(f.Edges); ne == smallestEdges && len(smallest) < 3 {
						smallest = append(smallest, fmt.Sprintf("seed %d: %q flagged in graphFlow(t, %q, %q)", seed, x.Name, comp.execs, comp.edges))
					}
				}
			}
			union.execs = append(union.execs, comp.execs)
			if comp.edges != "" {
				union.edges = append(union.edges, comp.edges)
			}
		}
		u := graphFlow(t, strings.Join(union.execs, " "), strings.Join(union.edges, " "))
		inputs := map[string]bool{}
		for _, x := range u.Execs {
			if x.InputFrom == InputExec && x.Join.Kind != JoinAll {
				inputs[x.InputExec] = true
			}
		}
		widest = max(widest, len(inputs))
		var got []string
		for _, x := range u.UnsureInputs() {
			got = append(got, unsureString(u, x))
		}
		if !slices.Equal(got, want) {
			t.Errorf("batch %d: the joined flows give\n%v\nbut one by one\n%v", b, got, want)
		}
	}
	t.Logf("%d flows, %d worlds, %d execs checked, %d can start without input, %d false alarms; up to %d distinct inputs in a joined flow",
		flows, worlds, checked, unsafe, alarms, widest)
	for _, s := range smallest {
		t.Logf("smallest false alarm: %s", s)
	}
	if unsafe == 0 || unsafe == checked || alarms > checked-unsafe {
		t.Errorf("implausible mix: %d checked, %d unsafe, %d false alarms", checked, unsafe, alarms)
	}
	if widest <= 64 {
		t.Errorf("the joined flows check at most %d distinct inputs, want more than one word of 64", widest)
	}
}

// unsureString describes one answer of UnsureInputs as "exec: from, ...".
func unsureString(f *Flow, u UnsureInput) string {
	var from []string
	for _, ei := range u.Edges {
		from = append(from, f.Edges[ei].From)
	}
	return f.Execs[u.Exec].Name + ": " + strings.Join(from, ", ")
}
