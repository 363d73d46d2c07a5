package server_test

import (
	"testing"

	"github.com/flowfabric/ff/runtime/server"
	"github.com/flowfabric/ff/runtime/server/servertest"
)

// With a token set, no spelling of a /v1 path or method, nor /metrics,
// answers without it: encoded, doubled or dotted segments, a trailing
// slash, another case, unknown methods. (Covers the guard on the Echo
// instance, guardPrefix, against paths Echo routes apart from URL.Path.)
// OPTIONS is answered without it: TestOptionsAnswersWithoutToken.
func TestTokenGuardsEverySpellingOfV1(t *testing.T) {
	t.Parallel()
	e := servertest.Start(t, func(c *server.Config) { c.Token = "s3cret-console-token" })
	for _, r := range []struct{ method, path string }{
		{"GET", "/v1/executions"},
		{"GET", "/v1/executions/"},
		{"GET", "//v1/executions"},
		{"GET", "/V1/executions"},
		{"GET", "/%76%31/executions"},
		{"GET", "/v1%2Fexecutions"},
		{"GET", "/v1/../v1/executions"},
		{"GET", "/./v1/executions"},
		{"GET", "/v1/%2e%2e/v1/executions"},
		{"GET", "/v1"},
		{"GET", "/v1/"},
		{"PUT", "/v1/executions"},
		{"DELETE", "/v1/executions"},
		{"GET", "/metrics"},
		{"GET", "/metrics/"},
	} {
		res := e.Do(t, r.method, r.path, nil, "")
		if res.Status < 400 {
			t.Errorf("%s %s without the token: %d %s", r.method, r.path, res.Status, res.Body)
		}
		if res.Status != 401 && res.Status != 404 {
			t.Logf("%s %s: %d %s", r.method, r.path, res.Status, res.Err.Code)
		}
	}
}
