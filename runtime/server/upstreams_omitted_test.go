package server_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/flowfabric/ff/compiler/plan"
	"github.com/flowfabric/ff/runtime/server/servertest"
	"github.com/flowfabric/ff/runtime/store"
	"github.com/flowfabric/ff/runtime/wire"
)

// TestUpstreamsOmittedOverHTTP: a member whose upstreams' outputs pass
// the bound a grant carries (store.UpstreamsCarried) is handed off with
// those that fit in upstreams and the others in upstreams_omitted, by
// execution id, whose result route answers their outputs; the Go client
// decodes the same; a root has no such key.
func TestUpstreamsOmittedOverHTTP(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	const n = 5
	ex := func(name string) plan.Exec { return bareExec("om5", name) }
	d := ex("d")
	f := &plan.Flow{Schema: plan.SchemaVersion, Name: "om5", Namespace: "default", Lane: "default"}
	var kinds []string
	for i := range n {
		a := fmt.Sprintf("a%d", i)
		f.Execs = append(f.Execs, ex(a))
		f.Edges = append(f.Edges, plan.Edge{From: a, To: "d", On: plan.OnSuccess})
		d.Upstreams = append(d.Upstreams, a)
		kinds = append(kinds, `"om5.`+a+`"`)
	}
	f.Execs = append(f.Execs, d)
	if _, err := env.Client.StageFlow(ctxT(t), f, nil); err != nil {
		t.Fatal(err)
	}
	tasks := rawTasks(t, env.Do(t, http.MethodPost, "/v1/worker/claim", nil,
		`{"worker_id":"w","kinds":[`+strings.Join(kinds, ",")+`],"max":8}`))
	if len(tasks) != n {
		t.Fatalf("claimed %d roots, want %d", len(tasks), n)
	}
	ids := map[string]string{}     // exec name -> execution id
	outputs := map[string]string{} // exec name -> output
	completion := map[string]string{}
	for _, task := range tasks {
		if v, ok := task["upstreams_omitted"]; ok {
			t.Fatalf("a root has upstreams_omitted: %s", v)
		}
		var kind string
		if err := json.Unmarshal(task["kind"], &kind); err != nil {
			t.Fatal(err)
		}
		name := strings.TrimPrefix(kind, "om5.")
		l := rawLease(t, task)
		ids[name] = l.ExecutionID
		outputs[name] = `"` + name + strings.Repeat("x", store.MaxPayloadBytes-len(name)-2) + `"`
		completion[name] = `{"execution_id":"` + l.ExecutionID + `","lease_id":"` + l.LeaseID + `","epoch":` +
			string(task["epoch"]) + `,"output":` + outputs[name] + `}`
	}
	// a0..a3 first, then a4 with a hand-off: d carries the 4 MiB of a0..a3
	// and lists a4.
	var first []string
	for i := range n - 1 {
		first = append(first, completion[fmt.Sprintf("a%d", i)])
	}
	if r := env.Do(t, http.MethodPost, "/v1/worker/complete", nil,
		`{"worker_id":"w","completions":[`+strings.Join(first, ",")+`]}`); r.Status != http.StatusOK {
		t.Fatalf("complete a0..a3: %d %s", r.Status, r.Body)
	}
	r := env.Do(t, http.MethodPost, "/v1/worker/complete", nil,
		`{"worker_id":"w","completions":[`+completion["a4"]+`],"handoff":{"kinds":["om5.d"],"max":1}}`)
	handed := rawTasks(t, r)
	if len(handed) != 1 {
		t.Fatalf("handed off %d tasks", len(handed))
	}
	wantOmitted := map[string]string{"a4": ids["a4"]}
	var omitted map[string]string
	if err := json.Unmarshal(handed[0]["upstreams_omitted"], &omitted); err != nil {
		t.Fatalf("upstreams_omitted %s: %v", handed[0]["upstreams_omitted"], err)
	}
	if diff := cmp.Diff(wantOmitted, omitted); diff != "" {
		t.Fatalf("upstreams_omitted (-want +got):\n%s", diff)
	}
	var ups map[string]json.RawMessage
	if err := json.Unmarshal(handed[0]["upstreams"], &ups); err != nil {
		t.Fatal(err)
	}
	if got := slices.Sorted(maps.Keys(ups)); !slices.Equal(got, []string{"a0", "a1", "a2", "a3"}) {
		t.Fatalf("upstreams carried %v, want a0..a3", got)
	}
	for name, out := range ups {
		if string(out) != outputs[name] {
			t.Errorf("upstream %s carried %d bytes, want its %d-byte output", name, len(out), len(outputs[name]))
		}
	}
	// The Go client decodes the same.
	var typed wire.LeaseResults
	if err := wire.UnmarshalLeaseResults([]byte(r.Body), &typed); err != nil || len(typed.Tasks) != 1 ||
		!cmp.Equal(wantOmitted, typed.Tasks[0].UpstreamsOmitted) || len(typed.Tasks[0].Upstreams) != n-1 {
		t.Fatalf("client decoding: %d tasks, %v", len(typed.Tasks), err)
	}
	res, err := env.Client.ExecutionResult(ctxT(t), ids["a4"])
	if err != nil || res.State != "completed" || string(res.Result) != outputs["a4"] {
		t.Fatalf("result of the omitted upstream: %v", err)
	}
}
