package worker_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flowfabric/ff/runtime/server/servertest"
	"github.com/flowfabric/ff/runtime/wire"
	"github.com/flowfabric/ff/runtime/worker"
)

// slowRenewals passes every request on, and holds the answers to renew
// requests as a loaded server or a slow link would: the n-th renewal's
// answer (n from 1) reaches the worker delay(n) after the server made it,
// or the request is refused 429 with a Retry-After of an hour when
// refuse(n). The server applies every renewal it gets, answered in time
// or not. held, when set, is called with n once the answer was held, just
// before the worker gets it. ok counts the renewals granted that reached
// the worker, and renewed is poked at each.
type slowRenewals struct {
	base    http.RoundTripper
	delay   func(n int64) time.Duration
	refuse  func(n int64) bool
	held    func(n int64)
	n       atomic.Int64
	ok      atomic.Int64
	renewed chan struct{}
}

func (s *slowRenewals) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.URL.Path != "/v1/worker/renew" {
		return s.base.RoundTrip(r)
	}
	n := s.n.Add(1)
	if s.refuse != nil && s.refuse(n) {
		return answer(r, http.StatusTooManyRequests,
			`{"error":{"code":"rate_limited","message":"slow down","details":{"retry_after_ms":3600000}}}`, "Retry-After", "3600"), nil
	}
	resp, err := s.base.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	body, err := readAnswer(resp)
	if err != nil {
		return nil, err
	}
	select {
	case <-time.After(s.delay(n)):
	case <-r.Context().Done():
		return nil, r.Context().Err()
	}
	if s.held != nil {
		s.held(n)
	}
	if resp.StatusCode == http.StatusOK && bytes.Contains(body, []byte(`"ok":true`)) {
		s.ok.Add(1)
		select {
		case s.renewed <- struct{}{}:
		default:
		}
	}
	return resp, nil
}

// holdUntilRenewed returns a handler that runs until want renewals
// reached the worker granted, or its context ends; its first run sends
// to ended nil or its context's cause.
func holdUntilRenewed(tr *slowRenewals, want int64, ended chan<- error) worker.Handler {
	var first atomic.Bool
	return func(ctx context.Context, _ *worker.Task) (json.RawMessage, error) {
		for tr.ok.Load() < want {
			select {
			case <-tr.renewed:
			case <-ctx.Done():
				if first.CompareAndSwap(false, true) {
					ended <- context.Cause(ctx)
				}
				return nil, ctx.Err()
			}
		}
		if first.CompareAndSwap(false, true) {
			ended <- nil
		}
		return json.RawMessage(`"done"`), nil
	}
}

// checkFirstAttempt fails t unless the handler's first run kept its lease
// (ended nil) and id completed in its first attempt.
func checkFirstAttempt(t *testing.T, env *servertest.Env, id string, ended <-chan error, why string) {
	t.Helper()
	select {
	case err := <-ended:
		if err != nil {
			t.Fatalf("the handler's context ended (%v): %s", err, why)
		}
	case <-ctxT(t).Done():
		t.Fatal("the handler never returned")
	}
	r := waitResult(t, env, id)
	ex, err := env.Client.GetExecution(ctxT(t), id)
	if err != nil {
		t.Fatal(err)
	}
	if r.State != "completed" || ex.Attempt != 1 {
		t.Errorf("%s after %d attempts, want completed in the first", r.State, ex.Attempt)
	}
}

// TestSlowRenewalsKeepTheLease: every renewal's answer reaches the
// worker 1.2 s after the server renewed the lease (4 s), longer than the
// renew interval (500 ms). The worker waits for the answer as long as
// the lease may still be saved (until it runs out, less a margin), not
// just a renew interval: the renewals go through, and the handler, which
// runs until three of them did (past the lease's first 4 s), keeps its
// lease. With each renewal cut after the interval, none reached the
// worker, which took the lease for lost once it ran out by its count,
// while the server, which had applied every renewal, still held it.
func TestSlowRenewalsKeepTheLease(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	tr := &slowRenewals{base: http.DefaultTransport, renewed: make(chan struct{}, 1),
		delay: func(int64) time.Duration { return 1200 * time.Millisecond }}
	w := newWorker(t, env, func(c *worker.Config) {
		c.Concurrency, c.LeaseTTL, c.RenewInterval = 1, 4*time.Second, 500*time.Millisecond
		c.NoLeaseWatch = true // the renewals alone keep and judge the lease
		c.HTTPClient = &http.Client{Transport: tr}
	})
	ended := make(chan error, 1)
	if err := w.Handle("job", holdUntilRenewed(tr, 3, ended)); err != nil {
		t.Fatal(err)
	}
	id := create(t, env, wire.CreateExecution{Kind: "job"})
	run(t, w)
	checkFirstAttempt(t, env, id, ended, "a renewal was cut before its answer came, though the lease could still be saved (the server held it)")
}

