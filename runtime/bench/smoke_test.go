package bench

import (
	"bytes"
	"context"
	"testing"
	"time"
)

// TestSmoke runs every variant and scenario at a tiny size: each must
// start its own deployment, run every task exactly once (the runs fail
// otherwise) and report what it measured.
func TestSmoke(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out bytes.Buffer
	tasks, err := Run(ctx, Config{Tasks: 200, Producers: 4, Workers: 1, Concurrency: 4, Batch: 20,
		IdleRate: 1000, Timeout: time.Minute}, &out)
	if err != nil {
		t.Fatalf("Run: %v\n%s", err, out.String())
	}
	if len(tasks) != 2 || tasks[0].Variant != "backlog" || tasks[1].Variant != "idle" {
		t.Fatalf("task variants: %+v", tasks)
	}
	for _, r := range tasks {
		if r.Tasks != 200 || r.TasksPerSec <= 0 || r.P50 <= 0 || r.P99 < r.P50 {
			t.Errorf("%s: %s", r.Variant, r)
		}
	}
	flows, err := RunFlows(ctx, FlowConfig{Runs: 8, Length: 3, Width: 20, Producers: 2, Concurrency: 4,
		Timeout: time.Minute}, &out)
	if err != nil {
		t.Fatalf("RunFlows: %v\n%s", err, out.String())
	}
	if len(flows) != 2 || flows[0].Scenario != "chain" || flows[1].Scenario != "diamond" {
		t.Fatalf("flow scenarios: %+v", flows)
	}
	if c := flows[0]; c.Runs != 8 || c.Execs != 3 || c.RunsPerSec <= 0 || c.Max < c.P50 {
		t.Errorf("chain: %+v", c)
	}
	if d := flows[1]; d.Runs != 1 || d.Execs != 22 || d.Elapsed <= 0 {
		t.Errorf("diamond: %+v", d)
	}
	caps, err := RunCaps(ctx, CapsConfig{Tasks: 60, Workers: 4, Sets: 2, Concurrency: 2, Unroutable: 2,
		Timeout: time.Minute}, &out)
	if err != nil {
		t.Fatalf("RunCaps: %v\n%s", err, out.String())
	}
	if caps.Correct != 60 || caps.Misrouted != 0 || caps.Parked != 2 {
		t.Errorf("caps: %s", caps)
	}
}
