package server_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/labstack/echo/v4"

	"github.com/flowfabric/ff/runtime/api"
	"github.com/flowfabric/ff/runtime/client"
	"github.com/flowfabric/ff/runtime/internal/valkeytest"
	"github.com/flowfabric/ff/runtime/server"
	"github.com/flowfabric/ff/runtime/server/servertest"
	"github.com/flowfabric/ff/runtime/wire"
)

func TestIdempotentCreate(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	ctx := ctxT(t)
	req := wire.CreateExecution{Kind: "k", IdempotencyKey: "order-42", Input: json.RawMessage(`1`)}
	first, created, err := env.Client.CreateExecution(ctx, req)
	if err != nil || !created {
		t.Fatalf("first create: created=%v err=%v", created, err)
	}
	req.Input = json.RawMessage(`2`)
	again, created, err := env.Client.CreateExecution(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if created || again.ID != first.ID || string(again.Input) != "1" {
		t.Fatalf("repeat: created=%v id=%s (first %s) input=%s", created, again.ID, first.ID, again.Input)
	}
	// Raw status codes: 201 then 200.
	for i, want := range []int{http.StatusOK, http.StatusCreated} {
		body := `{"kind":"k","idempotency_key":"order-42"}`
		if i == 1 {
			body = `{"kind":"k","idempotency_key":"order-43"}`
		}
		resp := rawDo(t, env, http.MethodPost, "/v1/executions", "", body)
		if resp.status != want {
			t.Errorf("create %d: status %d, want %d: %s", i, resp.status, want, resp.body)
		}
	}
	list, err := env.Client.ListExecutions(ctx, client.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Executions) != 2 {
		t.Fatalf("list: %d executions, want 2", len(list.Executions))
	}
}

type rawResp struct {
	status int
	body   string
	err    wire.ErrorBody
}

// rawDo sends one request with the bearer token (if any) through
// servertest's Env.Do.
func rawDo(t *testing.T, env *servertest.Env, method, path, token, body string) rawResp {
	t.Helper()
	var h map[string]string
	if token != "" {
		h = map[string]string{"Authorization": "Bearer " + token}
	}
	r := env.Do(t, method, path, h, body)
	return rawResp{status: r.Status, body: r.Body, err: r.Err}
}

func TestAuth(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t, func(c *server.Config) { c.Token = "s3cret-api-token" })
	tests := []struct {
		name, method, path, token string
		status                    int
		code                      string
	}{
		{"healthz open", http.MethodGet, "/healthz", "", 200, ""},
		{"readyz open", http.MethodGet, "/readyz", "", 200, ""},
		{"missing token", http.MethodGet, "/v1/executions", "", 401, wire.CodeUnauthorized},
		{"wrong token", http.MethodGet, "/v1/executions", "s3cret2", 401, wire.CodeUnauthorized},
		{"prefix of token", http.MethodGet, "/v1/executions", "s3c", 401, wire.CodeUnauthorized},
		{"right token", http.MethodGet, "/v1/executions", "s3cret-api-token", 200, ""},
		{"unknown route needs token", http.MethodGet, "/v1/nope", "", 401, wire.CodeUnauthorized},
		{"unknown route with token", http.MethodGet, "/v1/nope", "s3cret-api-token", 404, wire.CodeUnknownRoute},
		{"claim without token", http.MethodPost, "/v1/worker/claim", "", 401, wire.CodeUnauthorized},
		{"bare /v1 needs token", http.MethodGet, "/v1", "", 401, wire.CodeUnauthorized},
		// A token does not turn a wrong method into an unknown route.
		{"wrong method with token", http.MethodDelete, "/v1/executions", "s3cret-api-token", 405, wire.CodeMethodNotAllowed},
		{"wrong method with token, path parameter", http.MethodGet, "/v1/executions/x/cancel", "s3cret-api-token", 405, wire.CodeMethodNotAllowed},
		{"wrong method without token", http.MethodDelete, "/v1/executions", "", 401, wire.CodeUnauthorized},
		{"flow route wrong method with token", http.MethodDelete, "/v1/flows", "s3cret-api-token", 405, wire.CodeMethodNotAllowed},
		{"metrics needs token", http.MethodGet, "/metrics", "", 401, wire.CodeUnauthorized},
		{"metrics with token", http.MethodGet, "/metrics", "s3cret-api-token", 200, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := rawDo(t, env, tt.method, tt.path, tt.token, "")
			if r.status != tt.status || r.err.Code != tt.code {
				t.Errorf("status %d code %q, want %d %q (body %s)", r.status, r.err.Code, tt.status, tt.code, r.body)
			}
		})
	}
	// The Go client carries the token.
	c, err := client.New(env.URL, client.WithToken("s3cret-api-token"))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.CreateExecution(ctxT(t), wire.CreateExecution{Kind: "k"}); err != nil {
		t.Fatalf("create with token: %v", err)
	}
	bad, _ := client.New(env.URL)
	_, _, err = bad.CreateExecution(ctxT(t), wire.CreateExecution{Kind: "k"})
	if ae := apiErr(t, err); ae.Status != 401 || ae.Code != wire.CodeUnauthorized {
		t.Fatalf("create without token: %v", err)
	}
}

