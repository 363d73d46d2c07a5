package worker

import "encoding/json"

// NewTestTask returns a task carrying input and the outputs of upstream
// execs by name, so that handlers, generated Register<Flow> bindings
// included, can be exercised without a server.
func NewTestTask(input json.RawMessage, upstreams map[string]json.RawMessage) *Task {
	return &Task{input: input, upstreams: upstreams}
}
