package worker_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flowfabric/ff/runtime/server"
	"github.com/flowfabric/ff/runtime/server/servertest"
	"github.com/flowfabric/ff/runtime/wire"
	"github.com/flowfabric/ff/runtime/worker"
)

// The answer to a worker's fail report is lost after the server recorded
// the failure; the worker sends the report again, which the server answers
// as the first (a repeat of the same lease and message), so OnReported
// gets nil for a failure recorded once (the repeat was refused as a stale
// lease, and OnReported got that error).
func TestFailAnswerLost(t *testing.T) {
	t.Parallel()
	tr := &losingAnswer{base: http.DefaultTransport, path: "/v1/worker/fail"}
	env := servertest.Start(t)
	reported := make(chan error, 4)
	w := newWorker(t, env, func(c *worker.Config) {
		c.Concurrency = 1
		c.LeaseTTL = 3 * time.Second
		c.HTTPClient = &http.Client{Transport: tr}
		c.OnReported = func(_ string, err error) { reported <- err }
	})
	var runs atomic.Int64
	if err := w.Handle("job", func(context.Context, *worker.Task) (json.RawMessage, error) {
		runs.Add(1)
		return nil, worker.Permanent(errors.New("bad input"))
	}); err != nil {
		t.Fatal(err)
	}
	run(t, w)
	id := create(t, env, wire.CreateExecution{Kind: "job"})
	var err error
	select {
	case err = <-reported:
	case <-time.After(10 * time.Second):
		t.Fatal("the failure was never reported")
	}
	if !tr.lost.Load() {
		t.Fatal("no answer was lost: the test did not test anything")
	}
	r := waitResult(t, env, id)
	if r.State != "failed" || runs.Load() != 1 {
		t.Fatalf("result %+v after %d runs; want failed after one", r, runs.Load())
	}
	if err != nil {
		t.Errorf("OnReported(%s) = %v for a failure the server recorded (its answer was lost, the repeat refused)", id, err)
	}
}

