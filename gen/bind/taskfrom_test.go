package bind

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/flowfabric/ff/runtime/wire"
	"github.com/flowfabric/ff/runtime/worker"
)

// probeKey is a context key of this test's own.
type probeKey struct{}

// taskProbe is shapes whose Plain and InOut keep the context they get.
type taskProbe struct {
	*shapes
	plain, inOut context.Context
}

func (h *taskProbe) Plain(ctx context.Context) error { h.plain = ctx; return nil }

func (h *taskProbe) InOut(ctx context.Context, in item) (item, error) {
	h.inOut = ctx
	return in, nil
}

// TestBindingsCarryTheirTask: a binding called through a
// TestRegistrar gives its method a context carrying the task it was
// called with: from a plain context, from one carrying another task, and,
// unchanged, from one already carrying it; the caller's values stay.
func TestBindingsCarryTheirTask(t *testing.T) {
	h := &taskProbe{shapes: &shapes{}}
	r := worker.TestRegistrar{}
	if err := Register(r, shapesPlan("f"), h); err != nil {
		t.Fatal(err)
	}
	task := worker.NewTestFlowTask(nil, nil, map[string]wire.UpstreamError{"a": {State: "failed", Error: "boom"}})
	other := worker.NewTestTask(nil, nil)
	base := context.WithValue(context.Background(), probeKey{}, "kept")

	for _, tt := range []struct {
		name string
		ctx  context.Context
	}{
		{"plain", base},
		{"another task", worker.WithTask(base, other)},
		{"cancelled", func() context.Context {
			c, cancel := context.WithCancel(base)
			cancel()
			return c
		}()},
	} {
		if _, err := r["k.plain"](tt.ctx, task); err != nil {
			t.Fatal(err)
		}
		got, ok := worker.TaskFrom(h.plain)
		if !ok || got != task {
			t.Fatalf("%s: method found task %p (%v), want %p", tt.name, got, ok, task)
		}
		if st, msg, ok := got.UpstreamError("a"); st != "failed" || msg != "boom" || !ok {
			t.Fatalf("%s: UpstreamError = %q, %q, %v", tt.name, st, msg, ok)
		}
		if h.plain.Value(probeKey{}) != "kept" {
			t.Fatalf("%s: the caller's context value is lost", tt.name)
		}
		if tt.ctx.Err() != nil && h.plain.Err() == nil {
			t.Fatalf("%s: the cancellation is lost", tt.name)
		}
	}

	// Already carrying the task: the context is passed as it is.
	own := worker.WithTask(base, task)
	if _, err := r["k.plain"](own, task); err != nil {
		t.Fatal(err)
	}
	if h.plain != own {
		t.Fatal("a context carrying the task was wrapped again")
	}
	// A method with input too.
	if out, err := r["k.in_out"](context.Background(), worker.NewTestTask(json.RawMessage(`{"n":2}`), nil)); err != nil || string(out) != `{"n":2}` {
		t.Fatalf("in_out = %s, %v", out, err)
	}
	if _, ok := worker.TaskFrom(h.inOut); !ok {
		t.Fatal("in_out found no task")
	}
}
