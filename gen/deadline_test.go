package gen

import (
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"testing"

	"github.com/flowfabric/ff/compiler"
	"github.com/flowfabric/ff/compiler/plan"
	"github.com/flowfabric/ff/dsl"
)

// deadlineFlow: v takes its input from x under `join any`, and its other
// edge is a failure edge from u, which runs only after x succeeded. The
// %s is u's settings.
const deadlineFlow = `package dl

type T { id: string }

flow f(T) {
  exec x(T) -> T {}
  exec u(T) -> T { %s }
  exec v(T) { join any input x }
  x -> u
  x -> v
  u -> v on failure
}
`

// deadlineHarness runs the generated code of deadlineFlow on a real
// ffrun and requires V to be called with the run's input.
const deadlineHarness = `package dl

import (
	"context"
	"testing"
	"time"

	"github.com/flowfabric/ff/runtime/server/servertest"
	"github.com/flowfabric/ff/runtime/worker"
)

type impl struct{ v chan T }

func (impl) X(ctx context.Context, in T) (T, error) { time.Sleep(300 * time.Millisecond); return in, nil }
func (impl) U(ctx context.Context, in T, up FUUpstream) (T, error) { return in, nil }
func (h impl) V(ctx context.Context, in T, up FVUpstream) error  { h.v <- in; return nil }

func TestDeadlineInput(t *testing.T) {
	env := servertest.Start(t)
	w, err := worker.New(worker.Config{URL: env.URL, Name: "w", Concurrency: 2, ClaimWait: time.Second, DrainTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	h := impl{v: make(chan T, 1)}
	if err := RegisterF(w, h); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	defer func() { cancel(); <-done }()
	wctx, wcancel := context.WithTimeout(context.Background(), 8*time.Second)
	defer wcancel()
	run, err := StageF(wctx, env.Client, T{ID: "r1"})
	if err != nil {
		t.Fatal(err)
	}
	if err := run.Result(wctx); err != nil {
		t.Errorf("run failed: %v", err)
	}
	select {
	case in := <-h.v:
		if in.ID != "r1" {
			t.Errorf("V got input %+v", in)
		}
	default:
		t.Error("V was never called")
	}
}
`

// TestGeneratedInputWithDeadline: the generated code promises that a
// handler's input is always there, since the compiler refuses a join that
// could start an exec before the upstream feeding its input has succeeded
// (FF0309). With a deadline on u that would happen (u can expire while
// pending, before x ends, and its failure edge then holds): ffc refuses
// the flow. Without it, the generated code of the flow, built and run
// against a real ffrun, calls V with its input.
func TestGeneratedInputWithDeadline(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatal(err)
	}
	_, diags := compiler.Compile([]dsl.Source{{Name: "dl.ff", Data: []byte(fmt.Sprintf(deadlineFlow, "deadline 300ms"))}})
	refused := false
	for _, d := range diags {
		refused = refused || d.Code == dsl.CodeInputJoin
	}
	if !refused {
		t.Errorf("ffc accepts v's join any with a deadline on u: %v", diags)
	}
	pkg, diags := compiler.Compile([]dsl.Source{{Name: "dl.ff", Data: []byte(fmt.Sprintf(deadlineFlow, ""))}})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	goTestGenerated(t, goBin, pkg, "dl", deadlineHarness, "TestDeadlineInput")
}

// goTestGenerated writes pkg's generated code (name_ff.go) and harness
// (name_test.go) to a new package under testdata, and runs its tests
// matching run with the go command goBin: they must pass.
func goTestGenerated(t *testing.T, goBin string, pkg *plan.Package, name, harness, run string) {
	t.Helper()
	src, err := Generate(pkg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	root, err := os.MkdirTemp("testdata", "build-"+name+"-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	write(t, filepath.Join(root, name+"_ff.go"), src)
	write(t, filepath.Join(root, name+"_test.go"), []byte(harness))
	cmd := exec.Command(goBin, "test", "-count=1", "-run", run, ".")
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Errorf("go test of the generated code (%s): %v\n%s", path.Join(modulePath, "gen", filepath.ToSlash(root)), err, lastLines(string(out), 15))
	}
}

// lastLines returns the last n lines of s.
func lastLines(s string, n int) string {
	lines := []rune(s)
	count := 0
	for i := len(lines) - 1; i >= 0; i-- {
		if lines[i] == '\n' {
			count++
			if count > n {
				return string(lines[i+1:])
			}
		}
	}
	return s
}
