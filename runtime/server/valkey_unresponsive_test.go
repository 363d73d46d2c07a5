package server_test

import (
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/flowfabric/ff/runtime/server/servertest"
)

// TestValkeyUnresponsiveAnswers503: a Valkey that takes connections and
// never answers (a partition, a hung host) is answered 503 within the
// bound, as a refused port is: a timeout is not retried (24 retries of
// 10 s each held a request for minutes).
func TestValkeyUnresponsiveAnswers503(t *testing.T) {
	t.Parallel()
	env, stopValkey := servertest.StartOwnValkey(t)
	if r := env.Do(t, http.MethodGet, "/v1/flows", nil, ""); r.Status != http.StatusOK {
		t.Fatalf("with Valkey up: %d %s", r.Status, r.Body)
	}
	stopValkey()
	// Valkey's address now takes connections and never answers.
	addr := env.Config.ValkeyAddr
	var ln net.Listener
	var err error
	for deadline := time.Now().Add(5 * time.Second); ; {
		if ln, err = net.Listen("tcp", addr); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("listen on %s: %v", addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Before the server stops (cleanups run last first): refused again.
	servertest.Silent(t, ln)
	// Generous: the bound is about 10 s (a connection timeout, not retried).
	hc := &http.Client{Timeout: 30 * time.Second}
	start := time.Now()
	res, err := hc.Get(env.URL + "/v1/flows")
	if err != nil {
		t.Fatalf("GET /v1/flows with Valkey unresponsive: no answer after %s: %v", time.Since(start).Round(time.Second), err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("GET /v1/flows with Valkey unresponsive: %d after %s, want 503", res.StatusCode, time.Since(start).Round(time.Second))
	}
}
