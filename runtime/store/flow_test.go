package store

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flowfabric/ff/compiler/plan"
	"github.com/flowfabric/ff/runtime/internal/valkeytest"
	"github.com/google/go-cmp/cmp"
	"github.com/valkey-io/valkey-go"
)

// flowOf builds a plan from "a->b" style edges; execs are listed in order.
func flowOf(name string, execs []plan.Exec, edges ...string) *plan.Flow {
	f := &plan.Flow{Schema: plan.SchemaVersion, Name: name, Namespace: "default", Lane: "default", Execs: execs}
	for _, e := range edges {
		on := plan.OnSuccess
		if spec, cond, ok := strings.Cut(e, " on "); ok {
			e, on = spec, cond
		}
		from, to, _ := strings.Cut(e, "->")
		f.Edges = append(f.Edges, plan.Edge{From: from, To: to, On: on})
	}
	return f
}

func execs(names ...string) []plan.Exec {
	var out []plan.Exec
	for _, n := range names {
		out = append(out, plan.Exec{Name: n, Priority: plan.PriorityDefault, Retry: plan.Retry{Attempts: 1}})
	}
	return out
}

// outcome is what a test handler does with one grant.
type outcome struct {
	result []byte
	fail   bool
}

// drive claims and finishes every eligible execution until none is left,
// calling handle per grant, and returns the names in the order they ran.
func (e *env) drive(handle func(g Grant) outcome) []string {
	e.t.Helper()
	var ran []string
	for round := 0; round < 10_000; round++ {
		g := e.claimAll(worker1, 64, time.Minute)
		if len(g) == 0 {
			return ran
		}
		var items []Finish
		for _, x := range g {
			ran = append(ran, x.FlowNode)
			o := handle(x)
			items = append(items, Finish{Lease: x.Lease, Result: o.result, Failed: o.fail, Error: "handler failed", Retryable: true})
		}
		res, err := e.s.FinishMany(e.ctx, items)
		if err != nil {
			e.t.Fatal(err)
		}
		for _, r := range res {
			if r.Err != nil {
				e.t.Fatal(r.Err)
			}
			if r.RunEnded != nil {
				e.ended = append(e.ended, r.RunEnded)
			}
		}
	}
	e.t.Fatal("drive did not converge")
	return nil
}

func (e *env) stage(f *plan.Flow, input string) *Run {
	e.t.Helper()
	run, created, err := e.s.StageFlow(e.ctx, StageRequest{Flow: f, Input: []byte(input)})
	if err != nil || !created {
		e.t.Fatalf("StageFlow = %v, %v", created, err)
	}
	return run
}

func nodeStates(r *Run) map[string]PublicState {
	out := map[string]PublicState{}
	for _, n := range r.Nodes {
		out[n.Name] = n.State.Public
	}
	return out
}

func (e *env) run(id RunID) *Run {
	e.t.Helper()
	r, err := e.s.GetRun(e.ctx, id)
	if err != nil {
		e.t.Fatal(err)
	}
	for _, n := range r.Nodes {
		e.check(n.ExecutionID)
	}
	return r
}

func TestFlowChainPassesData(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	f := flowOf("chain", execs("a", "b", "c"), "a->b", "b->c")
	f.Result = "c"
	r := e.stage(f, `{"n":1}`)
	if r.State != RunRunning || r.Total != 3 {
		t.Fatalf("staged run = %+v", r)
	}
	if diff := cmp.Diff(map[string]PublicState{"a": StateWaiting, "b": StatePending, "c": StatePending}, nodeStates(e.run(r.ID))); diff != "" {
		t.Fatalf("staged states (-want +got):\n%s", diff)
	}
	ran := e.drive(func(g Grant) outcome {
		if g.FlowID == "" || g.Kind != "chain."+g.FlowNode {
			t.Errorf("grant %+v", g)
		}
		want := map[string]string{"a": `{"n":1}`, "b": "out-a", "c": "out-b"}[g.FlowNode]
		if string(g.Payload) != want {
			t.Errorf("%s got input %q, want %q", g.FlowNode, g.Payload, want)
		}
		return outcome{result: []byte("out-" + g.FlowNode)}
	})
	if diff := cmp.Diff([]string{"a", "b", "c"}, ran); diff != "" {
		t.Fatalf("order (-want +got):\n%s", diff)
	}
	done := e.run(r.ID)
	if done.State != RunSucceeded || string(done.Result) != "out-c" || done.Succeeded != 3 || done.EndedAt.IsZero() {
		t.Fatalf("run = %+v", done)
	}
	if st, err := e.s.RunState(e.ctx, r.ID); err != nil || st != RunSucceeded {
		t.Fatalf("RunState of the ended run = %q, %v; want succeeded", st, err)
	}
}

// RunState reads just the state: running while members run, the run's
// final state after, ErrNotFound for an unknown run.
func TestFlowRunState(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	f := flowOf("cancel", execs("a", "b"), "a->b")
	r := e.stage(f, "")
	if st, err := e.s.RunState(e.ctx, r.ID); err != nil || st != RunRunning {
		t.Fatalf("RunState of a staged run = %q, %v; want running", st, err)
	}
	if _, err := e.s.CancelRun(e.ctx, r.ID, "stop"); err != nil {
		t.Fatal(err)
	}
	if st, err := e.s.RunState(e.ctx, r.ID); err != nil || st != RunCancelled {
		t.Fatalf("RunState of a cancelled run = %q, %v; want cancelled", st, err)
	}
	missing := RunID(makeID(0, newUUID()))
	if _, err := e.s.RunState(e.ctx, missing); !errors.Is(err, ErrNotFound) {
		t.Fatalf("RunState of an unknown run = %v, want ErrNotFound", err)
	}
}

func TestFlowFanOutFanIn(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	names := []string{"root", "m0", "m1", "m2", "join"}
	f := flowOf("diamond", execs(names...), "root->m0", "root->m1", "root->m2", "m0->join", "m1->join", "m2->join")
	f.Execs[4].InputFrom, f.Execs[4].InputExec = plan.InputExec, "m1"
	f.Result = "join"
	r := e.stage(f, "in")
	var joinGrant Grant
	e.drive(func(g Grant) outcome {
		if g.FlowNode == "join" {
			joinGrant = g
		}
		return outcome{result: []byte(g.FlowNode + ":" + string(g.Payload))}
	})
	if string(joinGrant.Payload) != "m1:root:in" {
		t.Fatalf("join input = %q", joinGrant.Payload)
	}
	want := map[string][]byte{"m0": []byte("m0:root:in"), "m1": []byte("m1:root:in"), "m2": []byte("m2:root:in")}
	if diff := cmp.Diff(want, joinGrant.Upstreams); diff != "" {
		t.Fatalf("upstreams (-want +got):\n%s", diff)
	}
	if done := e.run(r.ID); done.State != RunSucceeded || string(done.Result) != "join:m1:root:in" {
		t.Fatalf("run = %+v", done)
	}
}

// TestFlowFailureBranch is the etl example of spec/language.md.
func TestFlowFailureBranch(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	x := execs("extract", "load", "quarantine", "report", "cleanup")
	x[3].Join = plan.Join{Kind: plan.JoinAny}
	x[3].InputFrom = plan.InputNone
	f := flowOf("etl", x, "extract->load", "extract->quarantine on failure",
		"load->report", "quarantine->report", "report->cleanup on done")
	r := e.stage(f, "")
	ran := e.drive(func(g Grant) outcome {
		return outcome{fail: g.FlowNode == "extract"}
	})
	if diff := cmp.Diff([]string{"extract", "quarantine", "report", "cleanup"}, ran); diff != "" {
		t.Fatalf("ran (-want +got):\n%s", diff)
	}
	done := e.run(r.ID)
	want := map[string]PublicState{"extract": StateFailed, "load": StateSkipped, "quarantine": StateCompleted,
		"report": StateCompleted, "cleanup": StateCompleted}
	if diff := cmp.Diff(want, nodeStates(done)); diff != "" {
		t.Fatalf("states (-want +got):\n%s", diff)
	}
	// extract's failure is handled by an on failure edge: the run succeeds.
	if done.State != RunSucceeded || done.Failed != 1 || done.Skipped != 1 {
		t.Fatalf("run = %+v", done)
	}
}

func TestFlowSkipPropagatesAndRunFails(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	names := make([]string, 300) // a long chain: skips must not recurse
	var edges []string
	for i := range names {
		names[i] = fmt.Sprintf("n%03d", i)
		if i > 0 {
			edges = append(edges, names[i-1]+"->"+names[i])
		}
	}
	f := flowOf("long", execs(names...), edges...)
	f.Result = names[len(names)-1]
	r := e.stage(f, "")
	ran := e.drive(func(g Grant) outcome { return outcome{fail: true} })
	if diff := cmp.Diff([]string{"n000"}, ran); diff != "" {
		t.Fatalf("ran (-want +got):\n%s", diff)
	}
	done := e.run(r.ID)
	if done.State != RunFailed || done.Failed != 1 || done.Skipped != 299 || done.Done != 300 {
		t.Fatalf("run = %+v", done)
	}
	if n := done.Nodes[0]; n.Name != "n000" || n.Error != "handler failed" {
		t.Fatalf("first node = %+v", n)
	}
}

