package server_test

import (
	"context"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flowfabric/ff/compiler/plan"
	"github.com/flowfabric/ff/runtime/client"
	"github.com/flowfabric/ff/runtime/devserver"
	"github.com/flowfabric/ff/runtime/server"
	"github.com/flowfabric/ff/runtime/server/servertest"
	"github.com/flowfabric/ff/runtime/wire"
)

// startValkeyOn starts a Valkey without persistence on port (0: a free
// one) in a directory of its own, stopped when t ends.
func startValkeyOn(t *testing.T, port int) *devserver.Server {
	t.Helper()
	srv, err := devserver.Start(context.Background(), devserver.Config{Dir: t.TempDir(), Port: port, NoPersistence: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop(context.Background()) })
	return srv
}

// startValkeyAnyPort is startValkeyOn a free port, and the port (to
// start the server again on it: a restart behind a stable address).
func startValkeyAnyPort(t *testing.T) (*devserver.Server, int) {
	t.Helper()
	vk := startValkeyOn(t, 0)
	_, portS, err := net.SplitHostPort(vk.Addr)
	if err != nil {
		t.Fatal(err)
	}
	port, err := strconv.Atoi(portS)
	if err != nil {
		t.Fatal(err)
	}
	return vk, port
}

// TestValkeyRestartRecovers: Valkey restarts (empty: no
// persistence) under two running ffrun processes. Once it is back, both
// must serve again without a restart of their own: a parked long-poll
// claim is woken by the wake-up pub/sub (the hint resync is off, so only a
// resubscribed wake-up channel can end it early), and a result request
// waiting on one process is answered by the run-end notice of the other
// (the periodic re-read is off too).
func TestValkeyRestartRecovers(t *testing.T) {
	vk, port := startValkeyAnyPort(t)
	share := func(c *server.Config) {
		c.ValkeyAddr, c.KeyPrefix = vk.Addr, "restart:"
		c.Templates = []*plan.Flow{twoStep()}
		c.ResyncInterval, c.RunPoll = time.Hour, time.Hour
		// No scanners: none is under test here, and valkey-go v1.0.79 races
		// (under -race) when it sends a read-only command again on a new
		// connection while the broken one's writer still reads it, which
		// a scanner's read caught in flight by the restart can trigger.
		c.DisableScanners = true
	}
	a, b := servertest.Start(t, share), servertest.Start(t, share)
	ctx := ctxT(t)
	if _, _, err := a.Client.CreateExecution(ctx, wire.CreateExecution{Kind: "k"}); err != nil {
		t.Fatal(err)
	}

	if err := vk.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	startValkeyOn(t, port)

	// Back: every request may still fail while connections redial (each
	// pipelined connection fails the first command given to it after the
	// restart, answered 503 unavailable); afterRestart retries those.
	for _, env := range []*servertest.Env{a, b} {
		if _, err := afterRestart(t, func() (*wire.Execution, error) {
			x, _, err := env.Client.CreateExecution(ctx, wire.CreateExecution{Kind: "warmup"})
			return x, err
		}); err != nil {
			t.Fatalf("ffrun does not serve after Valkey came back: %v", err)
		}
	}
	// A parked claim of process a, woken by a create on process b. Process
	// a resubscribes with a backoff of up to 2 s, later on a loaded
	// machine: a parked claim (of a kind of its own each time, waiting 4 s)
	// must be woken well before its wait ends within 20 s. Without the
	// resubscription none is (the safety-net resync is an hour).
	woke := false
	for i, until := 0, time.Now().Add(20*time.Second); !woke && time.Now().Before(until); i++ {
		kind := "after" + strconv.Itoa(i)
		got := claimAsync(ctx, a, wire.ClaimRequest{WorkerID: "w", Kinds: []string{kind}, WaitMs: 4000})
		time.Sleep(300 * time.Millisecond)
		start := time.Now()
		if _, err := afterRestart(t, func() (*wire.Execution, error) {
			x, _, err := b.Client.CreateExecution(ctx, wire.CreateExecution{Kind: kind})
			return x, err
		}); err != nil {
			t.Fatal(err)
		}
		res := <-got
		if client.IsCode(res.err, wire.CodeUnavailable) {
			continue // the claim met a connection not redialled yet
		}
		if res.err != nil {
			t.Fatalf("claim after the restart: %v", res.err)
		}
		woke = len(res.tasks) == 1 && time.Since(start) < 2*time.Second
	}
	if !woke {
		t.Fatal("no wake-up reached a parked claim in the 20 s after the restart")
	}

	// A result request waiting on b, for a run a's claims drive.
	run, err := afterRestart(t, func() (*client.Run, error) {
		return a.Client.StageTemplate(ctx, "two", map[string]string{"s": "x"})
	})
	if err != nil {
		t.Fatal(err)
	}
	answered := make(chan *wire.FlowRun, 1)
	go func() {
		r, err := afterRestart(t, func() (*wire.FlowRun, error) { return b.Client.RunResult(ctx, run.ID, 20*time.Second) })
		if err != nil {
			t.Errorf("waiting result: %v", err)
		}
		answered <- r
	}()
	time.Sleep(200 * time.Millisecond)
	start := time.Now()
	for range 2 {
		tasks, err := afterRestart(t, func() ([]wire.Task, error) {
			return a.Client.Claim(ctx, wire.ClaimRequest{WorkerID: "w", Kinds: []string{"two.a", "two.b"}, WaitMs: 10_000})
		})
		if err != nil || len(tasks) != 1 {
			t.Fatalf("claim: %+v %v", tasks, err)
		}
		task := tasks[0]
		lease := wire.Lease{ExecutionID: task.ExecutionID, LeaseID: task.LeaseID, Epoch: task.Epoch}
		// Sent again after a broken connection, the same completion is
		// answered as recorded.
		if _, err := afterRestart(t, func() (*wire.LeaseResult, error) { return a.Client.CompleteOne(ctx, lease, task.Input) }); err != nil {
			t.Fatal(err)
		}
	}
	r := <-answered
	if r == nil || r.State != wire.RunSucceeded {
		t.Fatalf("result after the restart: %+v", r)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("answered after %s: no run-end notice reached the other process after the restart", d)
	}
}

