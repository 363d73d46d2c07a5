package plan

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// graphFlow builds a flow from a compact description: execs as
// "name" or "name:join" (join "any" or a count) with "<x" for input from
// exec x and "@" after the name for a deadline, and edges as "a>b"
// (success), "a!b" (failure) or "a~b" (done).
// Execs without input take none.
func graphFlow(t *testing.T, execs, edges string) *Flow {
	t.Helper()
	out := &TypeRef{Kind: KindString}
	retry := Retry{Attempts: 1, Backoff: BackoffFixed, DelayMs: 1}
	f := &Flow{Schema: SchemaVersion, Name: "g", Namespace: "default", Lane: "default"}
	idx := map[string]int{}
	for _, d := range strings.Fields(execs) {
		x := Exec{Kind: "", Lane: "default", Priority: PriorityDefault, Output: out, InputFrom: InputNone, Join: Join{Kind: JoinAll}, Retry: retry}
		if name, in, ok := strings.Cut(d, "<"); ok {
			d = name
			x.InputFrom, x.InputExec, x.Input = InputExec, in, out
		}
		name, join, _ := strings.Cut(d, ":")
		if n, ok := strings.CutSuffix(name, "@"); ok {
			name, x.DeadlineMs = n, 1000
		}
		switch {
		case join == "any":
			x.Join = Join{Kind: JoinAny}
		case join != "":
			n, err := strconv.Atoi(join)
			if err != nil {
				t.Fatalf("bad join %q", join)
			}
			x.Join = Join{Kind: JoinCount, N: n}
		}
		x.Name, x.Kind = name, "g."+name
		idx[name] = len(f.Execs)
		f.Execs = append(f.Execs, x)
	}
	for _, d := range strings.Fields(edges) {
		i := strings.IndexAny(d, ">!~")
		on := map[byte]string{'>': OnSuccess, '!': OnFailure, '~': OnDone}[d[i]]
		e := Edge{From: d[:i], To: d[i+1:], On: on}
		f.Edges = append(f.Edges, e)
		to := &f.Execs[idx[e.To]]
		to.Upstreams = append(to.Upstreams, e.From)
	}
	return f
}

func TestUnsureInputs(t *testing.T) {
	tests := []struct {
		name, execs, edges string
		want               []string // "exec: from, from" per unsure exec
	}{
		{"join any over siblings", "a b c first:any<a", "a>first b>first c>first", []string{"first: b"}},
		{"join 2 over siblings", "a b c pair:2<b", "a>pair b>pair c>pair", []string{"pair: a, c"}},
		{"join 3 of 3 is join all", "a b c all:3<b", "a>all b>all c>all", nil},
		{"join 2 of 3, one other", "x a b p:2<x", "x>a a>p b>p x>p", nil},
		{"join all", "a b c all<a", "a>all b>all c>all", nil},
		{"one upstream", "a first:any<a", "a>first", nil},
		// defaults.ff: email { join 1 input reserve } after reserve and
		// charge, and charge runs only after reserve succeeded.
		{"other edge follows success", "reserve charge email:1<reserve", "reserve>charge reserve>email charge>email", nil},
		{"through a chain", "x a b c e:any<x", "x>a a>b b>c c>e x>e", nil},
		{"other edge follows failure", "x r e:any<x", "x!r r>e x>e", []string{"e: r"}},
		{"other edge follows done", "x r e:any<x", "x~r r>e x>e", []string{"e: r"}},
		{"failure edge of a follower", "x r e:any<x", "x>r r!e x>e", nil},
		{"done edge of a follower", "x r e:any<x", "x>r r~e x>e", nil},
		// A member with a deadline can expire while pending, which
		// satisfies its failure and done edges before x ended.
		{"failure edge of a follower with a deadline", "x r@ e:any<x", "x>r r!e x>e", []string{"e: r"}},
		{"done edge of a follower with a deadline", "x r@ e:any<x", "x>r r~e x>e", []string{"e: r"}},
		{"success edge of a follower with a deadline", "x r@ e:any<x", "x>r r>e x>e", nil},
		{"after a failure edge with a deadline", "x r@ s e:any<x", "x>r r!s s>e x>e", []string{"e: s"}},
		{"follower with join any", "x y r:any e:any<x", "x>r y>r r>e x>e", []string{"e: r"}},
		{"follower with join any, all after x", "x a b r:any e:any<x", "x>a x>b a>r b>r r>e x>e", nil},
		// r needs 2 of (a, b, y) where a and b follow x: any 2 include one.
		{"follower with join 2", "x a b y r:2 e:any<x", "x>a x>b a>r b>r y>r r>e x>e", nil},
		{"follower with join 1", "x a b y r:1 e:any<x", "x>a x>b a>r b>r y>r r>e x>e", []string{"e: r"}},
		{"join 2, two others unsure", "x a b e:2<x", "a>e b>e x>e", []string{"e: a, b"}},
		{"independent root", "x y e:any<x", "y>e x>e", []string{"e: y"}},
		{"two inputs, one safe", "x y f:any<y e:any<x", "x>y y>f x>e y>e x>f", []string{"f: x"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := graphFlow(t, tt.execs, tt.edges)
			var got []string
			for _, u := range f.UnsureInputs() {
				var from []string
				for _, ei := range u.Edges {
					from = append(from, f.Edges[ei].From)
				}
				got = append(got, f.Execs[u.Exec].Name+": "+strings.Join(from, ", "))
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("UnsureInputs (-want +got):\n%s", diff)
			}
		})
	}
}