func TestFlowJoinCountAndRetriesDoNotResolve(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	x := execs("a", "b", "c", "d")
	x[0].Retry = plan.Retry{Attempts: 2}
	x[3].Join = plan.Join{Kind: plan.JoinCount, N: 2}
	x[3].InputFrom = plan.InputNone
	f := flowOf("count", x, "a->d", "b->d", "c->d")
	r := e.stage(f, "")
	attempts := map[string]int{}
	e.drive(func(g Grant) outcome {
		attempts[g.FlowNode]++
		switch g.FlowNode {
		case "a":
			// The first attempt fails and is retried: d must not hear of it.
			if g.Attempt == 1 {
				if st := nodeStates(e.run(r.ID))["d"]; st != StatePending {
					t.Errorf("d is %s while a runs", st)
				}
				return outcome{fail: true}
			}
			// While the retry runs, the run shows the failed attempt's error.
			if n := nodeOf(t, e.run(r.ID), "a"); n.Error != "handler failed" {
				t.Errorf("a during its retry: error %q, want the first attempt's", n.Error)
			}
			return outcome{}
		case "b":
			return outcome{fail: true}
		}
		return outcome{}
	})
	// a (after a retry) and c succeed: 2 of 3, so d runs.
	if diff := cmp.Diff(map[string]int{"a": 2, "b": 1, "c": 1, "d": 1}, attempts); diff != "" {
		t.Fatalf("attempts (-want +got):\n%s", diff)
	}
	done := e.run(r.ID)
	if nodeStates(done)["d"] != StateCompleted || done.State != RunFailed { // b failed unhandled
		t.Fatalf("run = %+v", done)
	}
	// A success after a retry leaves no error behind.
	if n := nodeOf(t, done, "a"); n.Error != "" || n.Attempts != 2 {
		t.Fatalf("a after its retry succeeded = %+v", n)
	}
}

// nodeOf returns the member of run named name.
func nodeOf(t *testing.T, run *Run, name string) RunNode {
	t.Helper()
	for _, n := range run.Nodes {
		if n.Name == name {
			return n
		}
	}
	t.Fatalf("run %s has no member %q", run.ID, name)
	return RunNode{}
}

func TestFlowJoinImpossibleSkips(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	x := execs("a", "b", "c", "d")
	x[3].Join = plan.Join{Kind: plan.JoinCount, N: 2}
	x[3].InputFrom = plan.InputNone
	f := flowOf("count", x, "a->d", "b->d", "c->d")
	r := e.stage(f, "")
	e.drive(func(g Grant) outcome { return outcome{fail: g.FlowNode != "a"} })
	if st := nodeStates(e.run(r.ID))["d"]; st != StateSkipped {
		t.Fatalf("d = %s, want skipped", st)
	}
}

func TestFlowCancelRun(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	f := flowOf("c", execs("a", "b", "c"), "a->b")
	r := e.stage(f, "")
	g := e.claimAll(worker1, 1, time.Minute) // a or c runs
	if len(g) != 1 {
		t.Fatalf("granted %d", len(g))
	}
	c, err := e.s.CancelRun(e.ctx, r.ID, "stop")
	if err != nil {
		t.Fatal(err)
	}
	if c.State != RunCancelled || c.Cancelled != 3 {
		t.Fatalf("cancelled run = %+v", c)
	}
	for name, st := range nodeStates(e.run(r.ID)) {
		if st != StateCancelled {
			t.Fatalf("%s = %s, want cancelled", name, st)
		}
	}
	if err := e.s.Complete(e.ctx, g[0].Lease, nil); !errors.Is(err, ErrStaleLease) {
		t.Fatalf("Complete after cancel = %v", err)
	}
	if g := e.claimAll(worker1, 10, time.Minute); len(g) != 0 {
		t.Fatalf("claimed %v after cancel", grantIDs(g))
	}
	again, err := e.s.CancelRun(e.ctx, r.ID, "")
	if err != nil || again.State != RunCancelled {
		t.Fatalf("second CancelRun = %+v, %v", again, err)
	}
	if _, err := e.s.CancelRun(e.ctx, RunID(makeID(0, newUUID())), ""); !errors.Is(err, ErrNotFound) {
		t.Fatalf("CancelRun(missing) = %v", err)
	}
	// A cancelled run can be replayed from scratch.
	if _, err := e.s.ReplayRun(e.ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	e.drive(func(Grant) outcome { return outcome{} })
	if done := e.run(r.ID); done.State != RunSucceeded || done.Succeeded != 3 {
		t.Fatalf("replayed cancelled run = %+v", done)
	}
}

func TestFlowIdempotentStage(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	f := flowOf("i", execs("a"))
	first, created, err := e.s.StageFlow(e.ctx, StageRequest{Flow: f, IdempotencyKey: "run-1"})
	if err != nil || !created {
		t.Fatal(created, err)
	}
	again, created, err := e.s.StageFlow(e.ctx, StageRequest{Flow: f, IdempotencyKey: "run-1"})
	if err != nil || created || again.ID != first.ID {
		t.Fatalf("repeat = %s %v %v", again.ID, created, err)
	}
}

func TestFlowIdempotencyKeyOfAnotherFlow(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *Config) { c.FlowPartitions = 1 })
	first, _, err := e.s.StageFlow(e.ctx, StageRequest{Flow: flowOf("orders", execs("a")), IdempotencyKey: "k"})
	if err != nil {
		t.Fatal(err)
	}
	before := e.keys()
	// One run staged in one call, one staged in chunks: both refused,
	// nothing of theirs left.
	names := []string{"root"}
	for i := range StageChunkExecs + 10 {
		names = append(names, fmt.Sprintf("m%04d", i))
	}
	for _, f := range []*plan.Flow{flowOf("refunds", execs("a")), flowOf("wide", execs(names...))} {
		_, _, err := e.s.StageFlow(e.ctx, StageRequest{Flow: f, IdempotencyKey: "k"})
		want := &IdempotencyError{Key: "k", Flow: "orders", RunID: first.ID}
		var ie *IdempotencyError
		if !errors.As(err, &ie) || *ie != *want || !errors.Is(err, ErrWrongState) {
			t.Fatalf("%s with the key of a run of orders: %v, want %v", f.Name, err, want)
		}
		if diff := cmp.Diff(before, e.keys()); diff != "" {
			t.Fatalf("%s: keys changed (-before +after):\n%s", f.Name, diff)
		}
	}
	// The key's own flow still gets its first run back.
	again, created, err := e.s.StageFlow(e.ctx, StageRequest{Flow: flowOf("orders", execs("a")), IdempotencyKey: "k"})
	if err != nil || created || again.ID != first.ID {
		t.Fatalf("repeat of orders = %v %v %v", again, created, err)
	}
}

// TestFlowBadResourceDefinitionWritesNothing: budget and quota definitions
// are checked before anything is written (registerResources then writes
// them before the run): a bad one refuses the staging with nothing
// written.
func TestFlowBadResourceDefinitionWritesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *Config) { c.FlowPartitions = 1 })
	before := e.keys()
	badBudget := flowOf("x", execs("a"))
	badBudget.BudgetDefs = []plan.Budget{{Name: "b", Scope: plan.ScopeShared, OnHardLimit: "explode",
		Dimensions: []plan.Dimension{{Name: "n", Hard: 1}}}}
	badBudget.Execs[0].Budgets = []string{"b"}
	badQuota := flowOf("x", execs("a"))
	badQuota.QuotaDefs = []plan.Quota{{Name: "q"}} // neither a rate nor a concurrency limit
	badQuota.Execs[0].Quotas = []string{"q"}
	for field, f := range map[string]*plan.Flow{"flow.budget_defs[0].on_hard_limit": badBudget, "flow.quota_defs[0].rate": badQuota} {
		_, _, err := e.s.StageFlow(e.ctx, StageRequest{Flow: f})
		if ve := (*ValidationError)(nil); !errors.As(err, &ve) || ve.Field != field {
			t.Fatalf("StageFlow = %v, want a validation error of %s", err, field)
		}
		if diff := cmp.Diff(before, e.keys()); diff != "" {
			t.Fatalf("%s: a refused staging wrote keys (-before +after):\n%s", field, diff)
		}
	}
}

func TestFlowValidationWritesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	before := e.keys()
	bad := map[string]*plan.Flow{
		"cycle":        flowOf("x", execs("a", "b"), "a->b", "b->a"),
		"unknown edge": flowOf("x", execs("a"), "a->zz"),
		"self edge":    flowOf("x", execs("a"), "a->a"),
		"bad on":       flowOf("x", execs("a", "b"), "a->b on maybe"),
		"no execs":     flowOf("x", nil),
		"join n": func() *plan.Flow {
			f := flowOf("x", execs("a", "b"), "a->b")
			f.Execs[1].Join = plan.Join{Kind: plan.JoinCount, N: 2}
			return f
		}(),
		"bad input": func() *plan.Flow {
			f := flowOf("x", execs("a", "b", "c"), "a->c")
			f.Execs[2].InputFrom, f.Execs[2].InputExec = plan.InputExec, "b"
			return f
		}(),
		"bad result": func() *plan.Flow { f := flowOf("x", execs("a")); f.Result = "zz"; return f }(),
		"bad lane":   func() *plan.Flow { f := flowOf("x", execs("a")); f.Execs[0].Lane = "a:b"; return f }(),
		"dup name":   flowOf("x", execs("a", "a")),
	}
	for _, name := range slices.Sorted(maps.Keys(bad)) {
		if _, _, err := e.s.StageFlow(e.ctx, StageRequest{Flow: bad[name]}); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: err = %v, want ErrInvalid", name, err)
		}
	}
	if _, _, err := e.s.StageFlow(e.ctx, StageRequest{Flow: flowOf("x", execs("a")), Input: make([]byte, MaxPayloadBytes+1)}); !errors.Is(err, ErrTooLarge) {
		t.Errorf("oversize input: %v", err)
	}
	if diff := cmp.Diff(before, e.keys()); diff != "" {
		t.Fatalf("refused stages wrote keys (-before +after):\n%s", diff)
	}
}

func TestFlowRetentionPurgesRun(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *Config) { c.FlowPartitions = 1 })
	r := e.stage(flowOf("p", execs("a", "b"), "a->b"), "")
	e.drive(func(Grant) outcome { return outcome{} })
	time.Sleep(5 * time.Millisecond)
	e.purgeAll(100)
	if _, err := e.s.GetRun(e.ctx, r.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("GetRun after purge = %v", err)
	}
	e.wantPurged()
}

