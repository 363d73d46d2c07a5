package server_test

import (
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flowfabric/ff/runtime/server"
	"github.com/flowfabric/ff/runtime/server/servertest"
)

// TestValkeyDownAnswers503: with Valkey gone, requests that read it are
// answered 503 once the client's retries give up, instead of never.
func TestValkeyDownAnswers503(t *testing.T) {
	t.Parallel()
	env, stopValkey := servertest.StartOwnValkey(t)
	if r := env.Do(t, http.MethodGet, "/v1/flows", nil, ""); r.Status != http.StatusOK {
		t.Fatalf("with Valkey up: %d %s", r.Status, r.Body)
	}
	stopValkey()
	hc := &http.Client{Timeout: 60 * time.Second}
	for _, path := range []string{"/v1/flows", "/v1/executions", "/ui/runs"} {
		res, err := hc.Get(env.URL + path)
		if err != nil {
			t.Fatalf("GET %s with Valkey down: %v", path, err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusServiceUnavailable {
			t.Fatalf("GET %s with Valkey down: %d, want 503", path, res.StatusCode)
		}
	}
}

// TestOutageRequestsDoNotFloodErrorLog: with Valkey down, the requests
// answered 503 unavailable are logged once at warn level for the outage,
// the others at debug level, and none at error level: the log does not
// grow with the request rate of the fleet (workers, clients retrying) for
// as long as the outage lasts.
func TestOutageRequestsDoNotFloodErrorLog(t *testing.T) {
	logs := &logBuffer{t: t}
	env, stopValkey := servertest.StartOwnValkey(t, func(c *server.Config) {
		c.Logger = slog.New(slog.NewTextHandler(logs, nil))
	})
	stopValkey()
	const requests = 20
	for i := range requests {
		r := env.Do(t, http.MethodPost, "/v1/executions", nil, `{"kind":"k","idempotency_key":"o`+strconv.Itoa(i)+`"}`)
		if r.Status != http.StatusServiceUnavailable {
			t.Fatalf("create with Valkey down: %d %s, want 503", r.Status, r.Body)
		}
	}
	errs, warns := 0, 0
	for line := range strings.Lines(logs.String()) {
		switch {
		case strings.Contains(line, "level=ERROR"):
			errs++
		case strings.Contains(line, "level=WARN") && strings.Contains(line, "path=/v1/executions"):
			warns++
		}
	}
	if errs != 0 || warns != 1 {
		t.Errorf("%d ERROR lines and %d WARN lines about the requests for %d requests answered 503 during one Valkey outage; want 0 and 1",
			errs, warns, requests)
	}
}
