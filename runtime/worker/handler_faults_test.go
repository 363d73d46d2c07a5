package worker_test

import (
	"context"
	"encoding/json"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/flowfabric/ff/compiler/plan"
	"github.com/flowfabric/ff/runtime/server/servertest"
	"github.com/flowfabric/ff/runtime/wire"
	"github.com/flowfabric/ff/runtime/worker"
)

// checkFirstAttemptFailed waits for execution id, and checks that it
// completed with want on its second attempt after the first failed with a
// message containing msg.
func checkFirstAttemptFailed(t *testing.T, env *servertest.Env, id, want, msg string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r, err := env.Client.WaitResult(ctx, id, 20*time.Millisecond)
	if err != nil {
		t.Fatalf("execution %s did not end: %v", id, err)
	}
	if r.State != "completed" || string(r.Result) != want {
		t.Fatalf("execution %s ended %s %s %q, want completed %s", id, r.State, r.Result, r.Error, want)
	}
	ex, err := env.Client.GetExecution(ctxT(t), id)
	if err != nil {
		t.Fatal(err)
	}
	if len(ex.Attempts) != 2 || ex.Attempts[0].Outcome != "failed" || !strings.Contains(ex.Attempts[0].Error, msg) {
		t.Fatalf("attempts %+v, want a first one failed with %q, then a second", ex.Attempts, msg)
	}
}

// TestHandlerGoexitFailsItsAttempt: a handler that ends its goroutine with
// runtime.Goexit (t.FailNow or t.Fatal called in a handler under test, or
// a library that bails out that way) neither returns nor panics. The
// worker fails that attempt as it fails a panic (retryable, with a message
// naming runtime.Goexit), gives back its slot and stops renewing its
// lease: with Concurrency 1 the execution is retried and the next task
// runs.
func TestHandlerGoexitFailsItsAttempt(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	w := newWorker(t, env, func(c *worker.Config) { c.Concurrency = 1 })
	if err := w.Handle("exits", func(ctx context.Context, task *worker.Task) (json.RawMessage, error) {
		if task.Attempt() == 1 {
			runtime.Goexit()
		}
		return json.RawMessage(`"second attempt"`), nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := w.Handle("ok", func(ctx context.Context, task *worker.Task) (json.RawMessage, error) {
		return json.RawMessage(`"fine"`), nil
	}); err != nil {
		t.Fatal(err)
	}
	run(t, w)
	exits := create(t, env, wire.CreateExecution{Kind: "exits", Retry: &plan.Retry{Attempts: 2}})
	ok := create(t, env, wire.CreateExecution{Kind: "ok"})
	checkFirstAttemptFailed(t, env, exits, `"second attempt"`, "runtime.Goexit")
	if r := waitResult(t, env, ok); r.State != "completed" {
		t.Fatalf("the next task ended %s %q", r.State, r.Error)
	}
}

// panickyError is an error whose Error method panics, as a nil pointer
// returned as an error does when its method reads a field.
type panickyError struct{ msg *string }

func (e *panickyError) Error() string { return *e.msg }

// TestHandlerErrorMethodPanicFailsItsAttempt: the methods of the error a
// handler returns are the user's code. An error whose Error method panics
// (a nil *T returned as an error, the classic case) fails the attempt as a
// panic in the handler does (retryable, with a message naming the error's
// type), and the worker goes on instead of crashing.
func TestHandlerErrorMethodPanicFailsItsAttempt(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	w := newWorker(t, env, func(c *worker.Config) { c.Concurrency = 1 })
	if err := w.Handle("typed_nil", func(ctx context.Context, task *worker.Task) (json.RawMessage, error) {
		if task.Attempt() == 1 {
			var e *panickyError
			return nil, e // a non-nil error holding a nil pointer
		}
		return json.RawMessage(`1`), nil
	}); err != nil {
		t.Fatal(err)
	}
	run(t, w)
	id := create(t, env, wire.CreateExecution{Kind: "typed_nil", Retry: &plan.Retry{Attempts: 2}})
	checkFirstAttemptFailed(t, env, id, `1`, "*worker_test.panickyError whose methods panicked")
}
