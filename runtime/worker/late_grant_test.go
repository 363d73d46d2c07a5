package worker_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flowfabric/ff/runtime/server/servertest"
	"github.com/flowfabric/ff/runtime/wire"
	"github.com/flowfabric/ff/runtime/worker"
)

// lateGrant holds the answer to the first claim that granted a task until
// the worker's renew loop has run its first regular round (endRound), as
// a slow link, or the decoding of a grant of megabytes on a loaded
// machine, would: the worker sees the lease a renew interval after the
// server granted it. It tells when the server renewed a lease.
type lateGrant struct {
	base      http.RoundTripper
	round     chan struct{} // closed at the end of the first regular renew round
	roundOnce sync.Once
	held      atomic.Bool
	renewed   chan struct{} // closed when a renewal was granted
	renewOnce sync.Once
}

// endRound is the worker's renew round hook (worker.OnRenewRound).
func (l *lateGrant) endRound() { l.roundOnce.Do(func() { close(l.round) }) }

func (l *lateGrant) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := l.base.RoundTrip(r)
	if err != nil || (r.URL.Path != "/v1/worker/claim" && r.URL.Path != "/v1/worker/renew") {
		return resp, err
	}
	body, err := readAnswer(resp)
	if err != nil {
		return nil, err
	}
	switch {
	case r.URL.Path == "/v1/worker/renew" && bytes.Contains(body, []byte(`"ok":true`)):
		l.renewOnce.Do(func() { close(l.renewed) })
	case r.URL.Path == "/v1/worker/claim" && bytes.Contains(body, []byte(`"lease_id"`)) && l.held.CompareAndSwap(false, true):
		select {
		case <-l.round:
		case <-r.Context().Done():
			return nil, r.Context().Err()
		}
	}
	return resp, nil
}

// TestLateGrantRenewedAtOnce: the answer granting a task reaches the
// worker a renew interval (3 s) after the server granted the lease (4 s).
// The worker renews it as soon as it starts the task, not at its next
// renew round, 3 s on, by which the lease had expired: the handler, which
// runs until the lease was renewed, keeps it, and the task completes in
// its first attempt. (A CI run under -race lost a 5 s lease of a grant of
// several megabytes, which took seconds to encode and decode: a lease
// that reaches the worker with little time left is kept so; one that
// reaches it expired is not.)
func TestLateGrantRenewedAtOnce(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	tr := &lateGrant{base: http.DefaultTransport, round: make(chan struct{}), renewed: make(chan struct{})}
	w := newWorker(t, env, func(c *worker.Config) {
		c.Concurrency, c.LeaseTTL, c.RenewInterval = 1, 4*time.Second, 3*time.Second
		c.HTTPClient = &http.Client{Transport: tr}
	})
	worker.OnRenewRound(w, tr.endRound)
	lost := make(chan error, 1)
	if err := w.Handle("job", func(ctx context.Context, _ *worker.Task) (json.RawMessage, error) {
		select {
		case <-tr.renewed:
			return json.RawMessage(`"done"`), nil
		case <-ctx.Done():
			lost <- context.Cause(ctx)
			return nil, ctx.Err()
		}
	}); err != nil {
		t.Fatal(err)
	}
	id := create(t, env, wire.CreateExecution{Kind: "job"})
	run(t, w)
	r := waitResult(t, env, id)
	if !tr.held.Load() {
		t.Fatal("no claim answer was held: the test did not test anything")
	}
	select {
	case err := <-lost:
		t.Errorf("the handler's context ended (%v) before its lease was renewed: the late grant waited for the next renew round", err)
	default:
	}
	ex, err := env.Client.GetExecution(ctxT(t), id)
	if err != nil {
		t.Fatal(err)
	}
	if r.State != "completed" || ex.Attempt != 1 {
		t.Errorf("%s after %d attempts, want completed in the first", r.State, ex.Attempt)
	}
}