func TestFlowReplay(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	x := execs("extract", "load", "quarantine", "report")
	x[3].Join = plan.Join{Kind: plan.JoinAny}
	x[3].InputFrom = plan.InputNone
	f := flowOf("etl", x, "extract->load", "extract->quarantine on failure", "load->report", "quarantine->report")
	f.Result = "report"
	r := e.stage(f, "in")
	// First run: extract succeeds, so quarantine is skipped; load fails, so
	// report (join any) is skipped: the run fails.
	e.drive(func(g Grant) outcome { return outcome{result: []byte("r-" + g.FlowNode), fail: g.FlowNode == "load"} })
	first := e.run(r.ID)
	want := map[string]PublicState{"extract": StateCompleted, "load": StateFailed, "quarantine": StateSkipped, "report": StateSkipped}
	if diff := cmp.Diff(want, nodeStates(first)); diff != "" || first.State != RunFailed {
		t.Fatalf("first run %s (-want +got):\n%s", first.State, diff)
	}
	if _, err := e.s.ReplayRun(e.ctx, RunID(makeID(0, newUUID()))); !errors.Is(err, ErrNotFound) {
		t.Fatalf("ReplayRun(missing) = %v", err)
	}
	replayed, err := e.s.ReplayRun(e.ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	// extract keeps its result; load is eligible again at once; report waits;
	// quarantine stays skipped (extract succeeded: its on failure edge can
	// never hold).
	want = map[string]PublicState{"extract": StateCompleted, "load": StateWaiting, "quarantine": StateSkipped, "report": StatePending}
	if diff := cmp.Diff(want, nodeStates(e.run(r.ID))); diff != "" || replayed.State != RunRunning || replayed.Done != 2 {
		t.Fatalf("replayed run %+v (-want +got):\n%s", replayed, diff)
	}
	var ran []string
	e.drive(func(g Grant) outcome {
		ran = append(ran, g.FlowNode)
		if g.FlowNode == "load" && (g.AttemptType != AttemptReplay || string(g.Payload) != "r-extract") {
			t.Errorf("load grant = %+v", g)
		}
		// report waited for load after the replay: its claim is a replay too.
		if g.FlowNode == "report" && (g.AttemptType != AttemptReplay || g.Attempt != 1) {
			t.Errorf("report grant = %+v", g)
		}
		return outcome{result: []byte("r-" + g.FlowNode)}
	})
	if diff := cmp.Diff([]string{"load", "report"}, ran); diff != "" {
		t.Fatalf("replay ran (-want +got):\n%s", diff)
	}
	done := e.run(r.ID)
	if done.State != RunSucceeded || string(done.Result) != "r-report" {
		t.Fatalf("run after replay = %+v", done)
	}
	// The run says it was replayed, and when; so does the outcome of a
	// clean success, read without its members.
	if first.Replays != 0 || !first.ReplayedAt.IsZero() {
		t.Fatalf("a run never replayed says %d replays at %v", first.Replays, first.ReplayedAt)
	}
	if replayed.Replays != 1 || replayed.ReplayedAt.Before(first.EndedAt) || done.Replays != 1 || !done.ReplayedAt.Equal(replayed.ReplayedAt) {
		t.Fatalf("replays: %d at %v (then %d at %v), want 1 after the first end %v",
			replayed.Replays, replayed.ReplayedAt, done.Replays, done.ReplayedAt, first.EndedAt)
	}
	if out, err := e.s.GetRunOutcome(e.ctx, r.ID); err != nil || out.Nodes != nil || out.Replays != 1 || !out.ReplayedAt.Equal(replayed.ReplayedAt) {
		t.Fatalf("outcome after the replay = %+v, %v; want 1 replay, no members read", out, err)
	}
	if _, err := e.s.ReplayRun(e.ctx, r.ID); !errors.Is(err, ErrWrongState) {
		t.Fatalf("ReplayRun of a succeeded run = %v", err)
	}
}

func TestFlowChunkedStaging(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *Config) { c.FlowPartitions = 1 })
	names := []string{"root", "sink"}
	var edges []string
	for i := range StageChunkExecs*2 + 100 {
		m := fmt.Sprintf("m%04d", i)
		names = append(names, m)
		edges = append(edges, "root->"+m, m+"->sink")
	}
	f := flowOf("wide", execs(names...), edges...)
	f.Execs[1].InputFrom = plan.InputNone
	f.Result = "sink"
	r := e.stage(f, `"in"`)
	if r.Total != len(names) || r.State != RunRunning {
		t.Fatalf("staged run: total %d state %s", r.Total, r.State)
	}
	if st := nodeStates(r); st["root"] != StateWaiting || st["m0000"] != StatePending || st["sink"] != StatePending {
		t.Fatalf("states root %s m0000 %s sink %s", st["root"], st["m0000"], st["sink"])
	}
	n := len(e.drive(func(g Grant) outcome { return outcome{result: []byte(`"ok"`)} }))
	done := e.run(r.ID)
	if n != len(names) || done.State != RunSucceeded || done.Succeeded != len(names) || string(done.Result) != `"ok"` {
		t.Fatalf("ran %d; run = %s, %d succeeded", n, done.State, done.Succeeded)
	}
	if ks := e.keys(); slices.ContainsFunc(ks, func(k string) bool { return strings.Contains(k, ":staged") || strings.HasSuffix(k, ":staging") }) {
		t.Fatalf("staging keys left after commit: %v", ks)
	}
}

// handStaging stages the run a->b of flow x chunk by chunk by hand, as
// stageChunked would, so that a test can stall or abandon it in between.
type handStaging struct {
	e     *env
	pf    *preparedFlow
	refs  *stageRefs
	uuids []string
	run   string
}

func newHandStaging(e *env) *handStaging {
	e.t.Helper()
	f := flowOf("x", execs("a", "b"), "a->b")
	pf, err := prepareFlow(f)
	if err != nil {
		e.t.Fatal(err)
	}
	run := newUUID()
	return &handStaging{e: e, pf: pf, run: run, uuids: []string{newUUID(), newUUID()},
		refs: newStageRefs(f, "default", RunID("0."+run), []byte("in"))}
}

// member returns the ff_stage_flow entries of member i.
func (h *handStaging) member(i int) []string {
	h.e.t.Helper()
	m, err := h.pf.members[i].args(h.uuids, h.refs)
	if err != nil {
		h.e.t.Fatal(err)
	}
	return m
}

// chunk writes members with ff_stage_chunk, with a staging lifetime (ms).
func (h *handStaging) chunk(lifetime string, members ...int) {
	h.e.t.Helper()
	args := []string{h.run, "default", "in", lifetime}
	for _, i := range members {
		m := h.member(i)
		args = append(append(args, strconv.Itoa(len(m))), m...)
	}
	if _, err := h.e.s.single(h.e.ctx, call{fn: "ff_stage_chunk", partition: 0, args: args}, "", "stage"); err != nil {
		h.e.t.Fatal(err)
	}
}

// extraKeys returns the keys that are not in before, lane registries aside.
func (e *env) extraKeys(before []string) []string {
	var extra []string
	for _, k := range e.keys() {
		if !slices.Contains(before, k) && !strings.HasSuffix(k, ":lanes") {
			extra = append(extra, k)
		}
	}
	return extra
}

func TestFlowAbandonedStagingIsInvisibleAndPurged(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *Config) { c.FlowPartitions = 1 })
	before := e.keys()
	h := newHandStaging(e)
	run := h.run
	h.chunk("50", 0, 1) // a stager writes a chunk (lifetime 50 ms) and dies before committing
	if g := e.claimAll(worker1, 10, time.Minute); len(g) != 0 {
		t.Fatalf("claimed an uncommitted member: %v", grantIDs(g))
	}
	if page, err := e.s.ListExecutions(e.ctx, ListRequest{Namespace: "default"}); err != nil || len(page.Executions) != 0 {
		t.Fatalf("listed uncommitted members: %+v, %v", page, err)
	}
	if _, err := e.s.GetRun(e.ctx, RunID(makeID(0, run))); !errors.Is(err, ErrNotFound) {
		t.Fatalf("GetRun of uncommitted run = %v", err)
	}
	time.Sleep(60 * time.Millisecond)
	if _, err := e.s.PurgeTerminal(e.ctx, 0, time.Hour, 10); err != nil {
		t.Fatal(err)
	}
	if extra := e.extraKeys(before); len(extra) != 0 {
		t.Fatalf("keys left by an abandoned staging: %v", extra)
	}
	// Committing it now finds nothing.
	commit := []string{run, "default", "x", "", "", "1000", "", "", "0"}
	if _, err := e.s.single(e.ctx, call{fn: "ff_commit_flow", partition: 0, args: commit}, "", "stage"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("late commit = %v", err)
	}
}

// TestFlowStalledStagingCommitRefused: a stager that stalls longer than
// the staging lifetime between two chunks finds its first chunk dropped by
// retention, and the second chunk registers the run again with only its
// own member. The commit must not make such a run visible (its root would
// be written back as a bare record and claimed with no kind): it refuses
// and leaves nothing.
func TestFlowStalledStagingCommitRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *Config) { c.FlowPartitions = 1 })
	before := e.keys()
	h := newHandStaging(e)
	h.chunk("20", 0) // a; then the stager stalls past the lifetime
	time.Sleep(40 * time.Millisecond)
	if _, err := e.s.PurgeTerminal(e.ctx, 0, time.Hour, 10); err != nil {
		t.Fatal(err)
	}
	h.chunk(ms(StagingTTL), 1) // b
	commit := []string{h.run, "default", "x", "", "", "1000", "in", "", "2"}
	for i, u := range h.uuids {
		m := h.member(i)
		commit = append(commit, m[0], u, m[2], m[3], m[5], "0")
	}
	if _, err := e.s.single(e.ctx, call{fn: "ff_commit_flow", partition: 0, args: commit}, "", "stage"); !errors.Is(err, ErrStagingExpired) {
		t.Fatalf("commit of a run whose first chunk was dropped = %v, want ErrStagingExpired", err)
	}
	if g := e.claimAll(worker1, 10, time.Minute); len(g) != 0 {
		t.Fatalf("claimed after the refused commit: %v", grantIDs(g))
	}
	if extra := e.extraKeys(before); len(extra) != 0 {
		t.Fatalf("keys left by the refused commit: %v", extra)
	}
}

