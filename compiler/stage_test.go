package compiler

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/flowfabric/ff/compiler/plan"
	"github.com/flowfabric/ff/dsl"
	"github.com/flowfabric/ff/runtime/server/servertest"
	"github.com/flowfabric/ff/runtime/worker"
)

// These tests hold ffc to what a real ffrun does with its plans: what ffc
// accepts, ffrun stages and runs; what ffrun would refuse or mishandle,
// ffc refuses first.

// compilePlans compiles src, which must compile, and returns the plan of
// each flow as JSON: what `ffc plan -flow` prints and Stage<Flow> sends.
func compilePlans(t *testing.T, src string) []json.RawMessage {
	t.Helper()
	pkg, diags := Compile([]dsl.Source{{Name: "r.ff", Data: []byte(src)}})
	if diags.HasErrors() {
		t.Fatalf("ffc refuses it: %v", diags)
	}
	var out []json.RawMessage
	for i := range pkg.Flows {
		text, err := json.MarshalIndent(&pkg.Flows[i], "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, text)
	}
	return out
}

// wantRefused requires ffc to refuse src with an error of code.
func wantRefused(t *testing.T, src string, code dsl.Code) {
	t.Helper()
	_, diags := Compile([]dsl.Source{{Name: "r.ff", Data: []byte(src)}})
	for _, d := range diags {
		if d.Code == code && d.Severity == dsl.SeverityError {
			return
		}
	}
	t.Errorf("want an error %s, got %v", code, diags)
}

// stageFlows stages a run of each flow of src (which must compile) on a
// real ffrun with input in, and requires ffrun to accept it.
func stageFlows(t *testing.T, env *servertest.Env, src string, in any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, text := range compilePlans(t, src) {
		if _, err := env.Client.StageFlowJSON(ctx, text, in); err != nil {
			t.Errorf("ffc accepts the flow, but ffrun refuses to stage its %d-byte plan: %v", len(text), err)
		}
	}
}

// runFlows runs a worker whose handler for every exec of src (which must
// compile) returns no output, stages a run of each flow and requires it to
// succeed, and every member's execution to be readable (GET
// /v1/executions/{id}).
func runFlows(t *testing.T, env *servertest.Env, src string) {
	t.Helper()
	pkg, diags := Compile([]dsl.Source{{Name: "r.ff", Data: []byte(src)}})
	if diags.HasErrors() {
		t.Fatalf("ffc refuses it: %v", diags)
	}
	handlers := map[string]worker.Handler{}
	for _, fl := range pkg.Flows {
		for _, x := range fl.Execs {
			handlers[x.Kind] = func(context.Context, *worker.Task) (json.RawMessage, error) { return nil, nil }
		}
	}
	env.RunWorker(t, worker.Config{Name: "w"}, handlers)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
	defer cancel()
	for _, text := range compilePlans(t, src) {
		run, err := env.Client.StageFlowJSON(ctx, text, nil)
		if err != nil {
			t.Errorf("ffc accepts the flow, but ffrun refuses to stage it: %v", err)
			continue
		}
		end, err := run.Wait(ctx)
		if err != nil {
			now, gerr := env.Client.GetRun(context.Background(), run.ID)
			if gerr != nil {
				t.Fatal(gerr)
			}
			b, _ := json.Marshal(now)
			t.Errorf("run %s did not end: %v\nrun now: %s", run.ID, err, b)
		} else if end.State != "succeeded" {
			b, _ := json.Marshal(end)
			t.Errorf("run ended %s, want succeeded: %s", end.State, b)
		}
		full, err := env.Client.GetRun(context.Background(), run.ID)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range full.Execs {
			if r := env.Do(t, "GET", "/v1/executions/"+m.ExecutionID, nil, ""); r.Status != 200 {
				t.Errorf("GET /v1/executions/%s (member %s): %d %s", m.ExecutionID, m.Name, r.Status, r.Body)
			}
		}
	}
}

// TestSettingDurations: the duration of every setting is at most 366 days
// (plan.MaxDurationMs), the longest ffrun takes for an execution. Longer
// ones break ffrun: a retry delay, budget reset, quota window or jitter
// over 292 years overflows time.Duration (staging answers 400); a timeout
// or deadline of thousands of years cannot be written as JSON (claims and
// reads answer 500) or overflows into the past (the member expires at
// once). 8784h compiles and stages (timeouts and deadlines run); 8785h,
// and far more, is FF0506.
func TestSettingDurations(t *testing.T) {
	env := servertest.Start(t)
	staged := []string{
		"flow f() { exec a() { retry { attempts 2 delay %[1]s max_delay %[1]s } } }",
		"budget b { dimension n { hard 10 } reset %[1]s }\nflow f() { budget b exec a() {} }",
		"quota q { rate 1 per %[1]s }\nflow f() { quota q exec a() {} }",
		"quota q { concurrency 1 jitter %[1]s }\nflow f() { quota q exec a() {} }",
	}
	run := []string{
		"flow f() { exec a() { timeout %[1]s } exec b() {} }",
		"flow f() { exec a() { deadline %[1]s } }",
		"flow f() { deadline %[1]s timeout %[1]s exec a() {} }",
	}
	for i, src := range append(staged, run...) {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			for _, d := range []string{"8784h1ms", "8785h", "100000000h", "2562047788015h"} {
				wantRefused(t, fmt.Sprintf(src, d), dsl.CodeDurationRange)
			}
			longest := fmt.Sprintf(src, "8784h")
			if i < len(staged) {
				stageFlows(t, env, longest, nil)
			} else {
				runFlows(t, servertest.Start(t), longest)
			}
		})
	}
}

