package worker_test

import (
	"context"
	"encoding/json"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flowfabric/ff/runtime/server/servertest"
	"github.com/flowfabric/ff/runtime/wire"
	"github.com/flowfabric/ff/runtime/worker"
)

// completesRefused answers every complete 503 until the time in until
// (unix nanoseconds), and passes the other requests (renewals) on.
type completesRefused struct {
	base  http.RoundTripper
	until atomic.Int64
}

func (c *completesRefused) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.URL.Path == "/v1/worker/complete" && time.Now().UnixNano() < c.until.Load() {
		return answer(r, http.StatusServiceUnavailable, `{"error":{"code":"unavailable","message":"try later"}}`), nil
	}
	return c.base.RoundTrip(r)
}

// TestReportRetriedWhileRenewed: a report refused with 503 for longer
// than its lease (1 s) had left when it was first sent is sent again for
// as long as the renewals, which go on meanwhile, keep the lease: the
// bound of the retries is read from the lease at each retry, not frozen
// when the report started, so the task is completed once, rather than
// its report dropped while its lease was good and the task run again.
func TestReportRetriedWhileRenewed(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	tr := &completesRefused{base: http.DefaultTransport}
	reported := make(chan error, 4)
	w := newWorker(t, env, func(c *worker.Config) {
		c.Concurrency = 1
		c.LeaseTTL = time.Second
		c.HTTPClient = &http.Client{Transport: tr}
		c.OnReported = func(_ string, err error) { reported <- err }
	})
	var runs atomic.Int64
	if err := w.Handle("job", func(context.Context, *worker.Task) (json.RawMessage, error) {
		runs.Add(1)
		tr.until.Store(time.Now().Add(2500 * time.Millisecond).UnixNano())
		return json.RawMessage(`"done"`), nil
	}); err != nil {
		t.Fatal(err)
	}
	id := create(t, env, wire.CreateExecution{Kind: "job"})
	run(t, w)
	select {
	case err := <-reported:
		if err != nil {
			t.Errorf("OnReported(%s) = %v; want the report sent until the server took it (the lease was renewed)", id, err)
		}
	case <-ctxT(t).Done():
		t.Fatal("the outcome was never reported")
	}
	if r := waitResult(t, env, id); r.State != "completed" || runs.Load() != 1 {
		t.Errorf("result %+v after %d handler runs; want completed after one", r, runs.Load())
	}
}
