package worker_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/flowfabric/ff/compiler/plan"
	"github.com/flowfabric/ff/runtime/server/servertest"
	"github.com/flowfabric/ff/runtime/wire"
	"github.com/flowfabric/ff/runtime/worker"
)

// TestHandBackAnswerLost: the connection breaks while the answer to a
// hand-back at shutdown is on its way (the server revoked the lease, the
// worker never saw it). The worker sends the hand-back again and is
// answered stale_lease: the lease is no longer its own, which is what the
// hand-back wanted, so the attempt counts as handed back (OnReported gets
// ErrShutdown, the log says nothing failed), not as "could not hand a task
// back; its lease will expire".
func TestHandBackAnswerLost(t *testing.T) {
	t.Parallel()
	lost := &resetting{needle: []byte(`"worker shut down"`), resets: 1}
	env := servertest.StartOn(t, listenWrapped(t, func(c net.Conn) net.Conn { return &resetConn{Conn: c, l: lost} }))
	id := create(t, env, wire.CreateExecution{Kind: "job", Retry: &plan.Retry{Attempts: 1}})
	started := make(chan struct{})
	reported := make(chan error, 1)
	var logs lockedLog
	a := newWorker(t, env, func(c *worker.Config) {
		c.Name, c.DrainTimeout, c.LeaseTTL = "a", 50*time.Millisecond, time.Minute
		c.NoLeaseWatch = true // the revoke's answer alone names the reason
		c.OnReported = func(_ string, err error) { reported <- err }
		c.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	})
	_ = a.Handle("job", func(ctx context.Context, _ *worker.Task) (json.RawMessage, error) {
		close(started)
		<-ctx.Done()
		return nil, context.Cause(ctx)
	})
	stopA := run(t, a)
	<-started
	_ = stopA()
	if lost.done.Load() == 0 {
		t.Fatalf("no hand-back answer was lost: the test did not test anything; the worker's log:\n%s", logs.String())
	}
	select {
	case err := <-reported:
		if !errors.Is(err, worker.ErrShutdown) {
			t.Errorf("OnReported of the attempt handed back: %v, want an error wrapping ErrShutdown", err)
		}
	default:
		t.Error("OnReported was not called for the attempt handed back")
	}
	if l := logs.String(); strings.Contains(l, "could not hand a task back") || !strings.Contains(l, "task handed back") {
		t.Errorf("the worker's log of a hand-back repeated after its answer was lost:\n%s", l)
	}
	ex, err := env.Client.GetExecution(ctxT(t), id)
	if err != nil {
		t.Fatal(err)
	}
	if ex.State != "waiting" {
		t.Errorf("after the hand-back the task is %s (%s), want waiting", ex.State, ex.LastError)
	}
}
