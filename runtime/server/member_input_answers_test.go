package server_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/flowfabric/ff/compiler/plan"
	"github.com/flowfabric/ff/runtime/internal/valkeytest"
	"github.com/flowfabric/ff/runtime/server"
	"github.com/flowfabric/ff/runtime/server/servertest"
	"github.com/flowfabric/ff/runtime/wire"
)

// TestActingOnMemberAnswersItsInput: the routes that act on one execution
// answer the Execution as GET /v1/executions/{id} does, so a flow member
// fed by an upstream has as input what it receives (the upstream's
// output) in the answers of PUT …/priority, POST …/revoke-lease and POST
// …/cancel too, not an empty one.
func TestActingOnMemberAnswersItsInput(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t, func(c *server.Config) { c.Templates = []*plan.Flow{twoStep()} })
	ctx := ctxT(t)
	c := env.Client
	run, err := c.StageTemplate(ctx, "two", map[string]string{"s": "x"})
	if err != nil {
		t.Fatal(err)
	}
	tasks, err := c.Claim(ctx, wire.ClaimRequest{WorkerID: "w", Kinds: []string{"two.a"}, WaitMs: 2000})
	if err != nil || len(tasks) != 1 {
		t.Fatalf("claim a: %+v, %v", tasks, err)
	}
	a := tasks[0]
	const out = `{"s":"from-a"}`
	if _, err := c.Complete(ctx, wire.CompleteRequest{WorkerID: "w", Completions: []wire.Completion{{
		Lease: wire.Lease{ExecutionID: a.ExecutionID, LeaseID: a.LeaseID, Epoch: a.Epoch}, Output: json.RawMessage(out)}}}); err != nil {
		t.Fatal(err)
	}
	got, err := c.GetRun(ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	var b string
	for _, x := range got.Execs {
		if x.Name == "b" {
			b = x.ExecutionID
		}
	}
	if b == "" {
		t.Fatalf("run %s has no member b: %+v", run.ID, got.Execs)
	}
	if ex, err := c.GetExecution(ctx, b); err != nil || string(ex.Input) != out {
		t.Fatalf("GET b: input %s, %v; want %s", ex.Input, err, out)
	}
	check := func(route string, ex *wire.Execution, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", route, err)
		}
		if string(ex.Input) != out {
			t.Errorf("%s of member b answers input %q; want %s, what GET answers", route, ex.Input, out)
		}
	}
	ex, err := c.SetPriority(ctx, b, 500) // pending or waiting: either takes a priority
	check("PUT /v1/executions/{id}/priority", ex, err)
	if tasks, err = c.Claim(ctx, wire.ClaimRequest{WorkerID: "w", Kinds: []string{"two.b"}, WaitMs: 2000}); err != nil || len(tasks) != 1 {
		t.Fatalf("claim b: %+v, %v", tasks, err)
	}
	ex, err = c.RevokeLease(ctx, b, "test")
	check("POST /v1/executions/{id}/revoke-lease", ex, err)
	ex, err = c.CancelExecution(ctx, b, "test")
	check("POST /v1/executions/{id}/cancel", ex, err)
}

// TestActingOnMemberAnswersWhenItsInputCannotBeRead: the input a member
// fed by an upstream receives is read after the change (a revoke, a
// priority, a cancel) was written, in a second call. When that read
// fails (here the upstream's record made unreadable: WRONGTYPE, as any
// Valkey error would), the answer was a 5xx, which invites a retry of a
// change already applied (a second cancel or revoke, refused as 409). It
// is now 200 with the execution as written, without its input, and
// input_unread saying so.
func TestActingOnMemberAnswersWhenItsInputCannotBeRead(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t, func(c *server.Config) { c.Templates = []*plan.Flow{twoStep()}; c.DisableScanners = true })
	ctx := ctxT(t)
	c := env.Client
	if _, err := c.StageTemplate(ctx, "two", map[string]string{"s": "x"}); err != nil {
		t.Fatal(err)
	}
	tasks, err := c.Claim(ctx, wire.ClaimRequest{WorkerID: "w", Kinds: []string{"two.a"}, WaitMs: 2000})
	if err != nil || len(tasks) != 1 {
		t.Fatalf("claim a: %+v, %v", tasks, err)
	}
	a := tasks[0]
	if _, err := c.Complete(ctx, wire.CompleteRequest{WorkerID: "w", Completions: []wire.Completion{{
		Lease: wire.Lease{ExecutionID: a.ExecutionID, LeaseID: a.LeaseID, Epoch: a.Epoch}, Output: json.RawMessage(`{"s":"from-a"}`)}}}); err != nil {
		t.Fatal(err)
	}
	if tasks, err = c.Claim(ctx, wire.ClaimRequest{WorkerID: "w", Kinds: []string{"two.b"}, WaitMs: 2000}); err != nil || len(tasks) != 1 {
		t.Fatalf("claim b: %+v, %v", tasks, err)
	}
	b := tasks[0].ExecutionID
	// a's record, which b's input is read from, becomes a string.
	part, uuid, _ := strings.Cut(a.ExecutionID, ".")
	vk := valkeytest.Client(t, env.Config.ValkeyAddr)
	key := env.Config.KeyPrefix + "ff:{fp:" + part + "}:x:" + uuid
	if err := vk.Do(ctx, vk.B().Set().Key(key).Value("unreadable").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	check := func(route string, ex *wire.Execution, err error, state string) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s, written, answered %v; want 200 without the input", route, err)
		}
		if ex.State != state || len(ex.Input) != 0 || !ex.InputUnread {
			t.Errorf("%s: state %s, input %q, input_unread %v; want %s, no input and input_unread", route, ex.State, ex.Input, ex.InputUnread, state)
		}
	}
	ex, err := c.RevokeLease(ctx, b, "test")
	check("POST /v1/executions/{id}/revoke-lease", ex, err, "waiting")
	ex, err = c.SetPriority(ctx, b, 500)
	check("PUT /v1/executions/{id}/priority", ex, err, "waiting")
	ex, err = c.CancelExecution(ctx, b, "test")
	check("POST /v1/executions/{id}/cancel", ex, err, "cancelled")
}
