package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flowfabric/ff/compiler"
	"github.com/flowfabric/ff/compiler/plan"
	"github.com/flowfabric/ff/dsl"
	"github.com/flowfabric/ff/runtime/api"
	"github.com/flowfabric/ff/runtime/client"
	"github.com/flowfabric/ff/runtime/server"
	"github.com/flowfabric/ff/runtime/server/servertest"
	"github.com/flowfabric/ff/runtime/store"
	"github.com/flowfabric/ff/runtime/wire"
	"github.com/flowfabric/ff/runtime/worker"
)

// compileFlows compiles one .ff source and returns its flows by name.
func compileFlows(t *testing.T, src string) map[string]*plan.Flow {
	t.Helper()
	pkg, diags := compiler.Compile([]dsl.Source{{Name: "t.ff", Data: []byte(src)}})
	if diags.HasErrors() || pkg == nil {
		var b bytes.Buffer
		_ = diags.Format(&b)
		t.Fatalf("compile:\n%s", b.String())
	}
	out := map[string]*plan.Flow{}
	for i := range pkg.Flows {
		out[pkg.Flows[i].Name] = &pkg.Flows[i]
	}
	return out
}

func templates(m map[string]*plan.Flow) []*plan.Flow {
	var out []*plan.Flow
	for _, f := range m {
		out = append(out, f)
	}
	slices.SortFunc(out, func(a, b *plan.Flow) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// startAdmission serves ffrun with fast admission scanners and the flows
// as templates (so their shared budgets and quotas are registered).
func startAdmission(t *testing.T, flows map[string]*plan.Flow, mod ...func(*server.Config)) *servertest.Env {
	t.Helper()
	return servertest.Start(t, append([]func(*server.Config){func(c *server.Config) {
		c.Templates = templates(flows)
		c.Scanners.Unblock = 50 * time.Millisecond
		c.Scanners.QuotaRelease = 20 * time.Millisecond
		c.Scanners.QuotaReconcile = 500 * time.Millisecond
		c.Scanners.BudgetReset = 100 * time.Millisecond
	}}, mod...)...)
}

// runWorker runs an SDK worker until the test ends or stop is called.
func runWorker(t *testing.T, env *servertest.Env, cfg worker.Config, handlers map[string]worker.Handler) (stop func()) {
	t.Helper()
	return env.RunWorker(t, cfg, handlers)
}

// eventually polls cond every 20ms until it holds or timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, state := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s; last: %s", what, timeout, state)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func ok(out json.RawMessage) worker.Handler {
	return func(context.Context, *worker.Task) (json.RawMessage, error) { return out, nil }
}

func memberIDs(t *testing.T, c *client.Client, runID string) map[string]string {
	t.Helper()
	r, err := c.GetRun(context.Background(), runID)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, m := range r.Execs {
		out[m.Name] = m.ExecutionID
	}
	return out
}

const budgetFF = `
type Job { tenant: string }

budget tokens {
  dimension tokens { hard 10 soft 5 }
  on_hard_limit block
}

budget strict {
  dimension tokens { hard 10 }
  on_hard_limit fail
}

flow spend(Job) -> Job {
  budget tokens
  exec first(Job) -> Job {}
  exec second(Job) -> Job {}
  exec third(Job) -> Job {}
  first -> second
  first -> third
  result second
}

flow failing(Job) -> Job {
  budget strict
  exec first(Job) -> Job {}
  exec second(Job) -> Job {}
  first -> second
  result second
}
`

// A hard limit reached mid-flow parks the rest of the run
// (waiting_for_budget, with the budget and dimension in the detail); a
// reset through the API resumes it.
func TestBudgetHardLimitBlocksThenResetResumes(t *testing.T) {
	flows := compileFlows(t, budgetFF)
	env := startAdmission(t, flows)
	ctx := context.Background()
	c := env.Client

	// ffrun registered the declared shared budget.
	b, err := c.GetBudget(ctx, "default/tokens")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]wire.BudgetUsage{{Dimension: "tokens", Used: 0, Hard: 10, Soft: 5}}, b.Dimensions); diff != "" {
		t.Fatalf("registered budget (-want +got):\n%s", diff)
	}

	var ran sync.Map
	spendHandler := func(ctx context.Context, task *worker.Task) (json.RawMessage, error) {
		ran.Store(task.ID(), true)
		res, err := task.ReportUsage(ctx, "tokens", 10)
		if err != nil {
			return nil, err
		}
		if len(res) != 1 || res[0].Status != "hard_breach" || !res[0].OverHard {
			return nil, fmt.Errorf("usage result %+v, want one hard_breach", res)
		}
		return task.Input(), nil
	}
	var later atomic.Int64
	laterHandler := func(_ context.Context, task *worker.Task) (json.RawMessage, error) {
		later.Add(1)
		return task.Input(), nil
	}
	// One slot: no claim is parked while first runs, so the claim after
	// its completion reads the budgets after the breach. A claim cycle
	// that read them before may still grant (spec/runtime.md, "The grant
	// cycle"), which a second slot's parked claim could hit.
	runWorker(t, env, worker.Config{Name: "w1", Concurrency: 1}, map[string]worker.Handler{
		"spend.first": spendHandler, "spend.second": laterHandler, "spend.third": laterHandler,
	})
	run, err := c.StageFlow(ctx, flows["spend"], map[string]any{"tenant": "acme"})
	if err != nil {
		t.Fatal(err)
	}
	ids := memberIDs(t, c, run.ID)
	for _, name := range []string{"second", "third"} {
		eventually(t, 5*time.Second, name+" parked for the budget", func() (bool, string) {
			ex, err := c.GetExecution(ctx, ids[name])
			if err != nil {
				return false, err.Error()
			}
			return ex.BlockingReason == string(store.WaitingForBudget), fmt.Sprintf("%s %s %q", ex.State, ex.BlockingReason, ex.BlockingDetail)
		})
		ex, _ := c.GetExecution(ctx, ids[name])
		if ex.State != "blocked" || !strings.Contains(ex.BlockingDetail, "default/tokens") || !strings.Contains(ex.BlockingDetail, "tokens at hard limit (10 of 10)") {
			t.Errorf("%s: state %s detail %q, want blocked naming budget default/tokens and dimension tokens", name, ex.State, ex.BlockingDetail)
		}
	}
	// The list shows why too.
	list, err := c.ListExecutions(ctx, client.ListOptions{State: "blocked"})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Executions) != 2 || list.Executions[0].BlockingDetail == "" {
		t.Fatalf("blocked list: %+v", list.Executions)
	}
	time.Sleep(300 * time.Millisecond) // several unblock ticks: still parked
	if n := later.Load(); n != 0 {
		t.Fatalf("%d executions ran past the hard limit", n)
	}
	b, err = c.GetBudget(ctx, "default/tokens")
	if err != nil {
		t.Fatal(err)
	}
	if !b.HardLimited || b.HardBreaches != 1 || b.SoftBreaches != 1 || b.Dimensions[0].Used != 10 {
		t.Fatalf("budget after the report: %+v", b)
	}

	// Re-registering the declarations (ffrun restarting) keeps the usage.
	if err := server.RegisterDeclared(ctx, env.Server.Store(), templates(flows), nil); err != nil {
		t.Fatal(err)
	}
	if b, _ = c.GetBudget(ctx, "default/tokens"); b.Dimensions[0].Used != 10 {
		t.Fatalf("re-registering lost the usage: %+v", b.Dimensions)
	}

	b, err = c.ResetBudget(ctx, "default/tokens")
	if err != nil {
		t.Fatal(err)
	}
	if b.HardLimited || b.Dimensions[0].Used != 0 || b.Resets != 1 {
		t.Fatalf("budget after reset: %+v", b)
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := run.Result(wctx); err != nil {
		t.Fatalf("run after reset: %v", err)
	}
	if n := later.Load(); n != 2 {
		t.Fatalf("%d later executions ran, want 2", n)
	}
}

