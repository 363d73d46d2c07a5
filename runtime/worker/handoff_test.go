package worker_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flowfabric/ff/compiler/plan"
	"github.com/flowfabric/ff/runtime/server/servertest"
	"github.com/flowfabric/ff/runtime/worker"
)

// chainOf returns a flow of n execs a0 -> a1 -> ...; each takes the output
// of the one before (a list of the names that ran) and the run's result is
// the last one's.
func chainOf(n int) *plan.Flow {
	list := &plan.TypeRef{Kind: plan.KindList, Elem: &plan.TypeRef{Kind: plan.KindString}}
	f := &plan.Flow{Schema: plan.SchemaVersion, Name: "walk", Namespace: "default", Lane: "default",
		Input: list, Output: list}
	for i := range n {
		x := plan.Exec{Name: "a" + strconv.Itoa(i), Lane: "default", Priority: 100, Input: list, Output: list,
			InputFrom: plan.InputFlow, Join: plan.Join{Kind: plan.JoinAll}, Retry: plan.Retry{Attempts: 1, Backoff: plan.BackoffFixed}}
		x.Kind = "walk." + x.Name
		if i > 0 {
			prev := f.Execs[i-1].Name
			x.InputFrom, x.InputExec, x.Upstreams = plan.InputExec, prev, []string{prev}
			f.Edges = append(f.Edges, plan.Edge{From: prev, To: x.Name, On: plan.OnSuccess})
		}
		f.Execs = append(f.Execs, x)
	}
	f.Result = f.Execs[n-1].Name
	return f
}

// counting counts the worker's claim and complete requests; with
// refuseHandoff it answers a complete that asks for a hand-off as a server
// that does not know the field would (400 unknown_field), without passing
// it on.
type counting struct {
	base          http.RoundTripper
	refuseHandoff bool
	claims        atomic.Int64
	completes     atomic.Int64
	handoffs      atomic.Int64 // completes that asked for a hand-off
}

func (c *counting) RoundTrip(r *http.Request) (*http.Response, error) {
	switch r.URL.Path {
	case "/v1/worker/claim":
		c.claims.Add(1)
	case "/v1/worker/complete":
		c.completes.Add(1)
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return nil, err
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		if bytes.Contains(body, []byte(`"handoff"`)) {
			c.handoffs.Add(1)
			if c.refuseHandoff {
				return &http.Response{StatusCode: http.StatusBadRequest, Header: http.Header{"Content-Type": {"application/json"}},
					Body:    io.NopCloser(strings.NewReader(`{"error":{"code":"unknown_field","message":"unknown field \"handoff\"","details":{"field":"handoff"}}}`)),
					Request: r}, nil
			}
		}
	}
	return c.base.RoundTrip(r)
}

// runChain runs one chain of n through a worker of one slot over tr and
// checks the result.
func runChain(t *testing.T, n int, tr *counting, noHandoff bool) {
	t.Helper()
	env := servertest.Start(t)
	w := newWorker(t, env, func(c *worker.Config) {
		c.Concurrency = 1
		c.NoHandoff = noHandoff
		c.HTTPClient = &http.Client{Transport: tr}
	})
	for _, x := range chainOf(n).Execs {
		name := x.Name
		if err := w.Handle(x.Kind, func(_ context.Context, task *worker.Task) (json.RawMessage, error) {
			var seen []string
			if err := json.Unmarshal(task.Input(), &seen); err != nil {
				return nil, worker.Permanent(err)
			}
			return json.Marshal(append(seen, name))
		}); err != nil {
			t.Fatal(err)
		}
	}
	run(t, w)
	r, err := env.Client.StageFlow(ctxT(t), chainOf(n), []string{})
	if err != nil {
		t.Fatal(err)
	}
	out, err := r.Result(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	want := `["a0","a1","a2","a3","a4"]`
	if string(out) != want {
		t.Fatalf("result %s, want %s", out, want)
	}
}

// A worker completing a chain member gets the next member in the same
// request: one claim for the root, none after it.
func TestHandoffSavesClaims(t *testing.T) {
	t.Parallel()
	tr := &counting{base: http.DefaultTransport}
	runChain(t, 5, tr, false)
	if got := tr.handoffs.Load(); got != 4 {
		t.Errorf("%d completes asked for a hand-off, want 4 (every member but the last)", got)
	}
	// The root's claim, and the long-poll parked after the last member.
	if got := tr.claims.Load(); got > 2 {
		t.Errorf("%d claims for a chain of 5, want at most 2", got)
	}
}

// With NoHandoff every member is claimed.
func TestNoHandoffClaimsEveryMember(t *testing.T) {
	t.Parallel()
	tr := &counting{base: http.DefaultTransport}
	runChain(t, 5, tr, true)
	if got := tr.handoffs.Load(); got != 0 {
		t.Errorf("%d completes asked for a hand-off with NoHandoff", got)
	}
	if got := tr.claims.Load(); got < 5 {
		t.Errorf("%d claims for a chain of 5, want at least 5", got)
	}
}

// A server that refuses the hand-off field gets the completion again
// without it, and no more hand-off requests: the chain still completes.
func TestHandoffRefusedFallsBack(t *testing.T) {
	t.Parallel()
	tr := &counting{base: http.DefaultTransport, refuseHandoff: true}
	runChain(t, 5, tr, false)
	if got := tr.handoffs.Load(); got != 1 {
		t.Errorf("%d completes asked for a hand-off, want exactly 1 (then none)", got)
	}
	if got := tr.claims.Load(); got < 5 {
		t.Errorf("%d claims for a chain of 5, want at least 5", got)
	}
}

// A worker stopped while it walks a chain by hand-offs drains cleanly: the
// member running finishes and is recorded, nothing more is handed to it,
// and another worker finishes the run.
func TestHandoffDrain(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	const n = 8
	f := chainOf(n)
	var ran atomic.Int64
	register := func(w *worker.Worker) {
		for _, x := range f.Execs {
			name := x.Name
			if err := w.Handle(x.Kind, func(ctx context.Context, task *worker.Task) (json.RawMessage, error) {
				ran.Add(1)
				time.Sleep(20 * time.Millisecond)
				var seen []string
				if err := json.Unmarshal(task.Input(), &seen); err != nil {
					return nil, worker.Permanent(err)
				}
				return json.Marshal(append(seen, name))
			}); err != nil {
				t.Fatal(err)
			}
		}
	}
	first := newWorker(t, env, func(c *worker.Config) { c.Concurrency = 1 })
	register(first)
	stop := run(t, first)
	r, err := env.Client.StageFlow(ctxT(t), f, []string{})
	if err != nil {
		t.Fatal(err)
	}
	for ran.Load() < 3 {
		time.Sleep(time.Millisecond)
	}
	if err := stop(); err != nil {
		t.Fatalf("drain: %v", err)
	}
	stoppedAt := ran.Load()
	if stoppedAt >= n {
		t.Fatalf("the stopped worker ran all %d members", stoppedAt)
	}
	second := newWorker(t, env, func(c *worker.Config) { c.Concurrency = 1; c.Name = "second" })
	register(second)
	run(t, second)
	out, err := r.Result(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	var seen []string
	if err := json.Unmarshal(out, &seen); err != nil || len(seen) != n {
		t.Fatalf("result %s (%v), want %d names", out, err, n)
	}
	if got := ran.Load(); got != n {
		t.Fatalf("%d handler calls for %d members: a member ran twice or not at all", got, n)
	}
}
