package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/flowfabric/ff/runtime/authlimit"
	"github.com/flowfabric/ff/runtime/client"
	"github.com/flowfabric/ff/runtime/server"
	"github.com/flowfabric/ff/runtime/server/servertest"
	"github.com/flowfabric/ff/runtime/wire"
)

// TestRunWaitRidesOutRateLimit: Run.Wait rides out a 429 rate_limited as
// it rides out other failures that pass (a restart: connection refused,
// 502, 503, 504), asking again after the answer's Retry-After: a client
// whose address is limited for a moment (behind the same reverse proxy as
// a client with a wrong token; spec/api.md, Authentication: "not locked
// out", "retrying after the 429") gets the run once it succeeds, rather
// than Wait, and so Stage<Flow>(...).Result, failing at once.
func TestRunWaitRidesOutRateLimit(t *testing.T) {
	t.Parallel()
	const token = "the-right-token-0123456789"
	env := servertest.Start(t, func(c *server.Config) {
		c.Token = token
		c.DisableScanners = true
		c.AuthLimit = authlimit.Config{Free: 1, Window: time.Second, Interval: time.Hour, MaxWait: time.Millisecond}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	run, err := env.Client.StageFlow(ctx, oneExec(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 { // the free wrong token, then one at its turn: the address is limited
		if r := env.Do(t, http.MethodGet, "/v1/namespaces", map[string]string{"Authorization": "Bearer a-wrong-guess"}, ""); r.Status != http.StatusUnauthorized {
			t.Fatalf("wrong token %d: %d %s", i+1, r.Status, r.Body)
		}
	}
	type answer struct {
		run *wire.FlowRun
		err error
	}
	waited := make(chan answer, 1)
	go func() {
		r, err := run.Wait(ctx)
		waited <- answer{r, err}
	}()
	// A worker behind the same address claims through the 429s and
	// completes the run's exec once the window ended.
	var task wire.Task
	for {
		tasks, err := env.Client.Claim(ctx, wire.ClaimRequest{WorkerID: "w", Kinds: []string{"one.s"}, WaitMs: 1000})
		if err == nil && len(tasks) == 1 {
			task = tasks[0]
			break
		}
		if err != nil && !client.IsCode(err, wire.CodeRateLimited) {
			t.Fatal(err)
		}
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
	lease := wire.Lease{ExecutionID: task.ExecutionID, LeaseID: task.LeaseID, Epoch: task.Epoch}
	if _, err := env.Client.CompleteOne(ctx, lease, json.RawMessage(`"ok"`)); err != nil {
		t.Fatal(err)
	}
	a := <-waited
	if a.err != nil {
		t.Fatalf("Run.Wait = %v for a run that then succeeded; want it to ride out the 429 as it rides out a 503", a.err)
	}
	if a.run.State != wire.RunSucceeded {
		t.Fatalf("Run.Wait = %+v", a.run)
	}
}

// TestAPIErrorRetryAfter: APIError.RetryAfter is what an error answer said
// about trying again: details.retry_after_ms (ffrun's 429, to the
// millisecond) before the Retry-After header (whole seconds, or an HTTP
// date), 0 when it said nothing, and at most an hour.
func TestAPIErrorRetryAfter(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, header, body string
		want               time.Duration
	}{
		{"details", "2", `{"error":{"code":"rate_limited","message":"m","details":{"retry_after_ms":1250}}}`, 1250 * time.Millisecond},
		{"header", "3", `{"error":{"code":"unavailable","message":"m"}}`, 3 * time.Second},
		{"header, body not ffrun's", "4", `Service Unavailable`, 4 * time.Second},
		{"date in the past", "Wed, 21 Oct 2015 07:28:00 GMT", `{"error":{"code":"unavailable","message":"m"}}`, 0},
		{"none", "", `{"error":{"code":"unavailable","message":"m"}}`, 0},
		{"bounded", "999999999999", `{"error":{"code":"unavailable","message":"m"}}`, time.Hour},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if tc.header != "" {
					w.Header().Set("Retry-After", tc.header)
				}
				w.WriteHeader(http.StatusTooManyRequests)
				_, _ = w.Write([]byte(tc.body))
			}))
			defer srv.Close()
			c, err := client.New(srv.URL)
			if err != nil {
				t.Fatal(err)
			}
			err = c.Health(context.Background())
			ae, ok := errors.AsType[*client.APIError](err)
			if !ok {
				t.Fatalf("Health = %v, want an *APIError", err)
			}
			if ae.RetryAfter != tc.want {
				t.Errorf("RetryAfter = %v, want %v", ae.RetryAfter, tc.want)
			}
		})
	}
}
