package server_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/flowfabric/ff/compiler/plan"
	"github.com/flowfabric/ff/runtime/api"
	"github.com/flowfabric/ff/runtime/server"
	"github.com/flowfabric/ff/runtime/server/servertest"
	"github.com/flowfabric/ff/runtime/wire"
)

// A malformed execution id is an unknown one (404 not_found) on the single
// renew, complete and fail routes, as on every route about one execution,
// and a not_found item error in the batched ones (it was a 400 naming a
// field "id" that is not in the body).
func TestMalformedIDOnReportRoutesIsNotFound(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	for _, action := range []string{"renew", "complete", "fail"} {
		res := env.Do(t, http.MethodPost, "/v1/executions/nope/"+action, nil, `{"lease_id":"x","epoch":1}`)
		if res.Status != http.StatusNotFound || res.Err.Code != wire.CodeNotFound {
			t.Errorf("POST /v1/executions/nope/%s = %d %s (field %q), want 404 not_found as GET /v1/executions/nope answers",
				action, res.Status, res.Err.Code, res.Field())
		}
	}
	for _, c := range []struct{ path, body string }{
		{"/v1/worker/renew", `{"leases":[{"execution_id":"nope","lease_id":"x","epoch":1}]}`},
		{"/v1/worker/complete", `{"completions":[{"execution_id":"nope","lease_id":"x","epoch":1}]}`},
		{"/v1/worker/fail", `{"failures":[{"execution_id":"nope","lease_id":"x","epoch":1}]}`},
	} {
		res := env.Do(t, http.MethodPost, c.path, nil, c.body)
		var lr wire.LeaseResults
		if err := json.Unmarshal([]byte(res.Body), &lr); err != nil || res.Status != http.StatusOK || len(lr.Results) != 1 {
			t.Fatalf("POST %s = %d %s", c.path, res.Status, res.Body)
		}
		if e := lr.Results[0].Error; e == nil || e.Code != wire.CodeNotFound {
			t.Errorf("POST %s: item error %+v, want not_found (a malformed id is an unknown one)", c.path, e)
		}
	}
}

// The 404 of the single renew, complete and fail routes names the unknown
// execution, as every route about one execution does.
func TestReportNotFoundNamesTheID(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	unknown := "1.00000000-0000-4000-8000-000000000000"
	for _, action := range []string{"renew", "complete", "fail"} {
		res := env.Do(t, http.MethodPost, "/v1/executions/"+unknown+"/"+action, nil, `{"lease_id":"x","epoch":1}`)
		if res.Status != http.StatusNotFound || !strings.Contains(res.Err.Message, unknown) {
			t.Errorf("POST …/%s of an unknown execution = %d %q, want 404 naming %s", action, res.Status, res.Err.Message, unknown)
		}
	}
}

// An output over 1 MiB is a 413 naming the request's field: "output" on
// the single complete, "completions[i].output" in the batched one's item
// error (it was the store's name, "result").
func TestOversizeOutputNamesOutputField(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	env.Do(t, http.MethodPost, "/v1/executions", nil, `{"kind":"k"}`)
	res := env.Do(t, http.MethodPost, "/v1/worker/claim", nil, `{"worker_id":"w"}`)
	var cr wire.ClaimResponse
	if err := json.Unmarshal([]byte(res.Body), &cr); err != nil || len(cr.Tasks) != 1 {
		t.Fatalf("claim = %d %s", res.Status, res.Body)
	}
	tk := cr.Tasks[0]
	big := `"` + strings.Repeat("x", api.PayloadMaxBytes) + `"` // 2 bytes over
	res = env.Do(t, http.MethodPost, "/v1/executions/"+tk.ExecutionID+"/complete", nil,
		fmt.Sprintf(`{"lease_id":%q,"epoch":%d,"output":%s}`, tk.LeaseID, tk.Epoch, big))
	if res.Status != http.StatusRequestEntityTooLarge || res.Err.Code != wire.CodePayloadTooLarge || res.Field() != "output" {
		t.Errorf("single complete of a 1 MiB + 2 output = %d %s field %q (%s), want 413 payload_too_large naming output",
			res.Status, res.Err.Code, res.Field(), res.Err.Message)
	}
	res = env.Do(t, http.MethodPost, "/v1/worker/complete", nil,
		fmt.Sprintf(`{"completions":[{"execution_id":%q,"lease_id":%q,"epoch":%d,"output":%s}]}`, tk.ExecutionID, tk.LeaseID, tk.Epoch, big))
	var lr wire.LeaseResults
	if err := json.Unmarshal([]byte(res.Body), &lr); err != nil || len(lr.Results) != 1 || lr.Results[0].Error == nil {
		t.Fatalf("batched complete = %d %s", res.Status, clipBody(res.Body))
	}
	if e := lr.Results[0].Error; e.Code != wire.CodePayloadTooLarge || e.Details["field"] != "completions[0].output" {
		t.Errorf("batched complete of a 1 MiB + 2 output: item error %s field %v, want payload_too_large naming completions[0].output",
			e.Code, e.Details["field"])
	}
}

