// Package worker is the Go worker SDK: it connects to an ffrun server,
// claims tasks of the kinds it has handlers for, runs them with bounded
// concurrency under leases it renews, and reports their outcomes.
package worker

import (
	"context"
	"encoding/json"
	"errors"
)

// Handler runs one attempt of a task and returns its JSON output (nil for
// none). An error fails the attempt; the task is retried per its policy
// unless the error is wrapped with Permanent.
type Handler func(ctx context.Context, t *Task) (json.RawMessage, error)

// Registrar binds handlers to task kinds. *Worker implements it; generated
// Register<Flow> functions accept the interface.
type Registrar interface {
	// Handle registers h for kind. Registering a kind twice is an error.
	Handle(kind string, h Handler) error
}

// Task is one claimed attempt of an execution, as a handler sees it.
type Task struct {
	// TODO(runtime): fields.
	input     json.RawMessage
	upstreams map[string]json.RawMessage
}

// Input returns the task's JSON input (nil when it takes none).
func (t *Task) Input() json.RawMessage { return t.input }

// Upstream returns the JSON output of the upstream exec name of the same
// flow run, and false when that upstream produced no output (it failed,
// was skipped, or declares no output type).
func (t *Task) Upstream(name string) (json.RawMessage, bool) {
	out, ok := t.upstreams[name]
	return out, ok
}

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
