package worker

import (
	"encoding/json"
	"fmt"

	"github.com/flowfabric/ff/runtime/wire"
)

// NewTestTask returns a task carrying input and the outputs of upstream
// execs by name, so that handlers, generated Register<Flow> bindings
// included, can be exercised without a server.
func NewTestTask(input json.RawMessage, upstreams map[string]json.RawMessage) *Task {
	return &Task{input: input, upstreams: upstreams}
}

// NewTestFlowTask is NewTestTask with the errors of upstreams that ended
// without an output (Task.UpstreamError), as an exec that runs on failure
// sees them.
func NewTestFlowTask(input json.RawMessage, upstreams map[string]json.RawMessage, upstreamErrors map[string]wire.UpstreamError) *Task {
	return &Task{input: input, upstreams: upstreams, upErrors: upstreamErrors}
}

// TestRegistrar is a Registrar that keeps the handlers by kind, so that
// generated Register<Flow> bindings can be exercised without a Worker:
// call TestRegistrar[kind] with a task from NewTestTask.
type TestRegistrar map[string]Handler

// Handle records h for kind; a kind a Worker refuses (Worker.Handle) or
// registered twice is an error.
func (r TestRegistrar) Handle(kind string, h Handler) error {
	if err := checkKind(kind); err != nil {
		return err
	}
	if _, dup := r[kind]; dup {
		return fmt.Errorf("kind %q registered twice", kind)
	}
	r[kind] = h
	return nil
}
