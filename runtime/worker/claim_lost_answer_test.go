package worker_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
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

// proxyTimeout passes the first claim whose answer holds a grant on to
// the server, then answers it status in the server's place, as a proxy in
// front of ffrun does that timed the request out (408, 504) or lost
// ffrun's answer (502): the server granted, the worker cannot know.
type proxyTimeout struct {
	base   http.RoundTripper
	status int
	done   atomic.Bool
}

func (p *proxyTimeout) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := p.base.RoundTrip(r)
	if err != nil || r.URL.Path != "/v1/worker/claim" || p.done.Load() {
		return resp, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	if !bytes.Contains(body, []byte(`"lease_id"`)) || !p.done.CompareAndSwap(false, true) {
		resp.Body = io.NopCloser(bytes.NewReader(body))
		return resp, nil
	}
	return answer(r, p.status, fmt.Sprintf("<html><body><h1>%d %s</h1></body></html>", p.status, http.StatusText(p.status))), nil
}

// TestClaimAnswerReplacedByAProxy: a proxy answers a claim the server
// granted with a 408, 502 or 504 of its own. Each leaves the claim's
// outcome unknown, as a lost answer does (TestClaimAnswerLost): the next
// claim asks for the grants of the last one again (resume), and the task
// runs at once in its first attempt rather than after its lease expired,
// as a reclaim charged to its allowance.
func TestClaimAnswerReplacedByAProxy(t *testing.T) {
	t.Parallel()
	for _, status := range []int{http.StatusRequestTimeout, http.StatusBadGateway, http.StatusGatewayTimeout} {
		t.Run(strconv.Itoa(status), func(t *testing.T) {
			t.Parallel()
			env := servertest.Start(t)
			tr := &proxyTimeout{base: http.DefaultTransport, status: status}
			w := newWorker(t, env, func(c *worker.Config) {
				c.Concurrency, c.LeaseTTL = 1, time.Second
				c.HTTPClient = &http.Client{Transport: tr}
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
			if !tr.done.Load() {
				t.Fatal("no claim answer was replaced: the test did not test anything")
			}
			ex, err := env.Client.GetExecution(ctxT(t), id)
			if err != nil {
				t.Fatal(err)
			}
			if r.State != "completed" || runs.Load() != 1 || ex.Attempt != 1 {
				t.Errorf("%s after %d handler runs and %d attempts, want completed after one of each: "+
					"the grant the proxy's %d hid was not asked for again", r.State, runs.Load(), ex.Attempt, status)
			}
		})
	}
}
