package worker_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/flowfabric/ff/compiler/plan"
	"github.com/flowfabric/ff/runtime/server/servertest"
	"github.com/flowfabric/ff/runtime/worker"
)

// otherKey is a context key of the test's own.
type otherKey struct{}

// TestTaskFromAndUpstreamErrors: a handler finds its task in its context
// (through a deadline too), and a member that runs on its upstream's
// failure reads how and why that upstream ended.
func TestTaskFromAndUpstreamErrors(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	ex := func(name string) plan.Exec {
		return plan.Exec{Name: name, Kind: "onfail." + name, Lane: "default", Priority: 100, InputFrom: plan.InputNone,
			Join: plan.Join{Kind: plan.JoinAll}, Retry: plan.Retry{Attempts: 1, Backoff: plan.BackoffFixed}}
	}
	b := ex("b")
	b.TimeoutMs, b.Upstreams = 60_000, []string{"a"}
	f := &plan.Flow{Schema: plan.SchemaVersion, Name: "onfail", Namespace: "default", Lane: "default",
		Execs: []plan.Exec{ex("a"), b}, Edges: []plan.Edge{{From: "a", To: "b", On: plan.OnFailure}}}

	type seen struct {
		same, hasDeadline, ok bool
		state, msg            string
	}
	got := make(chan seen, 1)
	w := newWorker(t, env, nil)
	if err := w.Handle("onfail.a", func(ctx context.Context, task *worker.Task) (json.RawMessage, error) {
		if _, _, ok := task.UpstreamError("a"); ok {
			t.Error("a root reports an upstream error")
		}
		return nil, worker.Permanent(errors.New("disk full"))
	}); err != nil {
		t.Fatal(err)
	}
	if err := w.Handle("onfail.b", func(ctx context.Context, task *worker.Task) (json.RawMessage, error) {
		from, ok := worker.TaskFrom(context.WithValue(ctx, otherKey{}, 1)) // a context derived from it
		_, hasDeadline := ctx.Deadline()
		s := seen{same: ok && from == task, hasDeadline: hasDeadline}
		s.state, s.msg, s.ok = task.UpstreamError("a")
		got <- s
		return nil, nil
	}); err != nil {
		t.Fatal(err)
	}
	run(t, w)
	r, err := env.Client.StageFlow(ctxT(t), f, nil)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case s := <-got:
		if want := (seen{same: true, hasDeadline: true, ok: true, state: "failed", msg: "disk full"}); s != want {
			t.Fatalf("b saw %+v, want %+v", s, want)
		}
	case <-ctxT(t).Done():
		t.Fatal("b did not run")
	}
	// a's failure is handled by b's edge, and there is no result exec.
	if _, err := r.Result(ctxT(t)); err != nil {
		t.Fatalf("run: %v", err)
	}
	if _, ok := worker.TaskFrom(context.Background()); ok {
		t.Fatal("TaskFrom found a task in a plain context")
	}
}
