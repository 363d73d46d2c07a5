package server_test

import (
	"sort"
	"strings"
	"testing"

	"github.com/flowfabric/ff/runtime/server"
	"github.com/flowfabric/ff/runtime/server/servertest"
)

// Requests to paths no route has, with and without the token, with odd
// methods, and to console pages, count under a bounded set of route
// labels: no path text becomes a label.
func TestMetricsRouteLabels(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t, func(c *server.Config) { c.Token = "metrics-token-0123" })
	for _, p := range []string{"/v1/nope-a", "/v1/nope-b/x", "/nope-c", "/ui/nope-d/x"} {
		for _, tok := range []string{"", "metrics-token-0123", "wrong"} {
			rawDo(t, env, "GET", p, tok, "")
			rawDo(t, env, "PROPFIND", p, tok, "")
		}
	}
	m := scrape(t, env, "metrics-token-0123")
	var series []string
	for s := range m {
		if strings.HasPrefix(s, "ff_http_requests_total{") {
			series = append(series, s)
		}
	}
	sort.Strings(series)
	for _, s := range series {
		t.Logf("%s %v", s, m[s])
		if strings.Contains(s, "nope") {
			t.Errorf("a series names a request's path: %s", s)
		}
		if strings.Contains(s, `route="/v1/*"`) || strings.Contains(s, `route="/*"`) {
			t.Errorf("a catch-all pattern counts requests no route has: %s", s)
		}
	}
}
