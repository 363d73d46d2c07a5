package server_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/flowfabric/ff/compiler/plan"
	"github.com/flowfabric/ff/runtime/client"
	"github.com/flowfabric/ff/runtime/server/servertest"
	"github.com/flowfabric/ff/runtime/wire"
)

// TestStageFlowJSON: runs staged from a plan's JSON text (the first time,
// then again from the server's cache of plans) and from the *plan.Flow are
// the same runs, and all of them run to their result.
func TestStageFlowJSON(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	ctx := ctxT(t)
	c := env.Client
	p := twoStep()
	text, err := json.MarshalIndent(p, "", "  ") // as generated code embeds it
	if err != nil {
		t.Fatal(err)
	}

	var runs []*client.Run
	for i, stage := range []func() (*client.Run, error){
		func() (*client.Run, error) { return c.StageFlowJSON(ctx, text, map[string]string{"s": "x"}) },
		func() (*client.Run, error) { return c.StageFlowJSON(ctx, text, map[string]string{"s": "x"}) },
		func() (*client.Run, error) { return c.StageFlow(ctx, p, map[string]string{"s": "x"}) },
		func() (*client.Run, error) { return c.StageFlowJSON(ctx, text, map[string]string{"s": "x"}) },
	} {
		r, err := stage()
		if err != nil {
			t.Fatalf("stage %d: %v", i, err)
		}
		if r.Flow != "two" || r.Namespace != "default" || !r.Created {
			t.Fatalf("stage %d: %+v", i, r)
		}
		runs = append(runs, r)
	}
	// The same members, kinds and states; only ids and times differ.
	shape := cmp.Options{
		cmpopts.IgnoreFields(wire.FlowRun{}, "ID", "CreatedAt"),
		cmpopts.IgnoreFields(wire.FlowExec{}, "ExecutionID"),
	}
	var first *wire.FlowRun
	for i, r := range runs {
		got, err := r.Get(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if first == nil {
			first = got
			if len(got.Execs) != 2 || got.Execs[0].Kind != "two.a" || got.Execs[1].Kind != "two.b" {
				t.Fatalf("staged run: %+v", got)
			}
			continue
		}
		if diff := cmp.Diff(first, got, shape); diff != "" {
			t.Errorf("run %d differs from run 0 (-run 0 +run %d):\n%s", i, i, diff)
		}
	}

	// Every run runs: a, then b with a's output.
	for range 2 * len(runs) {
		tasks, err := c.Claim(ctx, wire.ClaimRequest{WorkerID: "w", WaitMs: 2000})
		if err != nil || len(tasks) != 1 {
			t.Fatalf("claim: %+v %v", tasks, err)
		}
		out := json.RawMessage(`{"s":"from a"}`)
		if tasks[0].Kind == "two.b" {
			if string(tasks[0].Input) != `{"s":"from a"}` {
				t.Fatalf("b's input: %s", tasks[0].Input)
			}
			out = json.RawMessage(`{"s":"done"}`)
		}
		if _, err := c.CompleteOne(ctx, wire.Lease{ExecutionID: tasks[0].ExecutionID, LeaseID: tasks[0].LeaseID, Epoch: tasks[0].Epoch}, out); err != nil {
			t.Fatal(err)
		}
	}
	for i, r := range runs {
		res, err := r.Result(ctx)
		if err != nil || string(res) != `{"s":"done"}` {
			t.Fatalf("run %d result: %s %v", i, res, err)
		}
	}

	// Options apply: an idempotency key returns the first run.
	k1, err := c.StageFlowJSON(ctx, text, map[string]string{"s": "y"}, client.WithIdempotencyKey("k1"))
	if err != nil {
		t.Fatal(err)
	}
	k2, err := c.StageFlowJSON(ctx, text, map[string]string{"s": "z"}, client.WithIdempotencyKey("k1"))
	if err != nil || k2.ID != k1.ID || k2.Created || !k1.Created {
		t.Fatalf("repeat with the key: %+v %+v %v", k1, k2, err)
	}
}

// TestStageFlowJSONRefusals: a bad plan or input sent as JSON text is
// refused as through StageFlow, the same way every time; text that is not
// JSON is refused before any request.
func TestStageFlowJSONRefusals(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	ctx := ctxT(t)
	c := env.Client
	bad := twoStep()
	bad.Edges = append(bad.Edges, plan.Edge{From: "b", To: "a", On: plan.OnSuccess})
	text, err := json.Marshal(bad)
	if err != nil {
		t.Fatal(err)
	}
	var msgs []string
	for range 3 {
		_, err := c.StageFlowJSON(ctx, text, map[string]string{"s": "x"})
		ae := apiErr(t, err)
		if ae.Code != wire.CodeValidation || ae.Details["field"] != "plan.edges" || !strings.Contains(err.Error(), "stage flow two") {
			t.Fatalf("cyclic plan: %v %v", err, ae.Details)
		}
		msgs = append(msgs, ae.Message)
	}
	_, err = c.StageFlow(ctx, bad, map[string]string{"s": "x"})
	if ae := apiErr(t, err); ae.Message != msgs[0] || msgs[1] != msgs[0] || msgs[2] != msgs[0] {
		t.Fatalf("refusals differ: %q, StageFlow %q", msgs, ae.Message)
	}

	good, err := json.Marshal(twoStep())
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		_, err := c.StageFlowJSON(ctx, good, map[string]int{"s": 1})
		if ae := apiErr(t, err); ae.Code != wire.CodeValidation || ae.Details["field"] != "input.s" {
			t.Fatalf("bad input: %v %v", err, ae.Details)
		}
	}

	// Text that is not JSON makes a body that is not: the server refuses it.
	for _, text := range []string{`{"name": "two"`, `not json`, `{"name": "two"}}`} {
		_, err := c.StageFlowJSON(ctx, []byte(text), nil)
		if ae := apiErr(t, err); ae.Code != wire.CodeInvalidJSON {
			t.Errorf("plan text %q: %v", text, err)
		}
	}
	if _, err := c.StageFlowJSON(ctx, nil, nil); err == nil {
		t.Error("an empty plan text was accepted")
	}
	list, err := c.ListExecutions(ctx, client.ListOptions{Namespace: "default"})
	if err != nil || len(list.Executions) != 0 {
		t.Fatalf("refused stagings wrote executions: %+v %v", list, err)
	}
}
