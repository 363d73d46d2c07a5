// Package client is the Go client of the ffrun HTTP API: what generated
// Stage<Flow> functions, tools and tests use to start and inspect work.
package client

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/flowfabric/ff/compiler/plan"
)

// Stager starts runs of compiled flows. *Client implements it; generated
// Stage<Flow> functions accept the interface so callers can substitute it.
type Stager interface {
	StageFlow(ctx context.Context, flow *plan.Flow, input any, opts ...StageOption) (*Run, error)
}

// StageOption customises one StageFlow call.
type StageOption func(*StageOptions)

// StageOptions are the settings StageOption functions change.
type StageOptions struct {
	IdempotencyKey string // a repeat with the same key returns the first run
	Namespace      string // overrides the flow's namespace when set
}

// WithIdempotencyKey makes staging idempotent: staging again with the same
// key returns the run created first instead of a new one.
func WithIdempotencyKey(key string) StageOption {
	return func(o *StageOptions) { o.IdempotencyKey = key }
}

// WithNamespace stages the run in namespace ns instead of the flow's own.
func WithNamespace(ns string) StageOption {
	return func(o *StageOptions) { o.Namespace = ns }
}

// Client talks to one ffrun server.
type Client struct {
	// TODO(runtime): fields; constructor New(baseURL string, opts ...Option).
}

// ErrNotImplemented is returned until the runtime lands.
var ErrNotImplemented = errors.New("client: not implemented")

// StageFlow starts a run of flow with input, which is encoded as JSON.
func (c *Client) StageFlow(ctx context.Context, flow *plan.Flow, input any, opts ...StageOption) (*Run, error) {
	return nil, ErrNotImplemented
}

// Run is a handle on one staged run of a flow.
type Run struct {
	ID   string // run id
	Flow string // flow name
}

// Result waits until the run is terminal and returns the JSON output of the
// flow's result exec. A run that did not succeed yields a *RunError.
func (r *Run) Result(ctx context.Context) (json.RawMessage, error) {
	return nil, ErrNotImplemented
}
