package worker_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flowfabric/ff/compiler/plan"
	"github.com/flowfabric/ff/runtime/server/servertest"
	"github.com/flowfabric/ff/runtime/store"
	"github.com/flowfabric/ff/runtime/wire"
	"github.com/flowfabric/ff/runtime/worker"
)

// fanInOf returns a flow of n roots u00.. (each takes the run's input,
// of kind <name>.<exec>) all feeding the member "join" (of kind
// <name>.join), whose input is u00's output; join may run attempts
// times.
func fanInOf(name string, n, attempts int) *plan.Flow {
	str := &plan.TypeRef{Kind: plan.KindString}
	f := &plan.Flow{Schema: plan.SchemaVersion, Name: name, Namespace: "default", Lane: "default", Input: str, Output: str}
	retry := plan.Retry{Attempts: 1, Backoff: plan.BackoffFixed}
	join := plan.Exec{Name: "join", Kind: name + ".join", Lane: "default", Priority: 100, Input: str, Output: str,
		InputFrom: plan.InputExec, InputExec: "u00", Join: plan.Join{Kind: plan.JoinAll},
		Retry: plan.Retry{Attempts: attempts, Backoff: plan.BackoffFixed}}
	for i := range n {
		u := fmt.Sprintf("u%02d", i)
		f.Execs = append(f.Execs, plan.Exec{Name: u, Kind: name + "." + u, Lane: "default", Priority: 100, Input: str, Output: str,
			InputFrom: plan.InputFlow, Join: plan.Join{Kind: plan.JoinAll}, Retry: retry})
		join.Upstreams = append(join.Upstreams, u)
		f.Edges = append(f.Edges, plan.Edge{From: u, To: "join", On: plan.OnSuccess})
	}
	f.Execs = append(f.Execs, join)
	f.Result = "join"
	return f
}

// upOutput is the output of upstream name: a JSON string of size bytes.
func upOutput(name string, size int) json.RawMessage {
	return json.RawMessage(`"` + name + strings.Repeat("x", size-len(name)-2) + `"`)
}

// resultReads counts the worker's reads of execution results and, while
// failing is set, answers them 503, or while hanging is set, answers none
// (a server gone silent: the read ends with its context); the worker's
// first failure report clears both.
type resultReads struct {
	base    http.RoundTripper
	n       atomic.Int64
	failing atomic.Bool
	hanging atomic.Bool
}

func (r *resultReads) RoundTrip(req *http.Request) (*http.Response, error) {
	switch {
	case req.Method == http.MethodGet && strings.HasPrefix(req.URL.Path, "/v1/executions/") && strings.HasSuffix(req.URL.Path, "/result"):
		r.n.Add(1)
		if r.hanging.Load() {
			<-req.Context().Done()
			return nil, req.Context().Err()
		}
		if r.failing.Load() {
			return answer(req, http.StatusServiceUnavailable, `{"error":{"code":"unavailable","message":"try later"}}`), nil
		}
	case req.URL.Path == "/v1/worker/fail":
		r.failing.Store(false)
		r.hanging.Store(false)
	}
	return r.base.RoundTrip(req)
}

// joinCall is what one call of a join's handler saw: its input and the
// upstream outputs by name.
type joinCall struct {
	input     json.RawMessage
	upstreams map[string]json.RawMessage
}

// fanInRun is a run of runFanIn: its result, what each call of the
// join's handler saw, and the join's execution.
type fanInRun struct {
	result json.RawMessage
	calls  []joinCall
	join   *wire.Execution
}

