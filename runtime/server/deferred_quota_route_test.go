package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/flowfabric/ff/runtime/client"
	"github.com/flowfabric/ff/runtime/store"
	"github.com/flowfabric/ff/runtime/worker"
)

// A flow member with a deferred quota key (keyed by its upstream's
// output) that is parked for a capable worker before its first claim
// keeps its deferred reference while parked; when a capable worker
// connects it is claimed, its key is settled from its input, it is
// admitted under that key and runs, and its slot is released.
func TestDeferredQuotaKeyAfterRouteParking(t *testing.T) {
	t.Parallel()
	flows := compileFlows(t, `
type A { n: int }
type B { tenant: string }

quota per_tenant { concurrency 1 key tenant }

flow f(A) -> B {
  exec first(A) -> B {}
  exec second(B) -> B { quota per_tenant requires ["gpu"] }
  first -> second
  result second
}
`)
	env := startAdmission(t, flows)
	ctx := context.Background()
	c := env.Client
	first := func(context.Context, *worker.Task) (json.RawMessage, error) {
		return json.RawMessage(`{"tenant":"zed"}`), nil
	}
	second := func(_ context.Context, task *worker.Task) (json.RawMessage, error) { return task.Input(), nil }
	// The plain worker has a handler for second too, so that its claims
	// see second and park it (no connected worker has gpu).
	runWorker(t, env, worker.Config{Name: "plain"}, map[string]worker.Handler{"f.first": first, "f.second": second})
	run, err := c.StageFlow(ctx, flows["f"], map[string]any{"n": 1})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "second parked for a capable worker", func() (bool, string) {
		blocked, err := c.ListExecutions(ctx, client.ListOptions{State: "blocked"})
		if err != nil {
			return false, err.Error()
		}
		for _, ex := range blocked.Executions {
			if ex.BlockingReason == string(store.WaitingForCapableWorker) {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%+v", blocked.Executions)
	})
	runWorker(t, env, worker.Config{Name: "gpu", Capabilities: []string{"gpu"}}, map[string]worker.Handler{"f.second": second})
	rctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if out, err := run.Result(rctx); err != nil || string(out) != `{"tenant":"zed"}` {
		t.Fatalf("run: %s, %v", out, err)
	}
	// Released: the subject holds no slot, or the quota reconciler has
	// already forgotten it (it forgets only subjects that hold none).
	eventually(t, 10*time.Second, "the slot of key zed released", func() (bool, string) {
		q, err := c.GetQuota(ctx, "default/per_tenant")
		if err != nil {
			return false, err.Error()
		}
		for _, s := range q.Subjects {
			if s.Key == "zed" {
				return s.ActiveCount == 0, fmt.Sprintf("%+v", q.Subjects)
			}
		}
		return true, ""
	})
}
