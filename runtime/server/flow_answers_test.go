package server_test

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/flowfabric/ff/compiler/plan"
	"github.com/flowfabric/ff/runtime/client"
	"github.com/flowfabric/ff/runtime/server/servertest"
	"github.com/flowfabric/ff/runtime/wire"
)

// claimCompleteOne claims the one waiting task, checks its kind and
// completes it with out.
func claimCompleteOne(t *testing.T, c *client.Client, kind, out string) {
	t.Helper()
	ctx := ctxT(t)
	tasks, err := c.Claim(ctx, wire.ClaimRequest{WorkerID: "w", WaitMs: 2000})
	if err != nil || len(tasks) != 1 || tasks[0].Kind != kind {
		t.Fatalf("claim %s: %+v %v", kind, tasks, err)
	}
	if _, err := c.CompleteOne(ctx, wire.Lease{ExecutionID: tasks[0].ExecutionID, LeaseID: tasks[0].LeaseID, Epoch: tasks[0].Epoch}, json.RawMessage(out)); err != nil {
		t.Fatal(err)
	}
}

// A run cancelled after its result exec succeeded did not succeed: its
// answers carry no result (spec/api.md: the result exec's output, once the
// run succeeded).
func TestCancelledRunAnswersNoResult(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	ctx := ctxT(t)
	c := env.Client
	f := renamed(twoStep(), "early")
	f.Result = "a" // the result exec is the first member
	run, err := c.StageFlow(ctx, f, map[string]string{"s": "x"})
	if err != nil {
		t.Fatal(err)
	}
	claimCompleteOne(t, c, "early.a", `{"s":"from a"}`)
	if out, err := c.CancelRun(ctx, run.ID, "stop"); err != nil || out.State != wire.RunCancelled {
		t.Fatalf("cancel: %+v %v", out, err)
	}
	res := env.Do(t, http.MethodGet, "/v1/flows/"+run.ID+"/result", nil, "")
	var w wire.FlowRun
	if err := json.Unmarshal([]byte(res.Body), &w); err != nil || res.Status != http.StatusOK {
		t.Fatalf("result: %d %s", res.Status, res.Body)
	}
	if w.State != wire.RunCancelled || w.Result != nil {
		t.Fatalf("result answer of a cancelled run: state %s, result %s (want none)", w.State, w.Result)
	}
}