// TestPlanSizeLimit: ffrun takes POST /v1/flows bodies of up to 16 MiB
// (the plan with the run's input), so ffc refuses a flow whose plan, as
// Stage<Flow> sends it, is over plan.MaxPlanBytes (FF0513): a flow within
// every other limit (10,000 execs with 256 capabilities each) has a plan
// of about 44 MB. A plan just within the limit stages with a 1 MiB input.
func TestPlanSizeLimit(t *testing.T) {
	caps := make([]string, plan.MaxCapabilities)
	for i := range caps {
		caps[i] = fmt.Sprintf("%q", fmt.Sprintf("c%03d", i))
	}
	// wide has n execs of equal-length names, each requiring every
	// capability; the first takes the flow's input.
	wide := func(n int) string {
		var b strings.Builder
		b.WriteString("flow wide(string) {\n  requires [" + strings.Join(caps, ", ") + "]\n  exec e00000(string) {}\n")
		for i := 1; i < n; i++ {
			fmt.Fprintf(&b, "  exec e%05d() {}\n", i)
		}
		b.WriteString("}\n")
		return b.String()
	}
	// The plan grows by the same number of bytes per exec: take as many
	// as fit (far fewer than plan.MaxExecs), and one more.
	size := func(n int) int { return len(compilePlans(t, wide(n))[0]) }
	s1, s2 := size(1), size(2)
	per := s2 - s1
	n := 1 + (plan.MaxPlanBytes-s1)/per
	wantRefused(t, wide(n+1), dsl.CodePlanSize)
	text := compilePlans(t, wide(n))[0]
	if got := len(text); got > plan.MaxPlanBytes || got <= plan.MaxPlanBytes-per {
		t.Fatalf("plan of %d execs is %d bytes, want at most %d and close to it", n, got, plan.MaxPlanBytes)
	}
	in := strings.Repeat("x", plan.MaxPayloadBytes-2) // 1 MiB as JSON
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := servertest.Start(t).Client.StageFlowJSON(ctx, text, in); err != nil {
		t.Errorf("ffc accepts the flow, but ffrun refuses to stage its %d-byte plan: %v", len(text), err)
	}
}

