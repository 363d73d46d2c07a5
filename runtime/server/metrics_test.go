package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flowfabric/ff/lua"
	"github.com/flowfabric/ff/runtime/internal/valkeytest"
	"github.com/flowfabric/ff/runtime/metrics"
	"github.com/flowfabric/ff/runtime/server"
	"github.com/flowfabric/ff/runtime/server/servertest"
	"github.com/flowfabric/ff/runtime/wire"
	"github.com/flowfabric/ff/runtime/worker"
)

// scrape reads GET /metrics and returns its samples by series text
// (`name{labels}` as written), checking the page's shape on the way: the
// content type, a HELP and TYPE line before every family's samples, and
// each family in one block.
func scrape(t *testing.T, env *servertest.Env, token string) map[string]float64 {
	t.Helper()
	r := env.Do(t, "GET", "/metrics", map[string]string{"Authorization": "Bearer " + token}, "")
	if r.Status != 200 {
		t.Fatalf("GET /metrics: %d %s", r.Status, r.Body)
	}
	req, err := http.NewRequest("GET", env.URL+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if ct := res.Header.Get("Content-Type"); ct != metrics.ContentType {
		t.Errorf("Content-Type %q, want %q", ct, metrics.ContentType)
	}
	samples := map[string]float64{}
	typed := map[string]bool{}
	var family string
	sc := bufio.NewScanner(strings.NewReader(r.Body))
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, "# TYPE "); ok {
			name, _, _ := strings.Cut(rest, " ")
			if typed[name] {
				t.Fatalf("family %s written twice", name)
			}
			typed[name], family = true, name
			continue
		}
		if strings.HasPrefix(line, "# HELP ") {
			continue
		}
		series, value, ok := strings.Cut(line, " ")
		if i := strings.Index(line, "} "); i >= 0 {
			series, value, ok = line[:i+1], line[i+2:], true
		}
		if !ok {
			t.Fatalf("malformed line %q", line)
		}
		name, _, _ := strings.Cut(series, "{")
		if family == "" || !strings.HasPrefix(name, family) {
			t.Fatalf("sample %q outside its family block (after TYPE %s)", line, family)
		}
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		samples[series] = v
	}
	return samples
}

