package client

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/flowfabric/ff/compiler/plan"
	"github.com/flowfabric/ff/runtime/wire"
)

// chain is a plan of n execs s0 -> s1 -> ... (the client does not
// validate plans: the server does).
func chain(n int) *plan.Flow {
	f := &plan.Flow{Schema: plan.SchemaVersion, Package: "bench", Name: "chain", Namespace: "default", Lane: "default"}
	for i := range n {
		f.Execs = append(f.Execs, plan.Exec{Name: fmt.Sprintf("s%d", i), Kind: fmt.Sprintf("chain.s%d", i), Lane: "default",
			Priority: plan.PriorityDefault, Retry: plan.Retry{Attempts: 1, Backoff: plan.BackoffFixed}})
		if i > 0 {
			f.Edges = append(f.Edges, plan.Edge{From: fmt.Sprintf("s%d", i-1), To: fmt.Sprintf("s%d", i), On: plan.OnSuccess})
		}
	}
	return f
}

// stageServer answers POST /v1/flows with a run of the flow it was sent,
// handing every body it receives to got.
func stageServer(tb testing.TB, got func(body []byte)) *Client {
	tb.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil || r.Method != http.MethodPost || r.URL.Path != "/v1/flows" {
			http.Error(w, "unexpected request", http.StatusBadRequest)
			return
		}
		got(body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, `{"id":"1.run","namespace":"default","flow":"chain","state":"running","created":true}`)
	}))
	tb.Cleanup(srv.Close)
	c, err := New(srv.URL)
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

// TestStageFlowJSONBody: StageFlowJSON sends the body StageFlow sends for
// the same plan, options and input.
func TestStageFlowJSONBody(t *testing.T) {
	var bodies [][]byte
	c := stageServer(t, func(b []byte) { bodies = append(bodies, b) })
	ctx := context.Background()
	p := chain(3)
	text, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	opts := []StageOption{WithIdempotencyKey("k"), WithNamespace("ns")}
	r1, err := c.StageFlow(ctx, p, map[string]int{"n": 1}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := c.StageFlowJSON(ctx, text, map[string]int{"n": 1}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(r1, r2, cmpopts.IgnoreUnexported(Run{})); diff != "" || r2.Flow != "chain" || r2.ID != "1.run" {
		t.Errorf("runs (-StageFlow +StageFlowJSON):\n%s", diff)
	}
	var sent [2]wire.StageFlow
	for i, b := range bodies {
		if err := json.Unmarshal(b, &sent[i]); err != nil {
			t.Fatalf("body %d: %v: %s", i, err, b)
		}
	}
	if diff := cmp.Diff(sent[0], sent[1]); diff != "" {
		t.Errorf("bodies (-StageFlow +StageFlowJSON):\n%s", diff)
	}
	if !strings.HasPrefix(string(bodies[1]), `{"plan":{`) {
		t.Errorf("the plan is not the body's first member: %.40s", bodies[1])
	}

	// The server is left to refuse text that is not JSON; no text is no plan.
	for _, text := range []string{"", " \n"} {
		if _, err := c.StageFlowJSON(ctx, []byte(text), 1); err == nil {
			t.Errorf("plan text %q was sent", text)
		}
	}
	if len(bodies) != 2 {
		t.Errorf("%d requests, want 2", len(bodies))
	}
}

func TestPlanName(t *testing.T) {
	long, err := json.MarshalIndent(chain(50), "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct{ text, want string }{
		{string(long), "chain"},
		{`{"schema": 1, "package": "p", "name": "a\"b"}`, `a"b`},
		{`{"execs": [{"name": "inner"}], "name": "outer"}`, "outer"},
		{`{"name": 5}`, ""},
		{`{"schema": 1}`, ""},
		{`[{"name": "x"}]`, ""},
		{`{"schema": `, ""},
		{``, ""},
	}
	for _, tt := range tests {
		if got := planName([]byte(tt.text)); got != tt.want {
			t.Errorf("planName(%.40q) = %q, want %q", tt.text, got, tt.want)
		}
	}
}

// BenchmarkStage measures the client's side of staging a 10-exec chain:
// StageFlow encodes the plan on every call, StageFlowJSON sends the text.
func BenchmarkStage(b *testing.B) {
	c := stageServer(b, func([]byte) {})
	ctx := context.Background()
	p := chain(10)
	text, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		b.Fatal(err)
	}
	b.Run("StageFlow", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := c.StageFlow(ctx, p, 1); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("StageFlowJSON", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := c.StageFlowJSON(ctx, text, 1); err != nil {
				b.Fatal(err)
			}
		}
	})
}