// runFanIn runs a fan-in of n upstreams of size-byte outputs (fanInOf)
// through a worker whose requests go through reads (its base set here);
// tune, when not nil, changes the worker before it runs.
func runFanIn(t *testing.T, name string, n, size, attempts int, reads *resultReads, tune func(*worker.Worker)) fanInRun {
	t.Helper()
	env := servertest.Start(t)
	// A transport of its own, whose idle connections are closed before the
	// server stops: the concurrent reads may leave one dialled and unused,
	// which the server's shutdown would wait 5 s for.
	tr := http.DefaultTransport.(*http.Transport).Clone()
	t.Cleanup(tr.CloseIdleConnections)
	reads.base = tr
	f := fanInOf(name, n, attempts)
	w := newWorker(t, env, func(c *worker.Config) {
		// A lease long enough that the join's first attempt ends by its
		// failure's report, not by an expiry, on a loaded machine (a CI
		// run saw a 5 s lease expire unrenewed while the worker decoded
		// the grant's megabytes under -race).
		c.Concurrency, c.LeaseTTL = 4, 20*time.Second
		c.HTTPClient = &http.Client{Transport: reads}
	})
	if tune != nil {
		tune(w)
	}
	for _, x := range f.Execs[:n] {
		out := upOutput(x.Name, size)
		if err := w.Handle(x.Kind, func(context.Context, *worker.Task) (json.RawMessage, error) { return out, nil }); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	var fr fanInRun
	if err := w.Handle(name+".join", func(_ context.Context, task *worker.Task) (json.RawMessage, error) {
		c := joinCall{input: task.Input(), upstreams: map[string]json.RawMessage{}}
		for i := range n {
			u := fmt.Sprintf("u%02d", i)
			if out, ok := task.Upstream(u); ok {
				c.upstreams[u] = out
			}
		}
		mu.Lock()
		fr.calls = append(fr.calls, c)
		mu.Unlock()
		return json.Marshal(fmt.Sprintf("%d upstreams", len(c.upstreams)))
	}); err != nil {
		t.Fatal(err)
	}
	run(t, w)
	r, err := env.Client.StageFlow(ctxT(t), f, "in")
	if err != nil {
		t.Fatal(err)
	}
	out, err := r.Result(ctxT(t))
	if err != nil {
		t.Fatalf("run %s: %v", r.ID, err)
	}
	got, err := r.Get(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range got.Execs {
		if x.Name == "join" {
			if fr.join, err = env.Client.GetExecution(ctxT(t), x.ExecutionID); err != nil {
				t.Fatal(err)
			}
		}
	}
	if fr.join == nil {
		t.Fatalf("run %s has no member join", r.ID)
	}
	mu.Lock()
	defer mu.Unlock()
	fr.result = out
	return fr
}

// checkJoinCall fails t unless c saw u00's output as its input and the
// output of each of n upstreams of size bytes.
func checkJoinCall(t *testing.T, c joinCall, n, size int) {
	t.Helper()
	if !bytes.Equal(c.input, upOutput("u00", size)) {
		t.Errorf("join input is %d bytes, want u00's output", len(c.input))
	}
	for i := range n {
		u := fmt.Sprintf("u%02d", i)
		if got, ok := c.upstreams[u]; !ok {
			t.Errorf("join ran without the output of %s", u)
		} else if !bytes.Equal(got, upOutput(u, size)) {
			t.Errorf("join saw %d bytes as the output of %s, want its %d", len(got), u, size)
		}
	}
}

// TestFanInPastTheBoundSeesEveryUpstream: a join of 12 upstreams of
// 512 KiB (6 MiB, past the 4 MiB a grant carries) runs its handler once,
// with every upstream's output: the worker read the ones the grant left
// out (4 of them) before running it.
func TestFanInPastTheBoundSeesEveryUpstream(t *testing.T) {
	t.Parallel()
	const n, size = 12, 512 << 10
	reads := &resultReads{}
	fr := runFanIn(t, "widefan", n, size, 1, reads, nil)
	if string(fr.result) != `"12 upstreams"` {
		t.Errorf("run result %s", fr.result)
	}
	if len(fr.calls) != 1 {
		t.Fatalf("the join's handler ran %d times, want once", len(fr.calls))
	}
	checkJoinCall(t, fr.calls[0], n, size)
	if got, want := reads.n.Load(), int64(n-store.UpstreamsCarried/size); got != want {
		t.Errorf("the worker read %d upstream results, want the %d the grant could not carry", got, want)
	}
	if len(fr.join.Attempts) != 1 || fr.join.Attempts[0].Outcome != "success" {
		t.Errorf("join attempts %+v, want one success", fr.join.Attempts)
	}
}

// TestFanInUpstreamReadFails: when an omitted upstream's result cannot be
// read, the join's attempt fails, retryable, with an error naming that
// upstream, and its handler does not run; the retry, whose reads succeed,
// runs it with every output.
func TestFanInUpstreamReadFails(t *testing.T) {
	t.Parallel()
	const n, size = 12, 512 << 10
	reads := &resultReads{}
	reads.failing.Store(true) // until the worker reports the failure
	fr := runFanIn(t, "failfan", n, size, 2, reads, nil)
	if string(fr.result) != `"12 upstreams"` {
		t.Errorf("run result %s", fr.result)
	}
	if len(fr.calls) != 1 {
		t.Fatalf("the join's handler ran %d times, want once (after the failed reads)", len(fr.calls))
	}
	checkJoinCall(t, fr.calls[0], n, size)
	a := fr.join.Attempts
	if len(a) != 2 || a[0].Outcome != "failed" || a[1].Outcome != "success" {
		t.Fatalf("join attempts %+v, want a failure, then a success", a)
	}
	// The failing upstream is one of those the grant omitted: u08..u11
	// (the grant carries u00, the input, then the first that fit).
	if !regexp.MustCompile(`^read the result of upstream u(0[89]|1[01]) \(\d+\.[0-9a-f-]+\): .*503 unavailable: try later$`).MatchString(a[0].Error) {
		t.Errorf("first attempt's error %q, want one naming the upstream it could not read", a[0].Error)
	}
}

// TestFanInUpstreamReadHangs: a read of an omitted upstream that the
// server never answers (gone silent mid-request) is bounded as a report is
// (its slack, 1 s here instead of 15 s, and the time an output of
// OutputMaxBytes takes at the slowest rate allowed for): the join's
// attempt fails, retryable, naming the upstream, and the retry runs the
// handler with every output. Unbounded, the read held the attempt, whose
// handler context has no deadline and whose lease the worker renews, for
// ever.
func TestFanInUpstreamReadHangs(t *testing.T) {
	t.Parallel()
	const n, size = 12, 512 << 10
	reads := &resultReads{}
	reads.hanging.Store(true) // until the worker reports the failure
	fr := runFanIn(t, "hangfan", n, size, 2, reads, func(w *worker.Worker) {
		worker.SetRequestSlack(w, time.Second)
		worker.SetRequestRate(w, 8<<20) // an upstream read's bound: 1.125 s, not 9
	})
	if string(fr.result) != `"12 upstreams"` {
		t.Errorf("run result %s", fr.result)
	}
	if len(fr.calls) != 1 {
		t.Fatalf("the join's handler ran %d times, want once (after the reads that timed out)", len(fr.calls))
	}
	checkJoinCall(t, fr.calls[0], n, size)
	a := fr.join.Attempts
	if len(a) != 2 || a[0].Outcome != "failed" || a[1].Outcome != "success" {
		t.Fatalf("join attempts %+v, want a failure, then a success", a)
	}
	if !regexp.MustCompile(`^read the result of upstream u(0[89]|1[01]) \(\d+\.[0-9a-f-]+\): .*context deadline exceeded$`).MatchString(a[0].Error) {
		t.Errorf("first attempt's error %q, want one naming the upstream whose read timed out", a[0].Error)
	}
}
