package worker_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/flowfabric/ff/compiler/plan"
	"github.com/flowfabric/ff/runtime/server/servertest"
	"github.com/flowfabric/ff/runtime/wire"
	"github.com/flowfabric/ff/runtime/worker"
)

// TestPauseQuotaHoldsBackTheUpstreamsCallers: a handler told "429, retry
// after" by an upstream pauses the quota its calls count against (keyed by
// tenant) and fails its attempt. No call of that tenant starts until the
// pause ends, the retry included; another tenant's calls go on; every run
// succeeds in the end. The API shows the pause meanwhile.
func TestPauseQuotaHoldsBackTheUpstreamsCallers(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	obj := &plan.TypeRef{Kind: plan.KindNamed, Name: "Call"}
	f := &plan.Flow{Schema: plan.SchemaVersion, Name: "calls", Namespace: "default", Lane: "default", Input: obj, Output: obj,
		Types: []plan.Type{{Name: "Call", Fields: []plan.Field{{Name: "tenant", Type: plan.TypeRef{Kind: plan.KindString}}}}},
		Execs: []plan.Exec{{Name: "call", Kind: "calls.call", Lane: "default", Priority: 100, Input: obj, Output: obj,
			InputFrom: plan.InputFlow, Join: plan.Join{Kind: plan.JoinAll}, Quotas: []string{"upstream"},
			Retry: plan.Retry{Attempts: 3, Backoff: plan.BackoffFixed, DelayMs: 10}}},
		QuotaDefs: []plan.Quota{{Name: "upstream", Concurrency: 10, Key: "tenant"}},
		Result:    "call"}
	const pause = 2 * time.Second
	var mu sync.Mutex
	var pausedAt, pauseEnd time.Time
	var early []string // calls of acme started during the pause
	w := newWorker(t, env, nil)
	err := w.Handle("calls.call", func(ctx context.Context, task *worker.Task) (json.RawMessage, error) {
		var in struct{ Tenant string }
		if err := json.Unmarshal(task.Input(), &in); err != nil {
			return nil, worker.Permanent(err)
		}
		mu.Lock()
		defer mu.Unlock()
		now := time.Now()
		if in.Tenant == "acme" && !pausedAt.IsZero() && now.Before(pauseEnd) {
			early = append(early, task.ID())
		}
		if in.Tenant == "acme" && pausedAt.IsZero() {
			// The upstream says 429: hold every acme call back.
			pausedAt, pauseEnd = now, now.Add(pause)
			if err := task.PauseQuota(ctx, "default/upstream", "acme", pause, "429 from upstream"); err != nil {
				return nil, worker.Permanent(err)
			}
			return nil, errors.New("upstream: 429 too many requests")
		}
		return task.Input(), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	run(t, w)
	ctx := ctxT(t)
	first, err := env.Client.StageFlow(ctx, f, map[string]string{"tenant": "acme"})
	if err != nil {
		t.Fatal(err)
	}
	// Once the pause is in force, more calls of both tenants.
	var q *wire.Quota
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if q, err = env.Client.GetQuota(ctx, "default/upstream"); err == nil && len(q.Subjects) > 0 && q.Subjects[0].PausedUntil != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no pause shown: %+v, %v", q, err)
		}
	}
	if s := q.Subjects[0]; s.Key != "acme" || s.PauseReason != "429 from upstream" {
		t.Fatalf("paused subject %+v", s)
	}
	runs := []string{first.ID}
	for _, tenant := range []string{"acme", "globex", "acme"} {
		r, err := env.Client.StageFlow(ctx, f, map[string]string{"tenant": tenant})
		if err != nil {
			t.Fatal(err)
		}
		runs = append(runs, r.ID)
	}
	// globex is not held back by acme's pause.
	if out, err := env.Client.RunResult(ctx, runs[2], 5*time.Second); err != nil || out.State != wire.RunSucceeded {
		t.Fatalf("globex's run: %+v, %v", out, err)
	}
	mu.Lock()
	globexDone := time.Now()
	end := pauseEnd
	mu.Unlock()
	if !globexDone.Before(end) {
		t.Fatalf("globex's run ended %s after the pause's end: it waited for acme's pause", globexDone.Sub(end))
	}
	for _, id := range runs {
		out, err := env.Client.RunResult(ctx, id, 10*time.Second)
		if err != nil || out.State != wire.RunSucceeded {
			t.Fatalf("run %s: %+v, %v", id, out, err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(early) > 0 {
		t.Fatalf("acme calls started during the pause: %v", early)
	}
}
