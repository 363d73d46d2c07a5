package api_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/flowfabric/ff/runtime/server/servertest"
	"github.com/flowfabric/ff/runtime/wire"
)

// TestAPIRefusesCrossSiteBrowserWrites: a web page the user opens may send
// a cross-site POST with a text/plain body (a "simple" request: no CORS
// preflight) to an ffrun it can reach, one without a token above all. The
// API refuses a browser's unsafe request from another origin (by Origin
// or Sec-Fetch-Site) with 403 forbidden before it acts; a browser's read,
// a same-origin request, and requests without those headers (scripts,
// curl, the Go client) pass.
func TestAPIRefusesCrossSiteBrowserWrites(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t) // no token: ffrun dev
	const body = `{"kind":"evil.job","input":{"from":"a web page"}}`
	for _, h := range []map[string]string{
		{"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "no-cors", "Content-Type": "text/plain;charset=UTF-8"},
		{"Origin": "https://evil.example"},
		{"Sec-Fetch-Site": "cross-site"},
		{"Sec-Fetch-Site": "same-site"},
	} {
		r := env.Do(t, http.MethodPost, "/v1/executions", h, body)
		if r.Status != http.StatusForbidden || r.Err.Code != wire.CodeForbidden {
			t.Fatalf("a cross-site browser POST (%v): %d %s; want 403 forbidden", h, r.Status, r.Body)
		}
	}
	if list := env.Do(t, http.MethodGet, "/v1/executions", map[string]string{"Sec-Fetch-Site": "cross-site"}, ""); list.Status != http.StatusOK ||
		strings.Contains(list.Body, "evil.job") {
		t.Fatalf("a cross-site browser read: %d %s; want 200 and no execution created", list.Status, list.Body)
	}
	for _, h := range []map[string]string{
		nil, // a script
		{"Sec-Fetch-Site": "same-origin"},
		{"Origin": env.URL},
	} {
		if r := env.Do(t, http.MethodPost, "/v1/executions", h, body); r.Status != http.StatusCreated {
			t.Fatalf("POST with %v: %d %s; want 201", h, r.Status, r.Body)
		}
	}
}
