package worker_test

import (
	"encoding/json"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flowfabric/ff/runtime/server/servertest"
	"github.com/flowfabric/ff/runtime/worker"
)

// TestReportWaitsForRunningHandlers: a report, once a request slot is
// free, waits (ReportLinger) for the handlers still running, so that the
// outcomes of handlers that finish together go in one complete request
// instead of the first alone and the rest in the next. The linger is long
// here, so that the batch does not depend on the machine's speed: the
// handlers all return once the gate opens.
func TestReportWaitsForRunningHandlers(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	const n = 8
	rc, sizes := &reportCounter{}, &reportSizes{base: http.DefaultTransport}
	w := newWorker(t, env, func(c *worker.Config) {
		c.Concurrency, c.LeaseTTL = n, 30*time.Second
		c.ReportLinger = time.Minute
		c.OnReported = rc.hook
		c.HTTPClient = &http.Client{Transport: sizes}
	})
	var runs atomic.Int64
	out := json.RawMessage(`"done"`)
	ids := gatedTasks(t, env, w, "together", n, &runs, func() (json.RawMessage, error) { return out, nil })
	wantAllCompleted(t, env, rc, ids, &runs, out)
	if _, requests := sizes.stats("/v1/worker/complete"); requests != 1 {
		t.Errorf("%d complete requests for %d handlers finishing together, want 1", requests, n)
	}
}
