package dashboard_test

import (
	"net/http"
	"testing"

	"github.com/flowfabric/ff/runtime/server"
	"github.com/flowfabric/ff/runtime/server/servertest"
)

// TestConsoleHeadSignedOut: HEAD is answered as GET,
// signed out too: GET of a page sends the reader to sign in (303), so
// HEAD must as well, not 401 "Signed out" (the answer to a form posted
// after the session ended).
func TestConsoleHeadSignedOut(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t, func(c *server.Config) { c.Token = "s3cret-console-token" })
	b := newBrowser(t, env)
	get := b.get("/ui/runs")
	get.wantRedirect(t, "/ui/login?next=%2Fui%2Fruns")
	head := b.do(http.MethodHead, "/ui/runs", nil, nil)
	if head.status != get.status || head.location != get.location {
		t.Fatalf("HEAD /ui/runs signed out: %d %q; GET: %d %q", head.status, head.location, get.status, get.location)
	}
}

// TestConsoleLimitsLookupMalformed: an id
// typed in the limits page's lookup box that the API refuses as an id (no
// namespace, a space) is the reader's typo: the limits page is shown with
// it among the ones not found (or with why), not replaced by an error page
// that loses the page.
func TestConsoleLimitsLookupMalformed(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t, func(c *server.Config) { c.Templates = compile(t, "limits.ff", limitsSource) })
	b := newBrowser(t, env)
	for _, id := range []string{"lim%2Fa%20b", "a%20b"} {
		p := b.get("/ui/limits?id=" + id)
		if p.status != http.StatusOK {
			t.Errorf("GET /ui/limits?id=%s: %d, want 200 with the limits page; body:\n%.600s", id, p.status, p.body)
		}
	}
}
