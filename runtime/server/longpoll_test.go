package server_test

import (
	"context"
	"testing"
	"time"

	"github.com/flowfabric/ff/runtime/server"
	"github.com/flowfabric/ff/runtime/server/servertest"
	"github.com/flowfabric/ff/runtime/wire"
)

// noSafetyNet disables the periodic hint resynchronisation, so only a
// wake-up can end a long-poll before its wait.
func noSafetyNet(c *server.Config) { c.ResyncInterval = time.Hour }

type claimResult struct {
	tasks []wire.Task
	err   error
}

func claimAsync(ctx context.Context, env *servertest.Env, req wire.ClaimRequest) <-chan claimResult {
	ch := make(chan claimResult, 1)
	go func() {
		tasks, err := env.Client.Claim(ctx, req)
		ch <- claimResult{tasks, err}
	}()
	return ch
}

// settle gives a claim just sent time to park on the server. Correctness
// does not depend on it: a claim that has not parked yet finds the work on
// its first attempt instead of through a wake-up.
func settle() { time.Sleep(50 * time.Millisecond) }

func TestLongPollWakesOnCreate(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t, noSafetyNet)
	ctx := ctxT(t)
	// The wait is far longer than the test's context: only a wake-up can
	// make the claim return with the task in time.
	got := claimAsync(ctx, env, wire.ClaimRequest{WorkerID: "w", Lanes: []string{"fast"}, Max: 2, WaitMs: wire.ClaimWaitMaxMs})
	settle()
	ex, _, err := env.Client.CreateExecution(ctx, wire.CreateExecution{Kind: "k", Lane: "fast"})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-got:
		if r.err != nil {
			t.Fatal(r.err)
		}
		if len(r.tasks) != 1 || r.tasks[0].ExecutionID != ex.ID {
			t.Fatalf("claim returned %+v, want %s", r.tasks, ex.ID)
		}
	case <-ctx.Done():
		t.Fatal("long-poll did not return with the new task")
	}
}

func TestLongPollOtherLaneDoesNotSteal(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t, noSafetyNet)
	ctx := ctxT(t)
	waitA := claimAsync(ctx, env, wire.ClaimRequest{WorkerID: "wa", Lanes: []string{"a"}, WaitMs: 500})
	waitB := claimAsync(ctx, env, wire.ClaimRequest{WorkerID: "wb", Lanes: []string{"b"}, WaitMs: wire.ClaimWaitMaxMs})
	settle()
	exB, _, err := env.Client.CreateExecution(ctx, wire.CreateExecution{Kind: "k", Lane: "b"})
	if err != nil {
		t.Fatal(err)
	}
	rb := <-waitB
	if rb.err != nil || len(rb.tasks) != 1 || rb.tasks[0].ExecutionID != exB.ID {
		t.Fatalf("lane b claim: %+v %v", rb.tasks, rb.err)
	}
	ra := <-waitA
	if ra.err != nil || len(ra.tasks) != 0 {
		t.Fatalf("lane a claim got %+v %v, want nothing", ra.tasks, ra.err)
	}
}

func TestManyWaitersEachTaskOnce(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t, noSafetyNet)
	ctx := ctxT(t)
	const waiters, tasks = 6, 6
	results := make([]<-chan claimResult, waiters)
	for i := range results {
		results[i] = claimAsync(ctx, env, wire.ClaimRequest{WorkerID: "w", Lanes: []string{"m"}, WaitMs: wire.ClaimWaitMaxMs})
	}
	settle()
	reqs := make([]wire.CreateExecution, tasks)
	for i := range reqs {
		reqs[i] = wire.CreateExecution{Kind: "k", Lane: "m"}
	}
	if _, err := env.Client.CreateExecutions(ctx, reqs); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, ch := range results {
		select {
		case r := <-ch:
			if r.err != nil {
				t.Fatal(r.err)
			}
			for _, tk := range r.tasks {
				if seen[tk.ExecutionID] {
					t.Fatalf("task %s granted twice", tk.ExecutionID)
				}
				seen[tk.ExecutionID] = true
			}
		case <-ctx.Done():
			t.Fatalf("only %d of %d tasks were granted to waiting claims", len(seen), tasks)
		}
	}
	if len(seen) != tasks {
		t.Fatalf("granted %d tasks, want %d", len(seen), tasks)
	}
}

func TestShutdownReleasesLongPoll(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t, noSafetyNet)
	ctx := ctxT(t)
	got := claimAsync(ctx, env, wire.ClaimRequest{WorkerID: "w", WaitMs: wire.ClaimWaitMaxMs})
	settle()
	stopped := make(chan error, 1)
	go func() { stopped <- env.Stop() }()
	select {
	case r := <-got:
		if r.err != nil || len(r.tasks) != 0 {
			t.Fatalf("released claim: %+v %v, want an empty 200", r.tasks, r.err)
		}
	case <-ctx.Done():
		t.Fatal("shutdown did not release the waiting claim")
	}
	if err := <-stopped; err != nil {
		t.Fatalf("serve returned %v", err)
	}
	// The listener is closed after shutdown.
	if err := env.Client.Health(ctx); err == nil {
		t.Fatal("server still answers after shutdown")
	}
}

// TestWakeAcrossProcesses: a claim parked on one ffrun is woken by work
// created through another ffrun on the same Valkey.
func TestWakeAcrossProcesses(t *testing.T) {
	t.Parallel()
	a := servertest.Start(t, noSafetyNet)
	b := servertest.StartConfig(t, a.Config)
	ctx := ctxT(t)
	got := claimAsync(ctx, b, wire.ClaimRequest{WorkerID: "w", Lanes: []string{"x"}, WaitMs: wire.ClaimWaitMaxMs})
	settle()
	ex, _, err := a.Client.CreateExecution(ctx, wire.CreateExecution{Kind: "k", Lane: "x"})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-got:
		if r.err != nil || len(r.tasks) != 1 || r.tasks[0].ExecutionID != ex.ID {
			t.Fatalf("claim on the other process: %+v %v", r.tasks, r.err)
		}
	case <-ctx.Done():
		t.Fatal("the claim parked on the other process was not woken")
	}
}
