package scheduler_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flowfabric/ff/compiler/plan"
	"github.com/flowfabric/ff/runtime/internal/valkeytest"
	"github.com/flowfabric/ff/runtime/scheduler"
	"github.com/flowfabric/ff/runtime/store"
	"github.com/valkey-io/valkey-go"
)

// netBytes returns total_net_input_bytes and total_net_output_bytes of
// the server c talks to (INFO stats).
func netBytes(t *testing.T, ctx context.Context, c valkey.Client) (in, out int64) {
	t.Helper()
	info, err := c.Do(ctx, c.B().Info().Section("stats").Build()).ToString()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok {
			continue
		}
		n, _ := strconv.ParseInt(v, 10, 64)
		switch k {
		case "total_net_input_bytes":
			in = n
		case "total_net_output_bytes":
			out = n
		}
	}
	return in, out
}

// A claim's cost does not grow with the run-scoped budgets at their hard
// limit whose runs do not run: a run's budget counts only against its
// members, so the claims leave out the breaches of runs that ended or are
// gone (Store.ClaimBreaches), and the scheduler reads the budgets at a
// hard limit again only when one reached or left its limit (their version
// moved) or its copy is BreachMaxAge old, not on every claim. Here 3,000
// run budgets of partition 0 at their limit, of runs that do not exist
// (what a run that ended at its cost cap and was deleted would leave if
// retention could not delete its budget): the claim after the one that
// read them again costs what a claim costs without them (a few KiB),
// where every claim used to read and send them all (hundreds of KiB on
// the wire, MiBs allocated).
func TestClaimCostIgnoresBreachedBudgetsOfEndedRuns(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	vk := valkeytest.Client(t, valkeytest.Start(t))
	st, err := store.Open(ctx, store.Config{Client: vk, FlowPartitions: 1, KeyPrefix: valkeytest.Prefix(t)})
	if err != nil {
		t.Fatal(err)
	}
	s, err := scheduler.New(scheduler.Config{Store: st, ResyncInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Stop(context.Background()) })

	// claim creates one plain task and claims it, returning the bytes
	// ffrun and Valkey exchanged and the bytes ffrun allocated meanwhile.
	round := 0
	claim := func() (wire int64, alloc uint64) {
		t.Helper()
		round++
		if _, _, err := st.CreateExecution(ctx, store.CreateRequest{Kind: "k", Lane: "l"}); err != nil {
			t.Fatal(err)
		}
		var before, after runtime.MemStats
		runtime.GC()
		in0, out0 := netBytes(t, ctx, vk)
		runtime.ReadMemStats(&before)
		g, err := s.Claim(ctx, scheduler.Request{Worker: store.WorkerIdentity{WorkerID: "w", InstanceID: "w-1", Namespace: "default"},
			Lanes: []string{"l"}, Max: 1, LeaseTTL: time.Minute})
		runtime.ReadMemStats(&after)
		in1, out1 := netBytes(t, ctx, vk)
		if err != nil || len(g) != 1 {
			t.Fatalf("claim %d: %d grants, %v", round, len(g), err)
		}
		return (in1 - in0) + (out1 - out0), after.TotalAlloc - before.TotalAlloc
	}
	wire0, alloc0 := claim()

	const runs = 3000
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		wg.Go(func() {
			for i := w; i < runs; i += 8 {
				id := store.RunBudgetID("default", "cost", store.RunID(fmt.Sprintf("0.00000000-0000-4000-8000-%012d", i)))
				if _, err := st.UpsertBudget(ctx, store.BudgetSpec{ID: id, Scope: plan.ScopeRun, OnHardLimit: plan.OnHardLimitFail,
					Dimensions: []store.BudgetDimension{{Name: "usd_micros", Hard: 1000}}}); err != nil {
					errs <- err
					return
				}
				if _, err := st.ReportUsage(ctx, id, "usd_micros", 1500, ""); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if b, err := st.BreachedBudgets(ctx); err != nil || len(b) != runs {
		t.Fatalf("BreachedBudgets: %d, %v; want the %d run budgets", len(b), err, runs)
	}
	if set, err := st.ClaimBreaches(ctx); err != nil || len(set.Breaches) != 0 {
		t.Fatalf("ClaimBreaches: %d, %v; want none (no run of theirs runs)", len(set.Breaches), err)
	}

	wireRead, _ := claim() // the version moved: this one reads them again
	wire1, alloc1 := claim()
	t.Logf("one claim of a task without budgets: %d B on the wire, %d KiB allocated; with %d breached budgets of ended runs: "+
		"%d B for the claim that read them, then %d B, %d KiB", wire0, alloc0>>10, runs, wireRead, wire1, alloc1>>10)
	if wire1 > wire0+16<<10 || alloc1 > alloc0+256<<10 {
		t.Errorf("one claim of a task that has no budget exchanged %d B with Valkey and allocated %d KiB; "+
			"with %d breached budgets of runs that do not run, %d B and %d KiB: the claim pays for them",
			wire0, alloc0>>10, runs, wire1, alloc1>>10)
	}
}

// The scheduler claims with a cached set of the budgets at a hard limit
// and reads only its version per scan cycle: claims while no budget
// reached or left its limit do not read the set again, a budget that
// reached its limit moves the version so that the very next claim blocks
// what counts against it, and a failed read of the version fails the
// claim as a failed read of the set does (fail closed).
func TestBreachedBudgetsCachedByVersion(t *testing.T) {
	t.Parallel()
	fs, s := newFaultEnv(t, 1, 8)
	ctx := context.Background()
	if _, err := fs.UpsertBudget(ctx, store.BudgetSpec{ID: "default/bv-cap", Dimensions: []store.BudgetDimension{{Name: "usd", Hard: 10}}}); err != nil {
		t.Fatal(err)
	}
	create := func() store.ExecutionID {
		t.Helper()
		ex, _, err := fs.CreateExecution(ctx, store.CreateRequest{Kind: "k", Lane: "bv", Budgets: []string{"bv-cap"}})
		if err != nil {
			t.Fatal(err)
		}
		return ex.ID
	}
	start := time.Now()
	for i := range 3 {
		id := create()
		g, err := s.Claim(ctx, req("bv", 1, 0))
		if err != nil || len(g) != 1 || g[0].ExecutionID != id {
			t.Fatalf("claim %d under the limit: %v %v", i, g, err)
		}
	}
	// (A machine so slow that the copy grew BreachMaxAge old meanwhile
	// reads it again, as it should.)
	if n := fs.budgetReads.Load(); n != 1 && time.Since(start) < scheduler.BreachMaxAge {
		t.Fatalf("3 claims with no budget reaching its limit read the budgets %d times, want once", n)
	}
	reads := fs.budgetReads.Load()
	if _, err := fs.ReportUsage(ctx, "default/bv-cap", "usd", 10, ""); err != nil {
		t.Fatal(err)
	}
	id := create()
	if g, err := s.Claim(ctx, req("bv", 1, 0)); err != nil || len(g) != 0 {
		t.Fatalf("claim at the limit: %v %v, want nothing granted", g, err)
	}
	if got, err := fs.GetExecution(ctx, id); err != nil || got.State.BlockingReason != store.WaitingForBudget {
		t.Fatalf("execution of the budget at its limit: %+v %v, want blocked waiting_for_budget", got.State, err)
	}
	if n := fs.budgetReads.Load() - reads; n != 1 {
		t.Fatalf("the claim after the version moved read the budgets %d times, want once", n)
	}
	fs.budgetErr.Store(true)
	claims := fs.claims.Load()
	// Another lane, so another group: the claim above left this one's
	// partition marked as holding nothing for it.
	if _, _, err := fs.CreateExecution(ctx, store.CreateRequest{Kind: "k", Lane: "bv2"}); err != nil {
		t.Fatal(err)
	}
	if g, err := s.Claim(ctx, req("bv2", 1, 0)); !errors.Is(err, errInjected) || len(g) != 0 {
		t.Fatalf("claim with the version unreadable: %v %v, want the injected error", g, err)
	}
	if n := fs.claims.Load() - claims; n != 0 {
		t.Fatalf("%d claim calls with the version unreadable, want 0", n)
	}
}
