package worker_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/flowfabric/ff/compiler/plan"
	"github.com/flowfabric/ff/runtime/server/servertest"
	"github.com/flowfabric/ff/runtime/wire"
	"github.com/flowfabric/ff/runtime/worker"
)

// TestFailAnswerLostThenRetried: the answer to a retryable failure is
// lost; the retry it scheduled (no backoff) is claimed at once, here by
// the worker's other slot, under a new lease, and may even have completed
// when the worker sends the failure again. The server recognises the
// repeat by the attempt of its lease (not only the execution's last), so
// OnReported gets no error for a failure that was recorded. A repeat used
// to be recognised only while the failed lease was still the execution's
// last, and refused as a stale lease after that.
func TestFailAnswerLostThenRetried(t *testing.T) {
	t.Parallel()
	tr := &losingAnswer{base: http.DefaultTransport, path: "/v1/worker/fail"}
	env := servertest.Start(t)
	var mu sync.Mutex
	reported := map[string][]error{}
	all := make(chan struct{}, 4)
	w := newWorker(t, env, func(c *worker.Config) {
		c.Concurrency = 2
		c.LeaseTTL = 3 * time.Second
		c.HTTPClient = &http.Client{Transport: tr}
		c.OnReported = func(id string, err error) {
			mu.Lock()
			reported[id] = append(reported[id], err)
			mu.Unlock()
			all <- struct{}{}
		}
	})
	if err := w.Handle("flaky", func(_ context.Context, task *worker.Task) (json.RawMessage, error) {
		if task.Attempt() == 1 {
			return nil, errors.New("first attempt fails")
		}
		return json.RawMessage(`"ok"`), nil
	}); err != nil {
		t.Fatal(err)
	}
	run(t, w)
	id := create(t, env, wire.CreateExecution{Kind: "flaky",
		Retry: &plan.Retry{Attempts: 2, Backoff: plan.BackoffFixed}})
	if r := waitResult(t, env, id); r.State != "completed" {
		t.Fatalf("result %+v", r)
	}
	if !tr.lost.Load() {
		t.Fatal("no answer was lost: the test did not test anything")
	}
	for range 2 {
		select {
		case <-all:
		case <-ctxT(t).Done():
			t.Fatal("OnReported was not called for both attempts")
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for i, err := range reported[id] {
		if err != nil {
			t.Errorf("OnReported #%d = %v; the failure it reports was recorded (its answer was lost, the repeat refused)", i+1, err)
		}
	}
}
