package api_test

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/flowfabric/ff/compiler/plan"
	"github.com/flowfabric/ff/runtime/client"
	"github.com/flowfabric/ff/runtime/internal/valkeytest"
	"github.com/flowfabric/ff/runtime/server"
	"github.com/flowfabric/ff/runtime/server/servertest"
	"github.com/flowfabric/ff/runtime/store"
	"github.com/flowfabric/ff/runtime/wire"
)

func TestMain(m *testing.M) {
	code := m.Run()
	valkeytest.StopShared()
	os.Exit(code)
}

// resp is one answer of the real server.
type resp struct {
	status int
	err    wire.ErrorBody
}

// field is the answer's details.field ("" when none).
func (r resp) field() string {
	f, _ := r.err.Details["field"].(string)
	return f
}

// do sends one request with an optional Authorization header.
func do(t *testing.T, env *servertest.Env, method, path, auth, body string) resp {
	t.Helper()
	var h map[string]string
	if auth != "" {
		h = map[string]string{"Authorization": auth}
	}
	r := env.Do(t, method, path, h, body)
	return resp{status: r.Status, err: r.Err}
}

// oneStep is a flow of one exec whose input is {"s": string}.
func oneStep() *plan.Flow {
	in := &plan.TypeRef{Kind: plan.KindNamed, Name: "In"}
	return &plan.Flow{
		Schema: plan.SchemaVersion, Name: "one", Namespace: "default", Lane: "default", Input: in, Output: in, Result: "a",
		Execs: []plan.Exec{{Name: "a", Kind: "one.a", Lane: "default", Priority: 100, Input: in, Output: in,
			InputFrom: plan.InputFlow, Join: plan.Join{Kind: plan.JoinAll}, Retry: plan.Retry{Attempts: 1, Backoff: plan.BackoffFixed}}},
		Edges: []plan.Edge{},
		Types: []plan.Type{{Name: "In", Fields: []plan.Field{{Name: "s", Type: plan.TypeRef{Kind: plan.KindString}}}}},
	}
}

func planJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// check is one expected refusal.
type check struct {
	name, method, path, body string
	status                   int
	code, field              string
	msg                      []string // in the message
}

func runChecks(t *testing.T, env *servertest.Env, auth string, tests []check) {
	t.Helper()
	for _, tt := range tests {
		r := do(t, env, tt.method, tt.path, auth, tt.body)
		if r.status != tt.status || r.err.Code != tt.code || r.field() != tt.field {
			t.Errorf("%s: %d %s field %q (%s), want %d %s field %q", tt.name, r.status, r.err.Code, r.field(), r.err.Message,
				tt.status, tt.code, tt.field)
		}
		for _, m := range tt.msg {
			if !strings.Contains(r.err.Message, m) {
				t.Errorf("%s: message %q does not contain %q", tt.name, r.err.Message, m)
			}
		}
		for _, goType := range []string{"struct", "plan.Flow", "wire.", "[]", "map["} {
			if strings.Contains(r.err.Message, goType) {
				t.Errorf("%s: message %q shows a Go type", tt.name, r.err.Message)
			}
		}
	}
}

// assertNothingWritten fails when any execution exists.
func assertNothingWritten(t *testing.T, env *servertest.Env) {
	t.Helper()
	list, err := env.Client.ListExecutions(t.Context(), client.ListOptions{Namespace: "default"})
	if err != nil || len(list.Executions) != 0 {
		t.Fatalf("refused requests wrote executions: %+v %v", list, err)
	}
}