// A query string that does not parse (a bad escape, a ';') is a 400: Go
// drops such parameters, and the listing answered as if nothing had been
// asked.
func TestMalformedQueryIsRefused(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	for _, q := range []string{"limit=%zz", "limit=1;state=failed", "bogus%zz=1"} {
		res := env.Do(t, http.MethodGet, "/v1/executions?"+q, nil, "")
		if res.Status != http.StatusBadRequest {
			t.Errorf("GET /v1/executions?%s = %d %s, want a 400: the query was not understood", q, res.Status, clipBody(res.Body))
		}
	}
}

// A template run and a schedule's PUT take a body of 1 MiB + 64 KiB, as
// documented (a template run took 1 MiB + 128 KiB).
func TestBodyLimitsAsDocumented(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t, func(c *server.Config) { c.Templates = []*plan.Flow{twoStep()} })
	const mib = 1 << 20
	// 1 MiB + 100 KiB: the input is 512 KiB, the padding the rest.
	input := `{"s":"` + strings.Repeat("x", mib/2) + `"}`
	body := `{"input":` + input + strings.Repeat(" ", mib+100<<10-len(input)-len(`{"input":}`)) + `}`
	res := env.Do(t, http.MethodPost, "/v1/templates/two/runs", nil, body)
	if res.Status != http.StatusRequestEntityTooLarge {
		t.Errorf("template run of a %d-byte body = %d, want 413 (documented limit %d)", len(body), res.Status, mib+64<<10)
	}
	// A schedule's PUT: the same, an input of up to 1 MiB and the rest.
	put := `{"template":"two","cron":"@hourly","input":` + input + `}`
	put += strings.Repeat(" ", mib+100<<10-len(put))
	res = env.Do(t, http.MethodPut, "/v1/schedules/big", nil, put)
	if res.Status != http.StatusRequestEntityTooLarge {
		t.Errorf("PUT /v1/schedules/big of a %d-byte body = %d, want 413 (documented limit %d)", len(put), res.Status, mib+64<<10)
	}
	// Within the limit: taken.
	res = env.Do(t, http.MethodPost, "/v1/templates/two/runs", nil, `{"input":`+input+strings.Repeat(" ", 32<<10)+`}`)
	if res.Status != http.StatusCreated {
		t.Errorf("template run of a 512 KiB input = %d %s", res.Status, clipBody(res.Body))
	}
}

