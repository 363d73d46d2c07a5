package server_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flowfabric/ff/compiler/plan"
	"github.com/flowfabric/ff/runtime/client"
	"github.com/flowfabric/ff/runtime/internal/valkeytest"
	"github.com/flowfabric/ff/runtime/server"
	"github.com/flowfabric/ff/runtime/server/servertest"
	"github.com/flowfabric/ff/runtime/wire"
)

// twoStep is a flow a -> b whose input is a record with one required
// string field.
func twoStep() *plan.Flow {
	in := &plan.TypeRef{Kind: plan.KindNamed, Name: "In"}
	ex := func(name string, from string) plan.Exec {
		x := plan.Exec{Name: name, Kind: "two." + name, Lane: "default", Priority: 100, Input: in, Output: in,
			InputFrom: from, Join: plan.Join{Kind: plan.JoinAll}, Retry: plan.Retry{Attempts: 1, Backoff: plan.BackoffFixed}}
		if from == plan.InputExec {
			x.InputExec, x.Upstreams = "a", []string{"a"}
		}
		return x
	}
	return &plan.Flow{
		Schema: plan.SchemaVersion, Name: "two", Namespace: "default", Lane: "default",
		Input: in, Output: in, Result: "b",
		Execs: []plan.Exec{ex("a", plan.InputFlow), ex("b", plan.InputExec)},
		Edges: []plan.Edge{{From: "a", To: "b", On: plan.OnSuccess}},
		Types: []plan.Type{{Name: "In", Fields: []plan.Field{{Name: "s", Type: plan.TypeRef{Kind: plan.KindString}}}}},
	}
}

// stageTwoStep stages a twoStep run with input {"s": "x"}.
func stageTwoStep(t *testing.T, env *servertest.Env) *client.Run {
	t.Helper()
	run, err := env.Client.StageFlow(ctxT(t), twoStep(), map[string]string{"s": "x"})
	if err != nil {
		t.Fatal(err)
	}
	return run
}

func stageBody(t *testing.T, f *plan.Flow, input string) string {
	t.Helper()
	p, err := json.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf(`{"plan": %s, "input": %s}`, p, input)
}

