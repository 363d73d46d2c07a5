package worker_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flowfabric/ff/runtime/server"
	"github.com/flowfabric/ff/runtime/server/servertest"
	"github.com/flowfabric/ff/runtime/wire"
	"github.com/flowfabric/ff/runtime/worker"
)

// TestSingleOversizeReportNotRetried: a completion that alone
// exceeds the server's body limit cannot be split further: the 413 is
// final. The worker sends it once (no loop while the lease lasts), calls
// OnReported once with the refusal, and frees the slot: with one slot, a
// task created afterwards still runs and completes.
func TestSingleOversizeReportNotRetried(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t, func(c *server.Config) { c.BodyLimit = 64 << 10 })
	sizes := &reportSizes{base: http.DefaultTransport}
	var calls, failed atomic.Int64
	w := newWorker(t, env, func(c *worker.Config) {
		c.Concurrency, c.LeaseTTL = 1, 3*time.Second
		c.HTTPClient = &http.Client{Transport: sizes}
		c.OnReported = func(_ string, err error) {
			calls.Add(1)
			if err != nil {
				failed.Add(1)
			}
		}
	})
	huge := json.RawMessage(`"` + strings.Repeat("x", 70_000) + `"`) // over 64 KiB, under OutputMaxBytes
	_ = w.Handle("huge", func(context.Context, *worker.Task) (json.RawMessage, error) { return huge, nil })
	_ = w.Handle("small", func(context.Context, *worker.Task) (json.RawMessage, error) { return json.RawMessage(`1`), nil })
	run(t, w)
	create(t, env, wire.CreateExecution{Kind: "huge"})
	for deadline := time.Now().Add(5 * time.Second); calls.Load() == 0 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if calls.Load() != 1 || failed.Load() != 1 {
		t.Fatalf("OnReported called %d times (%d errors), want once with the refusal", calls.Load(), failed.Load())
	}
	small := create(t, env, wire.CreateExecution{Kind: "small"})
	if r := waitResult(t, env, small); r.State != "completed" {
		t.Fatalf("the next task ended %s: the slot of the refused report was not freed", r.State)
	}
	if _, n := sizes.stats("/v1/worker/complete"); n > 3 {
		// The refused one, the small one, and at most one re-run after the lease expired.
		t.Errorf("%d complete requests: the oversize completion was sent again and again", n)
	}
	if got := sizes.tooLarge.Load(); got < 1 {
		t.Errorf("no 413: the test did not exercise the oversize report")
	}
}
