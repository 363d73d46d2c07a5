package worker_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flowfabric/ff/runtime/server/servertest"
	"github.com/flowfabric/ff/runtime/wire"
	"github.com/flowfabric/ff/runtime/worker"
)

// labelled counts the goroutines carrying the pprof label key=value, and
// returns their stacks. Goroutines inherit the labels of the goroutine that
// starts them, so every goroutine a Run started under the label carries it,
// whatever the tests running in parallel do.
func labelled(t *testing.T, key, value string) (int, string) {
	t.Helper()
	var b bytes.Buffer
	if err := pprof.Lookup("goroutine").WriteTo(&b, 1); err != nil {
		t.Fatal(err)
	}
	want := `"` + key + `":"` + value + `"`
	n := 0
	var stacks []string
	for entry := range strings.SplitSeq(b.String(), "\n\n") {
		if !strings.Contains(entry, "# labels:") || !strings.Contains(entry, want) {
			continue
		}
		count, _, _ := strings.Cut(entry, " @ ")
		c, err := strconv.Atoi(strings.TrimSpace(count[strings.LastIndex(count, "\n")+1:]))
		if err != nil {
			c = 1
		}
		n += c
		stacks = append(stacks, entry)
	}
	return n, strings.Join(stacks, "\n\n")
}

// settled waits up to d for no goroutine labelled key=value to be left.
func settled(t *testing.T, key, value string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		n, stacks := labelled(t, key, value)
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines left %s after Run returned:\n%s", n, d, stacks)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// runLabelled runs w.Run(ctx) on a goroutine labelled =label and
// returns a channel of its error.
func runLabelled(ctx context.Context, w *worker.Worker, label string) <-chan error {
	done := make(chan error, 1)
	go pprof.Do(context.Background(), pprof.Labels("", label), func(context.Context) {
		done <- w.Run(ctx)
	})
	return done
}

// runReturned waits for the Run whose result done carries, and returns
// its error; a Run that does not return within 20 s fails the test.
func runReturned(t *testing.T, done <-chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(20 * time.Second):
		t.Fatal("Run did not return")
		return nil
	}
}

