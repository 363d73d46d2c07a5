package worker_test

import (
	"context"
	"encoding/json"
	"net/http"
	"sync"
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

// refusals passes requests on and counts, by path, those answered 429.
type refusals struct {
	base http.RoundTripper
	mu   sync.Mutex
	by   map[string]int
}

func (r *refusals) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := r.base.RoundTrip(req)
	if err == nil && resp.StatusCode == http.StatusTooManyRequests {
		r.mu.Lock()
		if r.by == nil {
			r.by = map[string]int{}
		}
		r.by[req.URL.Path]++
		r.mu.Unlock()
	}
	return resp, err
}

func (r *refusals) count(path string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.by[path]
}

// TestClaimRateLimitedWaitsRetryAfter: a worker whose address is limited
// for 2 s claims once, is answered 429 rate_limited with the time the
// limit has left, and claims again after that, not on its own backoff
// (50 ms doubling: six refused claims in the 2 s, each taking a turn of
// an address the server asked to keep quiet); then it runs the task.
func TestClaimRateLimitedWaitsRetryAfter(t *testing.T) {
	t.Parallel()
	env := startLimited(t, 2*time.Second)
	tr := &refusals{base: http.DefaultTransport}
	w := newWorker(t, env, func(c *worker.Config) {
		c.Concurrency = 1
		c.HTTPClient = &http.Client{Transport: tr}
	})
	if err := w.Handle("job", func(context.Context, *worker.Task) (json.RawMessage, error) {
		return json.RawMessage(`"done"`), nil
	}); err != nil {
		t.Fatal(err)
	}
	id := create(t, env, wire.CreateExecution{Kind: "job"})
	limitAddress(t, env)
	run(t, w)
	if r := waitDone(t, env, id); r.State != "completed" {
		t.Errorf("result %+v; want completed", r)
	}
	// One refused claim, and one more when it comes back a moment before
	// the window ends (retry_after_ms is rounded down).
	if n := tr.count("/v1/worker/claim"); n > 2 {
		t.Errorf("%d claims refused 429 while the address was limited for 2 s; want at most 2: "+
			"the claim loop retries after the answer's Retry-After, not its own backoff", n)
	}
}

// TestRenewRateLimitedWaitsRetryAfter: the worker's address is limited for
// 2 s while it holds a lease of 8 s (renewed every 200 ms). The renewal
// answered 429 rate_limited is sent again after the answer's
// Retry-After, which the lease outlasts, not at the next renew ticks (ten
// refused renewals), and so is the lease watch (not after its backoff of
// 50 ms doubling: six refused); the lease is kept and the task completes
// in its first attempt.
func TestRenewRateLimitedWaitsRetryAfter(t *testing.T) {
	t.Parallel()
	env := startLimited(t, 2*time.Second)
	tr := &refusals{base: http.DefaultTransport}
	w := newWorker(t, env, func(c *worker.Config) {
		c.Concurrency = 1
		c.LeaseTTL, c.RenewInterval = 8*time.Second, 200*time.Millisecond
		c.HTTPClient = &http.Client{Transport: tr}
	})
	if err := w.Handle("job", func(ctx context.Context, _ *worker.Task) (json.RawMessage, error) {
		limitAddress(t, env)
		select {
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		case <-time.After(3 * time.Second): // past the limit's window
		}
		return json.RawMessage(`"done"`), nil
	}); err != nil {
		t.Fatal(err)
	}
	id := create(t, env, wire.CreateExecution{Kind: "job"})
	run(t, w)
	if r := waitDone(t, env, id); r.State != "completed" {
		t.Errorf("result %+v; want completed", r)
	}
	if ex, err := env.Client.GetExecution(ctxT(t), id); err != nil || ex.Attempt != 1 {
		t.Errorf("execution %+v, %v; want completed in its first attempt", ex, err)
	}
	if n := tr.count("/v1/worker/renew"); n == 0 || n > 2 {
		t.Errorf("%d renewals refused 429 while the address was limited for 2 s; want 1 or 2: "+
			"renewals wait for the answer's Retry-After when the lease outlasts it", n)
	}
	if n := tr.count("/v1/worker/watch"); n > 2 {
		t.Errorf("%d lease watches refused 429 while the address was limited for 2 s; want at most 2: "+
			"the watch waits for the answer's Retry-After", n)
	}
}

// renewsRefused answers the first renew request 429 rate_limited, asking
// to wait an hour, and passes every other request on.
type renewsRefused struct {
	base    http.RoundTripper
	refused atomic.Bool
}

func (r *renewsRefused) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Path == "/v1/worker/renew" && r.refused.CompareAndSwap(false, true) {
		return answer(req, http.StatusTooManyRequests,
			`{"error":{"code":"rate_limited","message":"slow down","details":{"retry_after_ms":3600000}}}`, "Retry-After", "3600"), nil
	}
	return r.base.RoundTrip(req)
}

// TestRenewRateLimitedKeepsTheLease: a renewal answered 429 with a
// Retry-After (an hour) longer than the lease has left (1.5 s) is sent
// again before the lease runs out, not after the Retry-After: waiting
// would lose the lease for sure (its task would run again elsewhere),
// while a renewal sent early may pass. The handler, which runs 2.5 s,
// keeps its lease and its task completes in its first attempt.
func TestRenewRateLimitedKeepsTheLease(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	tr := &renewsRefused{base: http.DefaultTransport}
	w := newWorker(t, env, func(c *worker.Config) {
		c.Concurrency = 1
		c.LeaseTTL = 1500 * time.Millisecond
		c.HTTPClient = &http.Client{Transport: tr}
	})
	cause := make(chan error, 1)
	if err := w.Handle("job", func(ctx context.Context, _ *worker.Task) (json.RawMessage, error) {
		select {
		case <-ctx.Done():
			cause <- context.Cause(ctx)
			return nil, ctx.Err()
		case <-time.After(2500 * time.Millisecond):
		}
		return json.RawMessage(`"done"`), nil
	}); err != nil {
		t.Fatal(err)
	}
	id := create(t, env, wire.CreateExecution{Kind: "job"})
	run(t, w)
	r := waitDone(t, env, id)
	if !tr.refused.Load() {
		t.Fatal("no renewal was refused: the test did not test anything")
	}
	select {
	case c := <-cause:
		t.Errorf("the handler's context ended (%v): the lease was lost waiting for the Retry-After", c)
	default:
	}
	ex, err := env.Client.GetExecution(ctxT(t), id)
	if err != nil {
		t.Fatal(err)
	}
	if r.State != "completed" || ex.Attempt != 1 {
		t.Errorf("result %+v after %d attempts; want completed in the first", r, ex.Attempt)
	}
}
