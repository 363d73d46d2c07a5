package flows

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/flowfabric/ff/runtime/server/servertest"
	"github.com/flowfabric/ff/runtime/wire"
	"github.com/flowfabric/ff/runtime/worker"
)

// TestWorkersAgainstServer runs the demo handlers, bound by the generated
// Register functions, in real workers (one per namespace) against a real
// ffrun server on real Valkey, and runs single executions of root execs
// through them: the typed input travels as JSON over HTTP, is decoded by
// the generated binding and the output comes back typed. Whole flow runs
// are exercised by the flow tests of the runtime.
func TestWorkersAgainstServer(t *testing.T) {
	env := servertest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- RunWorkers(runCtx, worker.Config{
			URL: env.URL, Name: "e2e", Concurrency: 4, ClaimWait: 200 * time.Millisecond,
			DrainTimeout: 2 * time.Second, Logger: servertest.Logger(t),
		}, NewDemo(Faults{}))
	}()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("RunWorkers: %v", err)
		}
	}()

	run := func(ns, lane, kind string, in any, requires ...string) *wire.ExecutionResult {
		t.Helper()
		b, err := json.Marshal(in)
		if err != nil {
			t.Fatal(err)
		}
		ex, _, err := env.Client.CreateExecution(ctx, wire.CreateExecution{Namespace: ns, Lane: lane, Kind: kind, Input: b, Requires: requires})
		if err != nil {
			t.Fatal(err)
		}
		res, err := env.Client.WaitResult(ctx, ex.ID, 20*time.Millisecond)
		if err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
		return res
	}

	res := run("media", "default", "media.probe", sampleClip)
	var clip Clip
	if res.State != "completed" || json.Unmarshal(res.Result, &clip) != nil || clip.ID != "clip-1" || !strings.Contains(strings.Join(clip.Tags, ","), "probed") {
		t.Fatalf("media.probe: %+v", res)
	}

	res = run("llm", "llm", "ask.draft_large", Question{ID: "q", Tenant: "t", Prompt: "hello there", MaxTokens: 100}, "gpu-large", "llm")
	var draft Draft
	if res.State != "completed" || json.Unmarshal(res.Result, &draft) != nil || draft.Model != "large-405b" || draft.CompletionTokens <= 0 {
		t.Fatalf("ask.draft_large: %+v", res)
	}

	// An input that does not match its type fails the generated binding
	// at once, naming the flow, exec and field.
	res = run("shop", "orders", "fulfil_order.check_order", badOrder(t))
	if res.State != "failed" || !strings.Contains(res.Error, "flow fulfil_order: exec check_order: the input does not match its type Order: input.items:") {
		t.Fatalf("bad input: %+v", res)
	}

	// A handler's own permanent error.
	o := sampleOrder()
	o.TotalCents = 1
	res = run("shop", "orders", "fulfil_order.check_order", o)
	if res.State != "failed" || !strings.Contains(res.Error, "does not match the items") {
		t.Fatalf("wrong total: %+v", res)
	}
}
