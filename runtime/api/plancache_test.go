package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/labstack/echo/v4"

	"github.com/flowfabric/ff/compiler/plan"
	"github.com/flowfabric/ff/runtime/wire"
)

// recordingFlows is a FlowService that records the plans it is asked to
// stage and answers a fixed run; the store's side of staging is tested in
// runtime/server.
type recordingFlows struct {
	FlowService // only StageFlow is called
	got         []FlowRequest
}

func (r *recordingFlows) StageFlow(_ context.Context, req FlowRequest) (*wire.FlowRun, bool, error) {
	r.got = append(r.got, req)
	return &wire.FlowRun{ID: "1.run", Flow: req.Flow.Name, State: wire.RunRunning}, true, nil
}

// chainPlan is a valid flow s0 -> s1 -> ... of n execs taking and
// returning json.
func chainPlan(name string, n int) *plan.Flow {
	js := &plan.TypeRef{Kind: plan.KindJSON}
	f := &plan.Flow{Schema: plan.SchemaVersion, Name: name, Namespace: "default", Lane: "default",
		Input: js, Output: js, Result: fmt.Sprintf("s%d", n-1)}
	for i := range n {
		x := plan.Exec{Name: fmt.Sprintf("s%d", i), Kind: fmt.Sprintf("%s.s%d", name, i), Lane: "default",
			Priority: plan.PriorityDefault, Input: js, Output: js, InputFrom: plan.InputFlow, Join: plan.Join{Kind: plan.JoinAll},
			Retry: plan.Retry{Attempts: 1, Backoff: plan.BackoffFixed}}
		if i > 0 {
			prev := fmt.Sprintf("s%d", i-1)
			x.InputFrom, x.InputExec, x.Upstreams = plan.InputExec, prev, []string{prev}
			f.Edges = append(f.Edges, plan.Edge{From: prev, To: x.Name, On: plan.OnSuccess})
		}
		f.Execs = append(f.Execs, x)
	}
	return f
}

func planBody(t testing.TB, f *plan.Flow, rest string) string {
	t.Helper()
	p, err := json.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	return `{"plan": ` + string(p) + rest + `}`
}

func newTestFlows(t testing.TB) (*flows, *recordingFlows) {
	t.Helper()
	rec := &recordingFlows{}
	return &flows{s: &Server{cfg: Config{}.withDefaults(), echo: echo.New()}, svc: rec}, rec
}

// post runs the stage route on body and returns the status and answer,
// or the *Error the route returned.
func post(f *flows, body string) (int, string, *Error) {
	req := httptest.NewRequest(http.MethodPost, "/v1/flows", strings.NewReader(body))
	w := httptest.NewRecorder()
	if err := f.stage(f.s.echo.NewContext(req, w)); err != nil {
		return 0, "", asError(err)
	}
	return w.Code, w.Body.String(), nil
}

// TestStagePlanCache: a plan staged again comes from the cache, as the
// same value; a hit answers as the miss did; different plans are
// different entries.
func TestStagePlanCache(t *testing.T) {
	f, rec := newTestFlows(t)
	chain := chainPlan("chain", 10)
	body := planBody(t, chain, `, "input": 1`)
	var answers []string
	for range 3 {
		status, out, e := post(f, body)
		if e != nil || status != http.StatusCreated {
			t.Fatalf("stage: %d %v", status, e)
		}
		answers = append(answers, out)
	}
	if answers[1] != answers[0] || answers[2] != answers[0] {
		t.Errorf("answers differ between the miss and the hits: %q", answers)
	}
	if rec.got[1].Flow != rec.got[0].Flow || rec.got[2].Flow != rec.got[0].Flow {
		t.Error("a repeat of the plan was decoded again, not taken from the cache")
	}
	for i, r := range rec.got {
		if !r.Shared {
			t.Errorf("request %d: a cached plan is not marked shared", i)
		}
	}
	if diff := cmp.Diff(chain, rec.got[0].Flow); diff != "" {
		t.Errorf("staged plan (-want +got):\n%s", diff)
	}
	for _, r := range rec.got {
		if string(r.Input) != "1" {
			t.Errorf("input %q, want 1", r.Input)
		}
	}

	// Another plan (one more exec, or only another name) is its own entry.
	other := chainPlan("chain", 11)
	renamed := chainPlan("chain2", 10)
	for _, p := range []*plan.Flow{other, renamed} {
		if _, _, e := post(f, planBody(t, p, `, "input": 2`)); e != nil {
			t.Fatal(e)
		}
		got := rec.got[len(rec.got)-1].Flow
		if diff := cmp.Diff(p, got); diff != "" {
			t.Errorf("plan %s staged as (-want +got):\n%s", p.Name, diff)
		}
	}
	if n := f.plans.len(); n != 3 {
		t.Errorf("%d plans cached, want 3", n)
	}
	// Namespace, idempotency key and input are per run, not part of the key.
	if _, _, e := post(f, planBody(t, chain, `, "input": 3, "namespace": "ns2", "idempotency_key": "k"`)); e != nil {
		t.Fatal(e)
	}
	last := rec.got[len(rec.got)-1]
	if last.Flow != rec.got[0].Flow || last.Namespace != "ns2" || last.IdempotencyKey != "k" || string(last.Input) != "3" {
		t.Errorf("repeat with options: %+v", last)
	}
}