// TestUnreachableWithDeadline: FF0901 takes deadlines into account. A
// member's deadline runs from its creation, and a pending member whose
// deadline passes expires, which satisfies its failure and done edges
// (spec/runtime.md, Resolution): here "failed" expires while "a" is still
// running, "a" then succeeds, and "both" runs, so ffc must not call it
// unreachable. Without the deadline it is.
func TestUnreachableWithDeadline(t *testing.T) {
	const src = `flow w() {
  exec a() {}
  exec ok() {}
  exec failed() { %s }
  exec both() {}
  a -> ok
  a -> failed on failure
  ok -> both
  failed -> both on failure
}
`
	_, diags := Compile([]dsl.Source{{Name: "w.ff", Data: []byte(fmt.Sprintf(src, ""))}})
	if len(diags) != 1 || diags[0].Code != dsl.CodeUnreachable {
		t.Errorf("without a deadline: want FF0901 for both, got %v", diags)
	}
	withDeadline := fmt.Sprintf(src, "deadline 300ms")
	_, diags = Compile([]dsl.Source{{Name: "w.ff", Data: []byte(withDeadline)}})
	if len(diags) > 0 {
		t.Errorf("with a deadline: %v", diags)
	}
	env := servertest.Start(t)
	ran := make(chan string, 8)
	handler := func(name string, d time.Duration) worker.Handler {
		return func(context.Context, *worker.Task) (json.RawMessage, error) {
			time.Sleep(d)
			ran <- name
			return nil, nil
		}
	}
	env.RunWorker(t, worker.Config{Name: "w", Concurrency: 2}, map[string]worker.Handler{
		"w.a": handler("a", time.Second), "w.ok": handler("ok", 0), "w.failed": handler("failed", 0), "w.both": handler("both", 0),
	})
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
	defer cancel()
	run, err := env.Client.StageFlowJSON(ctx, compilePlans(t, withDeadline)[0], nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := run.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	close(ran)
	bothRan := false
	for name := range ran {
		bothRan = bothRan || name == "both"
	}
	if !bothRan {
		t.Error("both did not run")
	}
}

// TestInputJoinWithDeadline: v takes its input from x under `join any`,
// and its other edge is a failure edge from u, which runs only after x
// succeeded. Without a deadline on u that edge implies x's success, and v
// always starts with its input. With one, u can expire while pending,
// before x ends, which satisfies its failure edge and would start v
// without input: ffc refuses that (FF0309), and so does ffrun's plan
// validation (400) for a plan made by hand.
func TestInputJoinWithDeadline(t *testing.T) {
	const src = `type T { id: string }
flow f(T) {
  exec x(T) -> T {}
  exec u(T) -> T { %s }
  exec v(T) { join any input x }
  x -> u
  x -> v
  u -> v on failure
}
`
	wantRefused(t, fmt.Sprintf(src, "deadline 300ms"), dsl.CodeInputJoin)

	env := servertest.Start(t)
	pkg, diags := Compile([]dsl.Source{{Name: "r.ff", Data: []byte(fmt.Sprintf(src, ""))}})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	byHand := pkg.Flows[0]
	byHand.Execs = append([]plan.Exec(nil), byHand.Execs...)
	byHand.Execs[1].DeadlineMs = 300 // u
	text, err := json.Marshal(&byHand)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
	defer cancel()
	if _, err := env.Client.StageFlowJSON(ctx, text, map[string]string{"id": "r1"}); err == nil || !strings.Contains(err.Error(), "400") || !strings.Contains(err.Error(), "join") {
		t.Errorf("ffrun stages the plan with a deadline on u: %v", err)
	}

	// Without the deadline v starts after x, with its input.
	vIn := make(chan string, 1)
	env.RunWorker(t, worker.Config{Name: "w", Concurrency: 2}, map[string]worker.Handler{
		"f.x": func(_ context.Context, task *worker.Task) (json.RawMessage, error) {
			time.Sleep(300 * time.Millisecond)
			return task.Input(), nil
		},
		"f.u": func(_ context.Context, task *worker.Task) (json.RawMessage, error) { return task.Input(), nil },
		"f.v": func(_ context.Context, task *worker.Task) (json.RawMessage, error) {
			vIn <- string(task.Input())
			return nil, nil
		},
	})
	run, err := env.Client.StageFlowJSON(ctx, compilePlans(t, fmt.Sprintf(src, ""))[0], map[string]string{"id": "r1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := run.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case in := <-vIn:
		if in != `{"id":"r1"}` {
			t.Errorf("v started with input %q", in)
		}
	default:
		t.Fatal("v did not run")
	}
}

// TestResourceLimits: budget, quota and dimension names are at most 64
// bytes, a budget has at most 32 dimensions, a quota's key path is at most
// 128 bytes, and the reference an exec fed by an upstream keeps of a keyed
// quota ("<namespace>/<quota>?<key path>") at most 256: ffrun refuses to
// stage more (400), so ffc refuses it (FF0107, FF0508, FF0306). At those
// limits, ffrun stages the run.
func TestResourceLimits(t *testing.T) {
	env := servertest.Start(t)
	dims := func(n int) string {
		var b strings.Builder
		for i := range n {
			fmt.Fprintf(&b, "dimension d%d { hard 1 } ", i)
		}
		return b.String()
	}
	name := func(c string, n int) string { return strings.Repeat(c, n) }
	// keyed has a quota keyed by a 128-byte field, used by y, which x
	// feeds, in namespace ns.
	keyed := func(ns, quota string) (string, any) {
		k := name("k", plan.MaxQuotaKeyLen)
		return "type T { " + k + ": string }\nquota " + quota + " { concurrency 1 key " + k + " }\n" +
			"flow f(T) { namespace \"" + ns + "\" exec x(T) -> T {} exec y(T) { quota " + quota + " } x -> y }", map[string]any{k: "tenant"}
	}
	a, b, c := name("a", 100), name("b", 100), name("c", 100)
	longKey := "type C { " + c + ": string }\ntype B { " + b + ": C }\ntype T { " + a + ": B }\n" +
		"quota q { concurrency 1 key " + a + "." + b + "." + c + " }\n" +
		"flow f(T) { exec x(T) -> T {} exec y(T) { quota q } x -> y }"
	for _, tc := range []struct {
		name    string
		bad, ok string
		code    dsl.Code
		inOK    any
	}{
		{name: "budget name", code: dsl.CodeBadName,
			bad: "budget " + name("n", 65) + " { dimension d { hard 1 } }\nflow f() { budget " + name("n", 65) + " exec a() {} }",
			ok:  "budget " + name("n", 64) + " { dimension d { hard 1 } }\nflow f() { budget " + name("n", 64) + " exec a() {} }"},
		{name: "quota name", code: dsl.CodeBadName,
			bad: "quota " + name("n", 65) + " { concurrency 1 }\nflow f() { quota " + name("n", 65) + " exec a() {} }",
			ok:  "quota " + name("n", 64) + " { concurrency 1 }\nflow f() { quota " + name("n", 64) + " exec a() {} }"},
		{name: "dimension name", code: dsl.CodeBadName,
			bad: "budget b { dimension " + name("n", 65) + " { hard 1 } }\nflow f() { budget b exec a() {} }",
			ok:  "budget b { dimension " + name("n", 64) + " { hard 1 } }\nflow f() { budget b exec a() {} }"},
		{name: "dimensions", code: dsl.CodeBudgetLimits,
			bad: "budget b { " + dims(33) + "}\nflow f() { budget b exec a() {} }",
			ok:  "budget b { " + dims(32) + "}\nflow f() { budget b exec a() {} }"},
		{name: "quota key path", code: dsl.CodeQuotaKey, bad: longKey},
		{name: "quota reference", code: dsl.CodeQuotaKey},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.name == "quota reference" {
				// 64 + 1 + 64 + 1 + 128 = 258 bytes; 62 + 1 + 64 + 1 + 128 = 256.
				tc.bad, _ = keyed(name("n", 64), name("q", 64))
				tc.ok, tc.inOK = keyed(name("n", 62), name("q", 64))
				// ffrun refuses the plan of tc.bad, made by hand.
				var f plan.Flow
				if err := json.Unmarshal(compilePlans(t, tc.ok)[0], &f); err != nil {
					t.Fatal(err)
				}
				f.Namespace = name("n", 64)
				text, err := json.Marshal(&f)
				if err != nil {
					t.Fatal(err)
				}
				_, err = env.Client.StageFlowJSON(context.Background(), text, tc.inOK)
				if err == nil || !strings.Contains(err.Error(), "400") || !strings.Contains(err.Error(), "256") {
					t.Errorf("ffrun stages a quota reference of 258 bytes: %v", err)
				}
			}
			if tc.name == "quota key path" {
				tc.ok, tc.inOK = keyed("default", "q")
			}
			wantRefused(t, tc.bad, tc.code)
			stageFlows(t, env, tc.ok, tc.inOK)
		})
	}
}