// afterRestart runs call until it does not fail with 503 unavailable, for
// up to 5 s: after a Valkey restart each pipelined connection of a process
// fails the first command given to it, which ffrun answers unavailable.
func afterRestart[T any](t *testing.T, call func() (T, error)) (T, error) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		v, err := call()
		if err == nil || !client.IsCode(err, wire.CodeUnavailable) || time.Now().After(deadline) {
			return v, err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestValkeyOutageLogsOnce: while Valkey is away, the run-end subscription
// logs its loss once at warn level (retries with a backoff, at debug
// level), and its return at info level, instead of a warning every 200 ms.
func TestValkeyOutageLogsOnce(t *testing.T) {
	vk, port := startValkeyAnyPort(t)
	logs := &logBuffer{t: t}
	servertest.Start(t, func(c *server.Config) {
		c.ValkeyAddr, c.KeyPrefix = vk.Addr, "outage:"
		c.DisableScanners = true
		c.ResyncInterval = time.Hour
		c.Logger = slog.New(slog.NewTextHandler(logs, nil))
	})
	if err := vk.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second)
	startValkeyOn(t, port)
	const restored = `msg="run notices: subscription restored"`
	for deadline := time.Now().Add(15 * time.Second); !strings.Contains(logs.String(), restored); {
		if time.Now().After(deadline) {
			t.Fatalf("no %s after Valkey came back", restored)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if n := strings.Count(logs.String(), `msg="run notices: subscription lost; retrying"`); n != 1 {
		t.Errorf("%d warnings of the lost subscription over one outage, want 1", n)
	}
}

// TestWakeSubscriptionOutageWarnsOnce: while Valkey is away, the
// scheduler's wake-up subscription logs its loss once at warn level (its
// resubscription attempts, 50 ms doubling to 2 s, at debug level) and its
// return at info level, as the run-end subscription does.
func TestWakeSubscriptionOutageWarnsOnce(t *testing.T) {
	vk, port := startValkeyAnyPort(t)
	logs := &logBuffer{t: t}
	servertest.Start(t, func(c *server.Config) {
		c.ValkeyAddr, c.KeyPrefix = vk.Addr, "wakeoutage:"
		c.DisableScanners = true
		c.ResyncInterval = time.Hour
		c.Logger = slog.New(slog.NewTextHandler(logs, nil))
	})
	if err := vk.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second) // the outage: several attempts
	startValkeyOn(t, port)
	const restored = `level=INFO msg="scheduler: wake-up subscription restored"`
	for deadline := time.Now().Add(15 * time.Second); !strings.Contains(logs.String(), restored); {
		if time.Now().After(deadline) {
			t.Fatalf("no %s after Valkey came back", restored)
		}
		time.Sleep(50 * time.Millisecond)
	}
	const lost = `level=WARN msg="scheduler: wake-up subscription ended; resubscribing"`
	if n := strings.Count(logs.String(), lost); n != 1 {
		t.Errorf("%d warnings %s over one 3 s outage, want 1", n, lost)
	}
}