// TestRunLeavesNoGoroutine: a worker that ran handlers (kept for
// the next task), hand-offs (started from a report sender), reports of
// several kinds in one batch (sent on goroutines of their own) and
// failures leaves no goroutine once Run returned.
func TestRunLeavesNoGoroutine(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	w := newWorker(t, env, func(c *worker.Config) { c.Concurrency = 4 })
	f := chainOf(4)
	var ran atomic.Int64
	handleChain(t, w, f, time.Millisecond, &ran)
	_ = w.Handle("job", func(_ context.Context, task *worker.Task) (json.RawMessage, error) {
		if task.Attempt() == 1 && strings.HasSuffix(string(task.Input()), `1}`) {
			return nil, worker.Permanent(errors.New("odd"))
		}
		return json.RawMessage(`"ok"`), nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := runLabelled(ctx, w, "leak-normal")
	var runs []interface {
		Result(context.Context) (json.RawMessage, error)
	}
	for range 3 {
		r, err := env.Client.StageFlow(ctxT(t), f, []string{})
		if err != nil {
			t.Fatal(err)
		}
		runs = append(runs, r)
	}
	var ids []string
	for i := range 12 {
		ids = append(ids, create(t, env, wire.CreateExecution{Kind: "job", Input: json.RawMessage(`{"n":` + strconv.Itoa(i%2) + `}`)}))
	}
	for _, r := range runs {
		if _, err := r.Result(ctxT(t)); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range ids {
		waitResult(t, env, id)
	}
	if n, _ := labelled(t, "", "leak-normal"); n == 0 {
		t.Fatal("no labelled goroutine while running: the test does not see the worker's goroutines")
	}
	cancel()
	if err := runReturned(t, done); err != nil {
		t.Fatalf("Run: %v", err)
	}
	settled(t, "", "leak-normal", 3*time.Second)
}

// TestDrainTimeoutLeavesNoGoroutineOnceHandlerReturns: a handler
// that ignores its context outlives the drain timeout; Run returns with
// the timeout error. Once that handler returns, its goroutine (a kept
// handler goroutine) must end too, and nothing else of the worker stays.
func TestDrainTimeoutLeavesNoGoroutineOnceHandlerReturns(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	w := newWorker(t, env, func(c *worker.Config) {
		c.Concurrency, c.DrainTimeout, c.LeaseTTL = 2, 200*time.Millisecond, 5*time.Second
	})
	started := make(chan struct{}, 4)
	release := make(chan struct{})
	_ = w.Handle("stubborn", func(context.Context, *worker.Task) (json.RawMessage, error) {
		started <- struct{}{}
		<-release // ignores ctx
		return json.RawMessage(`1`), nil
	})
	_ = w.Handle("quick", func(context.Context, *worker.Task) (json.RawMessage, error) {
		return json.RawMessage(`2`), nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := runLabelled(ctx, w, "leak-timeout")
	quick := create(t, env, wire.CreateExecution{Kind: "quick"})
	waitResult(t, env, quick)
	create(t, env, wire.CreateExecution{Kind: "stubborn"})
	<-started
	cancel()
	if err := runReturned(t, done); err == nil || !strings.Contains(err.Error(), "drain timeout") {
		t.Fatalf("Run = %v, want the drain timeout", err)
	}
	close(release)
	settled(t, "", "leak-timeout", 3*time.Second)
}

// reportKinds holds back the first two report requests (every request
// slot of the worker) until released, so that completions and failures
// finishing meanwhile queue up and go in batches of two kinds.
type reportKinds struct {
	base  *http.Transport
	hold  chan struct{}
	held  atomic.Int64
	mixed atomic.Int64 // a complete and a fail in flight at once
	comp  atomic.Int64
	fail  atomic.Int64
}

func (r *reportKinds) RoundTrip(req *http.Request) (*http.Response, error) {
	var c *atomic.Int64
	switch req.URL.Path {
	case "/v1/worker/complete":
		c = &r.comp
	case "/v1/worker/fail":
		c = &r.fail
	default:
		return r.base.RoundTrip(req)
	}
	if r.held.Add(1) <= 2 {
		<-r.hold
	}
	c.Add(1)
	defer c.Add(-1)
	if r.comp.Load() > 0 && r.fail.Load() > 0 {
		r.mixed.Add(1)
	}
	return r.base.RoundTrip(req)
}

// CloseIdleConnections passes the worker's call on (Run makes it when it
// stops), as http.Transport answers it.
func (r *reportKinds) CloseIdleConnections() { r.base.CloseIdleConnections() }

// holdingWorker returns a worker of 8 slots with handlers "ok" (succeeds)
// and "bad" (fails for good), whose reports go through a reportKinds
// transport that holds them until released.
func holdingWorker(t *testing.T, env *servertest.Env) (*reportKinds, *worker.Worker) {
	t.Helper()
	tr := &reportKinds{base: &http.Transport{}, hold: make(chan struct{})}
	w := newWorker(t, env, func(c *worker.Config) {
		c.Concurrency = 8
		c.HTTPClient = &http.Client{Transport: tr}
	})
	_ = w.Handle("ok", func(context.Context, *worker.Task) (json.RawMessage, error) { return json.RawMessage(`1`), nil })
	_ = w.Handle("bad", func(context.Context, *worker.Task) (json.RawMessage, error) {
		return nil, worker.Permanent(errors.New("bad"))
	})
	return tr, w
}

// TestReportsOfSeveralKindsInOneBatch: with every request slot
// busy, a completion and a failure queue up and go in one batch, as two
// requests; both are recorded, and nothing stays behind after Run.
func TestReportsOfSeveralKindsInOneBatch(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	tr, w := holdingWorker(t, env)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := runLabelled(ctx, w, "leak-mixed")
	first := create(t, env, wire.CreateExecution{Kind: "ok"}) // its complete is held
	for tr.held.Load() < 1 {
		time.Sleep(time.Millisecond)
	}
	second := create(t, env, wire.CreateExecution{Kind: "bad"}) // its fail is held
	for tr.held.Load() < 2 {
		time.Sleep(time.Millisecond)
	}
	var ids []string
	for range 6 {
		ids = append(ids, create(t, env, wire.CreateExecution{Kind: "ok"}), create(t, env, wire.CreateExecution{Kind: "bad"}))
	}
	time.Sleep(300 * time.Millisecond) // let them finish and queue behind the held report
	close(tr.hold)
	if r := waitResult(t, env, first); r.State != "completed" {
		t.Fatalf("first: %+v", r)
	}
	if r := waitResult(t, env, second); r.State != "failed" {
		t.Fatalf("second: %+v", r)
	}
	for i, id := range ids {
		want := "completed"
		if i%2 == 1 {
			want = "failed"
		}
		if r := waitResult(t, env, id); r.State != want {
			t.Fatalf("%s: state %s, want %s", id, r.State, want)
		}
	}
	cancel()
	if err := runReturned(t, done); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if tr.mixed.Load() == 0 {
		t.Error("no complete and fail in flight at once: the batch of two kinds was not exercised")
	}
	settled(t, "", "leak-mixed", 3*time.Second)
}

// TestDrainWaitsForHeldReports: the worker is stopped while both
// report requests are held by the server and more outcomes queue behind
// them. The drain sends them all once the server answers, Run returns,
// and nothing of the worker stays.
func TestDrainWaitsForHeldReports(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	tr, w := holdingWorker(t, env)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := runLabelled(ctx, w, "leak-drain")
	ids := []string{create(t, env, wire.CreateExecution{Kind: "ok"})}
	for tr.held.Load() < 1 {
		time.Sleep(time.Millisecond)
	}
	ids = append(ids, create(t, env, wire.CreateExecution{Kind: "bad"}))
	for tr.held.Load() < 2 {
		time.Sleep(time.Millisecond)
	}
	for range 4 {
		ids = append(ids, create(t, env, wire.CreateExecution{Kind: "ok"}), create(t, env, wire.CreateExecution{Kind: "bad"}))
	}
	time.Sleep(200 * time.Millisecond) // they finish and queue behind the held reports
	cancel()
	time.Sleep(100 * time.Millisecond) // the drain is waiting for the reports
	select {
	case err := <-done:
		t.Fatalf("Run returned (%v) with reports still held", err)
	default:
	}
	close(tr.hold)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the drain hangs")
	}
	for i, id := range ids {
		want := "completed"
		if i%2 == 1 {
			want = "failed"
		}
		if r := waitResult(t, env, id); r.State != want {
			t.Fatalf("%s: state %s, want %s", id, r.State, want)
		}
	}
	settled(t, "", "leak-drain", 3*time.Second)
}
