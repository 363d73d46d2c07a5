package client_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flowfabric/ff/runtime/client"
	"github.com/flowfabric/ff/runtime/server"
	"github.com/flowfabric/ff/runtime/server/servertest"
	"github.com/flowfabric/ff/runtime/wire"
)

// internalOnce answers the first request whose path ends in suffix 500
// internal, as ffrun does for a store error it has no other code for,
// and passes the others on.
type internalOnce struct {
	base   http.RoundTripper
	suffix string
	done   atomic.Bool
}

func (o *internalOnce) RoundTrip(r *http.Request) (*http.Response, error) {
	if strings.HasSuffix(r.URL.Path, o.suffix) && o.done.CompareAndSwap(false, true) {
		return &http.Response{StatusCode: http.StatusInternalServerError, Request: r,
			Header: http.Header{"Content-Type": {"application/json"}},
			Body:   io.NopCloser(strings.NewReader(`{"error":{"code":"internal","message":"internal error"}}`))}, nil
	}
	return o.base.RoundTrip(r)
}

// TestRunWaitRidesOutA500: Run.Wait asks again after a 500 internal (a
// store error ffrun has no other code for: a read, safe to send again),
// as the worker SDK does for its requests, rather than fail a run that
// succeeded. It took only 502, 503 and 504 for passing, the worker every
// 5xx: one rule (client.Passing) now decides for both.
func TestRunWaitRidesOutA500(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t, func(c *server.Config) { c.DisableScanners = true })
	tr := &internalOnce{base: http.DefaultTransport, suffix: "/result"}
	c, err := client.New(env.URL, client.WithHTTPClient(&http.Client{Transport: tr}))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	run, err := c.StageFlow(ctx, oneExec(), nil)
	if err != nil {
		t.Fatal(err)
	}
	tasks, err := env.Client.Claim(ctx, wire.ClaimRequest{WorkerID: "w", Kinds: []string{"one.s"}, WaitMs: 2000})
	if err != nil || len(tasks) != 1 {
		t.Fatalf("claim: %+v, %v", tasks, err)
	}
	lease := wire.Lease{ExecutionID: tasks[0].ExecutionID, LeaseID: tasks[0].LeaseID, Epoch: tasks[0].Epoch}
	if _, err := env.Client.CompleteOne(ctx, lease, json.RawMessage(`"ok"`)); err != nil {
		t.Fatal(err)
	}
	r, err := run.Wait(ctx)
	if err != nil {
		t.Fatalf("Run.Wait = %v after one 500; want the run, asked for again", err)
	}
	if !tr.done.Load() || r.State != wire.RunSucceeded {
		t.Fatalf("Run.Wait = %+v (500 answered: %v)", r, tr.done.Load())
	}
}

// TestPassing: which failures client.Passing, the one rule of Run.Wait,
// ffrun's waiting commands and the worker SDK, takes for passing.
func TestPassing(t *testing.T) {
	for status, want := range map[int]bool{
		400: false, 401: false, 403: false, 404: false, 409: false, 413: false,
		408: true, 429: true,
		500: true, 502: true, 503: true, 504: true, 522: true,
		501: false, 505: false, // what the server does not do at all
	} {
		if got := client.Passing(&client.APIError{Status: status}); got != want {
			t.Errorf("Passing(%d) = %v, want %v", status, got, want)
		}
	}
}
