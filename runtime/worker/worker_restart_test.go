package worker_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flowfabric/ff/runtime/devserver"
	"github.com/flowfabric/ff/runtime/server"
	"github.com/flowfabric/ff/runtime/server/servertest"
	"github.com/flowfabric/ff/runtime/wire"
	"github.com/flowfabric/ff/runtime/worker"
)

// TestValkeyRestartMidRunKeepsResult: Valkey (with persistence, as ffrun dev
// runs it) restarts while a flow run is in progress and a caller waits for
// its result with Run.Result. The data survive, ffrun reconnects, the
// worker finishes the run; the caller must get the result rather than an
// error from a wait that hit the outage.
func TestValkeyRestartMidRunKeepsResult(t *testing.T) {
	dir := t.TempDir()
	vk, err := devserver.Start(context.Background(), devserver.Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = vk.Stop(context.Background()) })
	_, portS, _ := net.SplitHostPort(vk.Addr)
	port, _ := strconv.Atoi(portS)
	env := servertest.Start(t, func(c *server.Config) { c.ValkeyAddr, c.KeyPrefix = vk.Addr, "restart-run:" })

	w := newWorker(t, env, func(c *worker.Config) { c.LeaseTTL = 10 * time.Second })
	f := chainOf(2)
	release := make(chan struct{})
	_ = w.Handle("walk.a0", func(context.Context, *worker.Task) (json.RawMessage, error) {
		<-release
		return json.RawMessage(`["a0"]`), nil
	})
	_ = w.Handle("walk.a1", func(context.Context, *worker.Task) (json.RawMessage, error) {
		return json.RawMessage(`["a0","a1"]`), nil
	})
	run(t, w)
	ctx := ctxT(t)
	r, err := env.Client.StageFlow(ctx, f, []string{})
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		out json.RawMessage
		err error
	}
	done := make(chan result, 1)
	go func() {
		out, err := r.Result(ctx)
		done <- result{out, err}
	}()
	time.Sleep(300 * time.Millisecond)

	if err := vk.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond) // longer than the server's run re-read (1 s)
	vk2, err := devserver.Start(context.Background(), devserver.Config{Dir: dir, Port: port})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = vk2.Stop(context.Background()) })
	close(release)

	res := <-done
	if res.err != nil || string(res.out) != `["a0","a1"]` {
		t.Fatalf("Run.Result across a Valkey restart: %s, %v", res.out, res.err)
	}
}

// requestCounter counts every request a worker sends.
type requestCounter struct {
	base http.RoundTripper
	n    atomic.Int64
}

func (c *requestCounter) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return c.base.RoundTrip(r)
}

// TestValkeyRestartWorkerBacksOffAndRecovers: Valkey stops for 3 s under a
// running ffrun and worker, then comes back empty. During the outage the worker
// must back off (not spin on failing claims, renewals and reports); the
// handler running across the restart loses its lease (the execution is
// gone) and sees ErrLeaseLost; afterwards the worker takes new work.
func TestValkeyRestartWorkerBacksOffAndRecovers(t *testing.T) {
	vk, err := devserver.Start(context.Background(), devserver.Config{Dir: t.TempDir(), NoPersistence: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = vk.Stop(context.Background()) })
	_, portS, _ := net.SplitHostPort(vk.Addr)
	port, _ := strconv.Atoi(portS)
	env := servertest.Start(t, func(c *server.Config) { c.ValkeyAddr, c.KeyPrefix = vk.Addr, "restart-worker:" })

	tr := &requestCounter{base: http.DefaultTransport}
	w := newWorker(t, env, func(c *worker.Config) {
		c.Concurrency, c.LeaseTTL = 2, 900*time.Millisecond
		c.HTTPClient = &http.Client{Transport: tr}
	})
	started := make(chan struct{}, 1)
	cause := make(chan error, 1)
	_ = w.Handle("hold", func(ctx context.Context, _ *worker.Task) (json.RawMessage, error) {
		started <- struct{}{}
		<-ctx.Done()
		cause <- context.Cause(ctx)
		return nil, ctx.Err()
	})
	_ = w.Handle("quick", func(context.Context, *worker.Task) (json.RawMessage, error) {
		return json.RawMessage(`"ok"`), nil
	})
	stop := run(t, w)
	create(t, env, wire.CreateExecution{Kind: "hold"})
	<-started

	if err := vk.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	before := tr.n.Load()
	time.Sleep(3 * time.Second)
	during := tr.n.Load() - before
	// Claims back off 50 ms doubling to 5 s (6 in 3 s), renewals and
	// heartbeats go once per 300 ms tick (20): 40 leaves room, a spin
	// makes hundreds.
	if during > 40 {
		t.Errorf("the worker sent %d requests in 3 s of outage: it spins", during)
	}
	vk2, err := devserver.Start(context.Background(), devserver.Config{Dir: t.TempDir(), Port: port, NoPersistence: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = vk2.Stop(context.Background()) })

	select {
	case c := <-cause:
		if !errors.Is(c, worker.ErrLeaseLost) {
			t.Errorf("handler across the restart: cause %v, want ErrLeaseLost", c)
		}
	case <-time.After(10 * time.Second):
		t.Error("the handler across the restart was never cancelled")
	}

	ctx := ctxT(t)
	var id string
	for deadline := time.Now().Add(10 * time.Second); ; {
		ex, _, err := env.Client.CreateExecution(ctx, wire.CreateExecution{Kind: "quick"})
		if err == nil {
			id = ex.ID
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("ffrun does not serve after Valkey came back: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	start := time.Now()
	if r := waitResult(t, env, id); r.State != "completed" {
		t.Fatalf("after the restart: %+v", r)
	}
	if d := time.Since(start); d > 8*time.Second {
		t.Errorf("new work waited %s after the restart", d)
	}
	if err := stop(); err != nil {
		t.Errorf("stop: %v", err)
	}
}
