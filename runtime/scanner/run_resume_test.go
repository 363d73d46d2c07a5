package scanner

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/flowfabric/ff/compiler/plan"
	"github.com/flowfabric/ff/lua"
	"github.com/flowfabric/ff/runtime/internal/valkeytest"
	"github.com/flowfabric/ff/runtime/store"
)

// A run cancel by steps whose caller stopped after its first step (here:
// one ff_cancel_run call made by hand) is finished by the run-resume
// scanner: the run ends cancelled with every member cancelled.
func TestRunResumeScanner(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := valkeytest.Client(t, valkeytest.Shared(t))
	prefix := valkeytest.Prefix(t)
	s, err := store.Open(ctx, store.Config{Client: c, KeyPrefix: prefix, FlowPartitions: 2})
	if err != nil {
		t.Fatal(err)
	}
	f := &plan.Flow{Schema: plan.SchemaVersion, Name: "wide", Namespace: "default", Lane: "default"}
	f.Execs = append(f.Execs, plan.Exec{Name: "src", Priority: plan.PriorityDefault, Retry: plan.Retry{Attempts: 1}})
	for i := range store.CancelStepMembers + 50 {
		n := fmt.Sprintf("m%d", i)
		f.Execs = append(f.Execs, plan.Exec{Name: n, Priority: plan.PriorityDefault, Retry: plan.Retry{Attempts: 1}})
		f.Edges = append(f.Edges, plan.Edge{From: "src", To: n, On: plan.OnSuccess})
	}
	r, _, err := s.StageFlow(ctx, store.StageRequest{Flow: f})
	if err != nil {
		t.Fatal(err)
	}
	p, uuid, ok := strings.Cut(string(r.ID), ".")
	if !ok {
		t.Fatalf("run id %s", r.ID)
	}
	anchor := prefix + "ff:{fp:" + p + "}:lanes"
	reply, err := c.Do(ctx, c.B().Fcall().Function(lua.Function("ff_cancel_run")).Numkeys(1).Key(anchor).
		Arg(uuid, "left halfway", "").Build()).ToArray()
	if err != nil || len(reply) != 6 {
		t.Fatalf("ff_cancel_run = %v, %v", reply, err)
	}
	if more, _ := reply[3].AsInt64(); more != 1 {
		t.Fatalf("the first step of a cancel of %d members said done", len(f.Execs))
	}
	sc, err := NewRunResume(RunResumeConfig{Store: s, Interval: fast, Age: time.Millisecond, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	run(t, sc)
	deadline := time.Now().Add(5 * time.Second)
	for {
		got, err := s.GetRun(ctx, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.State == store.RunCancelled {
			if got.Cancelled != got.Total {
				t.Fatalf("run cancelled with %d of %d members cancelled", got.Cancelled, got.Total)
			}
			for _, n := range got.Nodes {
				if n.Error != "left halfway" {
					t.Fatalf("%s ended with %q, want the first call's reason", n.Name, n.Error)
				}
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("run still %s with %d of %d cancelled", got.State, got.Cancelled, got.Total)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestRunResumeConfigRefused(t *testing.T) {
	t.Parallel()
	s := openStore(t, 1)
	if _, err := NewRunResume(RunResumeConfig{Store: s, Age: time.Microsecond}); err == nil ||
		!strings.Contains(err.Error(), "Config.Age") {
		t.Fatalf("NewRunResume(Age 1µs) = %v, want an error naming Config.Age", err)
	}
}