// TestFlowStageChunkAfterCommitRefused: a chunk for a run that is
// already committed (a stager's stray retry) must not write its members
// again, which would reset a running member's state under the scheduler.
func TestFlowStageChunkAfterCommitRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *Config) { c.FlowPartitions = 1 })
	h := newHandStaging(e)
	h.chunk(ms(StagingTTL), 0, 1)
	commit := []string{h.run, "default", "x", "", "", "1000", "in", "", "2"}
	for i, u := range h.uuids {
		m := h.member(i)
		commit = append(commit, m[0], u, m[2], m[3], m[5], "0")
	}
	if _, err := e.s.single(e.ctx, call{fn: "ff_commit_flow", partition: 0, args: commit}, "", "stage"); err != nil {
		t.Fatal(err)
	}
	g := e.claimAll(worker1, 10, time.Minute)
	if len(g) != 1 {
		t.Fatalf("claimed %v, want the root", grantIDs(g))
	}
	args := []string{h.run, "default", "in", ms(StagingTTL)}
	m := h.member(0)
	args = append(append(args, strconv.Itoa(len(m))), m...)
	if _, err := e.s.single(e.ctx, call{fn: "ff_stage_chunk", partition: 0, args: args}, ExecutionID(makeID(0, h.run)), "stage"); !errors.Is(err, ErrWrongState) {
		t.Fatalf("chunk after commit = %v, want ErrWrongState", err)
	}
	e.wantState(g[0].ExecutionID, StateActive)
	if ks := e.keys(); slices.ContainsFunc(ks, func(k string) bool { return strings.Contains(k, ":staged") || strings.HasSuffix(k, ":staging") }) {
		t.Fatalf("the refused chunk left staging keys: %v", ks)
	}
}

// TestFlowReplayResetsReclaims: a replay starts a member's allowances
// again, lost leases included: a member that failed because its worker
// lost the lease more than max_reclaims times is reclaimed, not failed,
// when the worker of its replay attempt loses the lease once.
func TestFlowReplayResetsReclaims(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *Config) { c.FlowPartitions = 1 })
	r := e.stage(flowOf("reclaims", execs("a")), "")
	id := r.Nodes[0].ExecutionID
	lose := func() Grant {
		t.Helper()
		g, err := e.s.Claim(e.ctx, ClaimRequest{Partition: 0, Lanes: []string{"default"}, Worker: worker1, Max: 1, LeaseTTL: LeaseTTLMin})
		if err != nil || len(g) != 1 {
			t.Fatalf("Claim = %v, %v", g, err)
		}
		time.Sleep(LeaseTTLMin + 30*time.Millisecond)
		if _, err := e.s.ExpireLeases(e.ctx, 0, 100); err != nil {
			t.Fatal(err)
		}
		return g[0]
	}
	for range MaxReclaimsDefault + 1 {
		lose()
	}
	if x := e.wantState(id, StateFailed); !strings.HasPrefix(x.FailureReason, "reclaims_exhausted") {
		t.Fatalf("failure reason %q, want reclaims_exhausted", x.FailureReason)
	}
	if _, err := e.s.ReplayRun(e.ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	if g := lose(); g.AttemptType != AttemptReplay {
		t.Fatalf("attempt type %s, want replay", g.AttemptType)
	}
	if x := e.check(id); x.State.Public != StateWaiting {
		t.Fatalf("after the replay attempt lost its lease once: %s (%q), want waiting (a reclaim)", x.State.Public, x.FailureReason)
	}
}

// TestFlowDeadlineSweepExpiresFiredMember: one deadline sweep expires a
// member, whose on-failure edge fires its downstream (added to the
// eligible index), and then expires the downstream too (its own deadline
// passed): the downstream must end in the terminal index only.
func TestFlowDeadlineSweepExpiresFiredMember(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *Config) { c.FlowPartitions = 1 })
	x := execs("a", "b")
	x[0].DeadlineMs = 20
	x[1].DeadlineMs = 40 // after a's: the sweep takes a first
	r := e.stage(flowOf("deadlines", x, "a->b on failure"), "")
	time.Sleep(60 * time.Millisecond)
	if _, err := e.s.ExpireDeadlines(e.ctx, 0, 100); err != nil {
		t.Fatal(err)
	}
	run := e.run(r.ID) // checks every member's indexes
	if st := nodeStates(run); st["a"] != StateExpired || st["b"] != StateExpired || run.State != RunFailed {
		t.Fatalf("run %s, members %v", run.State, st)
	}
	if n := eligibleCount(e, "default"); n != 0 {
		t.Fatalf("%d entries left in the eligible index", n)
	}
}

func TestFlowMemberCancelledAlone(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.stage(flowOf("m", execs("a", "b"), "a->b"), "")
	st := e.run(r.ID)
	var b ExecutionID
	for _, n := range st.Nodes {
		if n.Name == "b" {
			b = n.ExecutionID
		}
	}
	if _, err := e.s.Cancel(e.ctx, b, "not needed"); err != nil {
		t.Fatal(err)
	}
	e.drive(func(Grant) outcome { return outcome{} })
	if done := e.run(r.ID); done.State != RunCancelled || done.Cancelled != 1 || done.Succeeded != 1 {
		t.Fatalf("run = %+v", done)
	}
}

// TestFlowFanOutWakesOnce: a member whose end makes many downstreams of
// one lane eligible publishes one wake-up for them, not one per member.
func TestFlowFanOutWakesOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	sub := valkeytest.Client(t, valkeytest.Shared(t))
	msgs := make(chan string, 64)
	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	go sub.Receive(ctx, sub.B().Subscribe().Channel(e.s.WakeChannel()).Build(), func(m valkey.PubSubMessage) {
		msgs <- m.Message
	})
	waitUntil(t, 2*time.Second, "subscription", func() bool {
		n, _ := e.c.Do(e.ctx, e.c.B().PubsubNumsub().Channel(e.s.WakeChannel()).Build()).AsIntMap()
		return n[e.s.WakeChannel()] == 1
	})
	names := []string{"root"}
	var edges []string
	for i := range 20 {
		names = append(names, fmt.Sprintf("m%02d", i))
		edges = append(edges, "root->"+names[i+1])
	}
	r := e.stage(flowOf("fan", execs(names...), edges...), "in")
	expect := func(what string, n int) {
		t.Helper()
		for i := range n {
			select {
			case <-msgs:
			case <-time.After(2 * time.Second):
				t.Fatalf("%s: %d of %d wake-ups", what, i, n)
			}
		}
		select {
		case m := <-msgs:
			t.Fatalf("%s: unexpected wake-up %q", what, m)
		case <-time.After(50 * time.Millisecond):
		}
	}
	expect("stage", 1)
	g := e.claimAll(worker1, 10, time.Minute)
	if len(g) != 1 || g[0].FlowNode != "root" {
		t.Fatalf("grants = %+v", g)
	}
	if _, err := e.s.FinishMany(e.ctx, []Finish{{Lease: g[0].Lease, Result: []byte(`1`)}}); err != nil {
		t.Fatal(err)
	}
	expect("root finished", 1)
	if got := e.claimAll(worker1, 100, time.Minute); len(got) != 20 {
		t.Fatalf("%d grants after the fan-out, want 20", len(got))
	}
	if st := e.run(r.ID).State; st != RunRunning {
		t.Fatalf("run %s", st)
	}
}

// TestPlacementStreaks: runs and standalone executions without an
// idempotency key go to one partition for PlacementStreak placements, then
// to a random one; keyed ones keep their hashed partition.
func TestPlacementStreaks(t *testing.T) {
	s := &Store{cfg: Config{FlowPartitions: 16}}
	var got []int
	for range PlacementStreak * 12 {
		got = append(got, s.streakPartition())
	}
	seen := map[int]bool{}
	for i := 0; i < len(got); i += PlacementStreak {
		for j := i; j < i+PlacementStreak; j++ {
			if got[j] != got[i] || got[j] < 0 || got[j] >= 16 {
				t.Fatalf("placement %d = %d, its streak began with %d", j, got[j], got[i])
			}
		}
		seen[got[i]] = true
	}
	if len(seen) < 2 {
		t.Fatalf("12 streaks all on partition %v", seen) // odds 16^-11
	}

	e := newEnv(t, func(c *Config) { c.FlowPartitions = 16 })
	f := flowOf("one", execs("a"))
	first := e.stage(f, "")
	p, _ := ExecutionID(first.ID).Partition()
	for range 3 {
		r := e.stage(f, "")
		if q, _ := ExecutionID(r.ID).Partition(); q != p {
			t.Fatalf("run %s on partition %d, the streak is on %d", r.ID, q, p)
		}
	}
	k, _, err := e.s.StageFlow(e.ctx, StageRequest{Flow: f, IdempotencyKey: "k1"})
	if err != nil {
		t.Fatal(err)
	}
	if q, _ := ExecutionID(k.ID).Partition(); q != e.s.partitionFor("default", "run\x00k1") {
		t.Fatalf("keyed run on partition %d, want its hash's", q)
	}
	// Standalone executions without a key join the same streak (single
	// creates and batches); keyed ones keep their hashed partition.
	for range 3 {
		x, _, err := e.s.CreateExecution(e.ctx, CreateRequest{Kind: "k"})
		if err != nil {
			t.Fatal(err)
		}
		if x.Partition != p {
			t.Fatalf("execution %s on partition %d, the streak is on %d", x.ID, x.Partition, p)
		}
	}
	res, err := e.s.CreateMany(e.ctx, []CreateRequest{{Kind: "k"}, {Kind: "k"}, {Kind: "k", IdempotencyKey: "x1"}})
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		want := p
		if i == 2 {
			want = e.s.partitionFor("default", "x1")
		}
		if r.Err != nil || r.Execution.Partition != want {
			t.Fatalf("batched create %d on partition %d (%v), want %d", i, r.Execution.Partition, r.Err, want)
		}
	}
}

