package server_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/flowfabric/ff/compiler/plan"
	"github.com/flowfabric/ff/runtime/server"
	"github.com/flowfabric/ff/runtime/server/servertest"
	"github.com/flowfabric/ff/runtime/wire"
)

// Valkey restarts without persistence (empty) under an ffrun serving .ff
// files that declare a schedule and a shared budget. ffrun reloads the
// library and writes its declarations again: the schedule is back (it was
// gone until ffrun itself restarted, and never fired meanwhile), and so is
// the budget.
func TestDeclaredStateAfterEmptyValkeyRestart(t *testing.T) {
	vk, port := startValkeyAnyPort(t)
	f := twoStep()
	f.BudgetDefs = []plan.Budget{{Name: "spend", Scope: plan.ScopeShared, OnHardLimit: "block", Dimensions: []plan.Dimension{{Name: "n", Hard: 1000}}}}
	f.Execs[0].Budgets = []string{"spend"}
	env := servertest.Start(t, func(c *server.Config) {
		c.ValkeyAddr, c.KeyPrefix = vk.Addr, "declared:"
		c.Templates = []*plan.Flow{f}
		c.Schedules = []plan.Schedule{{Name: "nightly", Flow: "two", Cron: "0 3 * * *", Input: json.RawMessage(`{"s":"n"}`)}}
		c.DisableScanners = true // see TestValkeyRestartRecovers
		c.ResyncInterval, c.RunPoll = time.Hour, time.Hour
	})
	ctx := ctxT(t)
	if _, err := env.Client.GetSchedule(ctx, "nightly"); err != nil {
		t.Fatalf("declared schedule before the restart: %v", err)
	}
	if _, err := env.Client.GetBudget(ctx, "default/spend"); err != nil {
		t.Fatalf("declared budget before the restart: %v", err)
	}

	if err := vk.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	startValkeyOn(t, port)
	if _, err := afterRestart(t, func() (*wire.Execution, error) {
		x, _, err := env.Client.CreateExecution(ctx, wire.CreateExecution{Kind: "warmup"})
		return x, err
	}); err != nil {
		t.Fatalf("ffrun does not serve after Valkey came back: %v", err)
	}
	// Written again in the background, right after the reload.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		_, serr := env.Client.GetSchedule(ctx, "nightly")
		_, berr := env.Client.GetBudget(ctx, "default/spend")
		if serr == nil && berr == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the declarations after an empty Valkey restart while ffrun serves on: schedule %v, budget %v", serr, berr)
		}
	}
	// A run of the served flow, whose first exec meters the declared budget.
	r, err := afterRestart(t, func() (*wire.FlowRun, error) {
		run, err := env.Client.StageTemplate(ctx, "two", map[string]string{"s": "x"})
		if err != nil {
			return nil, err
		}
		return env.Client.GetRun(ctx, run.ID)
	})
	if err != nil {
		t.Errorf("staging the served template after the restart: %v", err)
	} else if r.State != wire.RunRunning {
		t.Errorf("run after the restart: %+v", r)
	}
	// Staging created the declared budget again (pinned: it passes).
	if _, err := env.Client.GetBudget(ctx, "default/spend"); err != nil {
		t.Errorf("the declared budget after staging a run of its flow: %v", err)
	}
}

// Valkey restarts empty under a running ffrun (4 flow partitions); when
// it reloads the library it stores its partition counts again, so a
// second process of the same deployment with 8 is refused, as before the
// restart (it stored 8 and served, and the two placed and scanned work on
// different partition sets).
func TestPartitionGuardAfterEmptyValkeyRestart(t *testing.T) {
	vk, port := startValkeyAnyPort(t)
	share := func(c *server.Config) {
		c.ValkeyAddr, c.KeyPrefix = vk.Addr, "guard:"
		c.DisableScanners = true // see TestValkeyRestartRecovers
		c.ResyncInterval, c.RunPoll = time.Hour, time.Hour
	}
	a := servertest.Start(t, share)
	ctx := ctxT(t)
	// Before the restart the guard holds.
	cfg8 := a.Config
	cfg8.FlowPartitions = 8
	if srv, err := server.Open(ctx, cfg8); err == nil {
		srv.Close()
		t.Fatal("a second ffrun with other partition counts was not refused before the restart")
	}

	if err := vk.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	startValkeyOn(t, port)
	if _, err := afterRestart(t, func() (*wire.Execution, error) {
		x, _, err := a.Client.CreateExecution(ctx, wire.CreateExecution{Kind: "warmup"})
		return x, err
	}); err != nil {
		t.Fatalf("ffrun does not serve after Valkey came back: %v", err)
	}
	srv, err := server.Open(ctx, cfg8)
	if err == nil {
		srv.Close()
		t.Fatal("after an empty Valkey restart, a second ffrun with 8 flow partitions opened beside a running one with 4")
	}
	t.Logf("refused: %v", err)
}