// TestFlowRouteErrors: every refusal of the flow routes keeps the error
// envelope, names the field, and writes nothing.
func TestFlowRouteErrors(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t, func(c *server.Config) { c.Templates = []*plan.Flow{twoStep()} })
	bad := twoStep()
	bad.Edges = append(bad.Edges, plan.Edge{From: "b", To: "a", On: plan.OnSuccess})
	tests := []struct {
		name, method, path, body string
		status                   int
		code, field              string
	}{
		{"no body", "POST", "/v1/flows", "", 400, wire.CodeInvalidJSON, ""},
		{"no plan", "POST", "/v1/flows", `{"input": {"s": "x"}}`, 400, wire.CodeValidation, "plan"},
		{"unknown field", "POST", "/v1/flows", `{"plan": {}, "inputs": 1}`, 400, wire.CodeUnknownField, "inputs"},
		{"cyclic plan", "POST", "/v1/flows", stageBody(t, bad, `{"s": "x"}`), 400, wire.CodeValidation, "plan.edges"},
		{"input type", "POST", "/v1/flows", stageBody(t, twoStep(), `{"s": 1}`), 400, wire.CodeValidation, "input.s"},
		{"input missing", "POST", "/v1/flows", stageBody(t, twoStep(), `null`), 400, wire.CodeValidation, "input"},
		{"bad namespace", "POST", "/v1/templates/two/runs", `{"input": {"s": "x"}, "namespace": "a b"}`, 400, wire.CodeValidation, "namespace"},
		{"long key", "POST", "/v1/templates/two/runs", `{"input": {"s": "x"}, "idempotency_key": "` + strings.Repeat("k", 257) + `"}`, 400, wire.CodeValidation, "idempotency_key"},
		{"control key", "POST", "/v1/templates/two/runs", `{"input": {"s": "x"}, "idempotency_key": "a\u0001b"}`, 400, wire.CodeValidation, "idempotency_key"},
		{"control key staged", "POST", "/v1/flows", strings.TrimSuffix(stageBody(t, twoStep(), `{"s": "x"}`), "}") + `, "idempotency_key": "a\u007fb"}`, 400, wire.CodeValidation, "idempotency_key"},
		{"unknown template", "POST", "/v1/templates/three/runs", `{}`, 404, wire.CodeNotFound, ""},
		{"unknown template get", "GET", "/v1/templates/three", "", 404, wire.CodeNotFound, ""},
		{"unknown run", "GET", "/v1/flows/0.00000000-0000-4000-8000-000000000000", "", 404, wire.CodeNotFound, ""},
		{"malformed run id", "GET", "/v1/flows/nope/result", "", 404, wire.CodeNotFound, ""},
		{"unknown run result", "GET", "/v1/flows/0.00000000-0000-4000-8000-000000000000/result", "", 404, wire.CodeNotFound, ""},
		{"unknown run result waiting", "GET", "/v1/flows/0.00000000-0000-4000-8000-000000000000/result?wait_ms=5000", "", 404, wire.CodeNotFound, ""},
		{"cancel unknown run", "POST", "/v1/flows/1.00000000-0000-4000-8000-000000000000/cancel", "", 404, wire.CodeNotFound, ""},
		{"replay unknown run", "POST", "/v1/flows/1.00000000-0000-4000-8000-000000000000/replay", "", 404, wire.CodeNotFound, ""},
		{"wait too long", "GET", "/v1/flows/1.00000000-0000-4000-8000-000000000000/result?wait_ms=60001", "", 400, wire.CodeValidation, "wait_ms"},
		{"stage wait too long", "POST", "/v1/flows?wait_ms=60001", stageBody(t, twoStep(), `{"s": "x"}`), 400, wire.CodeValidation, "wait_ms"},
		{"stage wait not a number", "POST", "/v1/templates/two/runs?wait_ms=soon", `{"input": {"s": "x"}}`, 400, wire.CodeValidation, "wait_ms"},
		{"stage unknown query", "POST", "/v1/flows?wait=5s", stageBody(t, twoStep(), `{"s": "x"}`), 400, wire.CodeUnknownField, "wait"},
		{"template unknown query", "POST", "/v1/templates/two/runs?namespace=x", `{"input": {"s": "x"}}`, 400, wire.CodeUnknownField, "namespace"},
		{"unknown query", "GET", "/v1/flows/1.00000000-0000-4000-8000-000000000000?state=x", "", 400, wire.CodeUnknownField, "state"},
		{"replay body", "POST", "/v1/flows/1.00000000-0000-4000-8000-000000000000/replay", `{"from": "a"}`, 400, wire.CodeUnknownField, "from"},
		{"long reason", "POST", "/v1/flows/1.00000000-0000-4000-8000-000000000000/cancel", `{"reason": "` + strings.Repeat("r", 2000) + `"}`, 400, wire.CodeValidation, "reason"},
		{"method", "DELETE", "/v1/flows/1.00000000-0000-4000-8000-000000000000", "", 405, wire.CodeMethodNotAllowed, ""},
		{"list state", "GET", "/v1/flows?state=done", "", 400, wire.CodeValidation, "state"},
		{"list flow", "GET", "/v1/flows?flow=a-b", "", 400, wire.CodeValidation, "flow"},
		{"list namespace", "GET", "/v1/flows?namespace=a%20b", "", 400, wire.CodeValidation, "namespace"},
		{"list limit", "GET", "/v1/flows?limit=501", "", 400, wire.CodeValidation, "limit"},
		{"list empty limit", "GET", "/v1/flows?limit=", "", 400, wire.CodeValidation, "limit"},
		{"list cursor", "GET", "/v1/flows?cursor=abc", "", 400, wire.CodeValidation, "cursor"},
		{"list unknown query", "GET", "/v1/flows?lane=default", "", 400, wire.CodeUnknownField, "lane"},
	}
	for _, tt := range tests {
		r := rawDo(t, env, tt.method, tt.path, "", tt.body)
		var field string
		if f, ok := r.err.Details["field"].(string); ok {
			field = f
		}
		if r.status != tt.status || r.err.Code != tt.code || field != tt.field {
			t.Errorf("%s: %d %s field %q (%s), want %d %s field %q", tt.name, r.status, r.err.Code, field, r.err.Message, tt.status, tt.code, tt.field)
		}
	}
	list, err := env.Client.ListExecutions(ctxT(t), client.ListOptions{Namespace: "default"})
	if err != nil || len(list.Executions) != 0 {
		t.Fatalf("refused stagings wrote executions: %+v %v", list, err)
	}
	runs, err := env.Client.ListRuns(ctxT(t), client.RunListOptions{})
	if err != nil || len(runs.Runs) != 0 || runs.NextCursor != "" {
		t.Fatalf("refused stagings wrote runs: %+v %v", runs, err)
	}
}

