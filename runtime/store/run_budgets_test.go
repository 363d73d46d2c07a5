package store

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/flowfabric/ff/compiler/plan"
	"github.com/google/go-cmp/cmp"
)

// budgetFlowOf is budgetFlow with size execs in all: the first counting
// against the budgets, the others free ones (a size over StageChunkExecs
// is staged in chunks).
func budgetFlowOf(size int) *plan.Flow {
	f := budgetFlow()
	for i := 1; i < size; i++ {
		f.Execs = append(f.Execs, plan.Exec{Name: fmt.Sprintf("m%04d", i), Kind: "k", Lane: plan.DefaultLane})
	}
	return f
}

// budgetFlow is a one-exec flow counting against a shared and a run-scoped
// budget.
func budgetFlow() *plan.Flow {
	f := flowOf("x", execs("a"))
	f.Execs[0].Budgets = []string{"daily", "per_run"}
	f.BudgetDefs = []plan.Budget{
		{Name: "daily", Dimensions: []plan.Dimension{{Name: "tokens", Hard: 1000}}, OnHardLimit: plan.OnHardLimitBlock, Scope: plan.ScopeShared},
		{Name: "per_run", Dimensions: []plan.Dimension{{Name: "tokens", Hard: 10}}, OnHardLimit: plan.OnHardLimitBlock, Scope: plan.ScopeRun},
	}
	return f
}

