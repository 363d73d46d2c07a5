package server_test

import (
	"net/http"
	"testing"
	"time"

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
