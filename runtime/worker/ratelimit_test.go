package worker_test

import (
	"context"
	"encoding/json"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flowfabric/ff/runtime/authlimit"
	"github.com/flowfabric/ff/runtime/client"
	"github.com/flowfabric/ff/runtime/server"
	"github.com/flowfabric/ff/runtime/server/servertest"
	"github.com/flowfabric/ff/runtime/wire"
	"github.com/flowfabric/ff/runtime/worker"
)

const limitedToken = "the-right-token-0123456789"

// limitAddress makes the server limit the loopback address, which the
// worker shares (spec/api.md, Authentication: the connection's address,
// so every client behind one reverse proxy shares it): the free wrong
// token, then one at its turn. Until the window ends every request with
// credentials whose turn is more than MaxWait off, the worker's right
// token included, is answered 429 rate_limited.
func limitAddress(t *testing.T, env *servertest.Env) {
	t.Helper()
	for i := range 2 {
		if r := env.Do(t, http.MethodGet, "/v1/namespaces", map[string]string{"Authorization": "Bearer a-wrong-guess"}, ""); r.Status != http.StatusUnauthorized {
			t.Errorf("wrong token %d: %d %s", i+1, r.Status, r.Body)
		}
	}
}

// startLimited serves ffrun with a token and an auth limiter that limits
// an address for window after two wrong tokens, refusing (429) every
// request of it meanwhile.
func startLimited(t *testing.T, window time.Duration) *servertest.Env {
	return servertest.Start(t, func(c *server.Config) {
		c.Token = limitedToken
		c.AuthLimit = authlimit.Config{Free: 1, Window: window, Interval: time.Hour, MaxWait: time.Millisecond}
	})
}

// waitDone polls id's result through 429s until it ended.
func waitDone(t *testing.T, env *servertest.Env, id string) *wire.ExecutionResult {
	t.Helper()
	ctx := ctxT(t)
	for {
		r, err := env.Client.ExecutionResult(ctx, id)
		switch {
		case err == nil:
			return r
		case client.IsCode(err, wire.CodeNotTerminal), client.IsCode(err, wire.CodeRateLimited):
		default:
			t.Fatalf("result of %s: %v", id, err)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("result of %s: %v", id, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// TestReportRateLimitedIsRetried: the worker's address is limited for a
// moment (a client behind the same reverse proxy guessed, or still runs
// with an old token) just as a task succeeds. The complete report is
// answered 429 rate_limited, a refusal that passes: the worker sends it
// again after the answer's Retry-After, within its lease, as it does after
// a 503, so the task is completed after one run (the report was taken as
// final, dropped, and the task ran again once its lease ran out).
func TestReportRateLimitedIsRetried(t *testing.T) {
	t.Parallel()
	env := startLimited(t, 1500*time.Millisecond)
	reported := make(chan error, 4)
	w := newWorker(t, env, func(c *worker.Config) {
		c.Concurrency = 1
		c.LeaseTTL = 4 * time.Second
		c.OnReported = func(_ string, err error) { reported <- err }
	})
	var runs atomic.Int64
	if err := w.Handle("job", func(context.Context, *worker.Task) (json.RawMessage, error) {
		if runs.Add(1) == 1 {
			limitAddress(t, env)
		}
		return json.RawMessage(`"done"`), nil
	}); err != nil {
		t.Fatal(err)
	}
	id := create(t, env, wire.CreateExecution{Kind: "job"})
	run(t, w)
	select {
	case err := <-reported:
		if err != nil {
			t.Errorf("OnReported(%s) = %v; want the report sent again once the address is no longer limited (its lease was good for seconds)", id, err)
		}
	case <-ctxT(t).Done():
		t.Fatal("the outcome was never reported")
	}
	r := waitDone(t, env, id)
	if r.State != "completed" || runs.Load() != 1 {
		t.Errorf("result %+v after %d handler runs; want completed after one", r, runs.Load())
	}
}

// TestUsageRateLimitedIsRetried: Task.ReportUsage sends a report again,
// with its dedup key, after a 429 rate_limited (after its Retry-After) as
// after a transport error or a 5xx, rather than fail the call at once.
func TestUsageRateLimitedIsRetried(t *testing.T) {
	t.Parallel()
	env := startLimited(t, 500*time.Millisecond)
	w := newWorker(t, env, func(c *worker.Config) { c.Concurrency = 1; c.LeaseTTL = 4 * time.Second })
	usageErr := make(chan error, 1)
	if err := w.Handle("job", func(ctx context.Context, task *worker.Task) (json.RawMessage, error) {
		limitAddress(t, env)
		_, err := task.ReportUsage(ctx, "tokens", 7)
		usageErr <- err
		return nil, nil
	}); err != nil {
		t.Fatal(err)
	}
	create(t, env, wire.CreateExecution{Kind: "job"})
	run(t, w)
	select {
	case err := <-usageErr:
		if err != nil {
			t.Errorf("ReportUsage = %v; want it sent again once the address is no longer limited", err)
		}
	case <-ctxT(t).Done():
		t.Fatal("the handler never ran")
	}
}

// TestConnectRateLimitedClaimsAnyway: a worker that starts while its
// address is limited (its connect answered 429 rate_limited) claims
// anyway, as after a transport error, and runs the task once the limit
// passes, instead of Run returning "connect refused".
func TestConnectRateLimitedClaimsAnyway(t *testing.T) {
	t.Parallel()
	env := startLimited(t, 500*time.Millisecond)
	w := newWorker(t, env, func(c *worker.Config) { c.Concurrency = 1 })
	if err := w.Handle("job", func(context.Context, *worker.Task) (json.RawMessage, error) {
		return json.RawMessage(`"done"`), nil
	}); err != nil {
		t.Fatal(err)
	}
	id := create(t, env, wire.CreateExecution{Kind: "job"})
	limitAddress(t, env)
	stop := run(t, w)
	if r := waitDone(t, env, id); r.State != "completed" {
		t.Errorf("result %+v; want completed", r)
	}
	if err := stop(); err != nil {
		t.Errorf("Run = %v", err)
	}
}
