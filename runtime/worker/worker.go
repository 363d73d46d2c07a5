// Package worker is the Go worker SDK: it connects to an ffrun server,
// claims tasks of the kinds it has handlers for, runs them with bounded
// concurrency under leases it renews, and reports their outcomes.
//
// A Worker talks HTTP to ffrun only. It long-polls for up to as many tasks
// as it has free slots, renews every lease it holds in one request per
// renew tick, and coalesces the outcomes of concurrent handlers into one
// request. A handler's context is cancelled when its lease is lost or its
// execution is cancelled; context.Cause tells which (ErrLeaseLost,
// ErrCancelled, ErrShutdown). While it holds leases it keeps one lease
// watch open, which the server answers as soon as one ends (a cancel, a
// revoke, a limit), so that the handler learns of it at once rather than
// at the next renew tick.
package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/flowfabric/ff/runtime/wire"
)

// Handler runs one attempt of a task and returns its JSON output (nil for
// none). An error fails the attempt; the task is retried per its policy
// unless the error is wrapped with Permanent. Handlers run on goroutines
// the worker keeps for later tasks: what a handler leaves on its goroutine
// (runtime.LockOSThread without UnlockOSThread, labels set with
// pprof.SetGoroutineLabels) stays for the next task that goroutine runs.
type Handler func(ctx context.Context, t *Task) (json.RawMessage, error)

// Registrar binds handlers to task kinds. *Worker implements it; generated
// Register<Flow> functions accept the interface.
type Registrar interface {
	// Handle registers h for kind. Registering a kind twice is an error.
	Handle(kind string, h Handler) error
}

// Task is one claimed attempt of an execution, as a handler sees it.
type Task struct {
	id          string
	kind        string
	namespace   string
	lane        string
	attempt     int
	maxAttempts int
	deadline    time.Time
	tags        map[string]string
	input       json.RawMessage
	upstreams   map[string]json.RawMessage
	upErrors    map[string]wire.UpstreamError
	usage       *taskUsage // nil for test tasks
}

// ID returns the execution id.
func (t *Task) ID() string { return t.id }

// Kind returns the task's kind (the handler key).
func (t *Task) Kind() string { return t.kind }

// Namespace returns the execution's namespace.
func (t *Task) Namespace() string { return t.namespace }

// Lane returns the execution's lane.
func (t *Task) Lane() string { return t.lane }

// Attempt returns the 1-based number of this attempt among every attempt
// of the execution: attempts after a lost lease (a reclaim), a revoked
// lease or a replay count here but not against the retry policy, so
// Attempt can exceed MaxAttempts.
func (t *Task) Attempt() int { return t.attempt }

// MaxAttempts returns how many failed attempts the retry policy allows
// (0 when the server did not say); see Attempt.
func (t *Task) MaxAttempts() int { return t.maxAttempts }

// Deadline returns the attempt's deadline (its timeout), and false when it
// has none. The handler's context carries the same deadline. It is on
// this worker's clock: the server's deadline moved by how far this clock
// is from the server's (seen at the grant), so a worker whose clock is off
// still gets the attempt's whole timeout.
func (t *Task) Deadline() (time.Time, bool) { return t.deadline, !t.deadline.IsZero() }

// Tags returns the execution's tags (do not modify the map).
func (t *Task) Tags() map[string]string { return t.tags }

// Input returns the task's JSON input (nil when it takes none).
func (t *Task) Input() json.RawMessage { return t.input }

// Upstream returns the JSON output of the upstream exec name of the same
// flow run, and false when that upstream produced no output (it failed,
// was skipped, or declares no output type). The server bounds the upstream
// outputs a grant carries (4 MiB per task, 16 MiB per answer) and lists
// the others by execution id; the worker reads those before it runs the
// handler, so every output is here. When one cannot be read, the attempt
// fails (to be retried) without running the handler, with an error naming
// that upstream.
func (t *Task) Upstream(name string) (json.RawMessage, bool) {
	out, ok := t.upstreams[name]
	return out, ok
}

// UpstreamError returns how the upstream exec name of the same flow run
// ended without an output, state (failed, expired, cancelled or skipped),
// and why, msg: its failure, or the reason it expired, was cancelled or
// was skipped. What an exec that runs on failure (an on failure or on done
// edge) reports or acts on. ok is false when that upstream succeeded or
// had not ended when the task was granted.
func (t *Task) UpstreamError(name string) (state, msg string, ok bool) {
	e, ok := t.upErrors[name]
	return e.State, e.Error, ok
}

// taskKey is the context key of the Task a handler runs.
type taskKey struct{}

// taskCtx is a context carrying a Task: what WithTask returns, and what a
// Worker hands its handlers (kept with the attempt's other state, so that
// it costs no allocation of its own).
type taskCtx struct {
	context.Context
	t *Task
}

func (c *taskCtx) Value(key any) any {
	if key == (taskKey{}) {
		return c.t
	}
	return c.Context.Value(key)
}

// WithTask returns a copy of ctx carrying t, for TaskFrom. A Worker gives
// every handler such a context; generated bindings add it when the
// context they are called with does not carry their task (tests calling
// them directly).
func WithTask(ctx context.Context, t *Task) context.Context {
	return &taskCtx{Context: ctx, t: t}
}

// TaskFrom returns the Task whose handler ctx was given to (or a context
// derived from it), and false for any other context. The typed handlers of
// generated code take no Task: they reach the attempt number, deadline,
// tags, the upstreams' errors and ReportUsage through it.
func TaskFrom(ctx context.Context) (*Task, bool) {
	t, ok := ctx.Value(taskKey{}).(*Task)
	return t, ok
}

// Causes of a handler's context cancellation, read with context.Cause.
var (
	// ErrLeaseLost: the server rejected the lease (expired, revoked or
	// superseded, or the attempt's timeout or the execution's deadline
	// passed) or it could not be renewed before it ran out.
	ErrLeaseLost = errors.New("worker: lease lost")
	// ErrCancelled: the execution was cancelled.
	ErrCancelled = errors.New("worker: execution cancelled")
	// ErrShutdown: the worker stopped and the drain timeout passed. A
	// handler that then fails has its task handed back, not failed (see
	// Worker.Run).
	ErrShutdown = errors.New("worker: shut down before the handler finished")
)

// permanentError marks a failure that must not be retried.
type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// Permanent wraps err so that the attempt fails without retry.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanentError{err: err}
}

// IsPermanent reports whether err was wrapped with Permanent.
func IsPermanent(err error) bool {
	var p *permanentError
	return errors.As(err, &p)
}

// PanicError is the failure recorded when a handler panics.
type PanicError struct {
	Value any
}

func (e *PanicError) Error() string { return fmt.Sprintf("handler panicked: %v", e.Value) }
