package server_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/flowfabric/ff/runtime/client"
	"github.com/flowfabric/ff/runtime/server/servertest"
	"github.com/flowfabric/ff/runtime/wire"
)

// TestExecutionNamesItsRun: an execution of a flow run says which run and
// which of its execs it is (run_id, flow_node), in its own answer and in
// listings; an execution outside a flow has neither field.
func TestExecutionNamesItsRun(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	ctx := ctxT(t)
	run := stageTwoStep(t, env)
	full, err := env.Client.GetRun(ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]string{} // execution id -> exec name
	for _, x := range full.Execs {
		ids[x.ExecutionID] = x.Name
	}
	if len(ids) != 2 {
		t.Fatalf("members %+v", full.Execs)
	}
	for id, name := range ids {
		x, err := env.Client.GetExecution(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if x.RunID != run.ID || x.FlowNode != name {
			t.Errorf("execution %s (%s of run %s): run_id %q, flow_node %q", id, name, run.ID, x.RunID, x.FlowNode)
		}
	}
	list, err := env.Client.ListExecutions(ctx, client.ListOptions{Namespace: "default"})
	if err != nil {
		t.Fatal(err)
	}
	listed := 0
	for _, x := range list.Executions {
		if name, ok := ids[x.ID]; ok {
			listed++
			if x.RunID != run.ID || x.FlowNode != name {
				t.Errorf("listed %s (%s of run %s): run_id %q, flow_node %q", x.ID, name, run.ID, x.RunID, x.FlowNode)
			}
		}
	}
	if listed != 2 {
		t.Errorf("the listing holds %d of the run's 2 members: %+v", listed, list.Executions)
	}

	plain, _, err := env.Client.CreateExecution(ctx, wire.CreateExecution{Kind: "plain.job"})
	if err != nil {
		t.Fatal(err)
	}
	r := env.Do(t, http.MethodGet, "/v1/executions/"+plain.ID, nil, "")
	if r.Status != http.StatusOK || strings.Contains(r.Body, `"run_id"`) || strings.Contains(r.Body, `"flow_node"`) {
		t.Errorf("an execution outside a flow: %d %s", r.Status, r.Body)
	}
}
