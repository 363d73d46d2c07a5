package worker_test

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flowfabric/ff/runtime/server/servertest"
	"github.com/flowfabric/ff/runtime/wire"
	"github.com/flowfabric/ff/runtime/worker"
)

// throttle slows the connections of a listener (listenWrapped) to at most rate
// bytes a second from the client to the server (a worker on a slow
// uplink; the answers are not slowed).
type throttle struct {
	rate int
	fast atomic.Bool // the test is over: no more slowing down
}

func (l *throttle) conn(c net.Conn) net.Conn { return &throttledConn{Conn: c, l: l} }

type throttledConn struct {
	net.Conn
	l *throttle
}

func (c *throttledConn) Read(p []byte) (int, error) {
	if len(p) > 16<<10 {
		p = p[:16<<10]
	}
	n, err := c.Conn.Read(p)
	if !c.l.fast.Load() {
		time.Sleep(time.Duration(n) * time.Second / time.Duration(c.l.rate))
	}
	return n, err
}

// completeOutcomes passes requests on and tells how each complete ended:
// nil, or the transport's error.
type completeOutcomes struct {
	base  http.RoundTripper
	ended chan error
}

func (o *completeOutcomes) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := o.base.RoundTrip(r)
	if r.URL.Path == "/v1/worker/complete" {
		select {
		case o.ended <- err:
		default:
		}
	}
	return resp, err
}

// TestBatchedReportOverASlowUplink: six handlers finish together with
// outputs of 1 MiB (OutputMaxBytes) on a worker whose uplink carries
// 1 MiB/s. The worker batches what is queued when it takes a report, so
// after a first report alone the next request carries the other five
// outputs, which take 5 s to arrive: past the fixed part of a report's
// bound (2 s here instead of 15 s, so that the test is quick), which each
// output alone fits. The bound grows with the request's size (at
// reportRateMin, 128 KiB/s), so every complete request ends without
// error; with a fixed bound the batch timed out, was sent again whole, and
// again, until the leases ran out and the tasks ran again.
func TestBatchedReportOverASlowUplink(t *testing.T) {
	t.Parallel()
	ln := &throttle{rate: 1 << 20}
	env := servertest.StartOn(t, listenWrapped(t, ln.conn))
	tr := &completeOutcomes{base: http.DefaultTransport, ended: make(chan error, 16)}
	const n = 6
	w := newWorker(t, env, func(c *worker.Config) {
		c.Concurrency = n
		c.LeaseTTL = 40 * time.Second
		c.HTTPClient = &http.Client{Transport: tr}
	})
	worker.SetRequestSlack(w, 2*time.Second)
	var started sync.WaitGroup
	started.Add(n)
	if err := w.Handle("big", func(_ context.Context, task *worker.Task) (json.RawMessage, error) {
		started.Done()
		started.Wait() // all finish together
		return json.RawMessage(`"` + task.ID() + strings.Repeat("x", worker.OutputMaxBytes-2-len(task.ID())) + `"`), nil
	}); err != nil {
		t.Fatal(err)
	}
	ids := make([]string, n)
	for i := range n {
		ids[i] = create(t, env, wire.CreateExecution{Kind: "big"})
	}
	run(t, w)
	t.Cleanup(func() { ln.fast.Store(true) }) // before the worker and ffrun stop
	for sent := 0; sent < n; {
		select {
		case err := <-tr.ended:
			if err != nil {
				t.Fatalf("a complete request failed: %v; each report alone fits the fixed bound, their batch needs its time", err)
			}
		case <-time.After(60 * time.Second):
			t.Fatal("no complete ended")
		}
		sent = 0
		for _, id := range ids {
			if r, err := env.Client.ExecutionResult(ctxT(t), id); err == nil && r.State == "completed" {
				sent++
			}
		}
	}
}
