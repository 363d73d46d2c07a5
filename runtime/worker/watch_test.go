package worker_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
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

// renewNever makes a worker's renew ticks too far apart to tell it of
// anything in a test: only the lease watch can.
func renewNever(c *worker.Config) {
	c.Concurrency, c.LeaseTTL, c.RenewInterval = 1, 30*time.Minute, 10*time.Minute
}

// watchesWaiting returns env's gauge ff_lease_watches_waiting.
func watchesWaiting(t *testing.T, env *servertest.Env) string {
	t.Helper()
	res := env.Do(t, http.MethodGet, "/metrics", nil, "")
	sc := bufio.NewScanner(strings.NewReader(res.Body))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "ff_lease_watches_waiting "); ok {
			return v
		}
	}
	t.Fatalf("GET /metrics has no ff_lease_watches_waiting:\n%s", res.Body)
	return ""
}

// untilWatching waits until env has one lease watch waiting: the worker's,
// past its first read of its leases, so that only the store's notice of
// an end can answer it.
func untilWatching(t *testing.T, env *servertest.Env) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); watchesWaiting(t, env) != "1"; {
		if time.Now().After(deadline) {
			t.Fatal("the worker's lease watch never waited")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// blocking is a handler that, on its first attempt, says it started and
// waits for its context to end, and returns the context's cause on
// causes; a later attempt (a revoked task claimed again) succeeds.
func blocking(started chan<- string, causes chan<- error) worker.Handler {
	return func(ctx context.Context, t *worker.Task) (json.RawMessage, error) {
		if t.Attempt() > 1 {
			return json.RawMessage(`"again"`), nil
		}
		started <- t.ID()
		<-ctx.Done()
		causes <- context.Cause(ctx)
		return nil, ctx.Err()
	}
}

// cause waits for the cause of the blocked handler's end.
func cause(t *testing.T, causes <-chan error) error {
	t.Helper()
	select {
	case c := <-causes:
		return c
	case <-time.After(20 * time.Second):
		t.Fatal("the handler's context was not cancelled (the renew tick is minutes away: only the lease watch could)")
		return nil
	}
}

// TestLeaseEndReachesHandlerThroughWatch: with renew ticks minutes apart,
// a running handler's context is cancelled all the same when its
// execution is cancelled (cause ErrCancelled), when its run is cancelled
// (ErrCancelled), and when its lease is revoked (ErrLeaseLost): the
// server's answer to the worker's lease watch brings each.
func TestLeaseEndReachesHandlerThroughWatch(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	ctx := ctxT(t)
	started, causes := make(chan string, 1), make(chan error, 1)
	w := newWorker(t, env, renewNever)
	for _, kind := range []string{"block", "walk.a0"} {
		if err := w.Handle(kind, blocking(started, causes)); err != nil {
			t.Fatal(err)
		}
	}
	run(t, w)
	await := func() string {
		t.Helper()
		select {
		case id := <-started:
			untilWatching(t, env)
			return id
		case <-ctx.Done():
			t.Fatal("the handler never started")
			return ""
		}
	}

	create(t, env, wire.CreateExecution{Kind: "block"})
	id := await()
	if _, err := env.Client.CancelExecution(ctx, id, "stop"); err != nil {
		t.Fatal(err)
	}
	if c := cause(t, causes); !errors.Is(c, worker.ErrCancelled) {
		t.Fatalf("cancel: cause %v, want ErrCancelled", c)
	}

	r, err := env.Client.StageFlow(ctx, chainOf(2), []string{})
	if err != nil {
		t.Fatal(err)
	}
	await()
	if _, err := r.Cancel(ctx, "run stopped"); err != nil {
		t.Fatal(err)
	}
	if c := cause(t, causes); !errors.Is(c, worker.ErrCancelled) {
		t.Fatalf("run cancel: cause %v, want ErrCancelled", c)
	}

	id = create(t, env, wire.CreateExecution{Kind: "block"})
	await()
	if _, err := env.Client.RevokeLease(ctx, id, "take it back"); err != nil {
		t.Fatal(err)
	}
	if c := cause(t, causes); !errors.Is(c, worker.ErrLeaseLost) {
		t.Fatalf("revoke: cause %v, want ErrLeaseLost", c)
	}
	if res := waitResult(t, env, id); res.State != "completed" { // its next attempt
		t.Fatalf("the revoked task ended %s, want completed by its next attempt", res.State)
	}
}

// TestLeaseWatchAcrossServers: the worker talks to server A; the cancel
// goes to server B on the same Valkey; the handler learns of it through
// A's answer to its watch.
func TestLeaseWatchAcrossServers(t *testing.T) {
	t.Parallel()
	a := servertest.Start(t)
	b := servertest.Start(t, func(c *server.Config) { c.KeyPrefix = a.Config.KeyPrefix })
	ctx := ctxT(t)
	started, causes := make(chan string, 1), make(chan error, 1)
	w := newWorker(t, a, renewNever)
	if err := w.Handle("block", blocking(started, causes)); err != nil {
		t.Fatal(err)
	}
	run(t, w)
	create(t, a, wire.CreateExecution{Kind: "block"})
	var id string
	select {
	case id = <-started:
	case <-ctx.Done():
		t.Fatal("the handler never started")
	}
	untilWatching(t, a)
	if _, err := b.Client.CancelExecution(ctx, id, "stop through B"); err != nil {
		t.Fatal(err)
	}
	if c := cause(t, causes); !errors.Is(c, worker.ErrCancelled) {
		t.Fatalf("cause %v, want ErrCancelled", c)
	}
}

// noWatch answers the lease watch as a server older than the route does
// (404 unknown_route), counting those requests, and passes everything
// else on, counting renewals.
type noWatch struct {
	base    http.RoundTripper
	watches atomic.Int64
	renews  atomic.Int64
}

func (n *noWatch) RoundTrip(r *http.Request) (*http.Response, error) {
	switch r.URL.Path {
	case "/v1/worker/watch":
		n.watches.Add(1)
		if r.Body != nil {
			r.Body.Close()
		}
		return answer(r, http.StatusNotFound, `{"error":{"code":"unknown_route","message":"no such route"}}`), nil
	case "/v1/worker/renew":
		n.renews.Add(1)
	}
	return n.base.RoundTrip(r)
}

// TestLeaseWatchOlderServer: against a server without the watch route the
// worker asks once, then runs on renewals alone: a task held over several
// renew ticks completes, no more watch is sent, and Run returns nil.
func TestLeaseWatchOlderServer(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	rt := &noWatch{base: http.DefaultTransport}
	release := make(chan struct{})
	w := newWorker(t, env, func(c *worker.Config) {
		c.Concurrency, c.LeaseTTL, c.RenewInterval = 1, 3*time.Second, 200*time.Millisecond
		c.HTTPClient = &http.Client{Transport: rt}
	})
	if err := w.Handle("hold", func(ctx context.Context, _ *worker.Task) (json.RawMessage, error) {
		select {
		case <-release:
			return json.RawMessage(`"held"`), nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}); err != nil {
		t.Fatal(err)
	}
	stop := run(t, w)
	id := create(t, env, wire.CreateExecution{Kind: "hold"})
	// Held for three renew ticks: long past the moment its lease is watched.
	for deadline := time.Now().Add(20 * time.Second); rt.renews.Load() < 3; {
		if time.Now().After(deadline) {
			t.Fatalf("%d renewals", rt.renews.Load())
		}
		time.Sleep(10 * time.Millisecond)
	}
	close(release)
	if res := waitResult(t, env, id); res.State != "completed" {
		t.Fatalf("task ended %s, want completed", res.State)
	}
	if err := stop(); err != nil {
		t.Fatalf("Run = %v", err)
	}
	if n := rt.watches.Load(); n != 1 {
		t.Fatalf("%d watch requests to a server without the route, want 1", n)
	}
}
