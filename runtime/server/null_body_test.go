package server_test

import (
	"net/http"
	"testing"

	"github.com/flowfabric/ff/runtime/server"
	"github.com/flowfabric/ff/runtime/server/servertest"
	"github.com/flowfabric/ff/runtime/wire"
)

// TestNullBodyIsInvalidJSON: where a route requires a JSON object, a body
// of null is 400 invalid_json (Errors: "not valid JSON of the expected
// shape"), as [] is, not read as {} and refused for its first missing
// field. A route whose body is optional takes null as no body.
func TestNullBodyIsInvalidJSON(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t, func(c *server.Config) { c.DisableScanners = true })
	for _, r := range []struct{ method, path string }{
		{http.MethodPost, "/v1/executions"},
		{http.MethodPost, "/v1/executions/batch"},
		{http.MethodPost, "/v1/flows"},
		{http.MethodPost, "/v1/flows/cancel"},
		{http.MethodPost, "/v1/worker/claim"},
		{http.MethodPost, "/v1/worker/complete"},
		{http.MethodPost, "/v1/worker/fail"},
		{http.MethodPost, "/v1/worker/renew"},
		{http.MethodPost, "/v1/worker/watch"},
		{http.MethodPost, "/v1/workers/heartbeat"},
		{http.MethodPut, "/v1/budgets"},
		{http.MethodPut, "/v1/quotas"},
		{http.MethodPut, "/v1/schedules/s"},
		{http.MethodPut, "/v1/executions/1.00000000-0000-4000-8000-000000000000/priority"},
		{http.MethodPost, "/v1/executions/1.00000000-0000-4000-8000-000000000000/complete"},
	} {
		if arr := env.Do(t, r.method, r.path, nil, `[]`); arr.Err.Code != wire.CodeInvalidJSON {
			t.Fatalf("%s %s []: %d %s, want the invalid_json this test compares with", r.method, r.path, arr.Status, clipBody(arr.Body))
		}
		res := env.Do(t, r.method, r.path, nil, " null\n")
		if res.Status != http.StatusBadRequest || res.Err.Code != wire.CodeInvalidJSON {
			t.Errorf("%s %s with body null = %d %s, want 400 invalid_json (a JSON object is required), as for []",
				r.method, r.path, res.Status, clipBody(res.Body))
		}
	}
	ex, _, err := env.Client.CreateExecution(ctxT(t), wire.CreateExecution{Kind: "k"})
	if err != nil {
		t.Fatal(err)
	}
	if res := env.Do(t, http.MethodPost, "/v1/executions/"+ex.ID+"/cancel", nil, `null`); res.Status != http.StatusOK {
		t.Errorf("cancel with body null = %d %s, want 200: the body is optional", res.Status, clipBody(res.Body))
	}
}
