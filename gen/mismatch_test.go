package gen

import (
	"os/exec"
	"testing"

	"github.com/flowfabric/ff/compiler"
	"github.com/flowfabric/ff/dsl"
)

// mismatchFlow: exec a's output feeds b, whose output is the result. a
// runs on lane "raw", where the harness serves it with a plain
// worker.Handler, as a worker of another language or one built from an
// older version of the .ff files (a field renamed since) would. b may be
// retried, so that a failure that is not permanent shows.
const mismatchFlow = `package mismatch

type Order { id: string, cents: int }

flow checkout(Order) -> Order {
  exec a(Order) -> Order { lane "raw" }
  exec b(Order) -> Order { retry { attempts 3 delay 0ms } }
  a -> b
  result b
}
`

// mismatchHarness runs the generated RegisterCheckout for b against a
// real ffrun, with a served by a plain handler whose output lacks both
// fields of Order: {"order_id": "o-1"}.
const mismatchHarness = `package mismatch

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flowfabric/ff/runtime/client"
	"github.com/flowfabric/ff/runtime/server/servertest"
	"github.com/flowfabric/ff/runtime/worker"
)

func TestMain(m *testing.M) {
	code := m.Run()
	servertest.StopShared()
	os.Exit(code)
}

// except registers every kind with w but one.
type except struct {
	w    worker.Registrar
	kind string
}

func (e except) Handle(kind string, h worker.Handler) error {
	if kind == e.kind {
		return nil
	}
	return e.w.Handle(kind, h)
}

type handlers struct{ calls atomic.Int32 } // of B

func (h *handlers) A(ctx context.Context, in Order) (Order, error) { return in, nil }

func (h *handlers) B(ctx context.Context, in Order, up CheckoutBUpstream) (Order, error) {
	h.calls.Add(1)
	return in, nil
}

func TestMismatchedOutput(t *testing.T) {
	env := servertest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	w, err := worker.New(worker.Config{URL: env.URL, Name: "w", Lanes: []string{"default", "raw"},
		ClaimWait: time.Second, DrainTimeout: time.Second, Logger: servertest.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	h := &handlers{}
	if err := RegisterCheckout(except{w, "checkout.a"}, h); err != nil {
		t.Fatal(err)
	}
	raw := func(context.Context, *worker.Task) (json.RawMessage, error) {
		return json.RawMessage(` + "`" + `{"order_id":"o-1"}` + "`" + `), nil
	}
	if err := w.Handle("checkout.a", raw); err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(runCtx) }()
	defer func() { stop(); <-done }()

	run, err := StageCheckout(ctx, env.Client, Order{ID: "o-1", Cents: 100})
	if err != nil {
		t.Fatal(err)
	}
	res, err := run.Result(ctx)
	var re *client.RunError
	if !errors.As(err, &re) {
		t.Fatalf("Result = %+v, %v; want the run to fail: a's output lacks the fields of Order", res, err)
	}
	if n := h.calls.Load(); n != 0 {
		t.Errorf("B was called %d times", n)
	}
	if len(re.Failures) != 1 || re.Failures[0].Exec != "b" {
		t.Fatalf("failures %+v, want exec b's", re.Failures)
	}
	msg := re.Failures[0].Error
	for _, want := range []string{"flow checkout: exec b:", "the output of upstream a", "input.id: is required (string) but missing"} {
		if !strings.Contains(msg, want) {
			t.Errorf("b's error %q does not say %q", msg, want)
		}
	}
	fr, err := run.Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range fr.Execs {
		if m.Name == "b" && m.Attempts != 1 {
			t.Errorf("b ran %d attempts, want 1: the mismatch is permanent, a retry gets the same output", m.Attempts)
		}
	}
}
`

// TestMismatchedOutputFailsTheRun: an exec's output that does not match
// its declared type (here served by a plain handler) fails the generated
// handler of the exec it feeds, permanently and without calling its
// method, with an error naming the exec, the upstream and the field; the
// run fails rather than succeeding with zero values. It runs the
// generated code against a real ffrun.
func TestMismatchedOutputFailsTheRun(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to build generated code: %v", err)
	}
	pkg, diags := compiler.Compile([]dsl.Source{{Name: "mismatch.ff", Data: []byte(mismatchFlow)}})
	if diags.HasErrors() {
		t.Fatalf("compile: %v", diags)
	}
	goTestGenerated(t, goBin, pkg, "mismatch", mismatchHarness, "TestMismatchedOutput")
}