// A run's budgets are created before the run is staged: when creating
// them fails, no run exists (none runs without its limits).
func TestStagingCreatesBudgetsFirst(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	// A key of the wrong type where the shared budget's reset is
	// scheduled makes its creation fail.
	f := budgetFlow()
	f.BudgetDefs[0].ResetMs = 86_400_000
	id := BudgetID("default", "daily")
	if err := e.c.Do(e.ctx, e.c.B().Set().Key(e.s.k.resets(e.s.budgetPart(id))).Value("x").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	before := e.keys()
	if _, _, err := e.s.StageFlow(e.ctx, StageRequest{Flow: f, Input: []byte(`{}`)}); err == nil {
		t.Fatal("staging succeeded although its budget could not be created")
	}
	var staged []string
	for _, k := range e.keys() {
		if !slices.Contains(before, k) && (strings.Contains(k, ":f:") || strings.Contains(k, ":x:")) {
			staged = append(staged, k)
		}
	}
	if len(staged) > 0 {
		t.Fatalf("a run was staged without its budgets: %v", staged)
	}
}

// A repeat of a run's idempotency key creates the budgets the first run
// lacks (a run staged while its budgets came after it, and the creation
// failed), and only those: the usage of existing ones is kept.
func TestStagingRepeatRepairsRunBudgets(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	f := budgetFlow()
	r, _, err := e.s.StageFlow(e.ctx, StageRequest{Flow: f, Input: []byte(`{}`), IdempotencyKey: "k"})
	if err != nil {
		t.Fatal(err)
	}
	runBudget := RunBudgetID("default", "per_run", r.ID)
	if _, err := e.s.ReportUsage(e.ctx, BudgetID("default", "daily"), "tokens", 7, "u1"); err != nil {
		t.Fatal(err)
	}
	// Lose the run-scoped budget, as a failure after staging did.
	for _, k := range e.keys() {
		if strings.Contains(k, runBudget) {
			if err := e.c.Do(e.ctx, e.c.B().Del().Key(k).Build()).Error(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := e.s.GetBudget(e.ctx, runBudget); !errors.Is(err, ErrNotFound) {
		t.Fatalf("run budget after deleting it: %v", err)
	}
	again, created, err := e.s.StageFlow(e.ctx, StageRequest{Flow: f, Input: []byte(`{}`), IdempotencyKey: "k"})
	if err != nil || created || again.ID != r.ID {
		t.Fatalf("repeat: %v created=%v err=%v, want run %s", again, created, err, r.ID)
	}
	b, err := e.s.GetBudget(e.ctx, runBudget)
	if err != nil {
		t.Fatalf("run budget after the repeat: %v", err)
	}
	if b.Dimensions[0].Hard != 10 {
		t.Fatalf("repaired run budget %+v", b.Dimensions)
	}
	d, err := e.s.GetBudget(e.ctx, BudgetID("default", "daily"))
	if err != nil {
		t.Fatal(err)
	}
	if got := []int64{d.Dimensions[0].Used}; !cmp.Equal(got, []int64{7}) {
		t.Fatalf("shared budget usage after the repeat: %v, want kept", got)
	}
	// The repeat made no budget for a run of its own.
	for _, k := range e.keys() {
		if strings.Contains(k, "per_run@") && !strings.Contains(k, string(r.ID)) {
			t.Fatalf("a repeat created %s", k)
		}
	}
}

// A run's idempotency key held by another run when staging reads it, and
// expired before the staging call: the run is staged as a new one, and
// its run-scoped budget exists before the run is visible (a root claimed
// in between would run without it). Small runs and chunked ones alike.
func TestStagingAfterKeyExpiredMidwayGetsBudgets(t *testing.T) {
	t.Parallel()
	for _, size := range []int{1, StageChunkExecs + 5} {
		t.Run(fmt.Sprintf("%d execs", size), func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			f := budgetFlowOf(size)
			first, _, err := e.s.StageFlow(e.ctx, StageRequest{Flow: f, Input: []byte(`{}`), IdempotencyKey: "k"})
			if err != nil {
				t.Fatal(err)
			}
			var points []string
			e.s.hook = func(point, run string) {
				if point == "chunk" {
					return
				}
				points = append(points, point)
				switch point {
				case "stage":
					if len(points) > 1 {
						return
					}
					// The key expires now, between the read and the staging call.
					for _, k := range e.keys() {
						if strings.Contains(k, ":fidem:") {
							if err := e.c.Do(e.ctx, e.c.B().Del().Key(k).Build()).Error(); err != nil {
								t.Error(err)
							}
						}
					}
				case "resources":
					if _, err := e.s.GetRun(e.ctx, RunID(run)); !errors.Is(err, ErrNotFound) {
						t.Errorf("run %s read before its budgets were created: err %v, want not found", run, err)
					}
				}
			}
			r, created, err := e.s.StageFlow(e.ctx, StageRequest{Flow: f, Input: []byte(`{}`), IdempotencyKey: "k"})
			if err != nil || !created || r.ID == first.ID {
				t.Fatalf("staging after the key expired = %v created=%v err=%v, want a new run", r, created, err)
			}
			if want := []string{"stage", "resources"}; !cmp.Equal(points, want) {
				t.Errorf("staging went through %v, want %v", points, want)
			}
			b, err := e.s.GetBudget(e.ctx, RunBudgetID("default", "per_run", r.ID))
			if err != nil || b.Dimensions[0].Hard != 10 {
				t.Fatalf("run budget of the new run = %+v, %v", b, err)
			}
			got, err := e.s.GetRun(e.ctx, r.ID)
			if err != nil || len(got.Nodes) != size {
				t.Fatalf("the new run reads %v, %v; want %d members", got, err, size)
			}
			// A repeat of the key finds the new run.
			e.s.hook = nil
			again, created, err := e.s.StageFlow(e.ctx, StageRequest{Flow: f, Input: []byte(`{}`), IdempotencyKey: "k"})
			if err != nil || created || again.ID != r.ID {
				t.Fatalf("repeat = %v created=%v err=%v, want run %s", again, created, err, r.ID)
			}
		})
	}
}

// logBuffer is a log destination for one test's store.
type logBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.WriteString(string(p))
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Staging leaves an existing shared budget or quota as it is; when the
// plan defines it otherwise, it says so (once in a while, not per run), so
// a limit changed in a .ff file and staged from the regenerated plan does
// not seem to apply silently.
func TestStagingWarnsWhenThePlanDefinesResourcesOtherwise(t *testing.T) {
	t.Parallel()
	var logs logBuffer
	e := newEnv(t, func(c *Config) { c.Logger = slog.New(slog.NewTextHandler(&logs, nil)) })
	f := budgetFlow()
	f.Execs[0].Quotas = []string{"per_flow"}
	f.QuotaDefs = []plan.Quota{{Name: "per_flow", Concurrency: 4}}
	e.stage(f, `{}`)
	if strings.Contains(logs.String(), "otherwise") {
		t.Fatalf("warned with the definitions as staged:\n%s", logs.String())
	}
	// The plan changes; the server keeps its definitions.
	f.BudgetDefs[0].Dimensions[0].Hard = 5
	f.QuotaDefs[0].Concurrency = 1
	e.stage(f, `{}`)
	e.stage(f, `{}`)
	out := logs.String()
	for _, want := range []string{`budget=default/daily`, `quota=default/per_flow`} {
		if n := strings.Count(out, "the plan defines this"); !strings.Contains(out, want) || n != 2 {
			t.Errorf("want one warning naming %s (of 2 in all), got %d:\n%s", want, n, out)
		}
	}
	if b, err := e.s.GetBudget(e.ctx, BudgetID("default", "daily")); err != nil || b.Dimensions[0].Hard != 1000 {
		t.Fatalf("the stored budget: %+v, %v; want it left at 1000", b, err)
	}
}

// A shared budget defined through the API with the plan's dimensions in
// another order is the same budget: staging does not warn about it.
func TestStagingDoesNotWarnForDimensionOrder(t *testing.T) {
	t.Parallel()
	var logs logBuffer
	e := newEnv(t, func(c *Config) { c.Logger = slog.New(slog.NewTextHandler(&logs, nil)) })
	f := budgetFlow()
	f.BudgetDefs[0].Dimensions = []plan.Dimension{{Name: "tokens", Hard: 1000}, {Name: "dollars", Hard: 5, Soft: 4}}
	spec := BudgetSpec{ID: BudgetID("default", "daily"), OnHardLimit: plan.OnHardLimitBlock, Scope: plan.ScopeShared,
		Dimensions: []BudgetDimension{{Name: "dollars", Hard: 5, Soft: 4}, {Name: "tokens", Hard: 1000}}}
	if _, err := e.s.UpsertBudget(e.ctx, spec); err != nil {
		t.Fatal(err)
	}
	e.stage(f, `{}`)
	if strings.Contains(logs.String(), "otherwise") {
		t.Fatalf("warned for the same dimensions in another order:\n%s", logs.String())
	}
	// A dimension more on the server is another definition.
	f.BudgetDefs[0].Dimensions = f.BudgetDefs[0].Dimensions[:1]
	e.stage(f, `{}`)
	if n := strings.Count(logs.String(), "the plan defines this"); n != 1 {
		t.Fatalf("want one warning for a dimension fewer, got %d:\n%s", n, logs.String())
	}
}
