package server_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/flowfabric/ff/runtime/internal/valkeytest"
	"github.com/flowfabric/ff/runtime/server"
	"github.com/flowfabric/ff/runtime/server/servertest"
	"github.com/flowfabric/ff/runtime/wire"
)

// spec/api.md, Metrics: GET /metrics "always answers 200: when Valkey
// cannot be read, ff_valkey_up is 0". A Valkey that hangs (here: every
// client paused) must not hang the scrape past Prometheus' default
// scrape timeout (10 s): the page bounds its Valkey reads (5 s).
func TestMetricsScrapeAnswersWhileValkeyHangs(t *testing.T) {
	t.Parallel()
	vk, env := startOnOwnValkey(t)
	if _, _, err := env.Client.CreateExecution(ctxT(t), wire.CreateExecution{Kind: "k"}); err != nil {
		t.Fatal(err)
	}
	if m := scrape(t, env, ""); m[`ff_valkey_up`] != 1 {
		t.Fatalf("with valkey up: ff_valkey_up %v", m[`ff_valkey_up`])
	}
	admin := valkeytest.Client(t, vk.Addr)
	if err := admin.Do(context.Background(), admin.B().ClientPause().Timeout(25000).All().Build()).Error(); err != nil {
		t.Fatal(err)
	}

	hc := &http.Client{Timeout: 10 * time.Second}
	start := time.Now()
	res, err := hc.Get(env.URL + "/metrics")
	if err != nil {
		t.Fatalf("GET /metrics while Valkey hangs: no answer after %v: %v", time.Since(start).Round(time.Millisecond), err)
	}
	body, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil {
		t.Fatalf("GET /metrics while Valkey hangs: body cut after %v: %v", time.Since(start).Round(time.Millisecond), err)
	}
	if res.StatusCode != 200 || !strings.Contains(string(body), "\nff_valkey_up 0\n") {
		t.Fatalf("GET /metrics while Valkey hangs: %d after %v, ff_valkey_up 0 missing:\n%s", res.StatusCode, time.Since(start), body)
	}
	t.Logf("answered in %v", time.Since(start).Round(time.Millisecond))
}

// An unknown path under /v1 counts as route "unmatched", token or not:
// with a token, Echo routes unknown /v1 paths to a catch-all not-found
// handler whose pattern ("/v1/*") must not become a series of its own.
func TestMetricsUnknownV1PathCountsAsUnmatched(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t, func(c *server.Config) { c.Token = "metrics-token-0123" })
	for _, p := range []string{"/v1/nope", "/v1/executions/x/nope"} {
		if r := rawDo(t, env, "GET", p, "metrics-token-0123", ""); r.status != 404 {
			t.Fatalf("GET %s: %d %s", p, r.status, r.body)
		}
	}
	m := scrape(t, env, "metrics-token-0123")
	if got := m[`ff_http_requests_total{method="GET",route="unmatched",code="404"}`]; got != 2 {
		var routes []string
		for series := range m {
			if strings.HasPrefix(series, `ff_http_requests_total{method="GET"`) {
				routes = append(routes, series)
			}
		}
		t.Fatalf("404s of unknown /v1 paths counted as route=\"unmatched\": %v, want 2; GET series: %v", got, routes)
	}
}

// 405 and 413 answers are counted under the route pattern the path
// matched, with their status (spec/api.md, Metrics: ff_http_requests_total
// counts requests answered by method, route pattern and code).
func TestMetricsCounts405And413(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t, func(c *server.Config) { c.Token = "metrics-token-0123"; c.BodyLimit = 1024 })
	if r := rawDo(t, env, "DELETE", "/v1/worker/claim", "metrics-token-0123", ""); r.status != 405 {
		t.Fatalf("DELETE /v1/worker/claim: %d %s", r.status, r.body)
	}
	big := `{"kind":"k","input":"` + strings.Repeat("x", 4096) + `"}`
	if r := rawDo(t, env, "POST", "/v1/executions", "metrics-token-0123", big); r.status != 413 {
		t.Fatalf("POST /v1/executions over the body limit: %d %s", r.status, r.body)
	}
	m := scrape(t, env, "metrics-token-0123")
	for series, want := range map[string]float64{
		`ff_http_requests_total{method="DELETE",route="/v1/worker/claim",code="405"}`: 1,
		`ff_http_requests_total{method="POST",route="/v1/executions",code="413"}`:     1,
	} {
		if got := m[series]; got != want {
			var have []string
			for s := range m {
				if strings.HasPrefix(s, "ff_http_requests_total") {
					have = append(have, s)
				}
			}
			t.Errorf("%s = %v, want %v; have %v", series, got, want, have)
		}
	}
}
