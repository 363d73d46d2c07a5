package worker_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/flowfabric/ff/runtime/server/servertest"
	"github.com/flowfabric/ff/runtime/wire"
	"github.com/flowfabric/ff/runtime/worker"
)

// leaseKey is a context key of this test's own.
type leaseKey struct{}

// derivedContexts returns contexts derived from ctx in every way a handler
// may derive one, with their cancel functions.
func derivedContexts(ctx context.Context) (map[string]context.Context, func()) {
	c1, cancel1 := context.WithCancel(ctx)
	c2, cancel2 := context.WithTimeout(ctx, time.Hour)
	c3, cancel3 := context.WithCancelCause(ctx)
	return map[string]context.Context{
			"WithCancel":      c1,
			"WithTimeout":     c2,
			"WithCancelCause": c3,
			"WithValue":       context.WithValue(ctx, leaseKey{}, 1),
			"WithoutCancel":   context.WithoutCancel(ctx),
			"nested":          context.WithValue(context.WithoutCancel(c1), leaseKey{}, 2),
		}, func() {
			cancel1()
			cancel2()
			cancel3(nil)
		}
}

// TestTaskFromAcrossLeaseLoss: a handler finds its task in every
// context derived from its own, before and after the lease is lost (the
// cancellation reaches contexts derived from it, but not a WithoutCancel
// one); a goroutine the handler leaves behind keeps reading its own task
// while the worker's handler goroutine runs the next attempt (-race).
// With an attempt timeout the handler's context is a deadline over the
// task's context; without one, the task's context itself.
func TestTaskFromAcrossLeaseLoss(t *testing.T) {
	t.Parallel()
	for _, timeoutMs := range []int64{0, 60_000} {
		t.Run(fmt.Sprintf("timeout_ms=%d", timeoutMs), func(t *testing.T) {
			t.Parallel()
			checkTaskFromAcrossLeaseLoss(t, timeoutMs)
		})
	}
}

// checkTaskFromAcrossLeaseLoss runs TestTaskFromAcrossLeaseLoss with an
// attempt timeout of timeoutMs (0 = none).
func checkTaskFromAcrossLeaseLoss(t *testing.T, timeoutMs int64) {
	env := servertest.Start(t)
	w := newWorker(t, env, func(c *worker.Config) {
		c.Concurrency = 1 // the next attempt runs on the same handler goroutine
		c.LeaseTTL = 600 * time.Millisecond
	})
	var (
		mu       sync.Mutex
		problems []string
	)
	problem := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		problems = append(problems, fmt.Sprintf(format, args...))
	}
	started := make(chan string, 1)
	stopReader := make(chan struct{})
	var readers sync.WaitGroup
	handled := make(chan int, 4)
	if err := w.Handle("tf.hold", func(ctx context.Context, task *worker.Task) (json.RawMessage, error) {
		defer func() { handled <- task.Attempt() }()
		if task.Attempt() > 1 {
			// The execution again after its revoke: a new task, in a new
			// context, on the same goroutine as the first attempt.
			if got, ok := worker.TaskFrom(ctx); !ok || got != task || got.Attempt() != task.Attempt() {
				problem("attempt %d found task %p (%v), want %p", task.Attempt(), got, ok, task)
			}
			return json.RawMessage(`"second"`), nil
		}
		derived, cancel := derivedContexts(ctx)
		defer cancel()
		for name, c := range derived {
			if got, ok := worker.TaskFrom(c); !ok || got != task {
				problem("%s: found task %p (%v), want %p", name, got, ok, task)
			}
		}
		if _, ok := derived["WithValue"].Deadline(); ok != (timeoutMs > 0) {
			problem("deadline %v with timeout_ms %d", ok, timeoutMs)
		}
		readers.Add(1)
		go func() { // outlives the handler
			defer readers.Done()
			for {
				got, ok := worker.TaskFrom(ctx)
				if !ok || got != task || got.ID() != task.ID() || got.Attempt() != 1 {
					problem("the reader found task %p (%v) attempt %d", got, ok, got.Attempt())
					return
				}
				select {
				case <-stopReader:
					return
				case <-time.After(time.Millisecond):
				}
			}
		}()
		started <- task.ID()
		<-ctx.Done() // the test revokes the lease
		if got, ok := worker.TaskFrom(ctx); !ok || got != task {
			problem("after the lease loss: found task %p (%v)", got, ok)
		}
		if cause := context.Cause(ctx); !errors.Is(cause, worker.ErrLeaseLost) {
			problem("cause %v, want ErrLeaseLost", cause)
		}
		for name, c := range derived {
			if got, ok := worker.TaskFrom(c); !ok || got != task {
				problem("%s after the lease loss: found task %p (%v)", name, got, ok)
			}
			if wantErr := name != "WithoutCancel" && name != "nested"; (c.Err() != nil) != wantErr {
				problem("%s after the lease loss: Err %v", name, c.Err())
			}
		}
		return nil, ctx.Err()
	}); err != nil {
		t.Fatal(err)
	}
	run(t, w)
	id := create(t, env, wire.CreateExecution{Kind: "tf.hold", TimeoutMs: timeoutMs})
	select {
	case got := <-started:
		if got != id {
			t.Fatalf("started %s, want %s", got, id)
		}
	case <-ctxT(t).Done():
		t.Fatal("the handler did not start")
	}
	if _, err := env.Client.RevokeLease(ctxT(t), id, "review"); err != nil {
		t.Fatal(err)
	}
	for _, want := range []int{1, 2} {
		select {
		case got := <-handled:
			if got != want {
				t.Fatalf("handled attempt %d, want %d", got, want)
			}
		case <-ctxT(t).Done():
			t.Fatalf("attempt %d did not end", want)
		}
	}
	if r := waitResult(t, env, id); string(r.Result) != `"second"` {
		t.Fatalf("result %+v", r)
	}
	close(stopReader)
	readers.Wait()
	mu.Lock()
	defer mu.Unlock()
	for _, p := range problems {
		t.Error(p)
	}
}
