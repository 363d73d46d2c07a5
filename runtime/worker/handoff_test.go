package worker_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flowfabric/ff/compiler/plan"
	"github.com/flowfabric/ff/runtime/server/servertest"
	"github.com/flowfabric/ff/runtime/wire"
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
				return answer(r, http.StatusBadRequest, `{"error":{"code":"unknown_field","message":"unknown field \"handoff\"","details":{"field":"handoff"}}}`), nil
			}
		}
	}
	return c.base.RoundTrip(r)
}

// handleChain registers on w a handler for every exec of f that appends
// its name to its input (after delay) and counts its calls in ran.
func handleChain(t *testing.T, w *worker.Worker, f *plan.Flow, delay time.Duration, ran *atomic.Int64) {
	t.Helper()
	for _, x := range f.Execs {
		name := x.Name
		if err := w.Handle(x.Kind, func(_ context.Context, task *worker.Task) (json.RawMessage, error) {
			ran.Add(1)
			time.Sleep(delay)
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

// TestHandoffRequests runs a chain of 5 through a worker of one slot and
// counts its requests: with hand-offs one claim serves the root and every
// completion but the last asks for the next member; with NoHandoff, or
// against a server that refuses the field (the worker asks once, then
// completes without), every member is claimed. The result is right in
// every case.
func TestHandoffRequests(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name                 string
		noHandoff, refuse    bool
		handoffs             int64
		minClaims, maxClaims int64
	}{
		// At most 2 claims: the root's, and the long-poll parked after the last member.
		{name: "hand-off", handoffs: 4, minClaims: 1, maxClaims: 2},
		{name: "NoHandoff", noHandoff: true, handoffs: 0, minClaims: 5, maxClaims: 1 << 30},
		{name: "refused", refuse: true, handoffs: 1, minClaims: 5, maxClaims: 1 << 30},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tr := &counting{base: http.DefaultTransport, refuseHandoff: tc.refuse}
			env := servertest.Start(t)
			w := newWorker(t, env, func(c *worker.Config) {
				c.Concurrency = 1
				c.NoHandoff = tc.noHandoff
				c.HTTPClient = &http.Client{Transport: tr}
			})
			var ran atomic.Int64
			handleChain(t, w, chainOf(5), 0, &ran)
			run(t, w)
			r, err := env.Client.StageFlow(ctxT(t), chainOf(5), []string{})
			if err != nil {
				t.Fatal(err)
			}
			out, err := r.Result(ctxT(t))
			if err != nil || string(out) != `["a0","a1","a2","a3","a4"]` {
				t.Fatalf("result %s, %v", out, err)
			}
			if got := tr.handoffs.Load(); got != tc.handoffs {
				t.Errorf("%d completes asked for a hand-off, want %d", got, tc.handoffs)
			}
			if got := tr.claims.Load(); got < tc.minClaims || got > tc.maxClaims {
				t.Errorf("%d claims, want %d..%d", got, tc.minClaims, tc.maxClaims)
			}
		})
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
	first := newWorker(t, env, func(c *worker.Config) { c.Concurrency = 1 })
	handleChain(t, first, f, 20*time.Millisecond, &ran)
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
	handleChain(t, second, f, 20*time.Millisecond, &ran)
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

// TestHandoffSlotsComeBackAfterStaleCompletions: a flow member with
// downstream members completes after its lease was revoked (the worker
// has not noticed yet), so its completion, which keeps its slot for a
// hand-off, is rejected as stale. Every slot must still come back: after
// several such runs the worker of two slots runs two handlers at once.
func TestHandoffSlotsComeBackAfterStaleCompletions(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	w := newWorker(t, env, func(c *worker.Config) { c.Concurrency, c.LeaseTTL = 2, 3*time.Second })
	f := chainOf(3)
	var revoked atomic.Int64
	for _, x := range f.Execs {
		name := x.Name
		_ = w.Handle(x.Kind, func(ctx context.Context, task *worker.Task) (json.RawMessage, error) {
			if name == "a0" && task.Attempt() == 1 {
				// Revoked behind the worker's back; its renewals (1 s) do
				// not notice before the report.
				if _, err := env.Client.RevokeLease(ctx, task.ID(), "test"); err != nil {
					return nil, err
				}
				revoked.Add(1)
			}
			var seen []string
			if err := json.Unmarshal(task.Input(), &seen); err != nil {
				return nil, worker.Permanent(err)
			}
			return json.Marshal(append(seen, name))
		})
	}
	both := make(chan struct{})
	var arrived atomic.Int64
	_ = w.Handle("pair", func(ctx context.Context, _ *worker.Task) (json.RawMessage, error) {
		if arrived.Add(1) == 2 {
			close(both)
		}
		select {
		case <-both:
			return nil, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	})
	run(t, w)
	ctx := ctxT(t)
	for f.Execs[0].Retry.Attempts = 3; revoked.Load() < 4; {
		r, err := env.Client.StageFlow(ctx, f, []string{})
		if err != nil {
			t.Fatal(err)
		}
		if out, err := r.Result(ctx); err != nil || string(out) != `["a0","a1","a2"]` {
			t.Fatalf("run: %s %v", out, err)
		}
	}
	a := create(t, env, wire.CreateExecution{Kind: "pair"})
	b := create(t, env, wire.CreateExecution{Kind: "pair"})
	select {
	case <-both:
	case <-time.After(5 * time.Second):
		t.Fatal("the worker of two slots never ran two handlers at once: a slot was not given back")
	}
	for _, id := range []string{a, b} {
		if r := waitResult(t, env, id); r.State != "completed" {
			t.Fatalf("pair %s: %+v", id, r)
		}
	}
}
