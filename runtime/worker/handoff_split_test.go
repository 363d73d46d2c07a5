package worker_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flowfabric/ff/runtime/client"
	"github.com/flowfabric/ff/runtime/server"
	"github.com/flowfabric/ff/runtime/server/servertest"
	"github.com/flowfabric/ff/runtime/worker"
)

// TestHandoffSlotsThroughSplitReports: completions of flow members
// with a downstream keep their slot for a hand-off; when their batched
// report is refused as too large (413) and sent again in halves, each
// half asks for the hand-offs of its own held slots. Every slot must come
// back exactly once: no more handlers run at once than Concurrency (a
// slot released twice), the worker does not stall (one never released),
// and every member runs once.
func TestHandoffSlotsThroughSplitReports(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t, func(c *server.Config) { c.BodyLimit = 64 << 10 })
	const runs, conc = 6, 6
	f := chainOf(3)
	sizes := &reportSizes{base: http.DefaultTransport}
	split := &handoffTooLarge{base: sizes}
	w := newWorker(t, env, func(c *worker.Config) {
		c.Concurrency, c.LeaseTTL = conc, 5*time.Second
		c.HTTPClient = &http.Client{Transport: &slowReports{base: split}}
	})
	big := strings.Repeat("x", 40_000) // one such output fits in 64 KiB, two do not
	var ran, inside, most atomic.Int64
	var arrived sync.WaitGroup
	arrived.Add(runs)
	gate := make(chan struct{})
	for i, x := range f.Execs {
		name := x.Name
		if err := w.Handle(x.Kind, func(_ context.Context, task *worker.Task) (json.RawMessage, error) {
			n := inside.Add(1)
			defer inside.Add(-1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			ran.Add(1)
			if i == 0 {
				arrived.Done()
				<-gate // the roots finish together
			}
			var seen []string
			if err := json.Unmarshal(task.Input(), &seen); err != nil {
				return nil, worker.Permanent(err)
			}
			if i == 0 {
				seen = append(seen, big)
			}
			time.Sleep(5 * time.Millisecond)
			return json.Marshal(append(seen, name))
		}); err != nil {
			t.Fatal(err)
		}
	}
	run(t, w)
	staged := make([]*client.Run, runs)
	for i := range staged {
		r, err := env.Client.StageFlow(ctxT(t), f, []string{})
		if err != nil {
			t.Fatal(err)
		}
		staged[i] = r
	}
	arrived.Wait()
	close(gate)
	for _, r := range staged {
		out, err := r.Result(ctxT(t))
		if err != nil {
			t.Fatalf("run %s: %v", r.ID, err)
		}
		var seen []string
		if err := json.Unmarshal(out, &seen); err != nil || len(seen) != 4 || seen[3] != "a2" {
			t.Fatalf("run %s result has %d entries (%v)", r.ID, len(seen), err)
		}
	}
	if got := ran.Load(); got != 3*runs {
		t.Errorf("%d handler calls for %d members", got, 3*runs)
	}
	if m := most.Load(); m > conc {
		t.Errorf("%d handlers ran at once with Concurrency %d: a slot was released twice", m, conc)
	}
	if split.n.Load() == 0 {
		t.Error("no report asking for a hand-off was refused as too large: the test did not exercise the split")
	}
}

// handoffTooLarge counts the complete requests that ask for a hand-off
// and are refused as too large.
type handoffTooLarge struct {
	base http.RoundTripper
	n    atomic.Int64
}

func (h *handoffTooLarge) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.URL.Path != "/v1/worker/complete" {
		return h.base.RoundTrip(r)
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, err
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	res, err := h.base.RoundTrip(r)
	if err == nil && res.StatusCode == http.StatusRequestEntityTooLarge && bytes.Contains(body, []byte(`"handoff"`)) {
		h.n.Add(1)
	}
	return res, err
}
