package worker_test

import (
	"context"
	"encoding/json"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flowfabric/ff/runtime/server"
	"github.com/flowfabric/ff/runtime/server/servertest"
	"github.com/flowfabric/ff/runtime/wire"
	"github.com/flowfabric/ff/runtime/worker"
)

// flap restarts env's ffrun times times on its address: up for up, then
// stopped gracefully (a rolling deploy) and away for down. It returns
// once the last process serves; that one stops when t ends.
func flap(env *servertest.Env, times int, up, down time.Duration) (stopLast func(), err error) {
	stop := func() {}
	stopCurrent := func() error { return env.Stop() }
	for range times {
		time.Sleep(up)
		if err := stopCurrent(); err != nil {
			return stop, err
		}
		stop()
		time.Sleep(down)
		srv, err := server.Open(context.Background(), env.Config)
		if err != nil {
			return stop, err
		}
		ln, err := net.Listen("tcp", strings.TrimPrefix(env.URL, "http://"))
		if err != nil {
			srv.Close()
			return stop, err
		}
		ctx, cancel := context.WithCancel(context.Background())
		served := make(chan error, 1)
		go func() { served <- srv.Serve(ctx, ln) }()
		var once sync.Once
		var serveErr error
		stopCurrent = func() error {
			once.Do(func() { cancel(); serveErr = <-served })
			return serveErr
		}
		stop = func() { _ = stopCurrent() }
	}
	return stop, nil
}

// onceCounts follows a worker's "job" tasks through a faulty network:
// each handler run, runs that overlap, and each report's outcome, so that
// a test can check that every task ran once and was reported once.
type onceCounts struct {
	mu              sync.Mutex
	reports         map[string][]error
	runs, inHandler map[string]int
	twice           []string
}

func newOnceCounts() *onceCounts {
	return &onceCounts{reports: map[string][]error{}, runs: map[string]int{}, inHandler: map[string]int{}}
}

// start runs a worker of 4 slots and lease TTL ttl on env, whose "job"
// handler (o.handler(d)) counts its runs and whose reports o records,
// with 60 tasks staged, under label (pprof): their ids, what stops the
// worker, and what Run returned (runLabelled).
func (o *onceCounts) start(t *testing.T, env *servertest.Env, ttl, d time.Duration, label string) ([]string, context.CancelFunc, <-chan error) {
	t.Helper()
	w := newWorker(t, env, func(c *worker.Config) {
		c.Concurrency = 4
		c.LeaseTTL = ttl
		c.ClaimWait = time.Second
		c.OnReported = func(id string, err error) {
			o.mu.Lock()
			o.reports[id] = append(o.reports[id], err)
			o.mu.Unlock()
		}
	})
	if err := w.Handle("job", o.handler(d)); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for range 60 {
		ids = append(ids, create(t, env, wire.CreateExecution{Kind: "job"}))
	}
	ctx, cancel := context.WithCancel(context.Background())
	return ids, cancel, runLabelled(ctx, w, label)
}

// handler runs a task for d (less when its context ends) and counts it.
func (o *onceCounts) handler(d time.Duration) worker.Handler {
	return func(ctx context.Context, task *worker.Task) (json.RawMessage, error) {
		o.mu.Lock()
		o.runs[task.ID()]++
		if o.inHandler[task.ID()]++; o.inHandler[task.ID()] > 1 {
			o.twice = append(o.twice, task.ID())
		}
		o.mu.Unlock()
		defer func() {
			o.mu.Lock()
			o.inHandler[task.ID()]--
			o.mu.Unlock()
		}()
		select {
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		case <-time.After(d):
		}
		return json.RawMessage(`"done"`), nil
	}
}

