package worker_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/flowfabric/ff/compiler/plan"
	"github.com/flowfabric/ff/runtime/server/servertest"
	"github.com/flowfabric/ff/runtime/wire"
	"github.com/flowfabric/ff/runtime/worker"
)

// TestTimedOutAttemptNotWarnedAsRejected: an exec whose handler runs past
// its attempt's timeout is the ordinary timeout path: the handler's
// context ends, the handler returns its context's error, and the server
// refuses that report as stale (attempt_timed_out). The worker knew the
// lease was gone, so that refusal is not logged at warn level (it once
// read `level=WARN msg="fail rejected" ... code=stale_lease`).
func TestTimedOutAttemptNotWarnedAsRejected(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	var logs servertest.LogBuffer
	reported := make(chan error, 4)
	w := newWorker(t, env, func(c *worker.Config) {
		c.Concurrency = 1
		c.LeaseTTL = 10 * time.Second
		c.Logger = slog.New(slog.NewTextHandler(&logs, nil))
		c.OnReported = func(_ string, err error) { reported <- err }
	})
	cancelled := make(chan error, 1)
	if err := w.Handle("slow", func(ctx context.Context, _ *worker.Task) (json.RawMessage, error) {
		<-ctx.Done()
		cancelled <- context.Cause(ctx)
		return nil, ctx.Err()
	}); err != nil {
		t.Fatal(err)
	}
	run(t, w)
	id := create(t, env, wire.CreateExecution{Kind: "slow", TimeoutMs: 500, Retry: &plan.Retry{Attempts: 1}})
	select {
	case <-cancelled:
	case <-ctxT(t).Done():
		t.Fatal("the handler was never cancelled by its timeout")
	}
	select {
	case <-reported:
	case <-time.After(5 * time.Second):
		// Not reported at all: the right behaviour too.
	}
	if r := waitResult(t, env, id); r.State != "failed" {
		t.Fatalf("result %+v, want failed (attempt timed out)", r)
	}
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, "level=WARN") && strings.Contains(line, id) {
			t.Errorf("an ordinary attempt timeout is logged at warn level:\n%s", line)
		}
	}
}

// TestNewRefusesBadNamespace: New applies the server's rules for
// namespaces and lanes (letters, digits, '_', '-', '.' and '/';
// spec/language.md, FF0507) and names the field, rather than Run failing
// at its first request with a 400.
func TestNewRefusesBadNamespace(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		cfg   worker.Config
		field string
	}{
		{worker.Config{URL: "http://127.0.0.1:1", Namespace: "Ops!"}, "Config.Namespace"},
		{worker.Config{URL: "http://127.0.0.1:1", Lanes: []string{"gpu!"}}, "Config.Lanes[0]"},
	} {
		_, err := worker.New(c.cfg)
		if err == nil || !strings.Contains(err.Error(), c.field) {
			t.Errorf("worker.New(Namespace %q, Lanes %q) = %v; want an error naming %s", c.cfg.Namespace, c.cfg.Lanes, err, c.field)
		}
	}
}

// TestHandleRefusesBadKind: Handle applies the rule of kinds that ffc,
// the API's creates and its claims apply (plan.ValidateKind): a kind
// with an invisible Unicode format character (FF0507), white space, a
// comma, or over 128 bytes is refused when registered, naming the
// problem, rather than every claim of the worker failing with a 400 (or
// the kind waiting for tasks no execution can have); TestRegistrar
// refuses it too, so a test of the handlers sees it.
func TestHandleRefusesBadKind(t *testing.T) {
	t.Parallel()
	w, err := worker.New(worker.Config{URL: "http://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	h := func(context.Context, *worker.Task) (json.RawMessage, error) { return nil, nil }
	for kind, want := range map[string]string{
		"media.probe\u200b":      "invisible Unicode format character U+200B",
		"media\u202eprobe":       "invisible Unicode format character U+202E",
		"a b":                    "white space",
		"a,b":                    "comma",
		strings.Repeat("k", 129): "longer than 128 bytes",
		"":                       "empty",
	} {
		if err := w.Handle(kind, h); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Handle(%q) = %v; want an error saying %q", kind, err, want)
		}
		if err := (worker.TestRegistrar{}).Handle(kind, h); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("TestRegistrar.Handle(%q) = %v; want an error saying %q", kind, err, want)
		}
	}
	if err := w.Handle("media.probe", h); err != nil {
		t.Errorf("Handle(media.probe) = %v", err)
	}
}

// TestStartLogNamesNamespace: the "worker started" line names the
// namespace the worker claims in, the first thing to check when a flow
// declared in another namespace waits.
func TestStartLogNamesNamespace(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	var logs servertest.LogBuffer
	w := newWorker(t, env, func(c *worker.Config) {
		c.Namespace = "ops"
		c.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	})
	if err := w.Handle("ops.fetch", func(context.Context, *worker.Task) (json.RawMessage, error) { return nil, nil }); err != nil {
		t.Fatal(err)
	}
	stop := run(t, w)
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(logs.String(), `msg="worker started"`) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	_ = stop()
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, `msg="worker started"`) && (!strings.Contains(line, "namespace=ops") || !strings.Contains(line, "kinds=[ops.fetch]")) {
			t.Errorf("the worker's start line does not name its namespace and kinds:\n%s", line)
		}
	}
}

// TestStoppedWorkerLeavesRegistry: a worker stopped cleanly (its Run
// returned after a drain) leaves GET /v1/workers within a moment, not
// when its heartbeat's ttl (30 s with the default lease) runs out: for
// that long wait hints and capability parking counted it as connected.
func TestStoppedWorkerLeavesRegistry(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	w := newWorker(t, env, func(c *worker.Config) {
		c.Name = "leaver"
		c.LeaseTTL = 30 * time.Second // the default: the registration lasts 30 s
	})
	if err := w.Handle("job", func(context.Context, *worker.Task) (json.RawMessage, error) { return nil, nil }); err != nil {
		t.Fatal(err)
	}
	stop := run(t, w)
	listed := func() bool {
		l, err := env.Client.Workers(ctxT(t), "")
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range l.Workers {
			if x.WorkerID == "leaver" {
				return true
			}
		}
		return false
	}
	for !listed() {
		if ctxT(t).Err() != nil {
			t.Fatal("the worker was never listed")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	until := time.Now().Add(5 * time.Second)
	for listed() {
		if time.Now().After(until) {
			t.Fatal("5 s after its Run returned, the stopped worker is still listed as connected (until its 30 s registration expires)")
		}
		time.Sleep(100 * time.Millisecond)
	}
}
