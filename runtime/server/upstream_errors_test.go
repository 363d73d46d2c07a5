package server_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/flowfabric/ff/compiler/plan"
	"github.com/flowfabric/ff/runtime/server/servertest"
	"github.com/flowfabric/ff/runtime/store"
	"github.com/flowfabric/ff/runtime/wire"
)

// rawTasks decodes the tasks of a claim or complete answer body as
// plain JSON, so that the test sees the keys the server wrote.
func rawTasks(t *testing.T, r servertest.Response) []map[string]json.RawMessage {
	t.Helper()
	if r.Status != http.StatusOK {
		t.Fatalf("status %d: %s", r.Status, r.Body)
	}
	var body struct {
		Tasks []map[string]json.RawMessage `json:"tasks"`
	}
	if err := json.Unmarshal([]byte(r.Body), &body); err != nil {
		t.Fatalf("%v: %s", err, r.Body)
	}
	return body.Tasks
}

// rawLease is the lease of a task decoded by rawTasks.
func rawLease(t *testing.T, task map[string]json.RawMessage) wire.Lease {
	t.Helper()
	var l wire.Lease
	if err := json.Unmarshal(task["execution_id"], &l.ExecutionID); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(task["lease_id"], &l.LeaseID); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(task["epoch"], &l.Epoch); err != nil {
		t.Fatal(err)
	}
	return l
}

// bareExec is exec name of flow: kind flow.name, no input or output,
// join all, one attempt.
func bareExec(flow, name string) plan.Exec {
	return plan.Exec{Name: name, Kind: flow + "." + name, Lane: "default", Priority: 100, InputFrom: plan.InputNone,
		Join: plan.Join{Kind: plan.JoinAll}, Retry: plan.Retry{Attempts: 1, Backoff: plan.BackoffFixed}}
}

// TestUpstreamErrorsOverHTTP: a claim answer carries
// upstream_errors for a member after a failed upstream, with the error's
// text as written (quotes, a new line, markup, non-ASCII), and so does the
// hand-off of a complete answer; a standalone task has no such key.
func TestUpstreamErrorsOverHTTP(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	ex := func(name string) plan.Exec { return bareExec("rv9", name) }
	d := ex("d")
	d.Upstreams = []string{"a", "b"}
	f := &plan.Flow{Schema: plan.SchemaVersion, Name: "rv9", Namespace: "default", Lane: "default",
		Execs: []plan.Exec{ex("a"), ex("b"), d},
		Edges: []plan.Edge{{From: "a", To: "d", On: plan.OnFailure}, {From: "b", To: "d", On: plan.OnSuccess}}}
	if _, err := env.Client.StageFlow(ctxT(t), f, nil); err != nil {
		t.Fatal(err)
	}
	claim := func(kinds string) []map[string]json.RawMessage {
		t.Helper()
		return rawTasks(t, env.Do(t, http.MethodPost, "/v1/worker/claim", nil,
			`{"worker_id":"w","kinds":`+kinds+`,"max":4}`))
	}
	tasks := claim(`["rv9.a"]`)
	if len(tasks) != 1 {
		t.Fatalf("claimed %d tasks of a", len(tasks))
	}
	if _, ok := tasks[0]["upstream_errors"]; ok {
		t.Fatalf("a root has upstream_errors: %s", tasks[0]["upstream_errors"])
	}
	msg := "say \"no\"\n<b>ünï</b> & \\ done"
	if _, err := env.Client.FailOne(ctxT(t), rawLease(t, tasks[0]), msg, false); err != nil {
		t.Fatal(err)
	}
	tasks = claim(`["rv9.b"]`)
	if len(tasks) != 1 {
		t.Fatalf("claimed %d tasks of b", len(tasks))
	}
	lb := rawLease(t, tasks[0])
	r := env.Do(t, http.MethodPost, "/v1/worker/complete", nil,
		`{"worker_id":"w","completions":[{"execution_id":"`+lb.ExecutionID+`","lease_id":"`+lb.LeaseID+
			`","epoch":`+string(tasks[0]["epoch"])+`,"output":"B"}],"handoff":{"kinds":["rv9.d"],"max":1}}`)
	handed := rawTasks(t, r)
	if len(handed) != 1 {
		t.Fatalf("handed off %d tasks: %s", len(handed), r.Body)
	}
	var errs map[string]wire.UpstreamError
	if err := json.Unmarshal(handed[0]["upstream_errors"], &errs); err != nil {
		t.Fatalf("upstream_errors %s: %v", handed[0]["upstream_errors"], err)
	}
	want := map[string]wire.UpstreamError{"a": {State: "failed", Error: msg}}
	if diff := cmp.Diff(want, errs); diff != "" {
		t.Fatalf("upstream_errors (-want +got):\n%s", diff)
	}
	if string(handed[0]["upstreams"]) != `{"b":"B"}` {
		t.Fatalf("upstreams %s", handed[0]["upstreams"])
	}
	// The Go client decodes the same.
	var typed wire.LeaseResults
	if err := wire.UnmarshalLeaseResults([]byte(r.Body), &typed); err != nil || !cmp.Equal(want, typed.Tasks[0].UpstreamErrors) {
		t.Fatalf("client decoding: %+v, %v", typed.Tasks, err)
	}

	if _, _, err := env.Client.CreateExecution(ctxT(t), wire.CreateExecution{Kind: "rv9.solo"}); err != nil {
		t.Fatal(err)
	}
	tasks = claim(`["rv9.solo"]`)
	if len(tasks) != 1 {
		t.Fatalf("claimed %d standalone tasks", len(tasks))
	}
	for _, k := range []string{"upstream_errors", "upstreams"} {
		if v, ok := tasks[0][k]; ok {
			t.Fatalf("a standalone task has %s: %s", k, v)
		}
	}
}