// Raising the hard limit through the API unblocks too.
func TestBudgetRaisingLimitUnblocks(t *testing.T) {
	flows := compileFlows(t, budgetFF)
	env := startAdmission(t, flows)
	ctx := context.Background()
	c := env.Client
	// One slot, for the reason given in TestBudgetHardLimitBlocksThenResetResumes.
	runWorker(t, env, worker.Config{Name: "w1", Concurrency: 1}, map[string]worker.Handler{
		"spend.first": func(ctx context.Context, task *worker.Task) (json.RawMessage, error) {
			_, err := task.ReportUsage(ctx, "tokens", 10)
			return task.Input(), err
		},
		"spend.second": ok(json.RawMessage(`{"tenant":"x"}`)), "spend.third": ok(nil),
	})
	run, err := c.StageFlow(ctx, flows["spend"], map[string]any{"tenant": "acme"})
	if err != nil {
		t.Fatal(err)
	}
	ids := memberIDs(t, c, run.ID)
	eventually(t, 5*time.Second, "second parked", func() (bool, string) {
		ex, err := c.GetExecution(ctx, ids["second"])
		if err != nil {
			return false, err.Error()
		}
		return ex.BlockingReason == string(store.WaitingForBudget), ex.State
	})
	b, created, err := c.PutBudget(ctx, wire.PutBudget{ID: "default/tokens", Dimensions: []wire.BudgetDimension{{Name: "tokens", Hard: 100}}})
	if err != nil {
		t.Fatal(err)
	}
	if created || b.HardLimited || b.Dimensions[0].Used != 10 || b.Dimensions[0].Hard != 100 {
		t.Fatalf("raised budget: created %v %+v", created, b)
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := run.Result(wctx); err != nil {
		t.Fatalf("run after raising the limit: %v", err)
	}
}

// on_hard_limit fail fails the executions that would run past the limit.
func TestBudgetOnHardLimitFail(t *testing.T) {
	flows := compileFlows(t, budgetFF)
	env := startAdmission(t, flows)
	ctx := context.Background()
	c := env.Client
	var second atomic.Int64
	// One slot, for the reason given in TestBudgetHardLimitBlocksThenResetResumes.
	runWorker(t, env, worker.Config{Name: "w1", Concurrency: 1}, map[string]worker.Handler{
		"failing.first": func(ctx context.Context, task *worker.Task) (json.RawMessage, error) {
			_, err := task.ReportUsage(ctx, "tokens", 12)
			return task.Input(), err
		},
		"failing.second": func(context.Context, *worker.Task) (json.RawMessage, error) {
			second.Add(1)
			return nil, nil
		},
	})
	run, err := c.StageFlow(ctx, flows["failing"], map[string]any{"tenant": "acme"})
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err = run.Result(wctx)
	var re *client.RunError
	if !errors.As(err, &re) {
		t.Fatalf("run result: %v, want a *client.RunError", err)
	}
	if second.Load() != 0 {
		t.Fatal("second ran past the hard limit")
	}
	ids := memberIDs(t, c, run.ID)
	ex, err := c.GetExecution(ctx, ids["second"])
	if err != nil {
		t.Fatal(err)
	}
	if ex.State != "failed" || !strings.Contains(ex.LastError, "budget_exceeded") || !strings.Contains(ex.LastError, "default/strict") {
		t.Fatalf("second: state %s error %q, want failed with budget_exceeded naming default/strict", ex.State, ex.LastError)
	}
}

// Usage reports are fenced by the lease and deduplicated by key.
func TestExecutionUsageDedupAndStaleLease(t *testing.T) {
	flows := compileFlows(t, budgetFF)
	env := startAdmission(t, flows)
	ctx := context.Background()
	c := env.Client
	if _, err := c.StageFlow(ctx, flows["spend"], map[string]any{"tenant": "acme"}); err != nil {
		t.Fatal(err)
	}
	tasks, err := c.Claim(ctx, wire.ClaimRequest{WorkerID: "raw", Max: 1, WaitMs: 2000})
	if err != nil || len(tasks) != 1 {
		t.Fatalf("claim: %v %v", tasks, err)
	}
	task := tasks[0]
	report := func(key string, epoch int64) ([]wire.UsageResult, error) {
		return c.ReportExecutionUsage(ctx, task.ExecutionID, wire.ExecutionUsageReport{
			LeaseID: task.LeaseID, Epoch: epoch, Dimension: "tokens", Delta: 3, DedupKey: key})
	}
	r1, err := report("k1", task.Epoch)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := report("k1", task.Epoch) // a retried request
	if err != nil {
		t.Fatal(err)
	}
	want := []wire.UsageResult{{BudgetID: "default/tokens", Status: "applied", Used: 3, Hard: 10, Soft: 5}}
	if diff := cmp.Diff(want, r1); diff != "" {
		t.Errorf("first report (-want +got):\n%s", diff)
	}
	want[0].Status = "duplicate"
	if diff := cmp.Diff(want, r2); diff != "" {
		t.Errorf("repeated report (-want +got):\n%s", diff)
	}
	// The longest key the API takes counts once too: scoped by the lease it
	// passes the store's limit and stands for itself by its hash (it was
	// refused with a 400).
	long := strings.Repeat("k", api.DedupKeyMaxBytes)
	for i, status := range []string{"soft_breach", "duplicate"} { // 3 + 3 crosses the soft limit
		r, err := report(long, task.Epoch)
		if err != nil || len(r) != 1 || r[0].Status != status || r[0].Used != 6 {
			t.Fatalf("report %d with a %d-byte dedup_key = %+v, %v; want %s at 6", i, len(long), r, err, status)
		}
	}
	if _, err := report("k2", task.Epoch+1); apiErr(t, err).Status != http.StatusConflict || apiErr(t, err).Code != wire.CodeStaleLease {
		t.Errorf("wrong epoch: %v, want 409 stale_lease", err)
	}
	if _, err := c.ReportExecutionUsage(ctx, task.ExecutionID, wire.ExecutionUsageReport{LeaseID: "nope", Epoch: task.Epoch,
		Dimension: "tokens", Delta: 1, DedupKey: "k3"}); apiErr(t, err).Code != wire.CodeStaleLease {
		t.Errorf("wrong lease id: %v, want stale_lease", err)
	}
	if _, err := c.CompleteOne(ctx, wire.Lease{ExecutionID: task.ExecutionID, LeaseID: task.LeaseID, Epoch: task.Epoch}, task.Input); err != nil {
		t.Fatal(err)
	}
	if _, err := report("k4", task.Epoch); apiErr(t, err).Code != wire.CodeStaleLease {
		t.Errorf("after completion: %v, want stale_lease", err)
	}
	if _, err := report("", task.Epoch); apiErr(t, err).Code != wire.CodeValidation {
		t.Errorf("no dedup key: %v, want validation_failed", err)
	}
	b, err := c.GetBudget(ctx, "default/tokens")
	if err != nil {
		t.Fatal(err)
	}
	if b.Dimensions[0].Used != 6 {
		t.Fatalf("usage %d, want 6 (dedup and fencing)", b.Dimensions[0].Used)
	}
}

const quotaFF = `
type Job { tenant: string, n: int }

quota r10 { rate 10 per 1s }
quota c3 { concurrency 3 }
quota per_tenant { concurrency 1 key tenant }

flow rated(Job) -> Job {
  quota r10
  exec go(Job) -> Job {}
  result go
}

flow capped(Job) -> Job {
  quota c3
  exec go(Job) -> Job {}
  result go
}

flow tenant(Job) -> Job {
  quota per_tenant
  exec go(Job) -> Job {}
  result go
}
`

func stageMany(t *testing.T, c *client.Client, f *plan.Flow, n int, input func(i int) any) []*client.Run {
	t.Helper()
	runs := make([]*client.Run, n)
	for i := range n {
		r, err := c.StageFlow(context.Background(), f, input(i))
		if err != nil {
			t.Fatal(err)
		}
		runs[i] = r
	}
	return runs
}

func waitRuns(t *testing.T, runs []*client.Run, timeout time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for _, r := range runs {
		if _, err := r.Result(ctx); err != nil {
			t.Fatalf("run %s: %v", r.ID, err)
		}
	}
}

// A rate quota of 10 per second admits at most 10 starts in any second,
// and about 10 per second under load from many workers.
func TestQuotaRateUnderLoad(t *testing.T) {
	flows := compileFlows(t, quotaFF)
	env := startAdmission(t, flows)
	c := env.Client
	var mu sync.Mutex
	var ids []string
	for i := range 8 {
		runWorker(t, env, worker.Config{Name: fmt.Sprintf("w%d", i), Concurrency: 4}, map[string]worker.Handler{
			"rated.go": func(_ context.Context, task *worker.Task) (json.RawMessage, error) {
				mu.Lock()
				ids = append(ids, task.ID())
				mu.Unlock()
				return task.Input(), nil
			},
		})
	}
	const n = 35 // about 3.5 s at 10/s
	runs := stageMany(t, c, flows["rated"], n, func(i int) any { return map[string]any{"tenant": "t", "n": i} })
	waitRuns(t, runs, 20*time.Second)

	mu.Lock()
	defer mu.Unlock()
	if len(ids) != n {
		t.Fatalf("%d starts, want %d", len(ids), n)
	}
	// The server's start times (its clock, taken in the claim that follows
	// the admission), not the handlers': those add the HTTP hop's jitter.
	var starts []time.Time
	for _, id := range ids {
		ex, err := c.GetExecution(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if ex.StartedAt == nil {
			t.Fatalf("execution %s ran but has no started_at", id)
		}
		starts = append(starts, *ex.StartedAt)
	}
	slices.SortFunc(starts, func(a, b time.Time) int { return a.Compare(b) })
	// Any window of 900ms holds at most 10 starts. A start trails its
	// admission by the claim that follows it, a gap that varies with load,
	// so the window is narrower than the quota's by a margin for it. A
	// limiter admitting one too many still fails here: the extra admission
	// comes at the same instant as the others of its window.
	for i, s := range starts {
		j := i
		for j < len(starts) && starts[j].Sub(s) < 900*time.Millisecond {
			j++
		}
		if j-i > 10 {
			t.Fatalf("%d starts within 900ms from start %d (%s)", j-i, i, s.Format(time.StampMilli))
		}
	}
	// Throughput: the window check above is the cap; this one says the
	// quota is used, at least 7 starts a second on the whole: by k seconds
	// after the first start, at least 7k have started. It counts the starts
	// so far rather than those of each second: admissions come in batches
	// (a claim of 4 slots is admitted 4 at the same millisecond), so the
	// first start coming a few ms late (load) moves a whole batch of the
	// next window into the first second, as in "14 6 10" starts per second
	// from a limiter that admitted exactly 10 per second. A total moves by
	// no more than that batch.
	t0 := starts[0]
	per := make([]int, 3)
	for _, s := range starts {
		if k := int(s.Sub(t0) / time.Second); k < len(per) {
			per[k]++
		}
	}
	t.Logf("starts per second: %v; total %d in %s", per, len(starts), starts[len(starts)-1].Sub(t0).Round(time.Millisecond))
	sofar := 0
	for k, got := range per {
		sofar += got
		if want := 7 * (k + 1); sofar < want {
			t.Errorf("%d starts in the %d s from the first, want at least %d (rate 10/s, starts per second %v)", sofar, k+1, want, per)
		}
	}
}

// A concurrency cap of 3 is never exceeded under 16 concurrent workers, and
// a killed worker's slot comes back (its lease expires).
func TestQuotaConcurrencyCapAndNoLeak(t *testing.T) {
	flows := compileFlows(t, quotaFF)
	env := startAdmission(t, flows)
	ctx := context.Background()
	c := env.Client

	// A worker that claims one capped task and dies without reporting.
	if _, err := c.StageFlow(ctx, flows["capped"], map[string]any{"tenant": "t", "n": -1}); err != nil {
		t.Fatal(err)
	}
	dead, err := c.Claim(ctx, wire.ClaimRequest{WorkerID: "doomed", Max: 1, WaitMs: 2000, LeaseMs: 500})
	if err != nil || len(dead) != 1 {
		t.Fatalf("claim of the doomed worker: %v %v", dead, err)
	}
	q, err := c.GetQuota(ctx, "default/c3")
	if err != nil {
		t.Fatal(err)
	}
	if q.Subjects[0].ActiveCount != 1 || q.Concurrency != 3 {
		t.Fatalf("quota while the doomed worker holds a slot: %+v", q)
	}

	var running, peak atomic.Int64
	for i := range 16 {
		runWorker(t, env, worker.Config{Name: fmt.Sprintf("w%d", i)}, map[string]worker.Handler{
			"capped.go": func(_ context.Context, task *worker.Task) (json.RawMessage, error) {
				n := running.Add(1)
				for {
					p := peak.Load()
					if n <= p || peak.CompareAndSwap(p, n) {
						break
					}
				}
				time.Sleep(30 * time.Millisecond)
				running.Add(-1)
				return task.Input(), nil
			},
		})
	}
	runs := stageMany(t, c, flows["capped"], 30, func(i int) any { return map[string]any{"tenant": "t", "n": i} })
	waitRuns(t, runs, 20*time.Second)
	if p := peak.Load(); p > 3 || p < 2 {
		t.Fatalf("peak concurrency %d, want 2..3 (cap 3)", p)
	}
	// The doomed worker's execution is reclaimed when its lease expires and
	// then runs. It is not among the runs waited for above and may be
	// admitted after them (the cap can be full when it is reclaimed, so it
	// waits for an unblock pass): wait for it rather than assume an order.
	eventually(t, 10*time.Second, "the dead worker's execution completed after reclaim", func() (bool, string) {
		ex, err := c.GetExecution(ctx, dead[0].ExecutionID)
		if err != nil {
			return false, err.Error()
		}
		return ex.State == "completed", ex.State + " " + ex.BlockingReason
	})
	// No slot leaked.
	eventually(t, 5*time.Second, "every slot released", func() (bool, string) {
		q, err := c.GetQuota(ctx, "default/c3")
		if err != nil {
			return false, err.Error()
		}
		active := int64(0)
		for _, s := range q.Subjects {
			active += s.ActiveCount
		}
		return active == 0, fmt.Sprintf("%+v", q.Subjects)
	})
}

// A keyed quota limits each key separately: tenant A at its cap does not
// hold up tenant B; GET /v1/quotas shows the counts per key.
func TestKeyedQuotaTenantsIndependent(t *testing.T) {
	flows := compileFlows(t, quotaFF)
	env := startAdmission(t, flows)
	ctx := context.Background()
	c := env.Client
	release := make(chan struct{})
	var bDone atomic.Int64
	runWorker(t, env, worker.Config{Name: "w", Concurrency: 4}, map[string]worker.Handler{
		"tenant.go": func(ctx context.Context, task *worker.Task) (json.RawMessage, error) {
			var in struct{ Tenant string }
			_ = json.Unmarshal(task.Input(), &in)
			if in.Tenant == "a" {
				select {
				case <-release:
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			} else {
				bDone.Add(1)
			}
			return task.Input(), nil
		},
	})
	aRuns := stageMany(t, c, flows["tenant"], 3, func(i int) any { return map[string]any{"tenant": "a", "n": i} })
	eventually(t, 5*time.Second, "tenant a saturated", func() (bool, string) {
		q, err := c.GetQuota(ctx, "default/per_tenant")
		if err != nil {
			return false, err.Error()
		}
		return len(q.Subjects) == 1 && q.Subjects[0].Key == "a" && q.Subjects[0].ActiveCount == 1, fmt.Sprintf("%+v", q.Subjects)
	})
	bRuns := stageMany(t, c, flows["tenant"], 2, func(i int) any { return map[string]any{"tenant": "b", "n": i} })
	waitRuns(t, bRuns, 10*time.Second) // while a still holds its slot
	if bDone.Load() != 2 {
		t.Fatalf("tenant b ran %d, want 2", bDone.Load())
	}
	// a's others wait for the quota, naming the quota and key.
	blocked, err := c.ListExecutions(ctx, client.ListOptions{State: "blocked"})
	if err != nil {
		t.Fatal(err)
	}
	if len(blocked.Executions) == 0 {
		t.Fatal("no execution of tenant a waits for the quota")
	}
	for _, ex := range blocked.Executions {
		if ex.BlockingReason != string(store.WaitingForQuota) || !strings.Contains(ex.BlockingDetail, "default/per_tenant=a") {
			t.Errorf("blocked %s: %s %q, want waiting_for_quota naming default/per_tenant=a", ex.ID, ex.BlockingReason, ex.BlockingDetail)
		}
	}
	q, err := c.GetQuota(ctx, "default/per_tenant")
	if err != nil {
		t.Fatal(err)
	}
	if q.Key != "tenant" || q.Concurrency != 1 {
		t.Fatalf("quota definition: %+v", q)
	}
	close(release)
	waitRuns(t, aRuns, 10*time.Second)
}

// logBuffer collects log lines for assertions and passes them to t.Log.
type logBuffer struct {
	t  *testing.T
	mu sync.Mutex
	b  strings.Builder
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	l.b.Write(p)
	l.mu.Unlock()
	l.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// An execution requiring gpu waits (waiting_for_capable_worker, visible in
// the API and logged by ffrun) until a gpu worker connects, then runs on it.
func TestCapabilityWaitsForCapableWorker(t *testing.T) {
	logs := &logBuffer{t: t}
	env := startAdmission(t, nil, func(c *server.Config) {
		c.Logger = slogText(logs)
	})
	ctx := context.Background()
	c := env.Client
	var ranOn atomic.Value
	handler := func(name string) worker.Handler {
		return func(_ context.Context, task *worker.Task) (json.RawMessage, error) {
			ranOn.Store(name)
			return nil, nil
		}
	}
	runWorker(t, env, worker.Config{Name: "cpu-worker", Capabilities: []string{"cpu"}}, map[string]worker.Handler{"render": handler("cpu-worker")})
	ex, _, err := c.CreateExecution(ctx, wire.CreateExecution{Kind: "render", Requires: []string{"gpu"}})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "parked for a capable worker", func() (bool, string) {
		got, err := c.GetExecution(ctx, ex.ID)
		if err != nil {
			return false, err.Error()
		}
		return got.BlockingReason == string(store.WaitingForCapableWorker), fmt.Sprintf("%s %s %q", got.State, got.BlockingReason, got.BlockingDetail)
	})
	got, _ := c.GetExecution(ctx, ex.ID)
	if got.State != "blocked" || !strings.Contains(got.BlockingDetail, "gpu") {
		t.Fatalf("parked execution: %s %q, want blocked naming gpu", got.State, got.BlockingDetail)
	}
	eventually(t, 3*time.Second, "ffrun logs the parking", func() (bool, string) {
		s := logs.String()
		return strings.Contains(s, "execution parked") && strings.Contains(s, ex.ID) && strings.Contains(s, "gpu"), ""
	})
	if ranOn.Load() != nil {
		t.Fatal("ran before a gpu worker connected")
	}
	runWorker(t, env, worker.Config{Name: "gpu-worker", Capabilities: []string{"gpu", "cuda-12"}}, map[string]worker.Handler{"render": handler("gpu-worker")})
	res, err := c.WaitResult(ctx, ex.ID, 20*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if res.State != "completed" || ranOn.Load() != "gpu-worker" {
		t.Fatalf("state %s on %v, want completed on gpu-worker", res.State, ranOn.Load())
	}
}

// A gpu worker of tenant A never unblocks tenant B's execution.
func TestCapabilityNamespacesIsolated(t *testing.T) {
	env := startAdmission(t, nil)
	ctx := context.Background()
	c := env.Client
	var ran atomic.Value
	h := func(name string) worker.Handler {
		return func(context.Context, *worker.Task) (json.RawMessage, error) { ran.Store(name); return nil, nil }
	}
	// B's cpu worker makes the claim that parks B's gpu execution.
	runWorker(t, env, worker.Config{Name: "b-cpu", Namespace: "tenant-b"}, map[string]worker.Handler{"render": h("b-cpu")})
	ex, _, err := c.CreateExecution(ctx, wire.CreateExecution{Namespace: "tenant-b", Kind: "render", Requires: []string{"gpu"}})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "b's execution parked", func() (bool, string) {
		got, err := c.GetExecution(ctx, ex.ID)
		if err != nil {
			return false, err.Error()
		}
		return got.BlockingReason == string(store.WaitingForCapableWorker), got.State
	})
	runWorker(t, env, worker.Config{Name: "a-gpu", Namespace: "tenant-a", Capabilities: []string{"gpu"}}, map[string]worker.Handler{"render": h("a-gpu")})
	time.Sleep(400 * time.Millisecond) // the connect and several unblock ticks
	got, err := c.GetExecution(ctx, ex.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != "blocked" || ran.Load() != nil {
		t.Fatalf("tenant a's gpu worker affected tenant b's execution: %s, ran on %v", got.State, ran.Load())
	}
	runWorker(t, env, worker.Config{Name: "b-gpu", Namespace: "tenant-b", Capabilities: []string{"gpu"}}, map[string]worker.Handler{"render": h("b-gpu")})
	res, err := c.WaitResult(ctx, ex.ID, 20*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if res.State != "completed" || ran.Load() != "b-gpu" {
		t.Fatalf("state %s on %v, want completed on b-gpu", res.State, ran.Load())
	}
}

// Capabilities are validated when a worker connects: a clear 400, and
// nothing registered.
func TestWorkerConnectValidatesCapabilities(t *testing.T) {
	env := startAdmission(t, nil)
	ctx := context.Background()
	c := env.Client
	for _, caps := range [][]string{{""}, {"a,b"}, {"has space"}, {"ctl\x01"}, {strings.Repeat("x", 5000)}} {
		_, err := c.Heartbeat(ctx, wire.WorkerHeartbeat{WorkerID: "w", Capabilities: caps})
		ae := apiErr(t, err)
		if ae.Status != http.StatusBadRequest || ae.Code != wire.CodeValidation || !strings.Contains(ae.Message, "capabilities") {
			t.Errorf("capabilities %q: %d %s %q, want 400 validation_failed naming capabilities", caps, ae.Status, ae.Code, ae.Message)
		}
	}
	ws, err := c.Workers(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(ws.Workers) != 0 {
		t.Fatalf("rejected workers were registered: %+v", ws.Workers)
	}
	if _, err := worker.New(worker.Config{URL: env.URL, Capabilities: []string{"a b"}}); err == nil {
		t.Fatal("the SDK accepted a capability with a space")
	}
}

// GET /v1/workers lists connected workers with capabilities, lanes and the
// leases they hold.
func TestWorkersList(t *testing.T) {
	env := startAdmission(t, nil)
	ctx := context.Background()
	c := env.Client
	hold := make(chan struct{})
	runWorker(t, env, worker.Config{Name: "lister", Lanes: []string{"default", "gpu"}, Capabilities: []string{"gpu", "cuda-12"}},
		map[string]worker.Handler{"k": func(ctx context.Context, _ *worker.Task) (json.RawMessage, error) {
			select {
			case <-hold:
			case <-ctx.Done():
			}
			return nil, nil
		}})
	ex, _, err := c.CreateExecution(ctx, wire.CreateExecution{Kind: "k"})
	if err != nil {
		t.Fatal(err)
	}
	var w wire.Worker
	eventually(t, 5*time.Second, "worker listed with its lease", func() (bool, string) {
		ws, err := c.Workers(ctx, "default")
		if err != nil {
			return false, err.Error()
		}
		if len(ws.Workers) != 1 {
			return false, fmt.Sprintf("%+v", ws.Workers)
		}
		w = ws.Workers[0]
		return len(w.ActiveLeases) == 1, fmt.Sprintf("%+v", w)
	})
	close(hold)
	if w.WorkerID != "lister" || !slices.Equal(w.Capabilities, []string{"cuda-12", "gpu"}) || !slices.Equal(w.Lanes, []string{"default", "gpu"}) || w.ActiveLeases[0] != ex.ID {
		t.Fatalf("listed worker: %+v", w)
	}
	if ws, err := c.Workers(ctx, "elsewhere"); err != nil || len(ws.Workers) != 0 {
		t.Fatalf("other namespace: %+v %v", ws, err)
	}
}

// Bad budget and quota definitions are rejected with 400 and nothing is
// written.
func TestAdmissionBadInputs(t *testing.T) {
	env := startAdmission(t, nil)
	ctx := context.Background()
	c := env.Client
	budgets := []struct {
		name string
		req  wire.PutBudget
		want string // in the message when set
	}{
		{"no dimension", wire.PutBudget{Name: "b1"}, ""},
		{"bad on_hard_limit", wire.PutBudget{Name: "b1", OnHardLimit: "explode", Dimensions: []wire.BudgetDimension{{Name: "d", Hard: 1}}}, ""},
		{"soft above hard", wire.PutBudget{Name: "b1", Dimensions: []wire.BudgetDimension{{Name: "d", Hard: 1, Soft: 2}}}, ""},
		{"negative", wire.PutBudget{Name: "b1", Dimensions: []wire.BudgetDimension{{Name: "d", Hard: -1}}}, ""},
		{"duplicate dimension", wire.PutBudget{Name: "b1", Dimensions: []wire.BudgetDimension{{Name: "d"}, {Name: "d"}}}, ""},
		{"id and name", wire.PutBudget{ID: "default/b1", Name: "b1", Dimensions: []wire.BudgetDimension{{Name: "d"}}}, ""},
		{"id without name", wire.PutBudget{ID: "default/", Dimensions: []wire.BudgetDimension{{Name: "d"}}}, ""},
		{"bad name", wire.PutBudget{Name: "b 1", Dimensions: []wire.BudgetDimension{{Name: "d"}}}, ""},
		{"run-scoped id", wire.PutBudget{ID: "default/b1@run", Dimensions: []wire.BudgetDimension{{Name: "d"}}}, ""},
		// The name part of an id obeys the rules of name.
		{"name with colon", wire.PutBudget{Name: "b:1", Dimensions: []wire.BudgetDimension{{Name: "d"}}}, `name: "b:1": only letters, digits`},
		{"id name with colon", wire.PutBudget{ID: "default/b:1", Dimensions: []wire.BudgetDimension{{Name: "d"}}}, `id: "b:1": only letters, digits`},
		{"name too long", wire.PutBudget{Name: strings.Repeat("b", 65), Dimensions: []wire.BudgetDimension{{Name: "d"}}}, "is longer than 64 bytes"},
		{"id name too long", wire.PutBudget{ID: "default/" + strings.Repeat("b", 65), Dimensions: []wire.BudgetDimension{{Name: "d"}}}, "is longer than 64 bytes"},
		{"name with at", wire.PutBudget{Name: "b@1", Dimensions: []wire.BudgetDimension{{Name: "d"}}}, `name: "b@1" must not contain '/', '@' or '='`},
		{"id name with at", wire.PutBudget{ID: "default/b@1", Dimensions: []wire.BudgetDimension{{Name: "d"}}}, `id: "b@1" must not contain '/', '@' or '='`},
		{"dimension with comma", wire.PutBudget{Name: "b1", Dimensions: []wire.BudgetDimension{{Name: "a,b"}}}, ""},
	}
	for _, tc := range budgets {
		_, _, err := c.PutBudget(ctx, tc.req)
		if ae := apiErr(t, err); ae.Status != http.StatusBadRequest || !strings.Contains(ae.Message, tc.want) {
			t.Errorf("%s: %d %s %q, want 400 mentioning %q", tc.name, ae.Status, ae.Code, ae.Message, tc.want)
		}
	}
	for _, id := range []string{"default/b1", "default/b 1", "default/b:1", "default/" + strings.Repeat("b", 65)} {
		if _, err := c.GetBudget(ctx, id); apiErr(t, err).Status/100 != 4 {
			t.Errorf("budget %q exists after bad requests: %v", id, err)
		}
	}
	quotas := []struct {
		name string
		req  wire.PutQuota
		want string // in the message when set
	}{
		{"no limit", wire.PutQuota{Name: "q1"}, ""},
		{"negative rate", wire.PutQuota{Name: "q1", Rate: -1}, ""},
		{"window without rate", wire.PutQuota{Name: "q1", Concurrency: 1, WindowMs: 1000}, ""},
		{"bad key", wire.PutQuota{Name: "q1", Concurrency: 1, Key: "a..b"}, ""},
		{"id name with colon", wire.PutQuota{ID: "default/q:1", Concurrency: 1}, `id: "q:1": only letters, digits`},
		{"id name too long", wire.PutQuota{ID: "default/" + strings.Repeat("q", 65), Concurrency: 1}, "is longer than 64 bytes"},
	}
	for _, tc := range quotas {
		_, _, err := c.PutQuota(ctx, tc.req)
		if ae := apiErr(t, err); ae.Status != http.StatusBadRequest || !strings.Contains(ae.Message, tc.want) {
			t.Errorf("%s: %d %s %q, want 400 mentioning %q", tc.name, ae.Status, ae.Code, ae.Message, tc.want)
		}
	}
	if _, err := c.GetQuota(ctx, "default/q1"); apiErr(t, err).Status != http.StatusNotFound {
		t.Errorf("quota exists after bad requests: %v", err)
	}
	// Unknown fields are refused too.
	resp := rawDo(t, env, http.MethodPut, "/v1/budgets", "", `{"name":"b2","dimensions":[{"name":"d"}],"color":"red"}`)
	if resp.status != http.StatusBadRequest || resp.err.Code != wire.CodeUnknownField {
		t.Errorf("unknown field: %d %s, want 400 unknown_field", resp.status, resp.err.Code)
	}
	// A good one round-trips, by id with '/' in the path.
	b, created, err := c.PutBudget(ctx, wire.PutBudget{Namespace: "team-x", Name: "gpu", ResetMs: 60_000,
		Dimensions: []wire.BudgetDimension{{Name: "minutes", Hard: 600, Soft: 480}}})
	if err != nil || !created {
		t.Fatalf("put budget: %v %v", created, err)
	}
	if b.ID != "team-x/gpu" || b.NextResetAt == nil || b.ResetMs != 60_000 {
		t.Fatalf("budget: %+v", b)
	}
	r, err := c.ReportBudgetUsage(ctx, "team-x/gpu", wire.BudgetUsageReport{Dimension: "minutes", Delta: 500})
	if err != nil || r.Status != "soft_breach" || r.Used != 500 {
		t.Fatalf("operator usage report: %+v %v", r, err)
	}
	if _, err := c.GetBudget(ctx, "team-x/none"); apiErr(t, err).Status != http.StatusNotFound {
		t.Errorf("missing budget: %v, want 404", err)
	}
	q, created, err := c.PutQuota(ctx, wire.PutQuota{ID: "default/q2", Rate: 5, WindowMs: 2000})
	if err != nil || !created || q.Rate != 5 || q.WindowMs != 2000 || len(q.Subjects) != 1 {
		t.Fatalf("put quota: %+v %v %v", q, created, err)
	}
	// A concurrency cap alone has no window to show.
	if q, _, err := c.PutQuota(ctx, wire.PutQuota{ID: "default/q3", Concurrency: 2}); err != nil || q.WindowMs != 0 || q.Concurrency != 2 {
		t.Fatalf("put a concurrency quota: %+v %v", q, err)
	}
}

// The admission routes sit behind the bearer token like every /v1 route.
func TestAdmissionRoutesRequireToken(t *testing.T) {
	env := startAdmission(t, nil, func(c *server.Config) { c.Token = "s3cret-api-token" })
	routes := []struct{ method, path, body string }{
		{http.MethodPut, "/v1/budgets", `{"name":"b","dimensions":[{"name":"d"}]}`},
		{http.MethodGet, "/v1/budgets/default/b", ""},
		{http.MethodPost, "/v1/budgets/default/b/reset", ""},
		{http.MethodPost, "/v1/budgets/default/b/usage", `{"dimension":"d","delta":1}`},
		{http.MethodPut, "/v1/quotas", `{"name":"q","rate":1}`},
		{http.MethodGet, "/v1/quotas/default/q", ""},
		{http.MethodPost, "/v1/executions/x/usage", `{}`},
		{http.MethodPost, "/v1/workers/heartbeat", `{"worker_id":"w"}`},
		{http.MethodGet, "/v1/workers", ""},
	}
	for _, r := range routes {
		if got := rawDo(t, env, r.method, r.path, "", r.body).status; got != http.StatusUnauthorized {
			t.Errorf("%s %s without token: %d, want 401", r.method, r.path, got)
		}
		if got := rawDo(t, env, r.method, r.path, "wrong", r.body).status; got != http.StatusUnauthorized {
			t.Errorf("%s %s with a wrong token: %d, want 401", r.method, r.path, got)
		}
	}
	// Nothing was written, and the right token works.
	if got := rawDo(t, env, http.MethodGet, "/v1/budgets/default/b", "s3cret-api-token", "").status; got != http.StatusNotFound {
		t.Errorf("budget after refused requests: %d, want 404", got)
	}
	if got := rawDo(t, env, http.MethodPut, "/v1/budgets", "s3cret-api-token", routes[0].body).status; got != http.StatusCreated {
		t.Errorf("put with the token: %d, want 201", got)
	}
}

func slogText(w *logBuffer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

// loseFirstUsageAnswer delivers the first usage report to the server and
// then drops its answer, as a connection reset would.
type loseFirstUsageAnswer struct {
	next    http.RoundTripper
	dropped atomic.Bool
}

func (l *loseFirstUsageAnswer) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := l.next.RoundTrip(r)
	if err == nil && strings.HasSuffix(r.URL.Path, "/usage") && !l.dropped.Swap(true) {
		resp.Body.Close()
		return nil, errors.New("connection reset after the request was sent")
	}
	return resp, err
}

// The SDK retries a usage report whose answer was lost with the same dedup
// key, so it counts once; a task without a server says so.
func TestSDKReportUsageRetryCountsOnce(t *testing.T) {
	flows := compileFlows(t, budgetFF)
	env := startAdmission(t, flows)
	ctx := context.Background()
	c := env.Client
	rt := &loseFirstUsageAnswer{next: http.DefaultTransport}
	results := make(chan []worker.UsageResult, 2)
	runWorker(t, env, worker.Config{Name: "flaky", HTTPClient: &http.Client{Transport: rt}}, map[string]worker.Handler{
		"spend.first": func(ctx context.Context, task *worker.Task) (json.RawMessage, error) {
			for range 2 { // two distinct reports: both count
				res, err := task.ReportUsage(ctx, "tokens", 2)
				if err != nil {
					return nil, err
				}
				results <- res
			}
			return task.Input(), nil
		},
		"spend.second": ok(json.RawMessage(`{"tenant":"x"}`)), "spend.third": ok(nil),
	})
	run, err := c.StageFlow(ctx, flows["spend"], map[string]any{"tenant": "acme"})
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := run.Result(wctx); err != nil {
		t.Fatal(err)
	}
	if !rt.dropped.Load() {
		t.Fatal("no usage answer was dropped: the test did not exercise the retry")
	}
	first, second := <-results, <-results
	if first[0].Status != "duplicate" || first[0].Used != 2 || second[0].Status != "applied" || second[0].Used != 4 {
		t.Fatalf("reports: %+v then %+v, want the retried one duplicate at 2 and the next applied at 4", first, second)
	}
	b, err := c.GetBudget(ctx, "default/tokens")
	if err != nil {
		t.Fatal(err)
	}
	if b.Dimensions[0].Used != 4 {
		t.Fatalf("usage %d, want 4 (the retried report counted once)", b.Dimensions[0].Used)
	}
	if _, err := worker.NewTestTask(nil, nil).ReportUsage(ctx, "tokens", 1); !errors.Is(err, worker.ErrNoServer) {
		t.Fatalf("test task: %v, want ErrNoServer", err)
	}
}

// A connecting worker promotes its namespace's parked executions at once,
// without waiting for the unblock scanner (slowed down here to a minute).
func TestConnectUnblocksPromptly(t *testing.T) {
	env := startAdmission(t, nil, func(c *server.Config) { c.Scanners.Unblock = time.Minute })
	ctx := context.Background()
	c := env.Client
	ex, _, err := c.CreateExecution(ctx, wire.CreateExecution{Kind: "render", Requires: []string{"gpu"}})
	if err != nil {
		t.Fatal(err)
	}
	other, _, err := c.CreateExecution(ctx, wire.CreateExecution{Namespace: "other", Kind: "render", Requires: []string{"gpu"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{"default", "other"} {
		if tasks, err := c.Claim(ctx, wire.ClaimRequest{WorkerID: "cpu", Namespace: ns, Capabilities: []string{"cpu"}, Max: 1}); err != nil || len(tasks) != 0 {
			t.Fatalf("cpu claim in %s: %v %v", ns, tasks, err)
		}
	}
	for _, id := range []string{ex.ID, other.ID} {
		got, err := c.GetExecution(ctx, id)
		if err != nil || got.BlockingReason != string(store.WaitingForCapableWorker) {
			t.Fatalf("%s after the cpu claim: %+v %v", id, got, err)
		}
	}
	res, err := c.Heartbeat(ctx, wire.WorkerHeartbeat{WorkerID: "gpu", InstanceID: "gpu-1", Capabilities: []string{"gpu"}})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(&wire.WorkerHeartbeatResponse{Registered: true, Unblocked: 1}, res); diff != "" {
		t.Fatalf("connect (-want +got):\n%s", diff)
	}
	if got, _ := c.GetExecution(ctx, ex.ID); got.State != "waiting" {
		t.Fatalf("after the gpu worker connected: %s %s, want waiting", got.State, got.BlockingReason)
	}
	if got, _ := c.GetExecution(ctx, other.ID); got.State != "blocked" {
		t.Fatalf("the other namespace's execution: %s, want still blocked", got.State)
	}
	// A repeat heartbeat is not a connect.
	if res, err := c.Heartbeat(ctx, wire.WorkerHeartbeat{WorkerID: "gpu", InstanceID: "gpu-1", Capabilities: []string{"gpu"}}); err != nil || res.Registered {
		t.Fatalf("second heartbeat: %+v %v", res, err)
	}
	tasks, err := c.Claim(ctx, wire.ClaimRequest{WorkerID: "gpu", InstanceID: "gpu-1", Capabilities: []string{"gpu"}, Max: 1})
	if err != nil || len(tasks) != 1 || tasks[0].ExecutionID != ex.ID {
		t.Fatalf("gpu claim: %v %v", tasks, err)
	}
}