func TestBadInputsWriteNothing(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	big := `{"kind":"k","input":"` + strings.Repeat("x", 1<<20) + `"}`
	var batch bytes.Buffer
	batch.WriteString(`{"executions":[{"kind":"ok1"},{"kind":"ok2"},{"kind":"bad","priority":5000}]}`)
	tests := []struct {
		name, method, path, body string
		status                   int
		code                     string
	}{
		{"malformed", "POST", "/v1/executions", `{"kind":`, 400, wire.CodeInvalidJSON},
		{"not an object", "POST", "/v1/executions", `[1,2]`, 400, wire.CodeInvalidJSON},
		{"trailing data", "POST", "/v1/executions", `{"kind":"k"} {"kind":"k"}`, 400, wire.CodeInvalidJSON},
		{"empty body", "POST", "/v1/executions", ``, 400, wire.CodeInvalidJSON},
		{"wrong type", "POST", "/v1/executions", `{"kind":5}`, 400, wire.CodeInvalidJSON},
		{"unknown field", "POST", "/v1/executions", `{"kind":"k","colour":"red"}`, 400, wire.CodeUnknownField},
		{"missing kind", "POST", "/v1/executions", `{"lane":"x"}`, 400, wire.CodeValidation},
		{"priority out of range", "POST", "/v1/executions", `{"kind":"k","priority":1001}`, 400, wire.CodeValidation},
		{"bad capability", "POST", "/v1/executions", `{"kind":"k","requires":["a,b"]}`, 400, wire.CodeValidation},
		{"lane with colon", "POST", "/v1/executions", `{"kind":"k","lane":"a:b"}`, 400, wire.CodeValidation},
		{"bad retry", "POST", "/v1/executions", `{"kind":"k","retry":{"attempts":2,"backoff":"linear"}}`, 400, wire.CodeValidation},
		{"oversize", "POST", "/v1/executions", big, 413, wire.CodePayloadTooLarge},
		{"batch with a bad item", "POST", "/v1/executions/batch", batch.String(), 400, wire.CodeValidation},
		{"batch with a namespace the store refuses", "POST", "/v1/executions/batch", `{"executions":[{"kind":"ok1"},{"kind":"ok2","namespace":"a+b"}]}`, 400, wire.CodeValidation},
		{"batch unknown field", "POST", "/v1/executions/batch", `{"executions":[{"kind":"a","x":1}]}`, 400, wire.CodeUnknownField},
		{"empty batch", "POST", "/v1/executions/batch", `{"executions":[]}`, 400, wire.CodeValidation},
		{"claim unknown field", "POST", "/v1/worker/claim", `{"worker_id":"w","lanes":["a"],"bogus":1}`, 400, wire.CodeUnknownField},
		{"claim max too big", "POST", "/v1/worker/claim", `{"worker_id":"w","max":100000}`, 400, wire.CodeValidation},
		{"claim kind with a comma", "POST", "/v1/worker/claim", `{"worker_id":"w","kinds":["a,b"]}`, 400, wire.CodeValidation},
		{"claim empty kind", "POST", "/v1/worker/claim", `{"worker_id":"w","kinds":[""]}`, 400, wire.CodeValidation},
		{"complete malformed", "POST", "/v1/worker/complete", `{"completions":[{]}`, 400, wire.CodeInvalidJSON},
		{"complete no lease", "POST", "/v1/worker/complete", `{"completions":[{"execution_id":"0.x"}]}`, 400, wire.CodeValidation},
		{"complete unknown field", "POST", "/v1/worker/complete", `{"completions":[{"execution_id":"0.x","lease_id":"l","epoch":1,"extra":1}]}`, 400, wire.CodeUnknownField},
		{"complete data after", "POST", "/v1/worker/complete", `{"completions":[]} {}`, 400, wire.CodeInvalidJSON},
		{"complete empty", "POST", "/v1/worker/complete", ``, 400, wire.CodeInvalidJSON},
		{"complete null", "POST", "/v1/worker/complete", `{"completions":null}`, 400, wire.CodeValidation},
		{"complete wrong type", "POST", "/v1/worker/complete", `{"completions":[{"execution_id":"0.x","lease_id":"l","epoch":"1"}]}`, 400, wire.CodeInvalidJSON},
		{"list bad limit", "GET", "/v1/executions?limit=0", ``, 400, wire.CodeValidation},
		{"list unknown param", "GET", "/v1/executions?colour=red", ``, 400, wire.CodeUnknownField},
		{"list bad state", "GET", "/v1/executions?state=sleeping", ``, 400, wire.CodeValidation},
		{"get malformed id", "GET", "/v1/executions/nope", ``, 404, wire.CodeNotFound},
		{"get unknown id", "GET", "/v1/executions/1.00000000-0000-4000-8000-000000000000", ``, 404, wire.CodeNotFound},
		{"wrong method", "DELETE", "/v1/executions", ``, 405, wire.CodeMethodNotAllowed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := rawDo(t, env, tt.method, tt.path, "", tt.body)
			if r.status != tt.status || r.err.Code != tt.code {
				t.Errorf("status %d code %q, want %d %q (body %.300s)", r.status, r.err.Code, tt.status, tt.code, r.body)
			}
		})
	}
	list, err := env.Client.ListExecutions(ctxT(t), client.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Executions) != 0 {
		t.Fatalf("bad requests wrote %d executions: %+v", len(list.Executions), list.Executions)
	}
}

