package worker_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/flowfabric/ff/runtime/server/servertest"
	"github.com/flowfabric/ff/runtime/wire"
	"github.com/flowfabric/ff/runtime/worker"
)

// longPollOutcomes passes requests on and tells how each request whose
// path ends with suffix ended: nil, or the transport's error.
type longPollOutcomes struct {
	base   http.RoundTripper
	suffix string
	ended  chan error
}

func (o *longPollOutcomes) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := o.base.RoundTrip(r)
	if strings.HasSuffix(r.URL.Path, o.suffix) {
		select {
		case o.ended <- err:
		default:
		}
	}
	return resp, err
}

// timeoutWorker returns a worker whose Config.HTTPClient has a Timeout
// (500 ms) shorter than its ClaimWait (2 s) and than the lease watch's
// wait (30 s), and tells through the returned channel how its requests
// to the path ending with suffix end.
func timeoutWorker(t *testing.T, env *servertest.Env, suffix string) (*worker.Worker, <-chan error) {
	t.Helper()
	tr := &longPollOutcomes{base: http.DefaultTransport, suffix: suffix, ended: make(chan error, 16)}
	w, err := worker.New(worker.Config{
		URL:        env.URL,
		Name:       "timeout-worker",
		ClaimWait:  2 * time.Second,
		HTTPClient: &http.Client{Timeout: 500 * time.Millisecond, Transport: tr},
		Logger:     servertest.Logger(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	return w, tr.ended
}

// TestClaimWaitUnderHTTPClientTimeout: Config.HTTPClient with a Timeout
// shorter than ClaimWait (a common http.Client setting; ClaimWait's
// default is 30 s): the claim's wait is bounded by the Timeout (less a
// margin), so an idle claim is answered, empty, before the client gives
// up, instead of every idle long-poll being cut by the client, logged as
// a failure, retried after a backoff, and a grant made as it gave up
// answered to nobody.
func TestClaimWaitUnderHTTPClientTimeout(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	w, ended := timeoutWorker(t, env, "/v1/worker/claim")
	if err := w.Handle("job", func(context.Context, *worker.Task) (json.RawMessage, error) { return nil, nil }); err != nil {
		t.Fatal(err)
	}
	run(t, w)
	select {
	case err := <-ended:
		if err != nil {
			t.Errorf("an idle claim failed against a healthy server: %v; want the claim's wait bounded by the "+
				"http.Client's Timeout (500ms < ClaimWait 2s)", err)
		}
	case <-ctxT(t).Done():
		t.Fatal("no claim ended")
	}
}

// TestLeaseWatchUnderHTTPClientTimeout: the lease watch, whose wait is
// 30 s, is bounded by Config.HTTPClient's Timeout as claims are: while a
// handler runs, its watch is answered (nothing ended) before the client
// gives up, rather than cut by it and retried as a failure.
func TestLeaseWatchUnderHTTPClientTimeout(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	w, ended := timeoutWorker(t, env, "/v1/worker/watch")
	cause := make(chan error, 1)
	if err := w.Handle("job", func(ctx context.Context, _ *worker.Task) (json.RawMessage, error) {
		<-ctx.Done()
		cause <- context.Cause(ctx)
		return nil, ctx.Err()
	}); err != nil {
		t.Fatal(err)
	}
	id := create(t, env, wire.CreateExecution{Kind: "job"})
	run(t, w)
	select {
	case err := <-ended:
		if err != nil {
			t.Errorf("a lease watch failed against a healthy server: %v; want its wait bounded by the "+
				"http.Client's Timeout (500ms < 30s)", err)
		}
	case <-ctxT(t).Done():
		t.Fatal("no watch ended")
	}
	if _, err := env.Client.CancelExecution(ctxT(t), id, "done"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-cause:
		if !errors.Is(err, worker.ErrCancelled) {
			t.Errorf("handler's context ended with %v, want ErrCancelled", err)
		}
	case <-ctxT(t).Done():
		t.Fatal("the handler was not told of the cancel")
	}
}