// TestRenewalExpiryCountedFromTheRequest: a renewal's answer reaches the
// worker 2.5 s after the server renewed the lease (8 s), and the next
// renewal is refused 429 with a Retry-After (an hour) longer than the
// lease has left, so the worker sends its last chance half a renew
// interval (3 s) before the lease runs out by its count. The count
// starts when the renewal was sent, not when its answer came (2.5 s
// later, past the server's expiry less 1.5 s): the last chance reaches
// the server while the lease holds, and the handler, which runs until it
// is granted, keeps its lease.
func TestRenewalExpiryCountedFromTheRequest(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	tr := &slowRenewals{base: http.DefaultTransport, renewed: make(chan struct{}, 1),
		delay: func(n int64) time.Duration {
			if n == 1 {
				return 2500 * time.Millisecond
			}
			return 0
		},
		refuse: func(n int64) bool { return n == 2 },
	}
	w := newWorker(t, env, func(c *worker.Config) {
		c.Concurrency, c.LeaseTTL, c.RenewInterval = 1, 8*time.Second, 3*time.Second
		c.NoLeaseWatch = true // the renewals alone keep and judge the lease
		c.HTTPClient = &http.Client{Transport: tr}
	})
	ended := make(chan error, 1)
	if err := w.Handle("job", holdUntilRenewed(tr, 2, ended)); err != nil {
		t.Fatal(err)
	}
	id := create(t, env, wire.CreateExecution{Kind: "job"})
	run(t, w)
	checkFirstAttempt(t, env, id, ended, "the renewal's expiry was counted from its late answer, and the last chance came after the lease ran out")
	if n := tr.n.Load(); n < 3 {
		t.Errorf("%d renewals sent; want a last chance after the refused one", n)
	}
}

// TestSlowRenewalKeepsTheWorkerListed: the first renewal's answer reaches
// the worker 5 s after the server renewed the lease (8 s), which the
// worker waits for (the lease could still be saved), while its heartbeat
// lists it for 3 renew intervals (3 s). Just before that answer reaches
// the worker, the worker is still listed (GET /v1/workers, what wait
// hints and capability routing read too): its heartbeats go on their own
// tick. With the heartbeat sent after each round's renewals, none went
// out during the 5 s, and the live worker dropped off the list.
func TestSlowRenewalKeepsTheWorkerListed(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	listed := make(chan error, 1)
	tr := &slowRenewals{base: http.DefaultTransport, renewed: make(chan struct{}, 1),
		delay: func(n int64) time.Duration {
			if n == 1 {
				return 5 * time.Second
			}
			return 0
		},
		held: func(n int64) {
			if n != 1 {
				return
			}
			l, err := env.Client.Workers(ctxT(t), "")
			if err == nil && !slices.ContainsFunc(l.Workers, func(w wire.Worker) bool { return w.WorkerID == "test-worker" }) {
				err = fmt.Errorf("not listed among %d workers", len(l.Workers))
			}
			listed <- err
		},
	}
	w := newWorker(t, env, func(c *worker.Config) {
		c.Concurrency, c.LeaseTTL, c.RenewInterval = 1, 8*time.Second, time.Second
		c.NoLeaseWatch = true // the renewals alone keep and judge the lease
		c.HTTPClient = &http.Client{Transport: tr}
	})
	ended := make(chan error, 1)
	if err := w.Handle("job", holdUntilRenewed(tr, 1, ended)); err != nil {
		t.Fatal(err)
	}
	id := create(t, env, wire.CreateExecution{Kind: "job"})
	run(t, w)
	checkFirstAttempt(t, env, id, ended, "the slow renewal was cut though the lease could still be saved")
	select {
	case err := <-listed:
		if err != nil {
			t.Errorf("the worker, waiting for a slow renewal: %v", err)
		}
	default:
		t.Fatal("no renewal answer was held: the test did not test anything")
	}
}