// restartOnSameAddress stops env's ffrun and, after down, serves a new
// process with the same configuration on the same address (a restart
// behind a stable address), stopped when t ends.
func restartOnSameAddress(t *testing.T, env *servertest.Env, down time.Duration) {
	t.Helper()
	if err := env.Stop(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(down)
	srv, err := server.Open(context.Background(), env.Config)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", strings.TrimPrefix(env.URL, "http://"))
	if err != nil {
		srv.Close()
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() { stop(); <-served })
}

// ffrun restarts (about a second away, same address) while a worker's
// handlers run and its claims wait. The worker rides it out: the running
// tasks complete once, under their first lease (no reclaim), and a task
// created after the restart is claimed and run.
func TestFfrunRestartWhileTasksRun(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	w := newWorker(t, env, func(c *worker.Config) {
		c.Concurrency = 2
		c.LeaseTTL = 4 * time.Second
		c.ClaimWait = 2 * time.Second
	})
	var runs atomic.Int64
	started := make(chan struct{}, 4)
	if err := w.Handle("slow", func(ctx context.Context, _ *worker.Task) (json.RawMessage, error) {
		runs.Add(1)
		started <- struct{}{}
		select {
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		case <-time.After(1500 * time.Millisecond):
		}
		return json.RawMessage(`"done"`), nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := w.Handle("after", func(context.Context, *worker.Task) (json.RawMessage, error) {
		return json.RawMessage(`"after"`), nil
	}); err != nil {
		t.Fatal(err)
	}
	run(t, w)
	id := create(t, env, wire.CreateExecution{Kind: "slow"})
	select {
	case <-started:
	case <-time.After(5 * time.Second):
		t.Fatal("the task never started")
	}
	restartOnSameAddress(t, env, time.Second)
	r := waitResult(t, env, id)
	if r.State != "completed" || string(r.Result) != `"done"` || runs.Load() != 1 {
		t.Fatalf("result %+v after %d runs; want completed once", r, runs.Load())
	}
	ex, err := env.Client.GetExecution(ctxT(t), id)
	if err != nil || ex.Attempt != 1 {
		t.Fatalf("execution %+v, %v; want one attempt (no reclaim)", ex, err)
	}
	after := create(t, env, wire.CreateExecution{Kind: "after"})
	if r := waitResult(t, env, after); r.State != "completed" {
		t.Fatalf("task created after the restart: %+v", r)
	}
}

// laggingClock passes requests on and moves every time in claim answers
// (deadline_at, lease_expires_at) by shift: what a worker sees when
// Valkey's clock, which every server time comes from (spec/runtime.md,
// "The server's clock"), is shift away from the worker host's.
type laggingClock struct {
	base  http.RoundTripper
	shift time.Duration
}

func (l *laggingClock) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := l.base.RoundTrip(r)
	if err != nil || r.URL.Path != "/v1/worker/claim" {
		return resp, err
	}
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		return nil, err
	}
	var ans struct {
		Tasks []map[string]any `json:"tasks"`
	}
	if err := json.Unmarshal(body, &ans); err != nil {
		return nil, err
	}
	for _, task := range ans.Tasks {
		for _, f := range []string{"deadline_at", "lease_expires_at"} {
			if s, ok := task[f].(string); ok {
				at, err := time.Parse(time.RFC3339Nano, s)
				if err != nil {
					return nil, err
				}
				task[f] = at.Add(l.shift).Format(time.RFC3339Nano)
			}
		}
	}
	if body, err = json.Marshal(ans); err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	resp.ContentLength = int64(len(body))
	resp.Header.Del("Content-Length")
	return resp, nil
}

// The worker host's clock is 90 s ahead of Valkey's. A task with a 60 s
// attempt timeout gets a handler context with its 60 s on the worker's
// clock (the server's deadline moved by the skew seen at the grant): the
// SDK read the server's absolute deadline on its own clock, and the
// handler started past its deadline, failing at once on every attempt.
func TestAttemptDeadlineUnderClockSkew(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	w := newWorker(t, env, func(c *worker.Config) {
		c.Concurrency = 1
		c.LeaseTTL = 5 * time.Second
		c.HTTPClient = &http.Client{Transport: &laggingClock{base: http.DefaultTransport, shift: -90 * time.Second}}
	})
	seen := make(chan error, 1)
	if err := w.Handle("timed", func(ctx context.Context, _ *worker.Task) (json.RawMessage, error) {
		select {
		case seen <- ctx.Err():
		default:
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		return json.RawMessage(`"done"`), nil
	}); err != nil {
		t.Fatal(err)
	}
	run(t, w)
	id := create(t, env, wire.CreateExecution{Kind: "timed", TimeoutMs: 60_000})
	select {
	case err := <-seen:
		if err != nil {
			t.Errorf("the handler of an attempt with 60 s left started with its context done: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the handler never ran")
	}
	if r := waitResult(t, env, id); r.State != "completed" {
		t.Errorf("result %+v; want completed", r)
	}
}

// A worker is stopped while a handler runs; at the drain timeout the
// handler's context is cancelled and the handler honours it, but returns
// only after 1.5 s of clean-up: within HandBackGrace, its task is given
// back (Run waited one second, then dropped the report: nothing was given
// back and the task stayed leased until its lease expired).
func TestSlowCancellingHandlerHandedBack(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	id := create(t, env, wire.CreateExecution{Kind: "job"})
	started := make(chan struct{})
	reported := make(chan error, 1)
	a := newWorker(t, env, func(c *worker.Config) {
		c.Name, c.DrainTimeout, c.LeaseTTL = "a", 100*time.Millisecond, time.Minute
		c.OnReported = func(_ string, err error) { reported <- err }
	})
	_ = a.Handle("job", func(ctx context.Context, _ *worker.Task) (json.RawMessage, error) {
		close(started)
		<-ctx.Done()
		time.Sleep(1500 * time.Millisecond) // clean-up before returning
		return nil, context.Cause(ctx)
	})
	stopA := run(t, a)
	<-started
	_ = stopA()
	time.Sleep(time.Second) // the handler has returned by now
	select {
	case err := <-reported:
		if !errors.Is(err, worker.ErrShutdown) {
			t.Errorf("OnReported of the stopped attempt: %v, want an error wrapping ErrShutdown", err)
		}
	default:
		t.Error("OnReported was never called for the attempt cancelled by the drain")
	}
	ex, err := env.Client.GetExecution(ctxT(t), id)
	if err != nil {
		t.Fatal(err)
	}
	if ex.State != "waiting" {
		t.Errorf("after the worker stopped and its handler returned, the task is %s (leased until its lease expires), want given back (waiting)", ex.State)
	}
}