// TestFlowStagedRunMatchesGetRun: the run StageFlow returns (built without
// reading it back) is what GetRun reads right after, for a run staged in
// one call and for one staged in chunks.
func TestFlowStagedRunMatchesGetRun(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	small := flowOf("small", execs("a", "b", "c", "d"), "a->c", "b->c on done", "c->d on failure")
	small.Execs[2].InputFrom = plan.InputNone
	small.Execs[1].Kind = "custom.kind"
	small.Result = "d"
	names := []string{"root"}
	var edges []string
	for i := range StageChunkExecs + 10 {
		names = append(names, fmt.Sprintf("m%04d", i))
		edges = append(edges, "root->"+names[i+1])
	}
	big := flowOf("big", execs(names...), edges...)
	for _, f := range []*plan.Flow{small, big} {
		staged := e.stage(f, `"in"`)
		if diff := cmp.Diff(e.run(staged.ID), staged); diff != "" {
			t.Fatalf("%s: staged run (-GetRun +StageFlow):\n%s", f.Name, diff)
		}
		// With an idempotency key, which the run carries.
		keyed, created, err := e.s.StageFlow(e.ctx, StageRequest{Flow: f, Input: []byte(`"in"`), IdempotencyKey: "k-" + f.Name})
		if err != nil || !created || keyed.IdempotencyKey != "k-"+f.Name {
			t.Fatalf("%s: keyed staging = %+v, %v", f.Name, keyed, err)
		}
		if diff := cmp.Diff(e.run(keyed.ID), keyed); diff != "" {
			t.Fatalf("%s: keyed staged run (-GetRun +StageFlow):\n%s", f.Name, diff)
		}
	}
	// The members' upstreams carry their edges' conditions.
	got := map[string][]RunEdge{}
	for _, n := range e.run(e.stage(small, `"in"`).ID).Nodes {
		got[n.Name] = n.Upstreams
	}
	want := map[string][]RunEdge{"a": nil, "b": nil, "c": {{"a", "success"}, {"b", "done"}}, "d": {{"c", "failure"}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("upstreams (-want +got):\n%s", diff)
	}
}

// GetRunOutcome skips the members of a run that succeeded without a failed
// or cancelled member; of another ended run it reads what GetRun says but
// its input and members: counts, result, result state and failures.
func TestFlowRunOutcome(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	f := flowOf("chain", execs("a", "b", "c"), "a->b", "b->c")
	f.Result = "c"
	r := e.stage(f, "")
	e.drive(func(g Grant) outcome { return outcome{result: []byte("out-" + g.FlowNode)} })
	got, err := e.s.GetRunOutcome(e.ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != RunSucceeded || got.ResultNode != "c" || string(got.Result) != "out-c" || got.Nodes != nil ||
		got.Succeeded != 3 || got.EndedAt.IsZero() {
		t.Fatalf("outcome of a clean run = %+v", got)
	}
	// The finish that ended it carried the same outcome, and only that one.
	if len(e.ended) != 1 {
		t.Fatalf("%d finishes carried an ended run, want 1", len(e.ended))
	}
	if diff := cmp.Diff(got, e.ended[0]); diff != "" {
		t.Fatalf("outcome carried by the finish differs from GetRunOutcome (-want +got):\n%s", diff)
	}
	e.ended = nil

	x := execs("extract", "load", "quarantine")
	g := flowOf("etl", x, "extract->load", "extract->quarantine on failure")
	g.Result = "quarantine"
	r = e.stage(g, "")
	e.drive(func(g Grant) outcome {
		return outcome{fail: g.FlowNode == "extract", result: []byte("out-" + g.FlowNode)}
	})
	got, err = e.s.GetRunOutcome(e.ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	full := e.run(r.ID)
	full.Nodes, full.Input = nil, nil
	if diff := cmp.Diff(full, got); diff != "" {
		t.Fatalf("outcome of a run with a failed member differs from GetRun (-want +got):\n%s", diff)
	}
	if got.State != RunSucceeded || got.Failed != 1 || string(got.Result) != "out-quarantine" || got.Nodes != nil ||
		len(got.Failures) != 1 || got.Failures[0].Name != "extract" || got.Failures[0].Error != "handler failed" ||
		got.ResultNode != "quarantine" || got.ResultState != StateCompleted {
		t.Fatalf("outcome of a run with a handled failure = %+v", got)
	}
	if len(e.ended) != 0 {
		t.Fatalf("a run with a failed member was carried by its finish: %+v", e.ended)
	}

	// A flow without a result exec; an unknown run.
	r = e.stage(flowOf("pair", execs("a", "b"), "a->b"), "")
	e.drive(func(g Grant) outcome { return outcome{result: []byte("x")} })
	got, err = e.s.GetRunOutcome(e.ctx, r.ID)
	if err != nil || got.State != RunSucceeded || got.ResultNode != "" || got.Result != nil || got.Nodes != nil {
		t.Fatalf("outcome of a clean run without a result exec = %+v, %v", got, err)
	}
	rp, _ := ExecutionID(r.ID).Partition()
	missing := RunID(makeID(rp, newUUID()))
	if _, err := e.s.GetRunOutcome(e.ctx, missing); !errors.Is(err, ErrNotFound) {
		t.Fatalf("outcome of an unknown run: %v, want ErrNotFound", err)
	}
}

// claimOne claims one execution for worker1 and fails unless exactly one
// was granted, of flow node node when node is not "".
func (e *env) claimOne(node string) Grant {
	e.t.Helper()
	g := e.claimAll(worker1, 1, time.Minute)
	if len(g) != 1 || node != "" && g[0].FlowNode != node {
		e.t.Fatalf("claim = %+v, want one grant %s", g, node)
	}
	return g[0]
}

// dropRecord deletes the record of id by hand, as an older version's
// retention did to flow members of a kept run.
func (e *env) dropRecord(id ExecutionID) {
	e.t.Helper()
	p, uuid, _ := splitID(string(id))
	if err := e.c.Do(e.ctx, e.c.B().Del().Key(e.s.k.core(p, uuid)).Build()).Error(); err != nil {
		e.t.Fatal(err)
	}
}

// purgeAll runs retention on partition 0 (age 1 ms, limit entries per
// call) until it reports nothing more to do; it fails when a call deletes
// more than the limit or after 100 calls, and returns the calls made and
// the records deleted.
func (e *env) purgeAll(limit int) (calls, deleted int) {
	e.t.Helper()
	for {
		res, err := e.s.PurgeTerminal(e.ctx, 0, time.Millisecond, limit)
		if err != nil {
			e.t.Fatal(err)
		}
		calls++
		deleted += res.Processed
		if res.Processed > limit {
			e.t.Fatalf("one purge call deleted %d records, the limit is %d", res.Processed, limit)
		}
		if !res.More {
			return calls, deleted
		}
		if calls >= 100 {
			e.t.Fatal("purge does not converge")
		}
	}
}

// stageResultFirst stages a run of a -> b on done whose result exec is a,
// and finishes a with result "ra"; b waits to be claimed.
func (e *env) stageResultFirst() (*Run, Grant) {
	e.t.Helper()
	f := flowOf("early", execs("a", "b"), "a->b on done")
	f.Result = "a"
	r := e.stage(f, "")
	a := e.claimOne("a")
	e.finishOK(a, "ra", nil)
	return r, a
}

// runKey returns the key of run id's record.
func (e *env) runKey(id RunID) string {
	e.t.Helper()
	p, uuid, err := e.s.locate(ExecutionID(id))
	if err != nil {
		e.t.Fatal(err)
	}
	return e.s.k.run(p, uuid)
}

// runRecord returns the record of run id, as stored.
func (e *env) runRecord(id RunID) map[string]string {
	e.t.Helper()
	f, err := e.c.Do(e.ctx, e.c.B().Hgetall().Key(e.runKey(id)).Build()).AsStrMap()
	if err != nil {
		e.t.Fatal(err)
	}
	return f
}

// A member's end counts down left; done and succeeded are derived from it
// and the other counters, on the way and at the end.
func TestFlowRunCountsDerived(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	f := flowOf("counts", execs("a", "b", "c", "d"), "a->b", "a->c", "b->d", "c->d on failure")
	r := e.stage(f, "")
	if got := e.runRecord(r.ID); got["left"] != "4" || got["done"] != "" || got["succeeded"] != "" {
		t.Fatalf("staged record = %v, want left 4 and no done or succeeded", got)
	}
	e.drive(func(g Grant) outcome { return outcome{result: []byte(`1`), fail: g.FlowNode == "c"} })
	done := e.run(r.ID)
	// a and b succeed, c fails (its on-failure edge handles it), d runs
	// (join all: b's success and c's failure both hold).
	if done.Total != 4 || done.Done != 4 || done.Succeeded != 3 || done.Failed != 1 || done.Skipped != 0 || done.State != RunSucceeded {
		t.Fatalf("run = %+v", done)
	}
	if got := e.runRecord(r.ID); got["left"] != "0" || got["result_outcome"] != "" {
		t.Fatalf("ended record = %v, want left 0 and no result outcome (no result exec)", got)
	}
}

// A run staged before the record had `left` (done and succeeded instead)
// is converted by its next member's end and ends as it always did.
func TestFlowRunRecordBeforeLeftIsConverted(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	f := flowOf("old", execs("a", "b", "c"), "a->b", "b->c")
	f.Result = "c"
	r := e.stage(f, "")
	first := e.claimOne("")
	e.finishOK(first, "ra", nil)
	// Rewrite the record as the previous layout kept it after one success.
	key := e.runKey(r.ID)
	for _, cmd := range []valkey.Completed{
		e.c.B().Hdel().Key(key).Field("left").Build(),
		e.c.B().Hset().Key(key).FieldValue().FieldValue("done", "1").FieldValue("succeeded", "1").Build(),
	} {
		if err := e.c.Do(e.ctx, cmd).Error(); err != nil {
			t.Fatal(err)
		}
	}
	if mid := e.run(r.ID); mid.Done != 1 || mid.Succeeded != 1 || mid.State != RunRunning {
		t.Fatalf("old-layout run = %+v", mid)
	}
	e.drive(func(g Grant) outcome { return outcome{result: []byte("r" + g.FlowNode)} })
	done := e.run(r.ID)
	if done.State != RunSucceeded || done.Done != 3 || done.Succeeded != 3 || string(done.Result) != "rc" {
		t.Fatalf("run = %+v", done)
	}
	got := e.runRecord(r.ID)
	if got["left"] != "0" || got["done"] != "" || got["succeeded"] != "" || got["result_outcome"] != "success" {
		t.Fatalf("converted record = %v", got)
	}
}

// A run whose result exec succeeded while other members still run has
// no result until it ends succeeded.
func TestFlowResultBeforeRunEnds(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r, _ := e.stageResultFirst()
	mid := e.run(r.ID)
	// The result exec succeeded, but the run goes on: no result yet
	// (spec/api.md: the result exec's output, once the run succeeded).
	if mid.State != RunRunning || mid.Result != nil || mid.ResultNode != "a" || mid.Done != 1 {
		t.Fatalf("run while b waits = %+v", mid)
	}
	e.drive(func(Grant) outcome { return outcome{fail: true} })
	if done := e.run(r.ID); done.State != RunSucceeded || string(done.Result) != "ra" || done.Failed != 1 {
		t.Fatalf("run = %+v", done)
	}
}

// A member that ends after its run record is gone leaves no record behind.
func TestFlowMemberEndWithoutRunRecord(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.stage(flowOf("gone", execs("a", "b"), "a->b"), "")
	first := e.claimOne("")
	key := e.runKey(r.ID)
	if err := e.c.Do(e.ctx, e.c.B().Del().Key(key).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	e.finishOK(first, "ra", nil)
	if n, err := e.c.Do(e.ctx, e.c.B().Exists().Key(key).Build()).AsInt64(); err != nil || n != 0 {
		t.Fatalf("run record after a member's end: exists = %d, %v", n, err)
	}
}

// StageRequest.Staging is called with the new run's id before anything is
// written, and not for a request that is refused.
func TestFlowStagingHook(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var seen RunID
	f := flowOf("hook", execs("a"))
	r, created, err := e.s.StageFlow(e.ctx, StageRequest{Flow: f, Staging: func(id RunID) {
		seen = id
		if _, err := e.s.GetRun(e.ctx, id); !errors.Is(err, ErrNotFound) {
			t.Errorf("run %s readable when Staging is called: %v", id, err)
		}
	}})
	if err != nil || !created || seen != r.ID {
		t.Fatalf("StageFlow = %v, %v; Staging saw %q, want %q", created, err, seen, r.ID)
	}
	called := false
	bad := flowOf("hook", execs("a", "a"))
	if _, _, err := e.s.StageFlow(e.ctx, StageRequest{Flow: bad, Staging: func(RunID) { called = true }}); err == nil || called {
		t.Fatalf("a refused plan: err %v, Staging called %v", err, called)
	}
}

// Retention keeps the members of a run until the run itself is deleted:
// a downstream member still reads its upstream's result, however long the
// upstream has been terminal. Then the run goes with all its members.
func TestFlowRetentionKeepsMembersOfKeptRuns(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *Config) { c.FlowPartitions = 1 })
	r, first := e.stageResultFirst()
	time.Sleep(5 * time.Millisecond)
	if res, err := e.s.PurgeTerminal(e.ctx, 0, time.Millisecond, 100); err != nil || res.Processed != 0 {
		t.Fatalf("purge while the run runs = %+v, %v; want nothing deleted", res, err)
	}
	e.wantState(first.ExecutionID, StateCompleted)
	e.drive(func(g Grant) outcome {
		if string(g.Payload) != "ra" {
			t.Errorf("b's input = %q, want a's result", g.Payload)
		}
		return outcome{result: []byte("rb")}
	})
	if done := e.run(r.ID); done.State != RunSucceeded || string(done.Result) != "ra" {
		t.Fatalf("run = %s %q, want succeeded with a's result", done.State, done.Result)
	}
	time.Sleep(5 * time.Millisecond)
	e.purgeAll(1) // one entry per call: the run's members over several calls
	e.wantPurged()
}

// The result exec's outcome is recorded when it ends: a run whose result
// exec's record is gone (deleted by an older version's retention, which
// purged members by their own age) still ends as its result exec did.
func TestFlowResultRecordGoneBeforeRunEnds(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *Config) { c.FlowPartitions = 1 })
	r, first := e.stageResultFirst()
	e.dropRecord(first.ExecutionID)
	e.drive(func(Grant) outcome { return outcome{result: []byte("rb")} })
	done, err := e.s.GetRun(e.ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if done.State != RunSucceeded || done.Done != 2 {
		t.Fatalf("run = %s (%d of %d done), want succeeded: its result exec succeeded; record %v", done.State, done.Done, done.Total, e.runRecord(r.ID))
	}
}

// An end counted when the run record says every end was counted already
// (it cannot happen through the store: a member ends once) changes
// nothing: the record is not "converted" as one from before `left`.
func TestFlowExtraEndLeavesRecord(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.stage(flowOf("extra", execs("a", "b"), "a->b"), "")
	first := e.claimOne("")
	key := e.runKey(r.ID)
	if err := e.c.Do(e.ctx, e.c.B().Hset().Key(key).FieldValue().FieldValue("left", "0").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	e.finishOK(first, "ra", nil)
	got := e.runRecord(r.ID)
	if got["left"] != "0" || got["done"] != "" || got["state"] != string(RunRunning) {
		t.Fatalf("record after an extra end = %v, want it unchanged (left 0, running)", got)
	}
}

// A replay keeps skipped the members whose join the kept members make
// impossible, and with them the members downstream that only they could
// fire: none of them waits for an upstream that will not end again, and
// the replayed run ends.
func TestFlowReplayKeepsImpossibleSkipsDownstream(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	f := flowOf("rs", execs("a", "b", "c", "d"), "a->b on failure", "b->c")
	r := e.stage(f, "")
	// a succeeds (b, then c, skipped); d fails with no edge: the run fails.
	e.drive(func(g Grant) outcome { return outcome{result: []byte("1"), fail: g.FlowNode == "d"} })
	if first := e.run(r.ID); first.State != RunFailed {
		t.Fatalf("first run = %s", first.State)
	}
	if _, err := e.s.ReplayRun(e.ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	replayed := e.run(r.ID)
	want := map[string]PublicState{"a": StateCompleted, "b": StateSkipped, "c": StateSkipped, "d": StateWaiting}
	if diff := cmp.Diff(want, nodeStates(replayed)); diff != "" || replayed.Done != 3 || replayed.Skipped != 2 {
		t.Fatalf("replayed run %d done, %d skipped; states (-want +got):\n%s", replayed.Done, replayed.Skipped, diff)
	}
	ran := e.drive(func(Grant) outcome { return outcome{result: []byte("1")} })
	if diff := cmp.Diff([]string{"d"}, ran); diff != "" {
		t.Fatalf("ran after the replay (-want +got):\n%s", diff)
	}
	if done := e.run(r.ID); done.State != RunSucceeded || done.Done != 4 || done.Skipped != 2 || done.Succeeded != 2 {
		t.Fatalf("replayed run = %+v", done)
	}
}

// A run some of whose members' records are gone (deleted by an older
// version's retention) cannot be replayed (their outcomes are unknown): the
// replay is refused and changes nothing.
func TestFlowReplayRefusedWhenMembersPurged(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *Config) { c.FlowPartitions = 1 })
	r := e.stage(flowOf("gone", execs("a", "b"), "a->b"), "")
	first := e.claimOne("")
	e.finishOK(first, "ra", nil)
	e.drive(func(Grant) outcome { return outcome{fail: true} })
	// a's record deleted, as an older version's retention did while the
	// run was kept.
	e.dropRecord(first.ExecutionID)
	before := e.runRecord(r.ID)
	_, err := e.s.ReplayRun(e.ctx, r.ID)
	var se *StateError
	if !errors.As(err, &se) || se.State != "purged" || !strings.Contains(err.Error(), "cannot replay run ") {
		t.Fatalf("replay with a purged member = %v, want a StateError of the run (purged)", err)
	}
	if diff := cmp.Diff(before, e.runRecord(r.ID)); diff != "" {
		t.Fatalf("the refused replay changed the run (-before +after):\n%s", diff)
	}
}

// A large run's members are deleted over several purge calls, each within
// the limit, and the run goes with the last of them.
func TestFlowRetentionPurgesLargeRunInSteps(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *Config) { c.FlowPartitions = 1 })
	names := make([]string, 600)
	for i := range names {
		names[i] = fmt.Sprintf("m%03d", i)
	}
	r := e.stage(flowOf("wide", execs(names...)), "")
	if n := len(e.drive(func(Grant) outcome { return outcome{result: []byte("1")} })); n != len(names) {
		t.Fatalf("ran %d members, want %d", n, len(names))
	}
	if done := e.run(r.ID); done.State != RunSucceeded {
		t.Fatalf("run = %s", done.State)
	}
	time.Sleep(5 * time.Millisecond)
	calls, deleted := e.purgeAll(100)
	if deleted != len(names) || calls < 6 {
		t.Fatalf("%d members deleted in %d calls, want %d in at least 6", deleted, calls, len(names))
	}
	if _, err := e.s.GetRun(e.ctx, r.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("GetRun after purge = %v", err)
	}
	e.wantPurged()
}

