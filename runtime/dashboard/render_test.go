package dashboard

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/flowfabric/ff/runtime/wire"
)

func TestShort(t *testing.T) {
	for d, want := range map[time.Duration]string{
		-time.Second:                            "0s",
		1500 * time.Nanosecond:                  "2µs",
		1234567 * time.Nanosecond:               "1.2ms",
		1234567890 * time.Nanosecond:            "1.23s",
		time.Minute:                             "1m",
		90 * time.Second:                        "1m30s",
		time.Hour:                               "1h",
		90 * time.Minute:                        "1h30m",
		24*time.Hour + 29*time.Second:           "24h",
		59*time.Minute + 59*time.Second:         "59m59s",
		59*time.Minute + 59500*time.Millisecond: "1h",
	} {
		if got := short(d); got != want {
			t.Errorf("short(%v) = %q, want %q", d, got, want)
		}
	}
}

func TestSafeNext(t *testing.T) {
	for next, want := range map[string]string{
		"/ui/runs/1?done=x":        "/ui/runs/1?done=x",
		"/ui/templates":            "/ui/templates",
		"":                         "/ui/runs",
		"/ui":                      "/ui/runs",
		"//evil.example/ui/":       "/ui/runs",
		"/ui/\\evil":               "/ui/runs",
		"https://evil/ui/":         "/ui/runs",
		"/v1/flows":                "/ui/runs",
		"/ui/../v1/flows":          "/ui/runs",
		"/ui/..":                   "/ui/runs",
		"/ui/./../metrics":         "/ui/runs",
		"/ui/runs/../../x":         "/ui/runs",
		"/ui//evil":                "/ui/runs",
		"/ui/runs/":                "/ui/runs/",
		"/ui/x\r\nSet-Cookie: a=b": "/ui/runs",
	} {
		if got := safeNext(next); got != want {
			t.Errorf("safeNext(%q) = %q, want %q", next, got, want)
		}
	}
}

func TestIndentCutsLargeValues(t *testing.T) {
	small := indent(json.RawMessage(`{"a":1}`))
	if small != "{\n  \"a\": 1\n}" {
		t.Fatalf("indent = %q", small)
	}
	if indent(nil) != "" || indent(json.RawMessage(`not json`)) != "not json" {
		t.Fatal("empty or non-JSON values")
	}
	big := json.RawMessage(`"` + strings.Repeat("é", JSONShown) + `"`)
	got := indent(big)
	head, tail, ok := strings.Cut(got, "\n… (")
	if !ok || len(head) > JSONShown || !utf8.ValidString(head) || !strings.HasSuffix(tail, " more bytes: GET the API for all of it)") {
		t.Fatalf("a %d-byte value shows %d bytes, tail %q", len(big), len(head), tail)
	}
}

func TestGraphMax(t *testing.T) {
	flow := func(n int) *wire.Template {
		t := &wire.Template{}
		for i := range n {
			x := wire.TemplateExec{Name: "m" + strconv.Itoa(i), Kind: "k"}
			if i > 0 {
				x.Upstreams = []string{"m0"}
			}
			t.Execs = append(t.Execs, x)
		}
		return t
	}
	if g := layoutGraph(flow(GraphMax), nil); g == nil || len(g.Nodes) != GraphMax || len(g.Edges) != GraphMax-1 {
		t.Fatalf("a flow of GraphMax execs is not drawn whole")
	}
	if layoutGraph(flow(GraphMax+1), nil) != nil {
		t.Fatal("a flow of more than GraphMax execs is drawn")
	}
	// A cycle (no compiled plan has one) and an upstream nobody declares.
	cyc := &wire.Template{Execs: []wire.TemplateExec{{Name: "a", Upstreams: []string{"b"}}, {Name: "b", Upstreams: []string{"a"}}}}
	if layoutGraph(cyc, nil) != nil {
		t.Fatal("a cycle is drawn")
	}
	ghost := &wire.Template{Execs: []wire.TemplateExec{{Name: "a", Upstreams: []string{"nobody"}}}}
	if g := layoutGraph(ghost, nil); g == nil || len(g.Edges) != 0 {
		t.Fatalf("an unknown upstream: %+v", g)
	}
}
