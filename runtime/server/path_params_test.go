package server_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/flowfabric/ff/compiler/plan"
	"github.com/flowfabric/ff/runtime/server"
	"github.com/flowfabric/ff/runtime/server/servertest"
	"github.com/flowfabric/ff/runtime/wire"
)

// TestPathParamsDecodedAlike: every route reads a percent-encoded
// character of its path parameter as the character (RFC 3986: the same
// URI), templates, executions and runs as schedules, budgets and quotas
// do; and none decodes one twice: "%2531" is "%31", not "1".
func TestPathParamsDecodedAlike(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t, func(c *server.Config) {
		c.Templates = []*plan.Flow{twoStep()}
		c.DisableScanners = true
	})
	ctx := ctxT(t)
	ex, _, err := env.Client.CreateExecution(ctx, wire.CreateExecution{Kind: "k"})
	if err != nil {
		t.Fatal(err)
	}
	run := stageTwoStep(t, env)
	if _, _, err := env.Client.PutSchedule(ctx, "s1", wire.PutSchedule{Template: "two", Cron: "@hourly", Input: []byte(`{"s":"x"}`)}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := env.Client.PutBudget(ctx, wire.PutBudget{Name: "gpu", Dimensions: []wire.BudgetDimension{{Name: "minutes", Hard: 10}}}); err != nil {
		t.Fatal(err)
	}
	dot := func(id string) string { return strings.Replace(id, ".", "%2E", 1) } // the '.' after the partition
	for _, r := range []struct{ method, path string }{
		{http.MethodGet, "/v1/templates/tw%6F"},
		{http.MethodGet, "/v1/executions/" + dot(ex.ID)},
		{http.MethodPut, "/v1/executions/" + dot(ex.ID) + "/priority"},
		{http.MethodGet, "/v1/flows/" + dot(run.ID)},
		{http.MethodGet, "/v1/schedules/s%31"},
		{http.MethodGet, "/v1/budgets/default%2Fgpu"},
		{http.MethodPost, "/v1/executions/" + dot(ex.ID) + "/cancel"},
		{http.MethodPost, "/v1/flows/" + dot(run.ID) + "/cancel"},
	} {
		body := ""
		if strings.HasSuffix(r.path, "/priority") {
			body = `{"priority": 7}`
		}
		if res := env.Do(t, r.method, r.path, nil, body); res.Status != http.StatusOK {
			t.Errorf("%s %s = %d %s, want 200: a percent-encoded character is the character", r.method, r.path, res.Status, clipBody(res.Body))
		}
	}
	for _, r := range []struct {
		path, name string
		status     int
	}{
		{"/v1/templates/tw%256F", `"tw%6F"`, http.StatusNotFound},
		{"/v1/schedules/s%2531", `"s%31"`, http.StatusBadRequest}, // no schedule name holds '%'
		{"/v1/executions/" + strings.Replace(ex.ID, ".", "%252E", 1), `"` + dot(ex.ID) + `"`, http.StatusNotFound},
	} {
		if res := env.Do(t, http.MethodGet, r.path, nil, ""); res.Status != r.status || !strings.Contains(res.Err.Message, r.name) {
			t.Errorf("GET %s = %d %s, want %d naming %s (decoded once)", r.path, res.Status, clipBody(res.Body), r.status, r.name)
		}
	}
	if res := env.Do(t, http.MethodGet, "/v1/budgets/default%252Fgpu", nil, ""); res.Status == http.StatusOK {
		t.Errorf("GET /v1/budgets/default%%252Fgpu = 200 %s: decoded twice, want the id default%%2Fgpu, which is no budget", clipBody(res.Body))
	}
}