// TestBodyErrorsNameTheirPath: decoding errors name the field by its
// whole path, in JSON terms, and member names are matched exactly.
func TestBodyErrorsNameTheirPath(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	good := planJSON(t, oneStep())
	bogus := strings.Replace(good, `"name":"a"`, `"name":"a","bogus":1`, 1)
	wrongType := strings.Replace(good, `"priority":100`, `"priority":"high"`, 1)
	pkg := planJSON(t, plan.Package{Schema: plan.SchemaVersion, Types: []plan.Type{}, Budgets: []plan.Budget{},
		Quotas: []plan.Quota{}, Flows: []plan.Flow{*oneStep()}})
	run := "/v1/flows/1.00000000-0000-4000-8000-000000000000"
	runChecks(t, env, "", []check{
		{"unknown field in an exec", "POST", "/v1/flows", `{"plan":` + bogus + `,"input":{"s":"x"}}`, 400,
			wire.CodeUnknownField, "plan.execs[0].bogus", []string{`"plan.execs[0].bogus"`}},
		{"wrong type in an exec", "POST", "/v1/flows", `{"plan":` + wrongType + `,"input":{"s":"x"}}`, 400,
			wire.CodeInvalidJSON, "plan.execs[0].priority", []string{"expected an integer, got JSON string"}},
		{"whole package", "POST", "/v1/flows", `{"plan":` + pkg + `,"input":{"s":"x"}}`, 400,
			wire.CodeUnknownField, "plan.quotas", []string{"ffc plan -flow NAME"}},
		{"whole package as the body", "POST", "/v1/flows", pkg, 400,
			wire.CodeUnknownField, "schema", []string{"ffc plan -flow NAME", `{"plan": …, "input": …}`}},
		{"plan as the body", "POST", "/v1/flows", good, 400,
			wire.CodeUnknownField, "schema", []string{`send it as {"plan": …, "input": …}`}},
		{"plan not an object", "POST", "/v1/flows", `{"plan":5}`, 400,
			wire.CodeInvalidJSON, "plan", []string{"expected a JSON object, got JSON number"}},
		{"replay body an array", "POST", run + "/replay", `[]`, 400,
			wire.CodeInvalidJSON, "", []string{"request body: expected a JSON object, got JSON array"}},
		{"upper-case member", "POST", "/v1/flows", `{"PLAN":` + good + `,"input":{"s":"x"}}`, 400,
			wire.CodeUnknownField, "PLAN", []string{`did you mean "plan"`}},
		{"upper-case nested member", "POST", "/v1/flows", `{"plan":` + strings.Replace(good, `"execs"`, `"Execs"`, 1) + `,"input":{"s":"x"}}`, 400,
			wire.CodeUnknownField, "plan.Execs", []string{`did you mean "execs"`}},
		{"escaped upper-case member", "POST", "/v1/executions", `{"kind":"k","\u004Bind":"j"}`, 400,
			wire.CodeUnknownField, "Kind", nil},
		{"key given in two cases", "POST", "/v1/executions", `{"kind":"k","idempotency_key":"a","IDEMPOTENCY_KEY":"b"}`, 400,
			wire.CodeUnknownField, "IDEMPOTENCY_KEY", []string{"case-sensitive"}},
		{"Kelvin sign folds to k", "POST", "/v1/executions", `{"\u212Aind":"k"}`, 400,
			wire.CodeUnknownField, "\u212Aind", nil},
		{"claim member", "POST", "/v1/worker/claim", `{"worker_id":"w","Max":2}`, 400,
			wire.CodeUnknownField, "Max", nil},
		{"batch item type", "POST", "/v1/executions/batch", `{"executions":[{"kind":"k"},{"kind":"k","priority":"x"}]}`, 400,
			wire.CodeInvalidJSON, "executions[1].priority", []string{"expected an integer"}},
		{"batch item unknown", "POST", "/v1/executions/batch", `{"executions":[{"kind":"k"},{"kind":"k","prio":1}]}`, 400,
			wire.CodeUnknownField, "executions[1].prio", nil},
	})
	assertNothingWritten(t, env)
	// Exact names still decode, upper case in values is no member name.
	if r := do(t, env, "POST", "/v1/executions", "", `{"kind":"K","input":{"Upper":"CASE"},"tags":{"Team":"A"}}`); r.status != 201 {
		t.Fatalf("create with upper-case values: %d %+v", r.status, r.err)
	}
}

// TestQueryParametersAreStrict: every route refuses a query parameter it
// does not take, a parameter given twice, and an empty wait_ms or limit,
// before anything is written.
func TestQueryParametersAreStrict(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	running, err := env.Client.StageFlow(t.Context(), oneStep(), map[string]string{"s": "x"})
	if err != nil {
		t.Fatal(err)
	}
	run := "/v1/flows/" + running.ID
	unknown := "/v1/flows/1.00000000-0000-4000-8000-000000000000"
	body := `{"plan":` + planJSON(t, oneStep()) + `,"input":{"s":"x"}}`
	runChecks(t, env, "", []check{
		{"empty wait_ms", "GET", run + "/result?wait_ms=", "", 400, wire.CodeValidation, "wait_ms", nil},
		{"wait_ms twice", "GET", run + "/result?wait_ms=1&wait_ms=2", "", 400, wire.CodeValidation, "wait_ms", []string{"2 times"}},
		{"stage empty wait_ms", "POST", "/v1/flows?wait_ms=", body, 400, wire.CodeValidation, "wait_ms", nil},
		{"stage wait_ms twice", "POST", "/v1/flows?wait_ms=1&wait_ms=1", body, 400, wire.CodeValidation, "wait_ms", nil},
		{"cancel run unknown query", "POST", run + "/cancel?force=1", "", 400, wire.CodeUnknownField, "force", nil},
		{"replay run unknown query", "POST", unknown + "/replay?force=1", "", 400, wire.CodeUnknownField, "force", nil},
		{"cancel execution unknown query", "POST", "/v1/executions/1.00000000-0000-4000-8000-000000000000/cancel?force=1", "", 400, wire.CodeUnknownField, "force", nil},
		{"get execution unknown query", "GET", "/v1/executions/1.00000000-0000-4000-8000-000000000000?x=1", "", 400, wire.CodeUnknownField, "x", nil},
		{"create unknown query", "POST", "/v1/executions?lane=a", `{"kind":"k"}`, 400, wire.CodeUnknownField, "lane", nil},
		{"claim unknown query", "POST", "/v1/worker/claim?wait_ms=1", `{"worker_id":"w"}`, 400, wire.CodeUnknownField, "wait_ms", nil},
		{"heartbeat unknown query", "POST", "/v1/workers/heartbeat?x", `{"worker_id":"w"}`, 400, wire.CodeUnknownField, "x", nil},
		{"list empty limit", "GET", "/v1/executions?limit=", "", 400, wire.CodeValidation, "limit", nil},
		{"list lane twice", "GET", "/v1/executions?lane=a&lane=b", "", 400, wire.CodeValidation, "lane", nil},
	})
	// The refused cancel changed nothing; without the parameter it works.
	r, err := env.Client.GetRun(t.Context(), running.ID)
	if err != nil || r.State != "running" {
		t.Fatalf("run after a refused cancel: %+v %v", r, err)
	}
	if res := do(t, env, "POST", run+"/cancel", "", ""); res.status != 200 {
		t.Fatalf("cancel: %d %+v", res.status, res.err)
	}
	if res := do(t, env, "GET", run+"/result?wait_ms=0", "", ""); res.status != 200 {
		t.Fatalf("result: %d %+v", res.status, res.err)
	}
}

