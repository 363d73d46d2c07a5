package server_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/flowfabric/ff/runtime/server"
	"github.com/flowfabric/ff/runtime/server/servertest"
	"github.com/flowfabric/ff/runtime/wire"
)

// TestOptionsAnswersWithoutToken: "OPTIONS on any route answers 204 with
// its Allow header" (Health), with a token set too: a browser's CORS
// preflight never carries credentials. The request it asks about is
// still checked: without the token a 401, and a browser's cross-origin
// write, with the token, a 403.
func TestOptionsAnswersWithoutToken(t *testing.T) {
	t.Parallel()
	const token = "s3cret-preflight-token"
	env := servertest.Start(t, func(c *server.Config) { c.Token = token; c.DisableScanners = true })
	preflight := map[string]string{"Origin": "https://app.example", "Access-Control-Request-Method": "POST",
		"Access-Control-Request-Headers": "authorization, content-type"}
	for _, r := range []struct{ path, allow string }{
		{"/v1/executions", http.MethodPost},
		{"/v1/executions/1.00000000-0000-4000-8000-000000000000/cancel", http.MethodPost},
		{"/v1/budgets/default/gpu", http.MethodGet},
		{"/v1/worker/claim", http.MethodPost},
		{"/metrics", http.MethodGet},
	} {
		for _, h := range []map[string]string{nil, preflight} {
			res := env.Do(t, http.MethodOptions, r.path, h, "")
			if res.Status != http.StatusNoContent || !strings.Contains(res.Header.Get("Allow"), r.allow) {
				t.Errorf("OPTIONS %s (headers %v) = %d Allow %q %s, want 204 with an Allow naming %s",
					r.path, h, res.Status, res.Header.Get("Allow"), clipBody(res.Body), r.allow)
			}
		}
	}
	if res := env.Do(t, http.MethodPost, "/v1/executions", nil, `{"kind":"k"}`); res.Status != http.StatusUnauthorized || res.Err.Code != wire.CodeUnauthorized {
		t.Errorf("POST /v1/executions without the token = %d %s, want 401", res.Status, clipBody(res.Body))
	}
	cross := map[string]string{"Origin": "https://app.example", "Authorization": "Bearer " + token}
	if res := env.Do(t, http.MethodPost, "/v1/executions", cross, `{"kind":"k"}`); res.Status != http.StatusForbidden || res.Err.Code != wire.CodeForbidden {
		t.Errorf("a browser's cross-origin POST with the token = %d %s, want 403 forbidden", res.Status, clipBody(res.Body))
	}
	if res := env.Do(t, http.MethodGet, "/v1/executions", map[string]string{"Authorization": "Bearer " + token}, ""); res.Status != http.StatusOK ||
		strings.Contains(res.Body, `"kind":"k"`) {
		t.Errorf("GET /v1/executions = %d %s, want 200 and nothing created", res.Status, clipBody(res.Body))
	}
}