// TestStageBadPlanNotCached: a refused plan is refused the same way every
// time, with the error decoding wire.StageFlow gives, and never cached.
func TestStageBadPlanNotCached(t *testing.T) {
	cyclic := chainPlan("cyc", 3)
	cyclic.Edges = append(cyclic.Edges, plan.Edge{From: "s2", To: "s0", On: plan.OnSuccess})
	schema := chainPlan("old", 2)
	schema.Schema = plan.SchemaVersion + 1
	tests := []struct {
		name, body  string
		code, field string
	}{
		{"cyclic", planBody(t, cyclic, ""), wire.CodeValidation, "plan.edges"},
		{"schema", planBody(t, schema, ""), wire.CodeValidation, "plan.schema"},
		{"no plan", `{"input": 1}`, wire.CodeValidation, "plan"},
		{"null plan", `{"plan": null}`, wire.CodeValidation, "plan"},
		{"plan type", `{"plan": {"name": "x", "execs": 5}}`, wire.CodeInvalidJSON, "plan.execs"},
		{"exec field type", `{"plan": {"name": "x", "execs": [{"name": 1}]}}`, wire.CodeInvalidJSON, "plan.execs[0].name"},
		{"unknown plan field", `{"plan": {"name": "x", "nope": 1}}`, wire.CodeUnknownField, "plan.nope"},
		{"unknown field", planBody(t, chainPlan("ok", 2), `, "inputs": 1`), wire.CodeUnknownField, "inputs"},
		{"syntax", `{"plan": {"name": }}`, wire.CodeInvalidJSON, ""},
		{"trailing", planBody(t, chainPlan("ok", 2), "") + "x", wire.CodeInvalidJSON, ""},
		{"input type", planBody(t, chainPlan("ok", 2), `, "input": 1, "namespace": 5`), wire.CodeInvalidJSON, "namespace"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, rec := newTestFlows(t)
			// The error of decoding and checking wire.StageFlow as a whole.
			var want *Error
			var req wire.StageFlow
			if err := decodeBody([]byte(tt.body), false, &req); err != nil {
				want = asError(err)
			} else {
				want = checkPlan(req.Plan)
			}
			if want == nil {
				t.Fatal("the body is valid")
			}
			for i := range 3 {
				_, _, got := post(f, tt.body)
				if diff := cmp.Diff(want, got); diff != "" {
					t.Fatalf("attempt %d (-want +got):\n%s", i, diff)
				}
				field, _ := got.Details["field"].(string)
				if got.Code != tt.code || field != tt.field {
					t.Fatalf("attempt %d: %s field %q (%s), want %s field %q", i, got.Code, field, got.Message, tt.code, tt.field)
				}
			}
			if n := f.plans.len(); n != 0 || len(rec.got) != 0 {
				t.Fatalf("%d plans cached, %d staged after refusals", n, len(rec.got))
			}
		})
	}
}

// TestStageDuplicatePlanKey: a body naming the plan twice is decoded as
// wire.StageFlow decodes it (the second object merged into the first), not
// taken as either text.
func TestStageDuplicatePlanKey(t *testing.T) {
	f, rec := newTestFlows(t)
	p, err := json.Marshal(chainPlan("dup", 2))
	if err != nil {
		t.Fatal(err)
	}
	body := `{"plan": ` + string(p) + `, "plan": {"namespace": "other"}, "input": 1}`
	var want wire.StageFlow
	if err := json.Unmarshal([]byte(body), &want); err != nil {
		t.Fatal(err)
	}
	if _, _, e := post(f, body); e != nil {
		t.Fatal(e)
	}
	if diff := cmp.Diff(want.Plan, rec.got[0].Flow); diff != "" {
		t.Errorf("plan (-want +got):\n%s", diff)
	}
	if n := f.plans.len(); n != 0 {
		t.Errorf("%d plans cached", n)
	}
}