// TestOversizeFlowInputNamesTheLimit: a 413 carries details.limit_bytes,
// also when the store refuses a flow's input.
func TestOversizeFlowInputNamesTheLimit(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	big := strings.Repeat("x", store.MaxPayloadBytes)
	r := do(t, env, "POST", "/v1/flows", "", `{"plan":`+planJSON(t, oneStep())+`,"input":{"s":"`+big+`"}}`)
	if r.status != 413 || r.err.Code != wire.CodePayloadTooLarge || r.field() != "input" {
		t.Fatalf("oversize flow input: %d %+v", r.status, r.err)
	}
	if got, _ := r.err.Details["limit_bytes"].(float64); got != store.MaxPayloadBytes {
		t.Fatalf("details %v, want limit_bytes %d", r.err.Details, store.MaxPayloadBytes)
	}
	assertNothingWritten(t, env)
}

// TestBearerSchemeIsCaseInsensitive: RFC 7235 auth schemes ignore case.
func TestBearerSchemeIsCaseInsensitive(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t, func(c *server.Config) { c.Token = "s3cret-api-token" })
	for auth, want := range map[string]int{
		"Bearer s3cret-api-token":  200,
		"bearer s3cret-api-token":  200,
		"BEARER  s3cret-api-token": 200,
		"Bearer S3CRET-API-TOKEN":  401, // the token itself is exact
		"Basic s3cret-api-token":   401,
		"bearers3cret-api-token":   401,
		"":                         401,
	} {
		if r := do(t, env, "GET", "/v1/executions", auth, ""); r.status != want {
			t.Errorf("Authorization %q: %d %+v, want %d", auth, r.status, r.err, want)
		}
	}
}

// TestNotFoundNamesTheID: unknown and malformed ids get the same wording.
func TestNotFoundNamesTheID(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	unknown := "1.00000000-0000-4000-8000-000000000000"
	runChecks(t, env, "", []check{
		{"malformed run", "GET", "/v1/flows/nonsense", "", 404, wire.CodeNotFound, "", []string{`no such run "nonsense"`}},
		{"unknown run", "GET", "/v1/flows/" + unknown, "", 404, wire.CodeNotFound, "", []string{`no such run "` + unknown + `"`}},
		{"unknown run result", "GET", "/v1/flows/" + unknown + "/result", "", 404, wire.CodeNotFound, "", []string{`no such run "` + unknown + `"`}},
		{"cancel unknown run", "POST", "/v1/flows/" + unknown + "/cancel", "", 404, wire.CodeNotFound, "", []string{`no such run "` + unknown + `"`}},
		{"malformed execution", "GET", "/v1/executions/nonsense", "", 404, wire.CodeNotFound, "", []string{`no such execution "nonsense"`}},
		{"unknown execution", "GET", "/v1/executions/" + unknown, "", 404, wire.CodeNotFound, "", []string{`no such execution "` + unknown + `"`}},
		{"cancel unknown execution", "POST", "/v1/executions/" + unknown + "/cancel", "", 404, wire.CodeNotFound, "", []string{`no such execution "` + unknown + `"`}},
		{"unknown template", "GET", "/v1/templates/nonsense", "", 404, wire.CodeNotFound, "", []string{`no such template "nonsense"`}},
	})
}