// A run without result exec whose only other member was cancelled on its
// own ends cancelled; its replay is not refused (it answered 409 with
// `details.state` = `cancelled`, a state replay takes).
func TestReplayOfCancelledRunNotRefused(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	ctx := ctxT(t)
	c := env.Client
	f := renamed(twoStep(), "comp")
	f.Result, f.Output = "", nil
	f.Execs[1].Input, f.Execs[1].Output, f.Execs[1].InputFrom, f.Execs[1].InputExec = nil, nil, plan.InputNone, ""
	f.Edges[0].On = plan.OnFailure
	run, err := c.StageFlow(ctx, f, map[string]string{"s": "x"})
	if err != nil {
		t.Fatal(err)
	}
	staged, err := c.GetRun(ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	var b string
	for _, x := range staged.Execs {
		if x.Name == "b" {
			b = x.ExecutionID
		}
	}
	if _, err := c.CancelExecution(ctx, b, "not needed"); err != nil {
		t.Fatal(err)
	}
	claimCompleteOne(t, c, "comp.a", `{"s":"ok"}`)
	got, err := c.GetRun(ctx, run.ID)
	if err != nil || got.State != wire.RunCancelled {
		t.Fatalf("run: %+v %v", got, err)
	}
	res := env.Do(t, http.MethodPost, "/v1/flows/"+run.ID+"/replay", nil, "{}")
	if res.Status != http.StatusOK || !strings.Contains(res.Body, `"state":"succeeded"`) {
		t.Fatalf("replay of a cancelled run: %d %s, want it ended again, succeeded (b skipped)", res.Status, res.Body)
	}

	// The same flow with b as its result exec fails when a succeeds (b is
	// skipped); nothing would run again: 409 with the reason.
	f = renamed(f, "comp2")
	f.Result = "b"
	run, err = c.StageFlow(ctx, f, map[string]string{"s": "x"})
	if err != nil {
		t.Fatal(err)
	}
	claimCompleteOne(t, c, "comp2.a", `{"s":"ok"}`)
	if got, err := c.GetRun(ctx, run.ID); err != nil || got.State != wire.RunFailed {
		t.Fatalf("run: %+v %v", got, err)
	}
	res = env.Do(t, http.MethodPost, "/v1/flows/"+run.ID+"/replay", nil, "{}")
	if res.Status != http.StatusConflict || res.Err.Details["reason"] != "nothing_to_replay" || res.Err.Details["state"] != "failed" {
		t.Fatalf("replay with nothing to run again: %d %s, want 409 with details.reason nothing_to_replay", res.Status, res.Body)
	}
}

// A result exec skipped by its upstream's failure: the result route
// answers the run failed, without result, naming the skipped result exec
// first and the failure after it (pins spec/api.md, Run: `error`).
func TestSkippedResultExecOverHTTP(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	ctx := ctxT(t)
	c := env.Client
	f := renamed(twoStep(), "skipres")
	run, err := c.StageFlow(ctx, f, map[string]string{"s": "x"})
	if err != nil {
		t.Fatal(err)
	}
	tasks, err := c.Claim(ctx, wire.ClaimRequest{WorkerID: "w", WaitMs: 2000})
	if err != nil || len(tasks) != 1 {
		t.Fatalf("claim: %+v %v", tasks, err)
	}
	if _, err := c.FailOne(ctx, wire.Lease{ExecutionID: tasks[0].ExecutionID, LeaseID: tasks[0].LeaseID, Epoch: tasks[0].Epoch}, "boom", false); err != nil {
		t.Fatal(err)
	}
	out, err := c.RunResult(ctx, run.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	if out.State != wire.RunFailed || out.Result != nil || out.Error != "result exec b ended skipped; a failed: boom" ||
		len(out.Failures) != 1 || out.Failures[0].Exec != "a" || out.Skipped != 1 || out.Failed != 1 {
		t.Fatalf("result = %+v", out)
	}
}

// renamed names flow f name, its execs' kinds "<name>.<exec>", so that a
// test's claims take only its own tasks.
func renamed(f *plan.Flow, name string) *plan.Flow {
	f.Name = name
	for i := range f.Execs {
		f.Execs[i].Kind = name + "." + f.Execs[i].Name
	}
	return f
}

// The answers that carry a run that ended (its result; a staging request
// that waited for it, here one whose idempotency key matched it) are what
// encoding/json writes of it, without HTML escaping, with a final newline
// and their length: the fast encoder (wire.AppendFlowRun) changes no byte.
func TestEndedRunAnswersAsMarshal(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	ctx := ctxT(t)
	c := env.Client
	f := renamed(twoStep(), "ended")
	run, err := c.StageFlow(ctx, f, map[string]string{"s": "x"}, client.WithIdempotencyKey("ended-1"))
	if err != nil {
		t.Fatal(err)
	}
	claimCompleteOne(t, c, "ended.a", `{"s":"from a"}`)
	claimCompleteOne(t, c, "ended.b", `{"s":"<b> & co"}`)
	body, err := json.Marshal(wire.StageFlow{Plan: f, Input: json.RawMessage(`{"s":"x"}`), IdempotencyKey: "ended-1"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, method, path, body string
		hasCreated               bool // the answer of a staging request says whether it created the run
	}{
		{"result", http.MethodGet, "/v1/flows/" + run.ID + "/result", "", false},
		{"staged again", http.MethodPost, "/v1/flows?wait_ms=1000", string(body), true},
	} {
		r := env.Do(t, tc.method, tc.path, nil, tc.body)
		var w wire.FlowRun
		if err := json.Unmarshal([]byte(r.Body), &w); err != nil || r.Status != http.StatusOK {
			t.Fatalf("%s: %d %s (%v)", tc.name, r.Status, r.Body, err)
		}
		if w.ID != run.ID || w.State != wire.RunSucceeded || string(w.Result) != `{"s":"<b> & co"}` || (w.Created != nil) != tc.hasCreated {
			t.Fatalf("%s: %s", tc.name, r.Body)
		}
		want, err := wire.Marshal(w)
		if err != nil {
			t.Fatal(err)
		}
		if r.Body != string(want)+"\n" {
			t.Errorf("%s answered\n%s\nwant\n%s", tc.name, r.Body, want)
		}
		if got := r.Header.Get("Content-Length"); got != strconv.Itoa(len(r.Body)) {
			t.Errorf("%s: Content-Length %q for %d bytes", tc.name, got, len(r.Body))
		}
	}
}