func TestMetrics(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t, func(c *server.Config) { c.Token = "metrics-token-0123" })
	ctx := ctxT(t)
	c := env.Client

	if r := rawDo(t, env, "GET", "/metrics", "", ""); r.status != 401 || r.err.Code != wire.CodeUnauthorized {
		t.Fatalf("GET /metrics without the token: %d %s", r.status, r.body)
	}
	for range 3 {
		if _, _, err := c.CreateExecution(ctx, wire.CreateExecution{Kind: "k", Lane: "m1"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := c.CreateExecution(ctx, wire.CreateExecution{Kind: "k", Lane: "m1", DelayMs: 3_600_000}); err != nil {
		t.Fatal(err)
	}
	flows := compileFlows(t, `
flow two() {
  lane "m2"
  exec a() {}
  exec b() {}
  a -> b
}
`)
	run, err := c.StageFlow(ctx, flows["two"], nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Heartbeat(ctx, wire.WorkerHeartbeat{WorkerID: "w1", Lanes: []string{"m1"}}); err != nil {
		t.Fatal(err)
	}
	// One task of m1 runs, another ends.
	tasks, err := c.Claim(ctx, wire.ClaimRequest{WorkerID: "w1", Lanes: []string{"m1"}, Max: 2})
	if err != nil || len(tasks) != 2 {
		t.Fatalf("claim: %d tasks, %v", len(tasks), err)
	}
	done := wire.Lease{ExecutionID: tasks[0].ExecutionID, LeaseID: tasks[0].LeaseID, Epoch: tasks[0].Epoch}
	res, err := c.Complete(ctx, wire.CompleteRequest{Completions: []wire.Completion{{Lease: done, Output: json.RawMessage(`1`)}}})
	if err != nil || len(res) != 1 || !res[0].OK {
		t.Fatalf("complete: %+v, %v", res, err)
	}

	// The same lease again, with another output: refused as stale.
	res, err = c.Complete(ctx, wire.CompleteRequest{Completions: []wire.Completion{{Lease: done, Output: json.RawMessage(`2`)}}})
	if err != nil || len(res) != 1 || res[0].OK || res[0].Error == nil || res[0].Error.Code != wire.CodeStaleLease {
		t.Fatalf("second complete: %+v, %v", res, err)
	}

	m := scrape(t, env, "metrics-token-0123")
	for series, want := range map[string]float64{
		`ff_valkey_up`: 1,
		`ff_executions{namespace="default",lane="m1",state="eligible"}`:       1,
		`ff_executions{namespace="default",lane="m1",state="delayed"}`:        1,
		`ff_executions{namespace="default",lane="m1",state="terminal"}`:       1,
		`ff_executions{namespace="default",lane="m1",state="pending"}`:        0,
		`ff_executions{namespace="default",lane="m1",state="blocked_route"}`:  0,
		`ff_executions{namespace="default",lane="m2",state="delayed"}`:        0,
		`ff_executions{namespace="default",lane="m2",state="terminal"}`:       0,
		`ff_executions{namespace="default",lane="m2",state="eligible"}`:       1,
		`ff_executions{namespace="default",lane="m2",state="pending"}`:        1,
		`ff_executions{namespace="default",lane="m2",state="blocked_route"}`:  0,
		`ff_executions{namespace="default",lane="m2",state="blocked_budget"}`: 0,
		`ff_executions{namespace="default",lane="m2",state="blocked_quota"}`:  0,
		`ff_executions_running`:                                                                                           1,
		`ff_workers_connected{namespace="default"}`:                                                                       1,
		`ff_http_requests_total{method="POST",route="/v1/executions",code="201"}`:                                         4,
		`ff_http_requests_total{method="POST",route="/v1/flows",code="201"}`:                                              1,
		`ff_http_requests_total{method="POST",route="/v1/worker/claim",code="200"}`:                                       1,
		`ff_http_requests_total{method="GET",route="/metrics",code="401"}`:                                                1,
		`ff_tasks_granted_total{how="claim"}`:                                                                             2,
		`ff_reports_total{report="complete",result="ok"}`:                                                                 1,
		`ff_reports_total{report="complete",result="stale_lease"}`:                                                        1,
		`ff_http_request_duration_seconds_count{method="POST",route="/v1/executions"}`:                                    4,
		`ff_http_request_duration_seconds_bucket{method="POST",route="/v1/executions",le="+Inf"}`:                         4,
		`ff_build_info{version="unknown",library_version="` + lua.Version() + `",go_version="` + runtime.Version() + `"}`: 1,
	} {
		got, ok := m[series]
		if !ok {
			t.Errorf("no series %s", series)
			continue
		}
		if got != want {
			t.Errorf("%s = %v, want %v", series, got, want)
		}
	}
	if m[`ff_go_goroutines`] < 1 || m[`ff_process_start_time_seconds`] < float64(time.Now().Add(-time.Hour).Unix()) {
		t.Errorf("process gauges: goroutines %v, start %v", m[`ff_go_goroutines`], m[`ff_process_start_time_seconds`])
	}

	// A lane with nothing left in any index (its executions deleted by
	// retention; its name stays in the partition's lane set) has no series.
	vc := valkeytest.Client(t, env.Config.ValkeyAddr)
	if err := vc.Do(ctx, vc.B().Sadd().Key(env.Config.KeyPrefix+"ff:{fp:0}:lanes").Member("default:ghost").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	for series := range scrape(t, env, "metrics-token-0123") {
		if strings.Contains(series, `lane="ghost"`) {
			t.Errorf("series %s of a lane with nothing in it", series)
		}
	}

	// An unknown path counts as one series, not one per path; ids never
	// become label values.
	for _, p := range []string{"/nope/1", "/nope/2"} {
		rawDo(t, env, "GET", p, "metrics-token-0123", "")
	}
	rawDo(t, env, "GET", "/v1/executions/"+tasks[0].ExecutionID, "metrics-token-0123", "")
	m = scrape(t, env, "metrics-token-0123")
	if got := m[`ff_http_requests_total{method="GET",route="unmatched",code="404"}`]; got != 2 {
		t.Errorf("unmatched 404s = %v, want 2", got)
	}
	if got := m[`ff_http_requests_total{method="GET",route="/v1/executions/:id",code="200"}`]; got != 1 {
		t.Errorf("GET /v1/executions/:id = %v, want 1", got)
	}
	for series := range m {
		if strings.Contains(series, tasks[0].ExecutionID) || strings.Contains(series, "/nope") {
			t.Errorf("series %s holds a request's path", series)
		}
	}

	// A worker runs the flow: b is handed off with a's completion.
	echo := func(_ context.Context, task *worker.Task) (json.RawMessage, error) {
		return json.RawMessage(`null`), nil
	}
	runWorker(t, env, worker.Config{Name: "mw", Lanes: []string{"m2"}}, map[string]worker.Handler{"two.a": echo, "two.b": echo})
	if _, err := run.Result(ctx); err != nil {
		t.Fatalf("run: %v", err)
	}
	m = scrape(t, env, "metrics-token-0123")
	if got := m[`ff_tasks_granted_total{how="handoff"}`]; got != 1 {
		t.Errorf("hand-off grants = %v, want 1 (b with a's completion)", got)
	}
	if got := m[`ff_tasks_granted_total{how="claim"}`]; got != 3 {
		t.Errorf("claim grants = %v, want 3 (two by hand, then a)", got)
	}

	// Every scanner's counters exist from the start (rate() sees the first
	// failure), and they count passes (FastScanners tick every 50ms).
	for _, sc := range []string{"lease_expiry", "delayed", "attempt_timeout", "deadline", "retention", "unblock", "budget_reset", "quota_release", "quota_reconcile", "library", "run_resume"} {
		for _, f := range []string{"ff_scanner_ticks_total", "ff_scanner_tick_errors_total", "ff_scanner_processed_total"} {
			if _, ok := m[f+`{scanner="`+sc+`"}`]; !ok {
				t.Errorf("no series %s{scanner=%q}", f, sc)
			}
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		m = scrape(t, env, "metrics-token-0123")
		if m[`ff_scanner_ticks_total{scanner="lease_expiry"}`] > 0 && m[`ff_scanner_ticks_total{scanner="delayed"}`] > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no scanner ticks counted in 10s: lease_expiry %v, delayed %v",
				m[`ff_scanner_ticks_total{scanner="lease_expiry"}`], m[`ff_scanner_ticks_total{scanner="delayed"}`])
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// With Valkey gone, the page still answers: ff_valkey_up is 0, no queue
// gauge pretends to be empty, and the scanners' failed passes count.
func TestMetricsWithoutValkey(t *testing.T) {
	t.Parallel()
	vk, env := startOnOwnValkey(t)
	if _, _, err := env.Client.CreateExecution(ctxT(t), wire.CreateExecution{Kind: "k"}); err != nil {
		t.Fatal(err)
	}
	if m := scrape(t, env, ""); m[`ff_valkey_up`] != 1 || m[`ff_executions{namespace="default",lane="default",state="eligible"}`] != 1 {
		t.Fatalf("with valkey up: up %v, eligible %v", m[`ff_valkey_up`], m[`ff_executions{namespace="default",lane="default",state="eligible"}`])
	}
	vk.Stop()
	m := scrape(t, env, "")
	if got, ok := m[`ff_valkey_up`]; !ok || got != 0 {
		t.Errorf("ff_valkey_up = %v (present %v), want 0", got, ok)
	}
	for series := range m {
		if strings.HasPrefix(series, "ff_executions") || strings.HasPrefix(series, "ff_workers") {
			t.Errorf("series %s written without Valkey", series)
		}
	}
	if _, ok := m[`ff_http_requests_total{method="POST",route="/v1/executions",code="201"}`]; !ok {
		t.Error("process counters missing without Valkey")
	}
	// The scanners' failed passes are counted.
	deadline := time.Now().Add(10 * time.Second)
	for m[`ff_scanner_tick_errors_total{scanner="lease_expiry"}`] == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no failed lease_expiry pass counted in 10s without Valkey")
		}
		time.Sleep(50 * time.Millisecond)
		m = scrape(t, env, "")
	}
}

// TestMetricsInFlightAndWaitingClaims: a long-poll claim parked for work
// shows in ff_claims_waiting and in ff_http_requests_in_flight (with the
// scrape itself), and leaves both once it is answered.
func TestMetricsInFlightAndWaitingClaims(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	ctx := ctxT(t)
	if m := scrape(t, env, ""); m["ff_claims_waiting"] != 0 || m["ff_http_requests_in_flight"] < 1 {
		t.Fatalf("idle: waiting %v, in flight %v (want 0 and at least the scrape)", m["ff_claims_waiting"], m["ff_http_requests_in_flight"])
	}
	done := make(chan error, 1)
	go func() {
		_, err := env.Client.Claim(ctx, wire.ClaimRequest{WorkerID: "w", WaitMs: 20000})
		done <- err
	}()
	var m map[string]float64
	for deadline := time.Now().Add(10 * time.Second); ; {
		if m = scrape(t, env, ""); m["ff_claims_waiting"] == 1 || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if m["ff_claims_waiting"] != 1 || m["ff_http_requests_in_flight"] != 2 {
		t.Fatalf("a parked claim: waiting %v, in flight %v (want 1 and 2)", m["ff_claims_waiting"], m["ff_http_requests_in_flight"])
	}
	if _, _, err := env.Client.CreateExecution(ctx, wire.CreateExecution{Kind: "k"}); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// The answer may reach the client a moment before the handler returns.
	for deadline := time.Now().Add(10 * time.Second); ; {
		if m = scrape(t, env, ""); m["ff_claims_waiting"] == 0 && m["ff_http_requests_in_flight"] == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the claim: waiting %v, in flight %v", m["ff_claims_waiting"], m["ff_http_requests_in_flight"])
		}
		time.Sleep(10 * time.Millisecond)
	}
}
