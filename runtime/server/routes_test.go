package server_test

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/flowfabric/ff/runtime/server/servertest"
)

// TestRouteIndexMatchesRouter: every route the router serves is in the
// route index of spec/api.md, and every route of the index is served.
// Each index row names a section that exists.
func TestRouteIndexMatchesRouter(t *testing.T) {
	data, err := os.ReadFile("../../spec/api.md")
	if err != nil {
		t.Fatal(err)
	}
	spec := string(data)
	start := strings.Index(spec, "### Route index\n")
	if start < 0 {
		t.Fatal(`spec/api.md has no "### Route index" section`)
	}
	section := spec[start+len("### Route index\n"):]
	if end := strings.Index(section, "\n#"); end >= 0 {
		section = section[:end]
	}
	type route struct{ method, path string }
	var documented []route
	row := regexp.MustCompile("(?m)^\\| ([A-Z]+) \\| `([^`]+)` \\| ([^|]+) \\|$")
	for _, m := range row.FindAllStringSubmatch(section, -1) {
		documented = append(documented, route{m[1], m[2]})
		heading := regexp.MustCompile(`(?m)^#{2,3} ` + regexp.QuoteMeta(strings.TrimSpace(m[3])) + `( —|$)`)
		if !heading.MatchString(spec) {
			t.Errorf("route index: %s %s names section %q, which spec/api.md does not have", m[1], m[2], m[3])
		}
	}
	if len(documented) < 30 {
		t.Fatalf("route index: read %d rows, want the whole table", len(documented))
	}

	// Router paths in the index's notation: ":id" is "{id}"; "/*" (ids
	// with slashes) serves every path below it.
	param := regexp.MustCompile(`:([a-z]+)`)
	matches := func(served route, doc route) bool {
		if served.method != doc.method {
			return false
		}
		if prefix, ok := strings.CutSuffix(served.path, "*"); ok {
			return strings.HasPrefix(doc.path, prefix) && len(doc.path) > len(prefix)
		}
		return param.ReplaceAllString(served.path, "{$1}") == doc.path
	}
	env := servertest.Start(t)
	var served []route
	for _, r := range env.Server.API().Echo().Routes() {
		served = append(served, route{r.Method, r.Path})
	}
	for _, s := range served {
		if !slices.ContainsFunc(documented, func(d route) bool { return matches(s, d) }) {
			t.Errorf("%s %s is served but not in the route index of spec/api.md", s.method, s.path)
		}
	}
	for _, d := range documented {
		if !slices.ContainsFunc(served, func(s route) bool { return matches(s, d) }) {
			t.Errorf("%s %s is in the route index of spec/api.md but not served", d.method, d.path)
		}
	}
}
