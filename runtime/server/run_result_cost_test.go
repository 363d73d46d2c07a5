package server

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/flowfabric/ff/compiler/plan"
	"github.com/flowfabric/ff/runtime/api"
	"github.com/flowfabric/ff/runtime/internal/valkeytest"
	"github.com/flowfabric/ff/runtime/store"
	"github.com/flowfabric/ff/runtime/wire"
)

// TestFailedRunResultCost: the result of a failed run of plan.MaxExecs
// members (src -> every other member -> sink; src failed, the rest
// skipped), GET /v1/flows/{id}/result, reads the run's outcome, its order
// key and failed set, and its one failure: a few commands, not one per
// member. Its pages (GET /v1/flows/{id}) list that failure on every page,
// reading the page's members only.
func TestFailedRunResultCost(t *testing.T) {
	vk := valkeytest.Client(t, valkeytest.Start(t))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	st, err := store.Open(ctx, store.Config{Client: vk, FlowPartitions: 1})
	if err != nil {
		t.Fatal(err)
	}
	f := wideRun(plan.MaxExecs)
	f.Execs[0].Name, f.Execs[1].Name = "src", "sink"
	f.Result = "sink"
	for i := 2; i < len(f.Execs); i++ {
		f.Edges = append(f.Edges, plan.Edge{From: "src", To: f.Execs[i].Name, On: plan.OnSuccess},
			plan.Edge{From: f.Execs[i].Name, To: "sink", On: plan.OnSuccess})
	}
	run, _, err := st.StageFlow(ctx, store.StageRequest{Flow: f})
	if err != nil {
		t.Fatal(err)
	}
	g, err := st.Claim(ctx, store.ClaimRequest{Partition: 0, Lanes: []string{"default"},
		Worker: store.WorkerIdentity{WorkerID: "w", InstanceID: "w-1", Namespace: "default"}, Max: 1})
	if err != nil || len(g) != 1 || g[0].FlowNode != "src" {
		t.Fatalf("claim: %+v %v", g, err)
	}
	if _, err := st.Fail(ctx, g[0].Lease, "src broke", false); err != nil {
		t.Fatal(err)
	}
	fs := &flowService{st: st, hints: newWaitHints(st)}
	before := valkeytest.CommandCalls(t, vk)
	res, err := fs.RunResult(ctx, string(run.ID), 0)
	calls := valkeytest.CommandCalls(t, vk) - before
	if err != nil {
		t.Fatal(err)
	}
	want := []wire.ExecFailure{{Exec: "src", ExecutionID: string(g[0].ExecutionID), State: "failed", Error: "src broke"}}
	if res.State != wire.RunFailed || len(res.Failures) != 1 || res.Failures[0] != want[0] ||
		!strings.Contains(res.Error, "result exec sink ended skipped") || res.Skipped != plan.MaxExecs-1 {
		t.Fatalf("result of the failed run: %+v", res)
	}
	t.Logf("the result of a failed run of %d members: %d commands", plan.MaxExecs, calls)
	if calls > 10 {
		t.Errorf("the result of a failed run of %d members ran %d commands", plan.MaxExecs, calls)
	}

	// A later page: its members, and the failure.
	first, err := fs.GetRun(ctx, string(run.ID), api.ExecsPage{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	before = valkeytest.CommandCalls(t, vk)
	page, err := fs.GetRun(ctx, string(run.ID), api.ExecsPage{Cursor: first.ExecsNextCursor, Limit: 100})
	calls = valkeytest.CommandCalls(t, vk) - before
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Execs) != 100 || page.Execs[0].Name == "src" || len(page.Failures) != 1 || page.Failures[0] != want[0] {
		t.Fatalf("a later page: %d members from %s, failures %+v", len(page.Execs), page.Execs[0].Name, page.Failures)
	}
	if calls > 100+10 {
		t.Errorf("a later page of 100 members of a run of %d ran %d commands", plan.MaxExecs, calls)
	}
}
