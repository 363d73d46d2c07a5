package server_test

import (
	"context"
	"testing"
	"time"

	"github.com/flowfabric/ff/runtime/server"
	"github.com/flowfabric/ff/runtime/wire"
)

// An execution without quotas behind quota-denied ones (their quota full)
// is granted by the next claim on an idle ffrun (it waited for the
// scheduler's resync: 950 ms with the default, an hour here).
func TestQuotaDeniedHeadDelaysFreeWork(t *testing.T) {
	flows := compileFlows(t, `
type Job { n: int }
quota one { concurrency 1 }
flow limited(Job) -> Job {
  quota one
  exec go(Job) -> Job {}
  result go
}
flow free(Job) -> Job {
  exec go(Job) -> Job {}
  result go
}
`)
	env := startAdmission(t, flows, func(c *server.Config) { c.FlowPartitions = 1; c.ResyncInterval = time.Hour })
	ctx := context.Background()
	c := env.Client
	stage := func(f string) string {
		r, err := c.StageFlow(ctx, flows[f], map[string]any{"n": 1})
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(3 * time.Millisecond) // one after the other in line
		return memberIDs(t, c, r.ID)["go"]
	}
	stage("limited")
	if tasks, err := c.Claim(ctx, wire.ClaimRequest{WorkerID: "holder", Max: 1, WaitMs: 2000}); err != nil || len(tasks) != 1 {
		t.Fatalf("claim of the slot holder: %v %v", tasks, err)
	}
	for range 5 {
		stage("limited")
	}
	free := stage("free")
	time.Sleep(200 * time.Millisecond) // the stagings' wake-ups are delivered before the claim
	tasks, err := c.Claim(ctx, wire.ClaimRequest{WorkerID: "w", Max: 1, WaitMs: 2000})
	if err != nil {
		t.Fatal(err)
	}
	if len(tasks) != 1 || tasks[0].ExecutionID != free {
		t.Fatalf("a 2 s claim granted %d tasks; want the execution without quotas %s behind 5 quota-denied ones", len(tasks), free)
	}
}