// TestUnsureInputsInvalid checks that plans Validate refuses for their
// structure give no answer rather than a panic.
func TestUnsureInputsInvalid(t *testing.T) {
	cycle := graphFlow(t, "a b c:any<a", "a>b b>a a>c b>c")
	dup := graphFlow(t, "a a c:any<a", "a>c")
	unknown := graphFlow(t, "a c:any<a", "a>c")
	unknown.Edges = append(unknown.Edges, Edge{From: "zz", To: "c", On: OnSuccess})
	for name, f := range map[string]*Flow{"cycle": cycle, "duplicate": dup, "unknown": unknown} {
		if got := f.UnsureInputs(); got != nil {
			t.Errorf("%s: UnsureInputs = %v, want nil", name, got)
		}
	}
}

// TestJoinSet checks the bit counting of joinSet against a direct count,
// across word boundaries and counter widths.
func TestJoinSet(t *testing.T) {
	const nbits = 130
	words := (nbits + 63) / 64
	for k := 1; k <= 9; k++ {
		sets := make([]bitset, k)
		for j := range sets {
			if j == 2 {
				continue // one empty set
			}
			sets[j] = make(bitset, words)
			for b := range nbits {
				if (b*7+j*13)%(j+2) != 0 {
					sets[j].set(b)
				}
			}
		}
		for need := 1; need <= k; need++ {
			got := joinSet(sets, need, words)
			for b := range nbits {
				missing := 0
				for _, s := range sets {
					if !s.has(b) {
						missing++
					}
				}
				if want := missing < need; got.has(b) != want {
					t.Errorf("k=%d need=%d bit %d: got %v, want %v (missing from %d sets)", k, need, b, got.has(b), want, missing)
				}
			}
		}
	}
}

// TestValidateMaxExecs checks the limit on the execs of a flow.
func TestValidateMaxExecs(t *testing.T) {
	for _, n := range []int{MaxExecs, MaxExecs + 1} {
		f := &Flow{Schema: SchemaVersion, Name: "big", Namespace: "default", Lane: "default"}
		for i := range n {
			name := fmt.Sprintf("e%d", i)
			f.Execs = append(f.Execs, Exec{Name: name, Kind: "big." + name, Lane: "default", Priority: PriorityDefault,
				InputFrom: InputNone, Join: Join{Kind: JoinAll}, Retry: Retry{Attempts: 1, Backoff: BackoffFixed}})
		}
		err := f.Validate()
		if n <= MaxExecs && err != nil {
			t.Errorf("%d execs: %v", n, err)
		}
		if n > MaxExecs && (err == nil || err.Error() != "execs: 10001 execs: at most 10000 are allowed") {
			t.Errorf("%d execs: got %v, want the exec limit", n, err)
		}
	}
}

// BenchmarkUnsureInputs measures the check on a 10,000-exec flow where
// half the execs take the input of a chain member with join any.
func BenchmarkUnsureInputs(b *testing.B) {
	const half = MaxExecs / 2
	var execs, edges []string
	for i := range half {
		execs = append(execs, fmt.Sprintf("c%d", i))
		if i > 0 {
			edges = append(edges, fmt.Sprintf("c%d>c%d", i-1, i))
		}
	}
	for i := range half {
		execs = append(execs, fmt.Sprintf("e%d:any<c%d", i, i))
		edges = append(edges, fmt.Sprintf("c%d>e%d", i, i))
		if i != half-1 {
			edges = append(edges, fmt.Sprintf("c%d>e%d", half-1, i))
		}
	}
	f := graphFlow(&testing.T{}, strings.Join(execs, " "), strings.Join(edges, " "))
	b.ResetTimer()
	for b.Loop() {
		f.UnsureInputs()
	}
}
