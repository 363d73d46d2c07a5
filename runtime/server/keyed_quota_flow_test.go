package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/flowfabric/ff/runtime/client"
	"github.com/flowfabric/ff/runtime/store"
	"github.com/flowfabric/ff/runtime/worker"
)

// spec/language.md, Quotas: with `key PATH` the limits apply to each value
// of a field of the exec's input, and FF0306 checks PATH against the input
// type of every exec that uses the quota. A downstream exec's input is its
// upstream's result: the key value is read from it when the member is
// first claimed, so the flow's input need not have the field.
func TestKeyedQuotaOnDownstreamExecKeyedByItsInput(t *testing.T) {
	flows := compileFlows(t, `
type A { n: int }
type B { tenant: string }

quota per_tenant { concurrency 1 key tenant }

flow f(A) -> B {
  exec first(A) -> B {}
  exec second(B) -> B { quota per_tenant }
  first -> second
  result second
}
`)
	env := startAdmission(t, flows)
	ctx := context.Background()
	c := env.Client
	release := make(chan struct{})
	runWorker(t, env, worker.Config{Name: "w", Concurrency: 4}, map[string]worker.Handler{
		// n picks second's tenant; n 0 gives second an input without one
		// (a worker's output the generated types would not allow).
		"f.first": func(ctx context.Context, task *worker.Task) (json.RawMessage, error) {
			var in struct{ N int }
			if err := json.Unmarshal(task.Input(), &in); err != nil {
				return nil, err
			}
			switch in.N {
			case 0:
				return json.RawMessage(`{}`), nil
			case 3:
				return json.RawMessage(`{"tenant":"b"}`), nil
			}
			return json.RawMessage(`{"tenant":"a"}`), nil
		},
		"f.second": func(ctx context.Context, task *worker.Task) (json.RawMessage, error) {
			var in struct{ Tenant string }
			if err := json.Unmarshal(task.Input(), &in); err != nil {
				return nil, err
			}
			if in.Tenant == "a" {
				select {
				case <-release:
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			}
			return task.Input(), nil
		},
	})
	stage := func(n int) *client.Run {
		t.Helper()
		r, err := c.StageFlow(ctx, flows["f"], map[string]any{"n": n})
		if err != nil {
			t.Fatalf("staging a flow the compiler accepted (n %d): %v", n, err)
		}
		return r
	}
	a1 := stage(1)
	eventually(t, 5*time.Second, "tenant a's second running", func() (bool, string) {
		q, err := c.GetQuota(ctx, "default/per_tenant")
		if err != nil {
			return false, err.Error()
		}
		return len(q.Subjects) == 1 && q.Subjects[0].Key == "a" && q.Subjects[0].ActiveCount == 1, fmt.Sprintf("%+v", q.Subjects)
	})
	a2 := stage(2)
	// The second a waits for the quota, keyed by its own input's tenant.
	eventually(t, 5*time.Second, "tenant a's second run blocked", func() (bool, string) {
		blocked, err := c.ListExecutions(ctx, client.ListOptions{State: "blocked"})
		if err != nil {
			return false, err.Error()
		}
		for _, ex := range blocked.Executions {
			if ex.BlockingReason == string(store.WaitingForQuota) && strings.Contains(ex.BlockingDetail, "default/per_tenant=a") {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%+v", blocked.Executions)
	})
	// Tenant b is not held up by a.
	b := stage(3)
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if out, err := b.Result(rctx); err != nil || string(out) != `{"tenant":"b"}` {
		t.Fatalf("tenant b's run: %s, %v", out, err)
	}
	// A member whose input has no key value fails, naming the quota; it
	// never runs unlimited and never waits forever.
	bad := stage(0)
	_, err := bad.Result(rctx)
	var re *client.RunError
	if !errors.As(err, &re) || len(re.Failures) != 1 || re.Failures[0].Exec != "second" ||
		!strings.Contains(re.Failures[0].Error, "quota_key_invalid: quota default/per_tenant") {
		t.Fatalf("run whose second has no tenant: %v, want second failed with quota_key_invalid", err)
	}
	close(release)
	for _, r := range []*client.Run{a1, a2} {
		if out, err := r.Result(rctx); err != nil || string(out) != `{"tenant":"a"}` {
			t.Fatalf("tenant a's run %s: %s, %v", r.ID, out, err)
		}
	}
}
