package worker_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flowfabric/ff/runtime/server"
	"github.com/flowfabric/ff/runtime/server/servertest"
	"github.com/flowfabric/ff/runtime/wire"
	"github.com/flowfabric/ff/runtime/worker"
)

// reportSizes records the body size of the worker's complete and fail
// requests and counts the answers the server refused as too large.
type reportSizes struct {
	base     http.RoundTripper
	mu       sync.Mutex
	largest  map[string]int // by path
	requests map[string]int
	tooLarge atomic.Int64
}

func (s *reportSizes) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.URL.Path == "/v1/worker/complete" || r.URL.Path == "/v1/worker/fail" {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return nil, err
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		s.mu.Lock()
		if s.largest == nil {
			s.largest, s.requests = map[string]int{}, map[string]int{}
		}
		s.largest[r.URL.Path] = max(s.largest[r.URL.Path], len(body))
		s.requests[r.URL.Path]++
		s.mu.Unlock()
	}
	res, err := s.base.RoundTrip(r)
	if err == nil && res.StatusCode == http.StatusRequestEntityTooLarge {
		s.tooLarge.Add(1)
	}
	return res, err
}

func (s *reportSizes) stats(path string) (largest, requests int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.largest[path], s.requests[path]
}

// reportCounter counts OnReported calls and keeps the first error.
type reportCounter struct {
	reported, failed atomic.Int64
	first            atomic.Value
}

func (c *reportCounter) hook(_ string, err error) {
	if err != nil {
		c.first.CompareAndSwap(nil, err.Error())
		c.failed.Add(1)
	}
	c.reported.Add(1)
}

// wait waits up to 60 s for n reports. The bound is generous on purpose:
// 40 outputs of 1 MiB through the race detector take 10 to 15 s to report
// on a loaded 2-core machine (steady progress, a batch every half second or
// so), more beside other test binaries; a lost report never arrives, so a
// longer wait only delays a failure, it does not hide one.
func (c *reportCounter) wait(n int64) {
	for deadline := time.Now().Add(60 * time.Second); c.reported.Load() < n && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
}

// gatedTasks registers kind on w with a handler that waits until n calls
// arrived, so that all finish together, then returns out; it creates the
// n executions, runs w and opens the gate. It returns the execution ids and
// counts the handler's calls in runs.
func gatedTasks(t *testing.T, env *servertest.Env, w *worker.Worker, kind string, n int, runs *atomic.Int64,
	out func() (json.RawMessage, error)) []string {
	t.Helper()
	var arrived sync.WaitGroup
	arrived.Add(n)
	gate := make(chan struct{})
	if err := w.Handle(kind, func(context.Context, *worker.Task) (json.RawMessage, error) {
		if runs.Add(1) <= int64(n) {
			arrived.Done()
		}
		<-gate
		return out()
	}); err != nil {
		t.Fatal(err)
	}
	reqs := make([]wire.CreateExecution, n)
	for i := range reqs {
		reqs[i] = wire.CreateExecution{Kind: kind}
	}
	res, err := env.Client.CreateExecutions(ctxT(t), reqs)
	if err != nil {
		t.Fatal(err)
	}
	run(t, w)
	arrived.Wait()
	close(gate)
	ids := make([]string, n)
	for i, r := range res {
		ids[i] = r.ID
	}
	return ids
}

// TestLargeOutputsFinishingTogetherAllReported: handlers may return
// outputs of up to worker.OutputMaxBytes (1 MiB) each, and the worker
// coalesces the outcomes of handlers that finish together. The server
// takes batched reports of up to 16 MiB (api.BodyLimitBatch): the worker
// must send 40 such outputs in several requests of at most 8 MiB, none
// refused as too large, and every completion is recorded the first time.
// reportingWorker returns a worker of n slots whose reports go through
// transport and are counted by rc.
func reportingWorker(t *testing.T, env *servertest.Env, n int, rc *reportCounter, transport http.RoundTripper) *worker.Worker {
	t.Helper()
	return newWorker(t, env, func(c *worker.Config) {
		c.Concurrency, c.LeaseTTL = n, 5*time.Second
		c.OnReported = rc.hook
		c.HTTPClient = &http.Client{Transport: transport}
	})
}

