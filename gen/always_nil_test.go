package gen

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestAlwaysNilUpstreamUnderJoinN: under join N of its N upstreams, as
// under join all, an upstream joined by an on failure edge is said to be
// always nil; under join N of more upstreams it may be set, and is not.
func TestAlwaysNilUpstreamUnderJoinN(t *testing.T) {
	src := `package joins

type Item { id: string }

flow f(Item) -> Item {
  exec a(Item) -> Item { }
  exec b(Item) -> Item { }
  exec c(Item) -> Item { }
  exec every() { join 2 }
  exec some() { join 2 }

  a -> b, c
  a -> every on failure
  b -> every
  a -> some on failure
  b, c -> some
  result b
}
`
	path := filepath.Join(t.TempDir(), "joins.ff")
	if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := Generate(compile(t, path), Options{})
	if err != nil {
		t.Fatal(err)
	}
	// Compare with runs of spaces and comment markers collapsed.
	flat := strings.Join(strings.Fields(strings.ReplaceAll(string(out), "//", "")), " ")
	want := "A is always nil: every runs only when a failed (an on failure edge, under join 2 of its 2 upstreams)"
	if !strings.Contains(flat, want) {
		t.Errorf("output lacks %q:\n%s", want, out)
	}
	if n := strings.Count(flat, "is always nil"); n != 1 {
		t.Errorf("%d fields said to be always nil, want 1 (some's a may be set):\n%s", n, out)
	}
}

// TestAlwaysNilUpstreamUnderJoinOfOne: an exec with a single upstream,
// joined by an on failure edge, runs only when that upstream failed under
// join any as under join 1 and join all: its field is said to be always
// nil in each case.
func TestAlwaysNilUpstreamUnderJoinOfOne(t *testing.T) {
	src := `package joins

type T { id: string }

flow f(T) {
  exec a(T) -> T {}
  exec one() { join 1 }
  exec any() { join any }
  exec all() {}
  a -> one on failure
  a -> any on failure
  a -> all on failure
}
`
	path := filepath.Join(t.TempDir(), "joins.ff")
	if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := Generate(compile(t, path), Options{})
	if err != nil {
		t.Fatal(err)
	}
	flat := strings.Join(strings.Fields(strings.ReplaceAll(string(out), "//", "")), " ")
	for _, want := range []string{
		"A is always nil: one runs only when a failed (an on failure edge, under join 1 of its one upstream)",
		"A is always nil: any runs only when a failed (an on failure edge, under join any of its one upstream)",
		"A is always nil: all runs only when a failed (an on failure edge, under join all)",
	} {
		if !strings.Contains(flat, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}