// TestPlanCacheBounds: the cache holds at most planCacheMaxEntries plans
// and none larger than planCacheMaxBytes.
func TestPlanCacheBounds(t *testing.T) {
	f, rec := newTestFlows(t)
	for i := range planCacheMaxEntries + 10 {
		if _, _, e := post(f, planBody(t, chainPlan(fmt.Sprintf("f%d", i), 2), `, "input": 1`)); e != nil {
			t.Fatal(e)
		}
	}
	if n := f.plans.len(); n != planCacheMaxEntries {
		t.Errorf("%d plans cached, want %d", n, planCacheMaxEntries)
	}
	for i, r := range rec.got {
		if want := fmt.Sprintf("f%d", i); r.Flow.Name != want {
			t.Fatalf("run %d staged flow %s, want %s", i, r.Flow.Name, want)
		}
	}

	// Plans just under the size limit: the total bound keeps fewer.
	heavy, _ := newTestFlows(t)
	for i := range 2 * planCacheMaxTotalBytes / planCacheMaxBytes {
		p := chainPlan(fmt.Sprintf("h%d", i), 2)
		p.Package = strings.Repeat("p", planCacheMaxBytes-2048)
		if _, _, e := post(heavy, planBody(t, p, `, "input": 1`)); e != nil {
			t.Fatal(e)
		}
	}
	total := 0
	for k := range heavy.plans.plans {
		total += len(k)
	}
	if n := heavy.plans.len(); n == 0 || total != heavy.plans.bytes || total > planCacheMaxTotalBytes {
		t.Errorf("%d plans of %d bytes cached (counted %d), the limit is %d", n, total, heavy.plans.bytes, planCacheMaxTotalBytes)
	}

	big, rec := newTestFlows(t)
	large := chainPlan("large", 2)
	large.Package = strings.Repeat("p", planCacheMaxBytes)
	body := planBody(t, large, `, "input": 1`)
	for range 2 {
		if _, _, e := post(big, body); e != nil {
			t.Fatal(e)
		}
	}
	if n := big.plans.len(); n != 0 || rec.got[0].Flow == rec.got[1].Flow {
		t.Errorf("a plan over %d bytes was cached (%d entries)", planCacheMaxBytes, n)
	}
	if rec.got[0].Shared || rec.got[1].Shared {
		t.Error("a plan decoded for one run is marked shared")
	}
}

// countingFlows is a FlowService that checks the plans it is asked to
// stage, from many goroutines.
type countingFlows struct {
	FlowService // only StageFlow is called
	mu          sync.Mutex
	byName      map[string]int
}

func (c *countingFlows) StageFlow(_ context.Context, req FlowRequest) (*wire.FlowRun, bool, error) {
	c.mu.Lock()
	c.byName[req.Flow.Name]++
	c.mu.Unlock()
	return &wire.FlowRun{ID: "1.run", Flow: req.Flow.Name, State: wire.RunRunning}, true, nil
}

// TestStageConcurrent: goroutines staging a few plans at once each get
// their own plan (run with -race).
func TestStageConcurrent(t *testing.T) {
	svc := &countingFlows{byName: map[string]int{}}
	f := &flows{s: &Server{cfg: Config{}.withDefaults(), echo: echo.New()}, svc: svc}
	bodies := make([]string, 4)
	for i := range bodies {
		bodies[i] = planBody(t, chainPlan(fmt.Sprintf("c%d", i), 3+i), `, "input": 1`)
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 20 {
				k := (g + i) % len(bodies)
				status, out, e := post(f, bodies[k])
				if e != nil || status != http.StatusCreated || !strings.Contains(out, fmt.Sprintf(`"flow":"c%d"`, k)) {
					t.Errorf("stage %d: %d %s %v", k, status, out, e)
					return
				}
			}
		})
	}
	wg.Wait()
	if diff := cmp.Diff(map[string]int{"c0": 40, "c1": 40, "c2": 40, "c3": 40}, svc.byName); diff != "" {
		t.Errorf("runs by flow (-want +got):\n%s", diff)
	}
	if n := f.plans.len(); n != len(bodies) {
		t.Errorf("%d plans cached, want %d", n, len(bodies))
	}
}

// TestStageBodyMatchesWire: the body the stage route decodes has the
// fields of wire.StageFlow, with the same JSON names.
func TestStageBodyMatchesWire(t *testing.T) {
	tags := func(v any) []string {
		var out []string
		typ := reflect.TypeOf(v)
		for i := range typ.NumField() {
			out = append(out, typ.Field(i).Name+" "+typ.Field(i).Tag.Get("json"))
		}
		return out
	}
	if diff := cmp.Diff(tags(wire.StageFlow{}), tags(stageBody{})); diff != "" {
		t.Fatalf("fields (-wire +stageBody):\n%s", diff)
	}
}

