package worker_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flowfabric/ff/compiler/plan"
	"github.com/flowfabric/ff/runtime/server/servertest"
	"github.com/flowfabric/ff/runtime/wire"
	"github.com/flowfabric/ff/runtime/worker"
)

// TestShutdownHandsTheTaskBack: a worker stopped while a well-behaved
// handler (one that returns when its context ends) still runs cancels it
// with ErrShutdown after the drain timeout. That is the worker going away,
// not the task failing: the worker gives the task back, uncharged (with
// one attempt it does not fail) and at once (another worker runs it long
// before the first one's lease would have expired).
func TestShutdownHandsTheTaskBack(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	id := create(t, env, wire.CreateExecution{Kind: "job", Retry: &plan.Retry{Attempts: 1}})
	started := make(chan struct{})
	reported := make(chan error, 1)
	a := newWorker(t, env, func(c *worker.Config) {
		c.Name, c.DrainTimeout, c.LeaseTTL = "a", 50*time.Millisecond, time.Minute
		c.OnReported = func(_ string, err error) { reported <- err }
	})
	_ = a.Handle("job", func(ctx context.Context, _ *worker.Task) (json.RawMessage, error) {
		close(started)
		<-ctx.Done()
		return nil, context.Cause(ctx)
	})
	stopA := run(t, a)
	<-started
	if err := stopA(); err == nil {
		t.Fatal("stopping a worker whose handler outlives the drain: want a drain timeout error")
	}
	select {
	case err := <-reported:
		if !errors.Is(err, worker.ErrShutdown) {
			t.Fatalf("OnReported of the stopped attempt: %v, want an error wrapping ErrShutdown", err)
		}
	default:
		t.Fatal("OnReported was not called for the stopped attempt")
	}
	ex, err := env.Client.GetExecution(ctxT(t), id)
	if err != nil {
		t.Fatal(err)
	}
	if ex.State != "waiting" {
		t.Fatalf("after the worker stopped the task is %s (%s), want waiting at once", ex.State, ex.LastError)
	}

	b := newWorker(t, env, func(c *worker.Config) { c.Name = "b" })
	_ = b.Handle("job", func(context.Context, *worker.Task) (json.RawMessage, error) {
		return json.RawMessage(`"from b"`), nil
	})
	run(t, b)
	r := waitResult(t, env, id)
	if r.State != "completed" || string(r.Result) != `"from b"` {
		t.Fatalf("a task whose worker shut down mid-attempt ended %s (%s): the shutdown was reported as its failure", r.State, r.Error)
	}
}

// beforeComplete calls hook before it passes on the first complete
// request that asks for a hand-off.
type beforeComplete struct {
	base http.RoundTripper
	hook func()
	done atomic.Bool
}

func (b *beforeComplete) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.URL.Path == "/v1/worker/complete" && !b.done.Swap(true) {
		b.hook()
	}
	return b.base.RoundTrip(r)
}

// TestShutdownHandsBackTasksGrantedInTheDrain: a worker stops while the
// completion of a flow member, asking for a hand-off of the next one, is
// in flight. The server grants the next member to it, but the worker is
// draining: it gives the member back instead of running it, and another
// worker runs it at once, uncharged (the member has one attempt).
func TestShutdownHandsBackTasksGrantedInTheDrain(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	f := chainOf(2)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tr := &beforeComplete{base: http.DefaultTransport, hook: func() {
		cancel()                           // stop the worker...
		time.Sleep(300 * time.Millisecond) // ...and let its drain begin before the grant arrives
	}}
	a := newWorker(t, env, func(c *worker.Config) {
		c.Name, c.Concurrency, c.LeaseTTL = "a", 1, time.Minute
		c.HTTPClient = &http.Client{Transport: tr}
	})
	var ranA, ranB atomic.Int64
	handleChain(t, a, f, 0, &ranA)
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	r, err := env.Client.StageFlow(ctxT(t), f, []string{})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("drain: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the worker did not stop")
	}
	if !tr.done.Load() {
		t.Fatal("no complete request: the test did not exercise the hand-off")
	}
	if got := ranA.Load(); got != 1 {
		t.Fatalf("the stopped worker ran %d members, want only the first: a member granted in the drain ran", got)
	}

	b := newWorker(t, env, func(c *worker.Config) { c.Name = "b" })
	handleChain(t, b, f, 0, &ranB)
	run(t, b)
	wctx, wcancel := context.WithTimeout(context.Background(), 10*time.Second) // well under a's lease of a minute
	defer wcancel()
	out, err := r.Result(wctx)
	if err != nil || string(out) != `["a0","a1"]` {
		t.Fatalf("result %s, %v: the member granted in the drain was not given back", out, err)
	}
	if got := ranB.Load(); got != 1 {
		t.Fatalf("the second worker ran %d members, want 1", got)
	}
}

