package dashboard_test

import (
	"html"
	"net/http"
	"net/url"
	"regexp"
	"testing"

	"github.com/flowfabric/ff/runtime/server"
	"github.com/flowfabric/ff/runtime/server/servertest"
)

// optSource has optional fields at the top of its input and inside a
// required record.
const optSource = `
type Meta { tag: string, level?: int }
type Req { url: string, note?: string, meta?: Meta, inner: Meta, tags?: [string] }

flow opt(Req) {
  exec a(Req) { }
}
`

// TestStartFormLeavesOptionalFieldsOut: the start form's input was
// prefilled with every field of the input type, the optional ones too, so
// that a user who left them sent values they never chose ("note": "",
// "meta": {...}). The optional fields now start out of the input (the
// form names them, with their types, for the user to add) and the
// required ones are prefilled as before, in field order.
func TestStartFormLeavesOptionalFieldsOut(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t, func(c *server.Config) { c.Templates = compile(t, "opt.ff", optSource) })
	b := newBrowser(t, env)
	p := b.get("/ui/templates/opt")
	p.want(t, http.StatusOK, `<p class="quiet">Optional fields, left out: <code>note</code> (string), <code>meta</code> (Meta), `+
		"<code>inner.level</code> (int), <code>tags</code> ([string]). Add one to give it a value.</p>")
	m := regexp.MustCompile(`(?s)<textarea name="input"[^>]*>(.*?)</textarea>`).FindStringSubmatch(p.body)
	want := "{\n  \"url\": \"\",\n  \"inner\": {\n    \"tag\": \"\"\n  }\n}"
	if m == nil || html.UnescapeString(m[1]) != want {
		t.Fatalf("the input prefilled:\n%v\nwant\n%s", m, want)
	}
	// Sent as it is, it is a valid input: the run starts.
	startRun(t, b, "opt", url.Values{"input": {want}})
}