// TestUnknownTemplateSuggests: a template name that is a likely
// misspelling of a served one gets a suggestion, in the message and in
// details.suggestion; a name close to none gets neither.
func TestUnknownTemplateSuggests(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t, func(c *server.Config) { c.Templates = []*plan.Flow{twoStep()} })
	for _, tc := range []struct{ method, path, body, msg, suggestion string }{
		{"GET", "/v1/templates/tow", "", `no such template "tow"; did you mean "two"? (GET /v1/templates lists them)`, "two"},
		{"POST", "/v1/templates/tow/runs", `{}`, `no such template "tow"; did you mean "two"? (GET /v1/templates lists them)`, "two"},
		{"GET", "/v1/templates/three", "", `no such template "three" (GET /v1/templates lists them)`, ""},
	} {
		r := rawDo(t, env, tc.method, tc.path, "", tc.body)
		s, _ := r.err.Details["suggestion"].(string)
		if r.status != 404 || r.err.Message != tc.msg || s != tc.suggestion {
			t.Errorf("%s %s: %d %q details %v, want 404 %q with suggestion %q", tc.method, tc.path, r.status, r.err.Message, r.err.Details, tc.msg, tc.suggestion)
		}
	}
}

// TestListRunsOverHTTP: GET /v1/flows lists runs newest first, filters
// them, pages with next_cursor, and says what each run is at.
func TestListRunsOverHTTP(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	ctx := ctxT(t)
	var ids []string // in staging order
	for range 3 {
		ids = append(ids, stageTwoStep(t, env).ID)
		time.Sleep(2 * time.Millisecond) // distinct staging times: the order is known
	}
	if _, err := env.Client.CancelRun(ctx, ids[1], "stop"); err != nil {
		t.Fatal(err)
	}
	states := func(l *wire.FlowRunList) []string {
		var out []string
		for _, r := range l.Runs {
			out = append(out, r.ID+" "+r.Flow+" "+r.State)
		}
		return out
	}
	all, err := env.Client.ListRuns(ctx, client.RunListOptions{Namespace: "default"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{ids[2] + " two running", ids[1] + " two cancelled", ids[0] + " two running"}
	if diff := cmp.Diff(want, states(all)); diff != "" || all.NextCursor != "" {
		t.Fatalf("list (-want +got):\n%s; next_cursor %q", diff, all.NextCursor)
	}
	if r := all.Runs[1]; r.Total != 2 || r.Done != 2 || r.Cancelled != 2 || r.ResultExec != "" ||
		r.CreatedAt == nil || r.EndedAt == nil || len(r.Execs) != 0 || r.Error != "" {
		t.Fatalf("listed cancelled run = %+v", r)
	}
	cancelled, err := env.Client.ListRuns(ctx, client.RunListOptions{State: "cancelled", Flow: "two"})
	if err != nil || cmp.Diff(want[1:2], states(cancelled)) != "" {
		t.Fatalf("cancelled runs = %v, %v", states(cancelled), err)
	}
	// Pages of one, through the raw route: the cursor goes back as is.
	var got []string
	path := "/v1/flows?limit=1"
	for range 4 {
		r := env.Do(t, "GET", path, nil, "")
		var page wire.FlowRunList
		if r.Status != http.StatusOK || json.Unmarshal([]byte(r.Body), &page) != nil {
			t.Fatalf("GET %s = %d %s", path, r.Status, r.Body)
		}
		got = append(got, states(&page)...)
		if page.NextCursor == "" {
			break
		}
		if !strings.Contains(r.Body, `"next_cursor":`) {
			t.Fatalf("no next_cursor in %s", r.Body)
		}
		path = "/v1/flows?limit=1&cursor=" + url.QueryEscape(page.NextCursor)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("pages of one (-want +got):\n%s", diff)
	}
	other, err := env.Client.ListRuns(ctx, client.RunListOptions{Namespace: "elsewhere"})
	if err != nil || len(other.Runs) != 0 {
		t.Fatalf("another namespace = %+v, %v", other, err)
	}
}

// TestFlowStoreRefusalNamesPlanPath: what only the store checks in a plan
// (a budget definition's on_hard_limit) is refused with the field's path
// in the request body, under "plan".
func TestFlowStoreRefusalNamesPlanPath(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	f := twoStep()
	f.BudgetDefs = []plan.Budget{{Name: "b", Scope: plan.ScopeShared, OnHardLimit: "explode",
		Dimensions: []plan.Dimension{{Name: "n", Hard: 1}}}}
	f.Execs[0].Budgets = []string{"b"}
	body, err := json.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	r := rawDo(t, env, "POST", "/v1/flows", "", `{"plan": `+string(body)+`, "input": {"s": "x"}}`)
	if r.status != http.StatusBadRequest || r.err.Details["field"] != "plan.budget_defs[0].on_hard_limit" {
		t.Fatalf("plan with a bad budget definition: %d %s", r.status, r.body)
	}
}

// TestFlowIdempotencyKeyOfAnotherFlow: a key used by a run of one flow is
// refused to another flow (409 naming the holder), not answered with the
// other flow's run.
func TestFlowIdempotencyKeyOfAnotherFlow(t *testing.T) {
	t.Parallel()
	other := twoStep()
	other.Name = "other"
	env := servertest.Start(t, func(c *server.Config) { c.Templates = []*plan.Flow{twoStep(), other} })
	r := rawDo(t, env, "POST", "/v1/templates/two/runs", "", `{"input": {"s": "x"}, "idempotency_key": "k9"}`)
	var run wire.FlowRun
	if err := json.Unmarshal([]byte(r.body), &run); err != nil || r.status != http.StatusCreated {
		t.Fatalf("stage two: %d %s", r.status, r.body)
	}
	r = rawDo(t, env, "POST", "/v1/templates/other/runs", "", `{"input": {"s": "x"}, "idempotency_key": "k9"}`)
	want := map[string]any{"field": "idempotency_key", "run_id": run.ID, "flow": "two"}
	if r.status != http.StatusConflict || r.err.Code != wire.CodeConflict || !cmp.Equal(r.err.Details, want) {
		t.Fatalf("other with two's key: %d %s, want 409 conflict with details %v", r.status, r.body, want)
	}
}

// TestFlowRunOverHTTP stages, inspects, waits for and cancels a run with
// a hand-driven worker (claim/complete over HTTP).
func TestFlowRunOverHTTP(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t, func(c *server.Config) { c.Templates = []*plan.Flow{twoStep()} })
	ctx := ctxT(t)
	c := env.Client

	r := rawDo(t, env, "POST", "/v1/templates/two/runs", "", `{"input": {"s": "x"}, "idempotency_key": "k1"}`)
	var run wire.FlowRun
	if err := json.Unmarshal([]byte(r.body), &run); err != nil || r.status != http.StatusCreated || run.Created == nil || !*run.Created {
		t.Fatalf("stage: %d %s", r.status, r.body)
	}
	r = rawDo(t, env, "POST", "/v1/templates/two/runs", "", `{"input": {"s": "y"}, "idempotency_key": "k1"}`)
	var again wire.FlowRun
	if err := json.Unmarshal([]byte(r.body), &again); err != nil || r.status != http.StatusOK || again.ID != run.ID || *again.Created {
		t.Fatalf("repeat: %d %s", r.status, r.body)
	}
	got := map[string]string{}
	for _, x := range run.Execs {
		got[x.Name] = x.State
	}
	if diff := cmp.Diff(map[string]string{"a": "waiting", "b": "pending"}, got); diff != "" {
		t.Fatalf("states after staging (-want +got):\n%s", diff)
	}
	if _, err := c.RunResult(ctx, run.ID, 0); !client.IsCode(err, wire.CodeNotTerminal) {
		t.Fatalf("result of a running run: %v", err)
	}

	// a runs and passes its output to b.
	tasks, err := c.Claim(ctx, wire.ClaimRequest{WorkerID: "w", WaitMs: 2000})
	if err != nil || len(tasks) != 1 || tasks[0].Kind != "two.a" || string(tasks[0].Input) != `{"s":"x"}` {
		t.Fatalf("claim a: %+v %v", tasks, err)
	}
	if _, err := c.CompleteOne(ctx, wire.Lease{ExecutionID: tasks[0].ExecutionID, LeaseID: tasks[0].LeaseID, Epoch: tasks[0].Epoch}, json.RawMessage(`{"s":"from a"}`)); err != nil {
		t.Fatal(err)
	}
	tasks, err = c.Claim(ctx, wire.ClaimRequest{WorkerID: "w", WaitMs: 2000})
	if err != nil || len(tasks) != 1 || tasks[0].Kind != "two.b" || string(tasks[0].Input) != `{"s":"from a"}` || string(tasks[0].Upstreams["a"]) != `{"s":"from a"}` {
		t.Fatalf("claim b: %+v %v", tasks, err)
	}
	// A waiting result request answers when b completes.
	done := make(chan *wire.FlowRun, 1)
	go func() {
		res, err := c.RunResult(ctx, run.ID, 20*time.Second)
		if err != nil {
			t.Errorf("waiting result: %v", err)
		}
		done <- res
	}()
	time.Sleep(50 * time.Millisecond)
	if _, err := c.CompleteOne(ctx, wire.Lease{ExecutionID: tasks[0].ExecutionID, LeaseID: tasks[0].LeaseID, Epoch: tasks[0].Epoch}, json.RawMessage(`{"s":"done"}`)); err != nil {
		t.Fatal(err)
	}
	select {
	case res := <-done:
		if res == nil || res.State != wire.RunSucceeded || string(res.Result) != `{"s":"done"}` || len(res.Execs) != 0 || res.EndedAt == nil {
			t.Fatalf("result: %+v", res)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the waiting result request did not answer")
	}
	// Cancelling an ended run changes nothing; replaying a succeeded one
	// is a conflict.
	out, err := c.CancelRun(ctx, run.ID, "late")
	if err != nil || out.State != wire.RunSucceeded {
		t.Fatalf("cancel after the end: %+v %v", out, err)
	}
	_, err = c.ReplayRun(ctx, run.ID)
	if ae := apiErr(t, err); ae.Code != wire.CodeConflict || ae.Details["op"] != "replay" || ae.Details["state"] != wire.RunSucceeded {
		t.Fatalf("replay of a succeeded run: %v %v", err, ae.Details)
	}
}

// TestShutdownAnswersWaitingResults: a result request parked on a running
// run does not hold up shutdown.
func TestShutdownAnswersWaitingResults(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	ctx := ctxT(t)
	run := stageTwoStep(t, env)
	answered := make(chan error, 1)
	written := make(chan struct{})
	wrote := sync.OnceFunc(func() { close(written) })
	traced := httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{WroteRequest: func(httptrace.WroteRequestInfo) { wrote() }})
	go func() {
		_, err := env.Client.RunResult(traced, run.ID, 60*time.Second)
		answered <- err
	}()
	// Shutdown closes the listener, and a request not sent by then is
	// refused rather than answered: wait until it is on the wire (which
	// may take long on a loaded machine), then give the server a moment to
	// take it up and park it.
	select {
	case <-written:
	case <-ctx.Done():
		t.Fatal("the result request was never sent")
	}
	time.Sleep(100 * time.Millisecond)
	start := time.Now()
	if err := env.Stop(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("shutdown took %s with a waiting result request", d)
	}
	select {
	case err := <-answered:
		if !client.IsCode(err, wire.CodeNotTerminal) {
			t.Fatalf("waiting request answered %v, want not_terminal", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the waiting request never answered")
	}
}

// TestStageWaits: a staging request with wait_ms answers with the run's
// outcome once it ended (no members, as GET .../result), or with the
// staged run when the wait runs out; through the client, WithWait makes
// Result answer from the staging answer without another request.
func TestStageWaits(t *testing.T) {
	t.Parallel()
	// No safety-net re-read: the staging wait must be woken by the run's
	// end, watched before the run was written.
	env := servertest.Start(t, func(c *server.Config) { c.Templates = []*plan.Flow{twoStep()}; c.RunPoll = time.Hour })
	ctx := ctxT(t)

	// Nobody runs the members: the wait runs out and the run is answered
	// as staged, with its members.
	start := time.Now()
	r := rawDo(t, env, "POST", "/v1/templates/two/runs?wait_ms=150", "", `{"input": {"s": "x"}}`)
	var run wire.FlowRun
	if err := json.Unmarshal([]byte(r.body), &run); err != nil || r.status != http.StatusCreated || run.State != wire.RunRunning || len(run.Execs) != 2 || !*run.Created {
		t.Fatalf("stage with a wait nobody ends: %d %s", r.status, r.body)
	}
	if waited := time.Since(start); waited < 150*time.Millisecond {
		t.Fatalf("answered after %s, before the wait ran out", waited)
	}
	if _, err := env.Client.CancelRun(ctx, run.ID, "test"); err != nil {
		t.Fatal(err)
	}

	// A worker runs both members while the staging request waits.
	go driveTwo(t, env)
	body, err := json.Marshal(twoStep())
	if err != nil {
		t.Fatal(err)
	}
	var requests countingTransport
	c, err := client.New(env.URL, client.WithHTTPClient(&http.Client{Transport: &requests}))
	if err != nil {
		t.Fatal(err)
	}
	staged, err := c.StageFlowJSON(ctx, body, map[string]string{"s": "y"}, client.WithWait(20*time.Second), client.WithIdempotencyKey("w1"))
	if err != nil {
		t.Fatal(err)
	}
	out, err := staged.Result(ctx)
	if err != nil || string(out) != `{"s":"b saw y"}` || !staged.Created {
		t.Fatalf("result: %s %v (created %v)", out, err, staged.Created)
	}
	if n := requests.n.Load(); n != 1 {
		t.Fatalf("%d requests to stage and read the result, want 1", n)
	}
	// The same key again: the first run, ended, answered at once (200).
	r = rawDo(t, env, "POST", "/v1/flows?wait_ms=20000", "", `{"plan": `+string(body)+`, "input": {"s": "z"}, "idempotency_key": "w1"}`)
	var again wire.FlowRun
	if err := json.Unmarshal([]byte(r.body), &again); err != nil || r.status != http.StatusOK || again.ID != staged.ID ||
		again.State != wire.RunSucceeded || string(again.Result) != `{"s":"b saw y"}` || len(again.Execs) != 0 || *again.Created {
		t.Fatalf("repeat with a wait: %d %s", r.status, r.body)
	}
	// A replayed handle asks the server again rather than answer the old
	// outcome.
	if _, err := staged.Replay(ctx); !client.IsCode(err, wire.CodeConflict) {
		t.Fatalf("replay of a succeeded run: %v", err)
	}
	if _, err := staged.Result(ctx); err != nil || requests.n.Load() != 3 {
		t.Fatalf("result after replay: %v, %d requests (want 3)", err, requests.n.Load())
	}
}

// driveTwo runs the members of twoStep runs as they come: a passes its
// input on, b answers "b saw <s>".
func driveTwo(t *testing.T, env *servertest.Env) {
	ctx := ctxT(t)
	for range 2 {
		tasks, err := env.Client.Claim(ctx, wire.ClaimRequest{WorkerID: "w", WaitMs: 10_000})
		if err != nil || len(tasks) != 1 {
			t.Errorf("claim: %+v %v", tasks, err)
			return
		}
		task := tasks[0]
		out := task.Input
		if task.Kind == "two.b" {
			var in struct{ S string }
			if err := json.Unmarshal(task.Input, &in); err != nil {
				t.Error(err)
				return
			}
			out, _ = json.Marshal(map[string]string{"s": "b saw " + in.S})
		}
		if _, err := env.Client.CompleteOne(ctx, wire.Lease{ExecutionID: task.ExecutionID, LeaseID: task.LeaseID, Epoch: task.Epoch}, out); err != nil {
			t.Error(err)
			return
		}
	}
}

// countingTransport counts the requests it carries.
type countingTransport struct{ n atomic.Int64 }

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return http.DefaultTransport.RoundTrip(r)
}

// TestRunEndReachesOtherProcesses: two ffrun processes share a Valkey; a
// result request waiting on one is answered when a worker of the other
// completes the run, by the end notice that process publishes: the
// periodic re-read is off, so only the end of the request's wait (20 s,
// far beyond what a notice takes) could answer it otherwise.
func TestRunEndReachesOtherProcesses(t *testing.T) {
	t.Parallel()
	addr, prefix := valkeytest.Shared(t), valkeytest.Prefix(t)
	share := func(c *server.Config) {
		c.ValkeyAddr, c.KeyPrefix = addr, prefix
		c.Templates = []*plan.Flow{twoStep()}
		c.RunPoll = time.Hour
	}
	a, b := servertest.Start(t, share), servertest.Start(t, share)
	ctx := ctxT(t)
	run, err := a.Client.StageTemplate(ctx, "two", map[string]string{"s": "x"})
	if err != nil {
		t.Fatal(err)
	}
	answered := make(chan *wire.FlowRun, 1)
	start := time.Now()
	go func() {
		res, err := b.Client.RunResult(ctx, run.ID, 20*time.Second)
		if err != nil {
			t.Errorf("waiting result on the other process: %v", err)
		}
		answered <- res
	}()
	time.Sleep(100 * time.Millisecond) // let the request park
	driveTwo(t, a)
	res := <-answered
	if res == nil || res.State != wire.RunSucceeded || string(res.Result) != `{"s":"b saw x"}` {
		t.Fatalf("result on the other process: %+v", res)
	}
	if waited := time.Since(start); waited > 10*time.Second {
		t.Fatalf("answered after %s: at the end of its wait, not by the run-end notice", waited)
	}
}

// TestRunErrorNamesFewFailures: a cancelled run of many members names the
// first few in its error and says how many more there are; failures lists
// every one.
func TestRunErrorNamesFewFailures(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	ctx := ctxT(t)
	in := &plan.TypeRef{Kind: plan.KindNamed, Name: "In"}
	f := twoStep()
	f.Name, f.Result, f.Output = "wide", "", nil
	f.Execs, f.Edges = nil, nil
	for i := range 12 {
		name := fmt.Sprintf("m%02d", i)
		f.Execs = append(f.Execs, plan.Exec{Name: name, Kind: "wide." + name, Lane: "default", Priority: 100,
			Input: in, InputFrom: plan.InputFlow, Join: plan.Join{Kind: plan.JoinAll}, Retry: plan.Retry{Attempts: 1, Backoff: plan.BackoffFixed}})
	}
	run, err := env.Client.StageFlow(ctx, f, map[string]string{"s": "x"})
	if err != nil {
		t.Fatal(err)
	}
	out, err := env.Client.CancelRun(ctx, run.ID, "enough")
	if err != nil || out.State != wire.RunCancelled {
		t.Fatalf("cancel: %+v, %v", out, err)
	}
	got, err := env.Client.GetRun(ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	// Cancelled alike, the twelve are named together: five by name, the
	// reason once.
	if len(got.Failures) != 12 || got.Error != "m00, m01, m02, m03, m04 and 7 more cancelled: enough" {
		t.Fatalf("error %q, %d failures", got.Error, len(got.Failures))
	}
}