// A run being deleted by retention is gone at once, however many calls
// its members take: it cannot be read or replayed half deleted, and the
// rest of its members go with the next calls.
func TestFlowRetentionRunGoneAtOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *Config) { c.FlowPartitions = 1 })
	r := e.stage(flowOf("three", execs("a", "b", "c")), "")
	e.drive(func(Grant) outcome { return outcome{fail: true} })
	if st := e.run(r.ID).State; st != RunFailed {
		t.Fatalf("run = %s, want failed", st)
	}
	time.Sleep(5 * time.Millisecond)
	res, err := e.s.PurgeTerminal(e.ctx, 0, time.Millisecond, 2)
	if err != nil || !res.More || res.Processed != 1 {
		t.Fatalf("first purge call = %+v, %v; want one member deleted and more to do", res, err)
	}
	if _, err := e.s.GetRun(e.ctx, r.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("GetRun of a run being deleted = %v, want ErrNotFound", err)
	}
	if _, err := e.s.ReplayRun(e.ctx, r.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("ReplayRun of a run being deleted = %v, want ErrNotFound", err)
	}
	e.purgeAll(2)
	e.wantPurged()
}

// A replay keeps a long chain of skips skipped in one pass: a -> c0 on
// failure, c0 -> c1 -> ... -> c1999, and x failing alone.
func TestFlowReplayLongSkipChain(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *Config) { c.FlowPartitions = 1 })
	const n = 2000
	names := []string{"a", "x"}
	edges := []string{"a->c0000 on failure"}
	for i := range n {
		names = append(names, fmt.Sprintf("c%04d", i))
		if i > 0 {
			edges = append(edges, fmt.Sprintf("c%04d->c%04d", i-1, i))
		}
	}
	r := e.stage(flowOf("long", execs(names...), edges...), "")
	e.drive(func(g Grant) outcome { return outcome{result: []byte("1"), fail: g.FlowNode == "x"} })
	// GetRun, not e.run: checking the indexes of 2,002 members twice
	// would be most of the test's time.
	if first, err := e.s.GetRun(e.ctx, r.ID); err != nil || first.State != RunFailed || first.Skipped != n {
		t.Fatalf("first run = %+v, %v; want failed with %d skipped", first, err, n)
	}
	start := time.Now()
	if _, err := e.s.ReplayRun(e.ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	t.Logf("replay of a run with a %d-long chain of skips: %s", n, time.Since(start))
	if ran := e.drive(func(Grant) outcome { return outcome{result: []byte("1")} }); len(ran) != 1 || ran[0] != "x" {
		t.Fatalf("ran after the replay: %v, want x only", ran)
	}
	if done, err := e.s.GetRun(e.ctx, r.ID); err != nil || done.State != RunSucceeded || done.Skipped != n || done.Done != n+2 {
		t.Fatalf("replayed run = %+v, %v", done, err)
	}
}