func TestBodyLimitConfigured(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t, func(c *server.Config) { c.BodyLimit = 100 })
	r := rawDo(t, env, "POST", "/v1/executions", "", `{"kind":"k","input":"`+strings.Repeat("y", 200)+`"}`)
	if diff := cmp.Diff([]any{413, wire.CodePayloadTooLarge}, []any{r.status, r.err.Code}); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
	list, err := env.Client.ListExecutions(ctxT(t), client.ListOptions{})
	if err != nil || len(list.Executions) != 0 {
		t.Fatalf("list after 413: %v %+v", err, list)
	}
}

// TestReadyzFollowsValkey: /readyz answers 503 with an error envelope once
// Valkey is gone, while /healthz (the process) stays 200.
func TestReadyzFollowsValkey(t *testing.T) {
	t.Parallel()
	logs := &logBuffer{t: t}
	vk, env := startOnOwnValkey(t, func(c *server.Config) { c.Logger = slogText(logs); c.DisableScanners = true })
	if r := rawDo(t, env, "GET", "/readyz", "", ""); r.status != 200 {
		t.Fatalf("readyz with valkey up: %d %s", r.status, r.body)
	}
	vk.Stop()
	// A check's outcome answers the probes of the next second.
	var r rawResp
	eventually(t, 5*time.Second, "readyz 503 with valkey down", func() (bool, string) {
		r = rawDo(t, env, "GET", "/readyz", "", "")
		return r.status == 503 && r.err.Code == wire.CodeUnavailable, fmt.Sprintf("%d %s", r.status, r.body)
	})
	// The open probe does not show where Valkey is or why it failed; the
	// log says why (a dial error with the address, or EOF on a connection
	// the restart broke), once per spell of unreadiness, however often the
	// probe asks.
	_, port, _ := strings.Cut(vk.Addr, ":")
	if strings.Contains(r.body, port) {
		t.Errorf("readyz shows the Valkey address: %s", r.body)
	}
	rawDo(t, env, "GET", "/readyz", "", "")
	var warned []string
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, `msg="not ready"`) {
			warned = append(warned, line)
		}
	}
	if len(warned) != 1 || !strings.Contains(warned[0], "error=") {
		t.Errorf("want one log line saying why; got %q", warned)
	}
	if r := rawDo(t, env, "GET", "/healthz", "", ""); r.status != 200 {
		t.Fatalf("healthz with valkey down: %d %s", r.status, r.body)
	}
}