// A key value given for an unkeyed quota is refused by GET as by pause and
// resume (400 naming key); GET answered an invented subject with zero
// counts and hid the quota's real ones.
func TestQuotaKeyOfUnkeyedQuota(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	if res := env.Do(t, http.MethodPut, "/v1/quotas", nil, `{"name":"api","concurrency":2}`); res.Status != http.StatusCreated {
		t.Fatalf("PUT quota = %d %s", res.Status, res.Body)
	}
	if res := env.Do(t, http.MethodPost, "/v1/quotas/default/api/resume", nil, `{"key":"acme"}`); res.Status != http.StatusBadRequest || res.Field() != "key" {
		t.Fatalf("resume of an unkeyed quota with a key = %d %s, want the 400 naming key this test compares with", res.Status, res.Body)
	}
	res := env.Do(t, http.MethodGet, "/v1/quotas/default/api?key=acme", nil, "")
	if res.Status != http.StatusBadRequest || res.Err.Code != wire.CodeValidation || res.Field() != "key" {
		t.Errorf("GET /v1/quotas/default/api?key=acme of an unkeyed quota = %d %s, want 400 validation_failed naming key, as pause and resume answer",
			res.Status, clipBody(res.Body))
	}
}

// A query with an unknown parameter and a repeated one always gets the
// same answer (the unknown one, first): the code is stable, and the order
// of Go's map iteration once chose between two.
func TestQueryErrorIsStable(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	seen := map[string]int{}
	for range 200 {
		res := env.Do(t, http.MethodGet, "/v1/executions?bogus=1&limit=1&limit=2", nil, "")
		seen[res.Err.Code+" "+res.Field()]++
	}
	if len(seen) != 1 {
		t.Errorf("the same request answered %d ways: %v", len(seen), seen)
	}
}

// A negative limit of a budget's dimension is named by its full path
// (dimensions[0].hard or .soft), not the dimension.
func TestBudgetLimitFieldPath(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	for member, body := range map[string]string{
		"hard": `{"name":"b","dimensions":[{"name":"d","hard":-1}]}`,
		"soft": `{"name":"b","dimensions":[{"name":"d","hard":5,"soft":-1}]}`,
	} {
		res := env.Do(t, http.MethodPut, "/v1/budgets", nil, body)
		if want := "dimensions[0]." + member; res.Status != http.StatusBadRequest || res.Field() != want {
			t.Errorf("PUT /v1/budgets %s = %d field %q, want 400 naming %s", body, res.Status, res.Field(), want)
		}
	}
}

// A page of executions that holds the last one may still carry a cursor
// (the listing does not read ahead): the page it leads to is empty and
// carries none, as documented.
func TestExecutionListLastPageHasNoCursor(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t, func(c *server.Config) { c.FlowPartitions = 1 })
	for range 2 {
		env.Do(t, http.MethodPost, "/v1/executions", nil, `{"kind":"k"}`)
	}
	res := env.Do(t, http.MethodGet, "/v1/executions?limit=2", nil, "")
	var l wire.ExecutionList
	if err := json.Unmarshal([]byte(res.Body), &l); err != nil || len(l.Executions) != 2 {
		t.Fatalf("GET /v1/executions?limit=2 = %d %s", res.Status, clipBody(res.Body))
	}
	for cursor := l.NextCursor; cursor != ""; {
		res := env.Do(t, http.MethodGet, "/v1/executions?limit=2&cursor="+cursor, nil, "")
		var next wire.ExecutionList
		if err := json.Unmarshal([]byte(res.Body), &next); err != nil || len(next.Executions) != 0 || next.NextCursor != "" {
			t.Fatalf("the page after the last execution = %d %s, want an empty page without a cursor", res.Status, clipBody(res.Body))
		}
		cursor = next.NextCursor
	}
}

// A map's key in an error path is quoted in brackets, as flow input paths
// write it: a key may hold a '.', and tags.a.b would read as nested
// members.
func TestMapKeyPathIsUnambiguous(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	res := env.Do(t, http.MethodPost, "/v1/executions", nil, `{"kind":"k","tags":{"a.b":1}}`)
	if want := `tags["a.b"]`; res.Status != http.StatusBadRequest || res.Field() != want {
		t.Errorf("a number under tag \"a.b\" = %d field %q, want 400 naming %s", res.Status, res.Field(), want)
	}
}

// clipBody shortens an answer for a failure message.
func clipBody(s string) string {
	if len(s) > 300 {
		return s[:300] + "…"
	}
	return s
}
