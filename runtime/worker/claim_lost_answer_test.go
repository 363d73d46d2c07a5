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

// resetting resets (RST, no FIN) the connections of a listener
// (listenWrapped) the first times (resets, at least one) the server writes
// bytes holding needle: the request was processed, its answer never
// reaches the client, as when a NAT, a load balancer or a flaky link drops
// the connection while the answer is on its way.
type resetting struct {
	needle []byte
	resets int64
	done   atomic.Int64 // connections reset so far
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

// lostClaimAnswers runs one task on a worker of lease TTL ttl whose first
// resets claim answers holding a grant are lost on their way, and returns
// its result, its execution, the handler's runs and the answers lost.
func lostClaimAnswers(t *testing.T, resets int64, ttl time.Duration) (*wire.ExecutionResult, *wire.Execution, int64, int64) {
	t.Helper()
	r := &resetting{needle: []byte(`"lease_id"`), resets: resets}
	env := servertest.StartOn(t, listenWrapped(t, func(c net.Conn) net.Conn { return &resetConn{Conn: c, l: r} }))
	w := newWorker(t, env, func(c *worker.Config) {
		c.Concurrency = 1
		c.LeaseTTL = ttl
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
	res := waitResult(t, env, id)
	ex, err := env.Client.GetExecution(ctxT(t), id)
	if err != nil {
		t.Fatal(err)
	}
	return res, ex, runs.Load(), r.done.Load()
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
	r, ex, runs, lost := lostClaimAnswers(t, 1, time.Second)
	if lost == 0 {
		t.Fatal("no answer was lost: the test did not test anything")
	}
	if r.State != "completed" || runs != 1 {
		t.Fatalf("result %+v after %d handler runs, want completed after one", r, runs)
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
	r, _, runs, lost := lostClaimAnswers(t, 4, 500*time.Millisecond)
	if lost < 4 {
		t.Fatalf("%d answers lost, want 4: the test did not test what it says", lost)
	}
	if r.State != "completed" || runs != 1 {
		t.Errorf("result %+v after %d handler runs; want completed after one: lost claim answers were charged as reclaims", r, runs)
	}
}
