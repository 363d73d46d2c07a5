package gen

import (
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flowfabric/ff/compiler"
	"github.com/flowfabric/ff/dsl"
)

// nullsSource is a flow whose upstreams a, m and j declare a list,
// a map and a json output: the Go zero values of those types (a nil
// slice, a nil map, a nil json.RawMessage) are valid outputs, which the
// generated handlers encode as null.
const nullsSource = `package nulls

type Item { n: int }

flow nulls(Item) -> [string] {
  exec a(Item) -> [Item] {}
  exec m(Item) -> {string: int} {}
  exec j(Item) -> json {}
  exec c([Item]) -> [string] { input a }
  a, m, j -> c
}
`

// nullsHarness drives the generated RegisterNulls: a, m and j
// succeed with their zero values, and c gets their outputs as the worker
// would pass them (the bytes their own handlers returned).
const nullsHarness = `package nulls

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/flowfabric/ff/runtime/worker"
)

type handlers struct{ up *NullsCUpstream }

func (h *handlers) A(context.Context, Item) ([]Item, error)          { return nil, nil }
func (h *handlers) M(context.Context, Item) (map[string]int64, error) { return nil, nil }
func (h *handlers) J(context.Context, Item) (json.RawMessage, error)  { return nil, nil }

func (h *handlers) C(_ context.Context, in []Item, up NullsCUpstream) ([]string, error) {
	h.up = &up
	return nil, nil
}

func TestSucceededUpstreamIsNotNil(t *testing.T) {
	r := worker.TestRegistrar{}
	h := &handlers{}
	if err := RegisterNulls(r, h); err != nil {
		t.Fatal(err)
	}
	in := json.RawMessage(` + "`" + `{"n":1}` + "`" + `)
	ups := map[string]json.RawMessage{}
	for _, name := range []string{"a", "m", "j"} {
		out, err := r["nulls."+name](context.Background(), worker.NewTestTask(in, nil))
		if err != nil {
			t.Fatalf("exec %s: %v", name, err)
		}
		ups[name] = out // a succeeded upstream: the worker passes its output on
	}
	if _, err := r["nulls.c"](context.Background(), worker.NewTestTask(ups["a"], ups)); err != nil {
		t.Fatalf("exec c: %v", err)
	}
	// The generated doc: a field is nil when that upstream produced no
	// output (it failed or was skipped, or had not ended). These three
	// succeeded.
	if h.up.A == nil {
		t.Errorf("up.A is nil although upstream a succeeded (its output was %s)", ups["a"])
	}
	if h.up.M == nil {
		t.Errorf("up.M is nil although upstream m succeeded (its output was %s)", ups["m"])
	}
	if h.up.J == nil {
		t.Errorf("up.J is nil although upstream j succeeded (its output was %s)", ups["j"])
	}
}
`

// TestSucceededUpstreamWithZeroOutput checks the promise of the
// generated <Flow><Exec>Upstream structs: a field is nil only when that
// upstream produced no output (failed, skipped, not ended). An upstream
// whose output type is a list, a map or json and whose handler returned
// the zero value succeeded with the output null; its field must not read
// as if it had failed.
func TestSucceededUpstreamWithZeroOutput(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to build generated code: %v", err)
	}
	pkg, diags := compiler.Compile([]dsl.Source{{Name: "nulls.ff", Data: []byte(nullsSource)}})
	if diags.HasErrors() {
		t.Fatalf("compile: %v", diags)
	}
	src, err := Generate(pkg, Options{})
	if err != nil {
		t.Fatalf("Generate: %v", err)
	}
	root, err := os.MkdirTemp("testdata", "nulls-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	write(t, filepath.Join(root, "gen_ff.go"), src)
	write(t, filepath.Join(root, "harness_test.go"), []byte(nullsHarness))
	cmd := exec.Command(goBin, "test", "-count=1", ".")
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go test %s: %v\n%s", path.Join(modulePath, "gen", filepath.ToSlash(root)), err, strings.TrimSpace(string(out)))
	}
}