// wantAllCompleted waits until every task of ids was reported and fails t
// unless each was recorded, completed with result out, and ran once.
func wantAllCompleted(t *testing.T, env *servertest.Env, rc *reportCounter, ids []string, runs *atomic.Int64, out json.RawMessage) {
	t.Helper()
	n := int64(len(ids))
	rc.wait(n)
	if f := rc.failed.Load(); f > 0 || rc.reported.Load() < n {
		t.Fatalf("%d of %d completions were refused (first: %v), %d answered", f, n, rc.first.Load(), rc.reported.Load())
	}
	for _, id := range ids {
		if got := waitResult(t, env, id); got.State != "completed" || string(got.Result) != string(out) {
			t.Fatalf("%s ended %s (%s)", id, got.State, got.Error)
		}
	}
	if r := runs.Load(); r != n {
		t.Errorf("%d handler calls for %d tasks: a completion was lost", r, n)
	}
}

func TestLargeOutputsFinishingTogetherAllReported(t *testing.T) {
	// Not parallel: tens of MB through the race detector slow the
	// renewals of the tests that run beside it past their short leases.
	env := servertest.Start(t)
	const n = 40
	rc, sizes := &reportCounter{}, &reportSizes{base: http.DefaultTransport}
	w := reportingWorker(t, env, n, rc, sizes)
	// A JSON string just under the 1 MiB limit.
	big := json.RawMessage(`"` + strings.Repeat("x", 1_000_000) + `"`)
	var runs atomic.Int64
	ids := gatedTasks(t, env, w, "big", n, &runs, func() (json.RawMessage, error) { return big, nil })
	wantAllCompleted(t, env, rc, ids, &runs, big)
	if got := sizes.tooLarge.Load(); got != 0 {
		t.Errorf("the server refused %d reports as too large", got)
	}
	largest, requests := sizes.stats("/v1/worker/complete")
	t.Logf("%d complete requests, the largest %d bytes", requests, largest)
	if largest > 8<<20 || requests < 5 {
		t.Errorf("%d complete requests, the largest %d bytes: want at least 5 of at most 8 MiB", requests, largest)
	}
}

// TestLongErrorsFinishingTogetherAllReported: the same for failures, with
// error texts of 1 MB (a dump, a response body). The server keeps 4 KiB of
// a failure message; the worker sends no more than that, so the 20
// failures go in small requests, and each is recorded the first time.
func TestLongErrorsFinishingTogetherAllReported(t *testing.T) {
	// Not parallel: tens of MB through the race detector slow the
	// renewals of the tests that run beside it past their short leases.
	env := servertest.Start(t)
	const n = 20
	rc, sizes := &reportCounter{}, &reportSizes{base: http.DefaultTransport}
	w := reportingWorker(t, env, n, rc, sizes)
	long := errors.New(strings.Repeat("e", 1_000_000))
	var runs atomic.Int64
	ids := gatedTasks(t, env, w, "long", n, &runs, func() (json.RawMessage, error) { return nil, worker.Permanent(long) })
	rc.wait(n)
	if f := rc.failed.Load(); f > 0 || rc.reported.Load() < n {
		t.Fatalf("%d of %d failures were refused (first: %v), %d answered", f, n, rc.first.Load(), rc.reported.Load())
	}
	for _, id := range ids {
		if got := waitResult(t, env, id); got.State != "failed" || runs.Load() != n {
			t.Fatalf("%s ended %s after %d runs of %d tasks", id, got.State, runs.Load(), n)
		}
		ex, err := env.Client.GetExecution(ctxT(t), id)
		if err != nil {
			t.Fatal(err)
		}
		if want := long.Error()[:4096]; ex.LastError != want {
			t.Fatalf("%s: last error of %d bytes, want the first 4096 bytes of the handler's", id, len(ex.LastError))
		}
	}
	if largest, _ := sizes.stats("/v1/worker/fail"); largest > n*(4096+256) {
		t.Errorf("a fail request of %d bytes for %d failures: messages are not clipped to 4 KiB", largest, n)
	}
}

// slowReports holds the first two complete requests (as many as a worker
// sends at once) for a while, so that the reports of the handlers that
// finish meanwhile queue up and go in one request.
type slowReports struct {
	base      http.RoundTripper
	completes atomic.Int64
}

func (s *slowReports) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.URL.Path == "/v1/worker/complete" && s.completes.Add(1) <= 2 {
		time.Sleep(300 * time.Millisecond)
	}
	return s.base.RoundTrip(r)
}