// A run's outcome carries the run record's counters and times, not its
// input (up to MaxPayloadBytes), which nobody reading a result needs.
func TestFlowOutcomeLeavesInputOut(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	f := flowOf("big", execs("a"))
	f.Result = "a"
	r := e.stage(f, `"`+strings.Repeat("x", 100_000)+`"`)
	e.drive(func(Grant) outcome { return outcome{result: []byte(`"ok"`)} })
	p, uuid, _ := e.s.locate(ExecutionID(r.ID))
	items, err := e.s.single(e.ctx, call{fn: "ff_run_outcome", partition: p, args: []string{uuid}}, ExecutionID(r.ID), "read run")
	if err != nil {
		t.Fatal(err)
	}
	kv, err := items[0].ToArray()
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(kv); i += 2 {
		if name := str(kv[i]); name == "input" {
			t.Fatal("the outcome carries the run's input")
		}
	}
	run, err := e.s.GetRunOutcome(e.ctx, r.ID)
	if err != nil || run.State != RunSucceeded || string(run.Result) != `"ok"` || run.Done != 1 || run.Succeeded != 1 || run.EndedAt.IsZero() {
		t.Fatalf("outcome = %+v, %v", run, err)
	}
}

// TestFlowUpstreamErrorsReachTheGrant: a member that runs after upstreams
// that ended without output (an on failure edge, or join any beside a
// skipped upstream) is granted with how and why each of them ended.
func TestFlowUpstreamErrorsReachTheGrant(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *Config) { c.FlowPartitions = 1 })
	x := execs("a", "b", "c", "d")
	x[3].Join = plan.Join{Kind: plan.JoinAny}
	x[3].InputFrom = plan.InputNone
	r := e.stage(flowOf("errs", x, "a->b", "a->c on failure", "b->d", "c->d"), "")
	ids := map[string]ExecutionID{}
	for _, n := range r.Nodes {
		ids[n.Name] = n.ExecutionID
	}
	g := e.claim(ids["a"], worker1, time.Minute)
	if len(g.UpstreamErrors) != 0 {
		t.Fatalf("a root has upstream errors: %v", g.UpstreamErrors)
	}
	if _, err := e.s.Fail(e.ctx, g.Lease, "boom", false); err != nil {
		t.Fatal(err)
	}
	g = e.claim(ids["c"], worker1, time.Minute)
	if diff := cmp.Diff(map[string]UpstreamError{"a": {State: StateFailed, Error: "boom"}}, g.UpstreamErrors); diff != "" || len(g.Upstreams) != 0 {
		t.Fatalf("grant of c: upstream errors (-want +got):\n%s; upstreams %v", diff, g.Upstreams)
	}
	if err := e.s.Complete(e.ctx, g.Lease, []byte(`"handled"`)); err != nil {
		t.Fatal(err)
	}
	g = e.claim(ids["d"], worker1, time.Minute)
	want := map[string]UpstreamError{"b": {State: StateSkipped, Error: "its join can no longer be satisfied"}}
	if diff := cmp.Diff(want, g.UpstreamErrors); diff != "" || string(g.Upstreams["c"]) != `"handled"` {
		t.Fatalf("grant of d: upstream errors (-want +got):\n%s; upstreams %v", diff, g.Upstreams)
	}
}

// TestFlowChunkedStagingDroppedBeforeCommit: when retention drops every
// chunk of a large run before its commit (the stager took longer than
// StagingTTL), StageFlow says the staging expired, not that the run is
// not found, and nothing is left.
func TestFlowChunkedStagingDroppedBeforeCommit(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *Config) { c.FlowPartitions = 1 })
	before := e.keys()
	names := []string{"root"}
	var edges []string
	for i := range StageChunkExecs + 10 {
		m := fmt.Sprintf("m%04d", i)
		names = append(names, m)
		edges = append(edges, "root->"+m)
	}
	e.s.hook = func(point, run string) {
		if point != "stage" {
			return
		}
		// What retention does once the staging outlived its lifetime.
		if err := e.c.Do(e.ctx, e.c.B().Zadd().Key(e.s.k.base(0)+":staging").Xx().ScoreMember().ScoreMember(1, run).Build()).Error(); err != nil {
			t.Error(err)
		}
		for {
			res, err := e.s.PurgeTerminal(e.ctx, 0, time.Hour, ScanLimitMax)
			if err != nil {
				t.Error(err)
				return
			}
			if !res.More {
				return
			}
		}
	}
	_, _, err := e.s.StageFlow(e.ctx, StageRequest{Flow: flowOf("wide", execs(names...), edges...), Input: []byte(`"in"`)})
	if !errors.Is(err, ErrStagingExpired) || !strings.Contains(err.Error(), "stage it again") {
		t.Fatalf("StageFlow whose chunks were dropped = %v, want ErrStagingExpired", err)
	}
	if extra := e.extraKeys(before); len(extra) != 0 {
		t.Fatalf("keys left: %v", extra)
	}
}