// TestLibraryReloadedAfterFlush: after FUNCTION FLUSH (a restarted or
// failed-over server) API calls still work: the store reloads the library.
func TestLibraryReloadedAfterFlush(t *testing.T) {
	t.Parallel()
	addr := valkeytest.Start(t)
	env := servertest.Start(t, func(c *server.Config) { c.ValkeyAddr = addr })
	ctx := ctxT(t)
	vk := valkeytest.Client(t, addr)
	if err := vk.Do(ctx, vk.B().FunctionFlush().Build()).Error(); err != nil {
		t.Fatal(err)
	}
	ex, _, err := env.Client.CreateExecution(ctx, wire.CreateExecution{Kind: "k"})
	if err != nil {
		t.Fatalf("create after FUNCTION FLUSH: %v", err)
	}
	if r := rawDo(t, env, "GET", "/readyz", "", ""); r.status != 200 {
		t.Fatalf("readyz after reload: %d %s", r.status, r.body)
	}
	tasks, err := env.Client.Claim(ctx, wire.ClaimRequest{WorkerID: "w", WaitMs: 1000})
	if err != nil || len(tasks) != 1 || tasks[0].ExecutionID != ex.ID {
		t.Fatalf("claim after reload: %+v %v", tasks, err)
	}
}

// TestExtraRoutesShareAuthAndErrors: a route added through API().V1() is
// behind the token and answers errors in the envelope.
func TestExtraRoutesShareAuthAndErrors(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t, func(c *server.Config) { c.Token = "metrics-token-0123" })
	env.Server.API().V1().POST("/echo", func(c echo.Context) error {
		var body struct {
			N int `json:"n"`
		}
		if err := api.Decode(c, api.BodyLimitDefault, false, &body); err != nil {
			return err
		}
		return c.JSON(200, body)
	})
	if r := rawDo(t, env, "POST", "/v1/echo", "", `{"n":1}`); r.status != 401 {
		t.Fatalf("without token: %d %s", r.status, r.body)
	}
	if r := rawDo(t, env, "POST", "/v1/echo", "metrics-token-0123", `{"n":1,"m":2}`); r.status != 400 || r.err.Code != wire.CodeUnknownField {
		t.Fatalf("unknown field: %d %s", r.status, r.body)
	}
	if r := rawDo(t, env, "POST", "/v1/echo", "metrics-token-0123", `{"n":7}`); r.status != 200 || r.body != "{\"n\":7}\n" {
		t.Fatalf("ok: %d %q", r.status, r.body)
	}
}