// TestReportTooLargeIsSplit: a server with a smaller body limit refuses a
// batched report as too large (413); the worker sends it again in halves,
// down to single items, and every completion is recorded the first time.
func TestReportTooLargeIsSplit(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t, func(c *server.Config) { c.BodyLimit = 64 << 10 })
	const n = 8
	rc, sizes := &reportCounter{}, &reportSizes{base: http.DefaultTransport}
	w := reportingWorker(t, env, n, rc, &slowReports{base: sizes})
	out := json.RawMessage(`"` + strings.Repeat("x", 40_000) + `"`) // one fits in 64 KiB, two do not
	var runs atomic.Int64
	ids := gatedTasks(t, env, w, "mid", n, &runs, func() (json.RawMessage, error) { return out, nil })
	wantAllCompleted(t, env, rc, ids, &runs, out)
	if sizes.tooLarge.Load() == 0 {
		t.Error("no report was refused as too large: the test did not exercise the split")
	}
}

// itemErrors answers the first complete request itself, as the server
// does when the store call of one partition fails: 200 with an error of
// code for every item, nothing recorded. Later requests go through.
type itemErrors struct {
	base      http.RoundTripper
	code      string
	completes atomic.Int64
}

func (e *itemErrors) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.URL.Path != "/v1/worker/complete" || e.completes.Add(1) > 1 {
		return e.base.RoundTrip(r)
	}
	var req wire.CompleteRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		return nil, err
	}
	var out wire.LeaseResults
	for _, c := range req.Completions {
		out.Results = append(out.Results, wire.LeaseResult{ExecutionID: c.ExecutionID,
			Error: &wire.ErrorBody{Code: e.code, Message: "store: finish: connection reset"}})
	}
	body, err := json.Marshal(out)
	if err != nil {
		return nil, err
	}
	return &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {"application/json"}},
		Body: io.NopCloser(bytes.NewReader(body)), Request: r}, nil
}

// TestItemErrorsOfReportsRetried: a complete whose items the server could
// not record for a passing reason (codes unavailable and internal) is sent
// again, and the task completes once; a stale lease stays final: the
// report is not sent again.
func TestItemErrorsOfReportsRetried(t *testing.T) {
	t.Parallel()
	tests := []struct {
		code  string
		retry bool
	}{
		{wire.CodeInternal, true},
		{wire.CodeUnavailable, true},
		{wire.CodeStaleLease, false},
	}
	for _, tc := range tests {
		t.Run(tc.code, func(t *testing.T) {
			t.Parallel()
			env := servertest.Start(t)
			tr := &itemErrors{base: http.DefaultTransport, code: tc.code}
			reported := make(chan error, 4)
			w := newWorker(t, env, func(c *worker.Config) {
				c.LeaseTTL = 3 * time.Second
				c.HTTPClient = &http.Client{Transport: tr}
				c.OnReported = func(_ string, err error) { reported <- err }
			})
			var runs atomic.Int64
			_ = w.Handle("job", func(context.Context, *worker.Task) (json.RawMessage, error) {
				runs.Add(1)
				return json.RawMessage(`"done"`), nil
			})
			run(t, w)
			id := create(t, env, wire.CreateExecution{Kind: "job"})
			var err error
			select {
			case err = <-reported:
			case <-time.After(5 * time.Second):
				t.Fatal("the completion was never reported")
			}
			if !tc.retry {
				if err == nil || !strings.Contains(err.Error(), tc.code) {
					t.Fatalf("reported %v, want the %s rejection", err, tc.code)
				}
				time.Sleep(300 * time.Millisecond) // a retry would go after 50 ms
				if got := tr.completes.Load(); got != 1 {
					t.Fatalf("%d complete requests: a %s rejection was sent again", got, tc.code)
				}
				return
			}
			if err != nil {
				t.Fatalf("reported %v, want the completion recorded on retry", err)
			}
			if r := waitResult(t, env, id); r.State != "completed" || string(r.Result) != `"done"` || runs.Load() != 1 {
				t.Fatalf("result %+v after %d runs", r, runs.Load())
			}
			if got := tr.completes.Load(); got != 2 {
				t.Fatalf("%d complete requests, want 2 (the refused one and its retry)", got)
			}
		})
	}
}
