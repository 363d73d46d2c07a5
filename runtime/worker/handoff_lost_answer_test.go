package worker_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flowfabric/ff/runtime/server/servertest"
	"github.com/flowfabric/ff/runtime/wire"
	"github.com/flowfabric/ff/runtime/worker"
)

// losingAnswer passes requests on, but loses the answer to the first
// request to path whose body holds when (any, when empty) after the server
// handled it: the worker sees a transport error (as when the connection
// drops while the answer is on its way) and sends the report again.
type losingAnswer struct {
	base http.RoundTripper
	path string
	when string
	lost atomic.Bool
}

func (l *losingAnswer) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.URL.Path != l.path || l.lost.Load() {
		return l.base.RoundTrip(r)
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, err
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	resp, err := l.base.RoundTrip(r)
	if err != nil || !bytes.Contains(body, []byte(l.when)) || !l.lost.CompareAndSwap(false, true) {
		return resp, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return nil, errors.New("connection reset (test)")
}

// TestHandoffAnswerLost: the answer to a complete that handed off the next
// member of a chain is lost; the worker sends the complete again and gets
// the same grant back, so that member runs under its first lease (no
// reclaim after the lease runs out) and the run ends.
func TestHandoffAnswerLost(t *testing.T) {
	t.Parallel()
	tr := &losingAnswer{base: http.DefaultTransport, path: "/v1/worker/complete", when: `"handoff"`}
	env := servertest.Start(t)
	w := newWorker(t, env, func(c *worker.Config) {
		c.Concurrency = 1
		c.LeaseTTL = 2 * time.Second
		c.HTTPClient = &http.Client{Transport: tr}
	})
	var ran atomic.Int64
	handleChain(t, w, chainOf(3), 0, &ran)
	run(t, w)
	r, err := env.Client.StageFlow(ctxT(t), chainOf(3), []string{})
	if err != nil {
		t.Fatal(err)
	}
	out, err := r.Result(ctxT(t))
	if err != nil || string(out) != `["a0","a1","a2"]` {
		t.Fatalf("result %s, %v", out, err)
	}
	if !tr.lost.Load() {
		t.Fatal("no answer was lost: the test did not test anything")
	}
	run2, err := env.Client.GetRun(ctxT(t), r.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range run2.Execs {
		if x.Attempts != 1 {
			t.Errorf("%s ran %d attempts, want 1 (the lost grant was not sent again)", x.Name, x.Attempts)
		}
	}
	if n := ran.Load(); n != 3 {
		t.Errorf("%d handler calls, want 3", n)
	}
}

// doublingClaims passes requests on, and repeats the task of the first
// claim answer that grants exactly one: the worker is granted a lease it
// already runs (what a re-delivered hand-off may do when the worker
// claimed that member meanwhile).
type doublingClaims struct {
	base    http.RoundTripper
	doubled atomic.Bool
}

func (d *doublingClaims) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := d.base.RoundTrip(r)
	if err != nil || r.URL.Path != "/v1/worker/claim" || d.doubled.Load() {
		return resp, err
	}
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		return nil, err
	}
	var ans struct {
		Tasks []json.RawMessage `json:"tasks"`
	}
	if json.Unmarshal(body, &ans) == nil && len(ans.Tasks) == 1 && d.doubled.CompareAndSwap(false, true) {
		body, _ = json.Marshal(map[string]any{"tasks": []json.RawMessage{ans.Tasks[0], ans.Tasks[0]}})
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	resp.ContentLength = int64(len(body))
	resp.Header.Del("Content-Length")
	return resp, nil
}

// TestSameLeaseGrantedTwiceRunsOnce: a grant of the lease a task already
// runs under does not start it again (nor cancel the running handler as
// a lost lease): the task runs once and its outcome is recorded.
func TestSameLeaseGrantedTwiceRunsOnce(t *testing.T) {
	t.Parallel()
	tr := &doublingClaims{base: http.DefaultTransport}
	env := servertest.Start(t)
	w := newWorker(t, env, func(c *worker.Config) {
		c.Concurrency = 2
		c.HTTPClient = &http.Client{Transport: tr}
	})
	var calls atomic.Int64
	cancelled := make(chan error, 2)
	if err := w.Handle("once", func(ctx context.Context, _ *worker.Task) (json.RawMessage, error) {
		calls.Add(1)
		select {
		case <-ctx.Done():
			cancelled <- context.Cause(ctx)
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		return json.RawMessage(`"done"`), nil
	}); err != nil {
		t.Fatal(err)
	}
	run(t, w)
	ex, _, err := env.Client.CreateExecution(ctxT(t), wire.CreateExecution{Kind: "once"})
	if err != nil {
		t.Fatal(err)
	}
	res, err := env.Client.WaitResult(ctxT(t), ex.ID, 20*time.Millisecond)
	if err != nil || res.State != "completed" || string(res.Result) != `"done"` {
		t.Fatalf("result %+v, %v", res, err)
	}
	if !tr.doubled.Load() {
		t.Fatal("no claim answer was doubled: the test did not test anything")
	}
	select {
	case cause := <-cancelled:
		t.Fatalf("the running handler was cancelled: %v", cause)
	default:
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("the handler ran %d times, want once", n)
	}
}
