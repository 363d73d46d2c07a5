package client_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/flowfabric/ff/runtime/client"
	"github.com/flowfabric/ff/runtime/server"
	"github.com/flowfabric/ff/runtime/server/servertest"
	"github.com/flowfabric/ff/runtime/wire"
)

// outcomes passes requests on and tells, for each request whose path
// ends with suffix, how it ended: nil, or the transport's error.
type outcomes struct {
	base   http.RoundTripper
	suffix string
	ended  chan error
}

func (o *outcomes) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := o.base.RoundTrip(r)
	if strings.HasSuffix(r.URL.Path, o.suffix) {
		select {
		case o.ended <- err:
		default:
		}
	}
	return resp, err
}

// TestRunWaitUnderHTTPClientTimeout: with a caller's http.Client that has
// a Timeout (WithHTTPClient(&http.Client{Timeout: 10 * time.Second}), a
// common setting), each request of Run.Wait asks the server to wait (30 s,
// runResultWait) only as long as the Timeout allows, less a margin, so
// that it is answered ("not terminal yet") before the client cuts it.
// Cut, Wait took it for an outage and, after WaitOutageMax (2 min) of a
// healthy server, returned "still failing". Here with a Timeout of
// 500 ms: no wait request fails while the server is fine.
func TestRunWaitUnderHTTPClientTimeout(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t, func(c *server.Config) { c.DisableScanners = true })
	tr := &outcomes{base: http.DefaultTransport, suffix: "/result", ended: make(chan error, 16)}
	c, err := client.New(env.URL, client.WithHTTPClient(&http.Client{Timeout: 500 * time.Millisecond, Transport: tr}))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	run, err := c.StageFlow(ctx, oneExec(), nil)
	if err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() {
		_, err := run.Wait(ctx)
		waited <- err
	}()
	var first error
	select {
	case first = <-tr.ended:
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	}
	// End the run, so that Wait returns.
	tasks, err := env.Client.Claim(ctx, wire.ClaimRequest{WorkerID: "w", Kinds: []string{"one.s"}, WaitMs: 1000})
	if err != nil || len(tasks) != 1 {
		t.Fatalf("claim: %v, %d tasks", err, len(tasks))
	}
	l := wire.Lease{ExecutionID: tasks[0].ExecutionID, LeaseID: tasks[0].LeaseID, Epoch: tasks[0].Epoch}
	if _, err := env.Client.CompleteOne(ctx, l, json.RawMessage(`"ok"`)); err != nil {
		t.Fatal(err)
	}
	if err := <-waited; err != nil {
		t.Errorf("Run.Wait: %v", err)
	}
	if first != nil {
		t.Errorf("Run.Wait's request failed against a healthy server: %v; want its server-side wait bounded by the "+
			"http.Client's Timeout (taken for an outage, 2 min of these fail Wait)", first)
	}
}

// TestLongPollUnderResponseHeaderTimeout: a caller's transport with a
// ResponseHeaderTimeout (500 ms) shorter than a long-poll's wait breaks
// the long-poll as an http.Client's Timeout does (the server answers when
// the wait ends, after the transport gave up on the headers): the waits
// are bounded by the smaller of the two, so an idle claim and a lease
// watch on a lease that goes on are answered, empty, rather than fail.
func TestLongPollUnderResponseHeaderTimeout(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t, func(c *server.Config) { c.DisableScanners = true })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, _, err := env.Client.CreateExecution(ctx, wire.CreateExecution{Kind: "held"}); err != nil {
		t.Fatal(err)
	}
	held, err := env.Client.Claim(ctx, wire.ClaimRequest{WorkerID: "w", Kinds: []string{"held"}, Max: 1, WaitMs: 1000, LeaseMs: 60_000})
	if err != nil || len(held) != 1 {
		t.Fatalf("claim: %v, %d tasks", err, len(held))
	}
	lease := wire.Lease{ExecutionID: held[0].ExecutionID, LeaseID: held[0].LeaseID, Epoch: held[0].Epoch}
	tr := &http.Transport{ResponseHeaderTimeout: 500 * time.Millisecond}
	t.Cleanup(tr.CloseIdleConnections)
	for name, hc := range map[string]*http.Client{
		"no Timeout":     {Transport: tr},
		"longer Timeout": {Transport: tr, Timeout: time.Minute},
	} {
		c, err := client.New(env.URL, client.WithHTTPClient(hc))
		if err != nil {
			t.Fatal(err)
		}
		tasks, err := c.Claim(ctx, wire.ClaimRequest{WorkerID: "w", Kinds: []string{"nothing.here"}, Max: 1, WaitMs: 2000})
		if err != nil || len(tasks) != 0 {
			t.Errorf("%s: an idle claim (wait 2 s) under a ResponseHeaderTimeout of 500 ms: %d tasks, %v; want none, "+
				"answered before the transport gives up", name, len(tasks), err)
		}
		ended, err := c.WatchLeases(ctx, wire.WatchRequest{WorkerID: "w", InstanceID: "w-1", WaitMs: 2000, Leases: []wire.Lease{lease}})
		if err != nil || len(ended) != 0 {
			t.Errorf("%s: a lease watch (wait 2 s) under a ResponseHeaderTimeout of 500 ms: %v, %v; want nothing ended, "+
				"answered before the transport gives up", name, ended, err)
		}
	}
}