// TestShutdownReportsAHandlersOwnFailure: a handler that, stopped by the
// drain timeout, returns an error of its own (not its context's) failed:
// the failure is reported as the handler said (here a permanent one, so
// the task fails), not handed back as the worker's going away.
func TestShutdownReportsAHandlersOwnFailure(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	id := create(t, env, wire.CreateExecution{Kind: "job", Retry: &plan.Retry{Attempts: 3}})
	started := make(chan struct{})
	a := newWorker(t, env, func(c *worker.Config) { c.Name, c.DrainTimeout, c.LeaseTTL = "a", 50*time.Millisecond, time.Minute })
	_ = a.Handle("job", func(ctx context.Context, _ *worker.Task) (json.RawMessage, error) {
		close(started)
		<-ctx.Done()
		return nil, worker.Permanent(errors.New("the input names no account"))
	})
	stopA := run(t, a)
	<-started
	_ = stopA()
	r := waitResult(t, env, id)
	if r.State != "failed" || r.Error != "the input names no account" {
		t.Fatalf("a handler's own permanent failure during the drain ended %s (%q), want failed with its error", r.State, r.Error)
	}
}

// TestRunReturnsWithinTheShutdownBound: Run returns at most DrainTimeout
// plus HandBackGrace after its context ends, however its handlers and
// reports behave: here one handler ignores its context, and the report of
// a task that finished is refused 503 for as long as the renewals keep
// its lease. Run took DrainTimeout + HandBackGrace + max(DrainTimeout,
// 5 s) (11 s here, 65 s with the defaults, against a 30 s grace period
// of Kubernetes).
func TestRunReturnsWithinTheShutdownBound(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	tr := &completesRefused{base: http.DefaultTransport}
	tr.until.Store(time.Now().Add(time.Hour).UnixNano())
	const drain = time.Second
	w := newWorker(t, env, func(c *worker.Config) {
		c.Concurrency, c.DrainTimeout, c.LeaseTTL = 2, drain, time.Minute
		c.HTTPClient = &http.Client{Transport: tr}
	})
	started := make(chan struct{}, 2)
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	_ = w.Handle("stubborn", func(context.Context, *worker.Task) (json.RawMessage, error) {
		started <- struct{}{}
		<-release // ignores its context
		return nil, nil
	})
	_ = w.Handle("quick", func(context.Context, *worker.Task) (json.RawMessage, error) {
		started <- struct{}{}
		return json.RawMessage(`"done"`), nil
	})
	create(t, env, wire.CreateExecution{Kind: "stubborn"})
	create(t, env, wire.CreateExecution{Kind: "quick"})
	stop := run(t, w)
	<-started
	<-started
	begin := time.Now()
	err := stop()
	took := time.Since(begin)
	if err == nil || !strings.Contains(err.Error(), "drain timeout") {
		t.Errorf("Run = %v, want the drain timeout", err)
	}
	// A generous margin: the bound is what matters, not how fast.
	if bound := drain + worker.HandBackGrace; took > bound+2*time.Second {
		t.Errorf("Run returned %s after its context ended, want at most DrainTimeout + HandBackGrace (%s)", took.Round(time.Millisecond), bound)
	}
}

// heldReport holds the first complete request until the worker gives up
// on it (its context ends: Run's bound has passed), then until released,
// and fails it: what the worker does with that failure comes after.
type heldReport struct {
	base    *http.Transport
	holding chan struct{} // closed once a complete is held
	release chan struct{}
	held    sync.Once
	freed   sync.Once
}

func (h *heldReport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.URL.Path != "/v1/worker/complete" {
		return h.base.RoundTrip(r)
	}
	if r.Body != nil {
		r.Body.Close()
	}
	h.held.Do(func() { close(h.holding) })
	<-r.Context().Done()
	<-h.release
	return nil, r.Context().Err()
}

func (h *heldReport) free() { h.freed.Do(func() { close(h.release) }) }

// CloseIdleConnections passes the worker's call on, as http.Transport
// answers it.
func (h *heldReport) CloseIdleConnections() { h.base.CloseIdleConnections() }

// TestNoOnReportedAfterRunReturned: a report the server never answers is
// given up at Run's bound (DrainTimeout + HandBackGrace). Its request ends
// then, and its failure reached OnReported after Run had returned: a
// caller that tears down what the hook uses once Run is back (closes a
// channel, flushes metrics) raced with it. No call comes after Run
// returned.
func TestNoOnReportedAfterRunReturned(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	tr := &heldReport{base: &http.Transport{}, holding: make(chan struct{}), release: make(chan struct{})}
	t.Cleanup(tr.free)
	returned := make(chan struct{})
	var late atomic.Int64
	w := newWorker(t, env, func(c *worker.Config) {
		c.Concurrency, c.DrainTimeout, c.LeaseTTL = 1, 100*time.Millisecond, time.Minute
		c.HTTPClient = &http.Client{Transport: tr}
		c.OnReported = func(string, error) {
			select {
			case <-returned:
				late.Add(1)
			default:
			}
		}
	})
	_ = w.Handle("job", func(context.Context, *worker.Task) (json.RawMessage, error) {
		return json.RawMessage(`"done"`), nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := runLabelled(ctx, w, "onreported-late")
	create(t, env, wire.CreateExecution{Kind: "job"})
	select {
	case <-tr.holding:
	case <-time.After(20 * time.Second):
		t.Fatal("no complete request")
	}
	cancel()
	err := runReturned(t, done)
	close(returned)
	tr.free()
	if err == nil || !strings.Contains(err.Error(), "reporting outcomes did not finish in time") {
		t.Errorf("Run = %v, want the report given up", err)
	}
	settled(t, "", "onreported-late", 3*time.Second) // the reporter has stopped
	if n := late.Load(); n != 0 {
		t.Errorf("OnReported was called %d times after Run returned", n)
	}
}