// BenchmarkStage measures the stage route on the plan of a 10-exec chain
// (without the FlowService): "before" is the decoding and validation the
// route did on every call before it cached plans.
func BenchmarkStage(b *testing.B) {
	body := planBody(b, chainPlan("chain", 10), `, "input": 1`)
	b.Run("before", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var req wire.StageFlow
			if err := decodeBody([]byte(body), false, &req); err != nil {
				b.Fatal(err)
			}
			if e := checkPlan(req.Plan); e != nil {
				b.Fatal(e)
			}
		}
	})
	for _, cached := range []bool{false, true} {
		b.Run(fmt.Sprintf("route/cached=%v", cached), func(b *testing.B) {
			f, rec := newTestFlows(b)
			b.ReportAllocs()
			for b.Loop() {
				if !cached {
					f.plans = planCache{}
				}
				rec.got = rec.got[:0]
				if _, _, e := post(f, body); e != nil {
					b.Fatal(e)
				}
			}
		})
	}
}

// FuzzStage: whatever the body, the stage route stages what decoding it as
// wire.StageFlow gives, or refuses it with the same error, and caches only
// plans that validated.
func FuzzStage(f *testing.F) {
	p, err := json.Marshal(chainPlan("chain", 3))
	if err != nil {
		f.Fatal(err)
	}
	text := string(p)
	for _, body := range []string{
		`{"plan": ` + text + `, "input": 1}`,
		`{"input": {"plan": "}"}, "plan": ` + text + `, "namespace": "ns", "idempotency_key": "k"}`,
		`{"plan": ` + text + `, "plan": {"name": "other"}, "input": 1}`,
		`{"plan": ` + text + `, "PLAN": null, "input": 1}`,
		`{"plan": ` + text + `, "input": 1, "inputs": 2}`,
		`{"plan": ` + text + `, "input": 1} {}`,
		`{"plan": ` + strings.Replace(text, `"s1"`, `"s0"`, 1) + `, "input": 1}`,
		`{"plan": ` + strings.Replace(text, `"execs":[`, `"execs":[1,`, 1) + `, "input": 1}`,
		`{"plan": ` + strings.Replace(text, `"name":"chain"`, `"name":"chain","x":1`, 1) + `, "input": 1}`,
		`{"plan": {}}`,
		`{"plan": [], "input": 1}`,
		`{"plan": null}`,
		`{"input": 1}`,
		`{"plan": ` + text + `, "input": 1`,
	} {
		f.Add(body)
	}
	fl, rec := newTestFlows(f)
	f.Fuzz(func(t *testing.T, body string) {
		rec.got = rec.got[:0]
		var want wire.StageFlow
		var wantErr *Error
		if err := decodeBody([]byte(body), false, &want); err != nil {
			wantErr = asError(packageHint([]byte(body), err)) // as the route words it
		} else if wantErr = checkPlan(want.Plan); wantErr == nil {
			wantErr = checkInput(want.Plan, want.Input)
			if wantErr == nil && want.Namespace != "" {
				wantErr = checkName("namespace", want.Namespace)
			}
			if wantErr == nil {
				wantErr = checkIdemKey("idempotency_key", want.IdempotencyKey)
			}
		}
		for range 2 { // a miss, then maybe a hit
			_, _, got := post(fl, body)
			if diff := cmp.Diff(wantErr, got); diff != "" {
				t.Fatalf("%s: error (-want +got):\n%s", body, diff)
			}
		}
		if wantErr != nil {
			return
		}
		for _, r := range rec.got {
			gotReq := wire.StageFlow{Plan: r.Flow, Input: r.Input, Namespace: r.Namespace, IdempotencyKey: r.IdempotencyKey}
			if diff := cmp.Diff(want, gotReq); diff != "" {
				t.Fatalf("%s: staged (-want +got):\n%s", body, diff)
			}
		}
		for _, cached := range fl.plans.plans {
			if e := checkPlan(cached.flow); e != nil {
				t.Fatalf("an invalid plan was cached: %v", e)
			}
		}
	})
}

// A template's plan is shared by every run staged from it.
func TestStageTemplateShared(t *testing.T) {
	f, rec := newTestFlows(t)
	f.templates = map[string]*plan.Flow{"chain": chainPlan("chain", 3)}
	req := httptest.NewRequest(http.MethodPost, "/v1/templates/chain/runs", strings.NewReader(`{"input": 1}`))
	req.Header.Set(echo.HeaderContentType, echo.MIMEApplicationJSON)
	c := f.s.echo.NewContext(req, httptest.NewRecorder())
	c.SetParamNames("name")
	c.SetParamValues("chain")
	if err := f.stageTemplate(c); err != nil {
		t.Fatal(err)
	}
	if len(rec.got) != 1 || !rec.got[0].Shared || rec.got[0].Flow != f.templates["chain"] {
		t.Fatalf("staged %+v, want the template's plan, shared", rec.got)
	}
}
