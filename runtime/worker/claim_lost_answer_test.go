package worker_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flowfabric/ff/runtime/server/servertest"
	"github.com/flowfabric/ff/runtime/wire"
	"github.com/flowfabric/ff/runtime/worker"
)

// resetting is a listener whose connections are reset (RST, no FIN) by
// the server side the first times (resets, at least one) the server
// writes bytes holding needle:
// the request was processed, its answer never reaches the client, as when
// a NAT, a load balancer or a flaky link drops the connection while the
// answer is on its way.
type resetting struct {
	net.Listener
	needle []byte
	resets int64
	done   atomic.Int64 // connections reset so far
}

func (l *resetting) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &resetConn{Conn: c, l: l}, nil
}

type resetConn struct {
	net.Conn
	l *resetting
}

func (c *resetConn) Write(p []byte) (int, error) {
	if bytes.Contains(p, c.l.needle) && c.l.done.Add(1) <= max(c.l.resets, 1) {
		if tc, ok := c.Conn.(*net.TCPConn); ok {
			_ = tc.SetLinger(0) // close with a reset
		}
		_ = c.Conn.Close()
		return 0, net.ErrClosed
	}
	return c.Conn.Write(p)
}

func listenResetting(t *testing.T, needle string, resets int64) *resetting {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return &resetting{Listener: ln, needle: []byte(needle), resets: resets}
}

// TestClaimAnswerLost: the connection breaks while the answer to a claim
// that granted a task is on its way (the server granted the lease, the
// worker never saw it). The worker's next claim says so (resume) and gets
// the grant again, under the same lease: the task runs in its first
// attempt, not after its lease ran out as a reclaim charged to its
// allowance (as a hand-off whose answer is lost is re-delivered,
// TestHandoffAnswerLost).
func TestClaimAnswerLost(t *testing.T) {
	t.Parallel()
	ln := listenResetting(t, `"lease_id"`, 1)
	env := servertest.StartOn(t, ln)
	w := newWorker(t, env, func(c *worker.Config) {
		c.Concurrency = 1
		c.LeaseTTL = time.Second
	})
	var runs atomic.Int64
	if err := w.Handle("job", func(context.Context, *worker.Task) (json.RawMessage, error) {
		runs.Add(1)
		return json.RawMessage(`"done"`), nil
	}); err != nil {
		t.Fatal(err)
	}
	id := create(t, env, wire.CreateExecution{Kind: "job"})
	run(t, w)
	r := waitResult(t, env, id)
	if ln.done.Load() == 0 {
		t.Fatal("no answer was lost: the test did not test anything")
	}
	if r.State != "completed" {
		t.Fatalf("result %+v, want completed", r)
	}
	ex, err := env.Client.GetExecution(ctxT(t), id)
	if err != nil {
		t.Fatal(err)
	}
	if ex.Attempt != 1 {
		var hist []string
		for _, a := range ex.Attempts {
			hist = append(hist, a.Type+"/"+a.Outcome)
		}
		t.Errorf("the execution took %d attempts %v, want 1: the grant of the lost claim answer was never re-delivered, "+
			"it waited for its lease to expire and was charged as a reclaim", ex.Attempt, hist)
	}
}

// TestClaimAnswersLostDoNotFailTheExecution: four claim answers in a row
// lost on the way (a flaky link) do not spend the execution's reclaim
// allowance (store.MaxReclaimsDefault, 3) on leases no worker ever held:
// each resume delivers the grant again, and the task runs once.
func TestClaimAnswersLostDoNotFailTheExecution(t *testing.T) {
	t.Parallel()
	ln := listenResetting(t, `"lease_id"`, 4)
	env := servertest.StartOn(t, ln)
	w := newWorker(t, env, func(c *worker.Config) {
		c.Concurrency = 1
		c.LeaseTTL = 500 * time.Millisecond
	})
	var runs atomic.Int64
	if err := w.Handle("job", func(context.Context, *worker.Task) (json.RawMessage, error) {
		runs.Add(1)
		return json.RawMessage(`"done"`), nil
	}); err != nil {
		t.Fatal(err)
	}
	id := create(t, env, wire.CreateExecution{Kind: "job"})
	run(t, w)
	r := waitResult(t, env, id)
	if n := ln.done.Load(); n < 4 {
		t.Fatalf("%d answers lost, want 4: the test did not test what it says", n)
	}
	if r.State != "completed" || runs.Load() != 1 {
		t.Errorf("result %+v after %d handler runs; want completed after one: lost claim answers were charged as reclaims", r, runs.Load())
	}
}