// TestLongFailureOverHTTP: a failure message over the limit, sent
// over HTTP, reaches the member that runs on that failure cut to at most
// store.MaxErrorBytes with the API's "…" kept, as the upstream's recorded
// failure reason.
func TestLongFailureOverHTTP(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	ex := func(name string) plan.Exec { return bareExec("rv9l", name) }
	b := ex("b")
	b.Upstreams = []string{"a"}
	f := &plan.Flow{Schema: plan.SchemaVersion, Name: "rv9l", Namespace: "default", Lane: "default",
		Execs: []plan.Exec{ex("a"), b}, Edges: []plan.Edge{{From: "a", To: "b", On: plan.OnFailure}}}
	if _, err := env.Client.StageFlow(ctxT(t), f, nil); err != nil {
		t.Fatal(err)
	}
	tasks, err := env.Client.Claim(ctxT(t), wire.ClaimRequest{WorkerID: "w", Kinds: []string{"rv9l.a"}})
	if err != nil || len(tasks) != 1 {
		t.Fatalf("claim a: %v, %v", tasks, err)
	}
	msg := strings.Repeat("ü", 3000) // 6000 bytes
	lease := wire.Lease{ExecutionID: tasks[0].ExecutionID, LeaseID: tasks[0].LeaseID, Epoch: tasks[0].Epoch}
	if _, err := env.Client.FailOne(ctxT(t), lease, msg, false); err != nil {
		t.Fatal(err)
	}
	tasks, err = env.Client.Claim(ctxT(t), wire.ClaimRequest{WorkerID: "w", Kinds: []string{"rv9l.b"}})
	if err != nil || len(tasks) != 1 {
		t.Fatalf("claim b: %v, %v", tasks, err)
	}
	got := tasks[0].UpstreamErrors["a"]
	if got.State != "failed" || len(got.Error) > store.MaxErrorBytes || !utf8.ValidString(got.Error) ||
		len(got.Error) < store.MaxErrorBytes-8 || !strings.HasSuffix(got.Error, "…") || !strings.HasPrefix(msg, strings.TrimSuffix(got.Error, "…")) {
		t.Fatalf("upstream error %s of %d bytes", got.State, len(got.Error))
	}
	a, err := env.Client.GetExecution(ctxT(t), lease.ExecutionID)
	if err != nil || a.LastError != got.Error {
		t.Fatalf("a's last error differs from the upstream error (%v)", err)
	}
}