// TestFlowReplayRerunsWhatTheFailureFired: a replay also resets the
// members that ran because of the failure it replays (an on failure
// compensation, an on done notice, and what those fired), so a run that
// then succeeds does not keep a compensation for a failure that is gone.
// A member that succeeded over another upstream (join any) keeps its
// result.
func TestFlowReplayRerunsWhatTheFailureFired(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	x := execs("order", "charge", "ship", "release", "notify", "audit", "log")
	for i := range x {
		switch x[i].Name {
		case "release", "notify", "log":
			x[i].InputFrom = plan.InputNone
		case "audit":
			x[i].InputFrom = plan.InputExec
			x[i].InputExec = "release"
		}
	}
	x[6].Join = plan.Join{Kind: plan.JoinAny}
	f := flowOf("checkout", x, "order->charge", "charge->ship", "charge->release on failure", "charge->notify on done",
		"release->audit", "order->log", "charge->log")
	f.Result = "ship"
	r := e.stage(f, "in")
	e.drive(func(g Grant) outcome { return outcome{result: []byte("r-" + g.FlowNode), fail: g.FlowNode == "charge"} })
	want := map[string]PublicState{"order": StateCompleted, "charge": StateFailed, "ship": StateSkipped,
		"release": StateCompleted, "notify": StateCompleted, "audit": StateCompleted, "log": StateCompleted}
	if first := e.run(r.ID); first.State != RunFailed || cmp.Diff(want, nodeStates(first)) != "" {
		t.Fatalf("first run %s (-want +got):\n%s", first.State, cmp.Diff(want, nodeStates(first)))
	}

	replayed, err := e.s.ReplayRun(e.ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	want = map[string]PublicState{"order": StateCompleted, "charge": StateWaiting, "ship": StatePending,
		"release": StatePending, "notify": StatePending, "audit": StatePending, "log": StateCompleted}
	if diff := cmp.Diff(want, nodeStates(e.run(r.ID))); diff != "" || replayed.Done != 2 {
		t.Fatalf("replayed run, %d done (-want +got):\n%s", replayed.Done, diff)
	}
	var ran []string
	e.drive(func(g Grant) outcome {
		ran = append(ran, g.FlowNode)
		return outcome{result: []byte("r2-" + g.FlowNode)}
	})
	slices.Sort(ran)
	if diff := cmp.Diff([]string{"charge", "notify", "ship"}, ran); diff != "" {
		t.Fatalf("the replay ran (-want +got):\n%s", diff)
	}
	done := e.run(r.ID)
	want = map[string]PublicState{"order": StateCompleted, "charge": StateCompleted, "ship": StateCompleted,
		"release": StateSkipped, "notify": StateCompleted, "audit": StateSkipped, "log": StateCompleted}
	if diff := cmp.Diff(want, nodeStates(done)); diff != "" || done.State != RunSucceeded || string(done.Result) != "r2-ship" {
		t.Fatalf("run after the replay: %s %q (-want +got):\n%s", done.State, done.Result, diff)
	}
}

// TestRunMembersInFlowOrder: a run lists its members in flow order
// (every member after its upstreams, ties by name), both when staged and
// when read, so a chain reads top to bottom.
func TestRunMembersInFlowOrder(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	x := execs("load", "transform", "b_side", "start", "extract")
	x[0].InputFrom = plan.InputNone
	f := flowOf("order", x, "start->extract", "extract->transform", "transform->load", "b_side->load")
	order := func(r *Run) []string {
		var out []string
		for _, n := range r.Nodes {
			out = append(out, n.Name)
		}
		return out
	}
	want := []string{"b_side", "start", "extract", "transform", "load"}
	staged, _, err := e.s.StageFlow(e.ctx, StageRequest{Flow: f, Input: []byte(`"in"`)})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, order(staged)); diff != "" {
		t.Errorf("staged run (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want, order(e.run(staged.ID))); diff != "" {
		t.Errorf("read run (-want +got):\n%s", diff)
	}
}

// TestFlowReplayKeepsAJoinTheKeptMembersSatisfy: a member whose join the
// members the replay keeps satisfy on their own keeps its result, even over
// an edge that held on a reset member's outcome: it would fire again at
// once, before the replayed member ends, so running it again would repeat
// it for nothing. A join any fired by the first upstream, and a join 2 of
// three.
func TestFlowReplayKeepsAJoinTheKeptMembersSatisfy(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	x := execs("order", "stock", "charge", "notify", "report")
	x[3].Join = plan.Join{Kind: plan.JoinAny}
	x[3].InputFrom = plan.InputNone
	x[4].Join = plan.Join{Kind: plan.JoinCount, N: 2}
	x[4].InputFrom = plan.InputNone
	f := flowOf("pay", x, "order->stock", "order->charge", "order->notify", "charge->notify on done",
		"order->report", "stock->report", "charge->report on done")
	f.Result = "charge"
	r := e.stage(f, "in")
	e.drive(func(g Grant) outcome { return outcome{result: []byte("r-" + g.FlowNode), fail: g.FlowNode == "charge"} })
	want := map[string]PublicState{"order": StateCompleted, "stock": StateCompleted, "charge": StateFailed,
		"notify": StateCompleted, "report": StateCompleted}
	if first := e.run(r.ID); first.State != RunFailed || cmp.Diff(want, nodeStates(first)) != "" {
		t.Fatalf("first run %s (-want +got):\n%s", first.State, cmp.Diff(want, nodeStates(first)))
	}
	replayed, err := e.s.ReplayRun(e.ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	want["charge"] = StateWaiting
	if diff := cmp.Diff(want, nodeStates(e.run(r.ID))); diff != "" || replayed.Done != 4 {
		t.Fatalf("replayed run, %d done (-want +got):\n%s", replayed.Done, diff)
	}
	ran := e.drive(func(g Grant) outcome { return outcome{result: []byte("r2-" + g.FlowNode)} })
	if diff := cmp.Diff([]string{"charge"}, ran); diff != "" {
		t.Fatalf("the replay ran (-want +got):\n%s", diff)
	}
	want["charge"] = StateCompleted
	done := e.run(r.ID)
	if diff := cmp.Diff(want, nodeStates(done)); diff != "" || done.State != RunSucceeded || string(done.Result) != "r2-charge" {
		t.Fatalf("run after the replay: %s %q (-want +got):\n%s", done.State, done.Result, diff)
	}
}

// TestFlowReplayResetsAJoinItsKeptUpstreamsNoLongerSatisfy: a join any
// that consumed a failure and whose other upstream held only because the
// failure fired it (a compensation the replay resets in turn) is reset
// too, whichever edge the replay walks first.
func TestFlowReplayResetsAJoinItsKeptUpstreamsNoLongerSatisfy(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	x := execs("charge", "notify", "release")
	x[1].Join = plan.Join{Kind: plan.JoinAny}
	x[1].InputFrom = plan.InputNone
	x[2].InputFrom = plan.InputNone
	f := flowOf("pay", x, "charge->notify on done", "charge->release on failure", "release->notify")
	f.Result = "charge"
	r := e.stage(f, "in")
	e.drive(func(g Grant) outcome { return outcome{result: []byte("r-" + g.FlowNode), fail: g.FlowNode == "charge"} })
	want := map[string]PublicState{"charge": StateFailed, "notify": StateCompleted, "release": StateCompleted}
	if first := e.run(r.ID); first.State != RunFailed || cmp.Diff(want, nodeStates(first)) != "" {
		t.Fatalf("first run %s (-want +got):\n%s", first.State, cmp.Diff(want, nodeStates(first)))
	}
	if _, err := e.s.ReplayRun(e.ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	want = map[string]PublicState{"charge": StateWaiting, "notify": StatePending, "release": StatePending}
	if diff := cmp.Diff(want, nodeStates(e.run(r.ID))); diff != "" {
		t.Fatalf("replayed run (-want +got):\n%s", diff)
	}
	ran := e.drive(func(g Grant) outcome { return outcome{result: []byte("r2-" + g.FlowNode)} })
	if diff := cmp.Diff([]string{"charge", "notify"}, ran); diff != "" {
		t.Fatalf("the replay ran (-want +got):\n%s", diff)
	}
	want = map[string]PublicState{"charge": StateCompleted, "notify": StateCompleted, "release": StateSkipped}
	if done := e.run(r.ID); done.State != RunSucceeded || cmp.Diff(want, nodeStates(done)) != "" {
		t.Fatalf("run after the replay %s (-want +got):\n%s", done.State, cmp.Diff(want, nodeStates(done)))
	}
}

// TestFlowReplayOfCancelledRunRerunsTheCompensation: in a run cancelled
// after a failure's compensation ran, the replay resets the compensation
// (and what it fired) with the failure; the cancelled member, which fired
// nothing, is reset as such.
func TestFlowReplayOfCancelledRunRerunsTheCompensation(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	x := execs("charge", "release", "later")
	x[1].InputFrom = plan.InputNone
	f := flowOf("pay", x, "charge->release on failure", "release->later")
	f.Result = "charge"
	r := e.stage(f, "in")
	for _, step := range []struct {
		node string
		fail bool
	}{{"charge", true}, {"release", false}} {
		g := e.claimOne(step.node)
		res, err := e.s.FinishMany(e.ctx, []Finish{{Lease: g.Lease, Result: []byte("r"), Failed: step.fail, Error: "no"}})
		if err != nil || res[0].Err != nil {
			t.Fatalf("finish %s: %v, %+v", step.node, err, res)
		}
	}
	if _, err := e.s.CancelRun(e.ctx, r.ID, "stop"); err != nil {
		t.Fatal(err)
	}
	want := map[string]PublicState{"charge": StateFailed, "release": StateCompleted, "later": StateCancelled}
	if first := e.run(r.ID); first.State != RunCancelled || cmp.Diff(want, nodeStates(first)) != "" {
		t.Fatalf("cancelled run %s (-want +got):\n%s", first.State, cmp.Diff(want, nodeStates(first)))
	}
	replayed, err := e.s.ReplayRun(e.ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	want = map[string]PublicState{"charge": StateWaiting, "release": StatePending, "later": StatePending}
	if diff := cmp.Diff(want, nodeStates(e.run(r.ID))); diff != "" || replayed.Done != 0 || replayed.Cancelled != 0 {
		t.Fatalf("replayed run %+v (-want +got):\n%s", replayed, diff)
	}
	ran := e.drive(func(g Grant) outcome { return outcome{result: []byte("r2-" + g.FlowNode)} })
	if diff := cmp.Diff([]string{"charge"}, ran); diff != "" {
		t.Fatalf("the replay ran (-want +got):\n%s", diff)
	}
	want = map[string]PublicState{"charge": StateCompleted, "release": StateSkipped, "later": StateSkipped}
	if done := e.run(r.ID); done.State != RunSucceeded || done.Skipped != 2 || cmp.Diff(want, nodeStates(done)) != "" {
		t.Fatalf("run after the replay %+v (-want +got):\n%s", done, cmp.Diff(want, nodeStates(done)))
	}
}
