package dashboard_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/flowfabric/ff/runtime/server"
	"github.com/flowfabric/ff/runtime/server/servertest"
	"github.com/flowfabric/ff/runtime/wire"
)

// A cancel reason the form lets through (500 characters, counted by the
// browser) cancels the run, cut to the API's 1,024 bytes at a character
// boundary: 400 characters of Japanese (1,200 bytes) were refused with a
// bare 400 page, the run not cancelled and what was typed lost.
func TestCancelReasonTheFormAllows(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t, func(c *server.Config) {
		c.Templates = compile(t, "held.ff", `flow held() { namespace "nobody" exec a() { } }`)
	})
	b := newBrowser(t, env)
	id, _ := startRun(t, b, "held", url.Values{})
	c := b.get("/ui/runs/" + id + "/cancel")
	c.want(t, http.StatusOK, `<input name="reason" maxlength="500"`)
	reason := strings.Repeat("日", 400)
	if n := utf8.RuneCountInString(reason); n > 500 {
		t.Fatalf("the reason has %d characters, more than the form takes", n)
	}
	p := b.post("/ui/runs/"+id+"/cancel", url.Values{"reason": {reason}})
	got, err := env.Client.GetRun(ctxT(t), id)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != wire.RunCancelled {
		t.Fatalf("a reason of %d characters (%d bytes), which the cancel form accepts: answer %d %q; the run is %s, want it cancelled",
			utf8.RuneCountInString(reason), len(reason), p.status, pageMessage(p.body), got.State)
	}
}

// pageMessage is the refusal a console page shows, for messages.
func pageMessage(body string) string {
	i := strings.Index(body, `class="refused">`)
	if i < 0 {
		return ""
	}
	rest := body[i+len(`class="refused">`):]
	if j := strings.Index(rest, "<"); j >= 0 {
		rest = rest[:j]
	}
	return rest
}