// check fails t unless every execution of ended (by id) completed in one
// attempt (attempts: whether to require it), run by one handler call,
// never two at once, and reported once without error.
func (o *onceCounts) check(t *testing.T, ended map[string]*wire.Execution, attempts bool) {
	t.Helper()
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.twice) > 0 {
		t.Errorf("handlers ran twice at once for %v", o.twice)
	}
	for id, ex := range ended {
		var hist []string
		for _, a := range ex.Attempts {
			hist = append(hist, a.Type+"/"+a.Outcome)
		}
		if ex.State != "completed" || o.runs[id] != 1 || attempts && ex.Attempt != 1 || len(o.reports[id]) != 1 || o.reports[id][0] != nil {
			t.Errorf("%s: %s after %d handler runs, attempts %v, OnReported %v; want completed, one run%s, one nil report",
				id, ex.State, o.runs[id], hist, o.reports[id], map[bool]string{true: ", one attempt"}[attempts])
		}
	}
}

// TestWorkerUnderFlappingServer: ffrun restarts every few hundred
// milliseconds while a worker runs tasks. No task runs twice (nor twice
// at once), every outcome is recorded once under the first lease, no
// report is lost (OnReported nil for each), Run drains and returns nil,
// and the worker leaves no goroutine. (A claim that failed in a restart
// resumes, and the server delivers again the grants of the instance's
// last claim that it still holds: one whose report was answered while the
// resume was on its way is among them, and the worker must not run it
// again.)
func TestWorkerUnderFlappingServer(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	o := newOnceCounts()
	ids, cancel, done := o.start(t, env, 3*time.Second, 150*time.Millisecond, "flapping")
	defer cancel()
	stopLast, err := flap(env, 5, 400*time.Millisecond, 200*time.Millisecond)
	t.Cleanup(stopLast)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		r := waitResult(t, env, id)
		if r.State != "completed" {
			t.Errorf("%s: %+v", id, r)
		}
	}
	cancel()
	if err := runReturned(t, done); err != nil {
		t.Errorf("Run: %v", err)
	}
	settled(t, "", "flapping", 3*time.Second)
	ended := make(map[string]*wire.Execution, len(ids))
	for _, id := range ids {
		ex, err := env.Client.GetExecution(ctxT(t), id)
		if err != nil {
			t.Fatal(err)
		}
		ended[id] = ex
	}
	o.check(t, ended, true)
}

// cutting keeps the connections of a listener (listenWrapped) so that
// they can all be reset at once (a load balancer or NAT dropping its
// flows; ffrun itself keeps running).
type cutting struct {
	mu    sync.Mutex
	conns map[net.Conn]bool
}

func (l *cutting) add(c net.Conn) net.Conn {
	l.mu.Lock()
	l.conns[c] = true
	l.mu.Unlock()
	return c
}

// cut resets every connection open now.
func (l *cutting) cut() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for c := range l.conns {
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetLinger(0)
		}
		_ = c.Close()
	}
	clear(l.conns)
}

// TestWorkerUnderResettingNetwork: every connection between the
// worker and ffrun is reset every 70 ms, whatever is on it: requests
// and answers are lost at any point. No handler runs twice (nor twice at
// once), every task completes, every report is recorded (OnReported nil:
// a report whose answer was lost is sent again and answered as the
// first), Run drains and returns nil and leaves no goroutine.
func TestWorkerUnderResettingNetwork(t *testing.T) {
	t.Parallel()
	ln := &cutting{conns: map[net.Conn]bool{}}
	env := servertest.StartOn(t, listenWrapped(t, ln.add))
	o := newOnceCounts()
	ids, cancel, done := o.start(t, env, 2*time.Second, 40*time.Millisecond, "resetting")
	defer cancel()
	ctx, stopCutting := context.WithCancel(context.Background())
	defer stopCutting()
	cutting := make(chan struct{})
	go func() {
		defer close(cutting)
		tick := time.NewTicker(70 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				ln.cut()
			}
		}
	}()
	results := make(map[string]*wire.Execution, len(ids))
	for _, id := range ids {
		for {
			ex, err := env.Client.GetExecution(ctxT(t), id)
			if err == nil && (ex.State == "completed" || ex.State == "failed") {
				results[id] = ex
				break
			}
			if ctxT(t).Err() != nil {
				t.Fatalf("%s did not end: %+v, %v", id, ex, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	cancel()
	stopCutting()
	<-cutting
	if err := runReturned(t, done); err != nil {
		t.Errorf("Run: %v", err)
	}
	settled(t, "", "resetting", 3*time.Second)
	o.check(t, results, false)
}
