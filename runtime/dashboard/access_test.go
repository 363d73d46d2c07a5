package dashboard_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/flowfabric/ff/runtime/client"
	"github.com/flowfabric/ff/runtime/server"
	"github.com/flowfabric/ff/runtime/server/servertest"
)

const base64URL = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"

// TestSignOutEndsEverySpellingOfTheCookie: after a sign-out, a copy of
// the session cookie stays refused however its signature is spelled. The
// cookie's last part is the HMAC in unpadded base64 (32 bytes: 43
// characters, whose last one carries 2 unused bits); the three other
// values of those bits spell the same signature, and none of them opens
// the console: only the spelling the cookie was issued with is accepted,
// and that one is what the sign-out revoked.
func TestSignOutEndsEverySpellingOfTheCookie(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t, func(c *server.Config) { c.Token = "s3cret-console-token" })
	b := newBrowser(t, env)
	p := b.post("/ui/login", url.Values{"token": {"s3cret-console-token"}})
	p.wantRedirect(t, "/ui/runs")
	value := strings.TrimPrefix(strings.Split(p.header.Get("Set-Cookie"), ";")[0], "ff_session=")
	parts := strings.Split(value, ".")
	if len(parts) != 3 || len(parts[2]) != 43 {
		t.Fatalf("session cookie %q: want <expiry>.<nonce>.<43 characters of HMAC>", value)
	}
	sig := parts[2]
	last := strings.IndexByte(base64URL, sig[42])
	var variants []string
	for k := range 4 {
		if c := base64URL[last&^3|k]; c != sig[42] {
			variants = append(variants, parts[0]+"."+parts[1]+"."+sig[:42]+string(c))
		}
	}
	open := func(cookie string) page {
		return newBrowser(t, env).do(http.MethodGet, "/ui/runs", nil, map[string]string{"Cookie": "ff_session=" + cookie})
	}
	// Signed in: the cookie as issued opens the console, no other spelling.
	open(value).want(t, http.StatusOK)
	for _, v := range variants {
		open(v).wantRedirect(t, "/ui/login?next=%2Fui%2Fruns")
	}
	b.post("/ui/logout", url.Values{}).wantRedirect(t, "/ui/login")
	for _, v := range append(variants, value) {
		open(v).wantRedirect(t, "/ui/login?next=%2Fui%2Fruns")
	}
}

// TestEveryConsoleRouteNeedsASession: with a token, no console route but
// the sign-in page and the style sheet shows or does anything without a
// session: a GET is sent to sign in, a POST (from the console's own
// origin) is refused with 401 before it acts; every answer, the sign-in
// page included, forbids framing.
func TestEveryConsoleRouteNeedsASession(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t, func(c *server.Config) {
		c.Token = "s3cret-console-token"
		c.Templates = compile(t, "pipe.ff", pipeSource)
	})
	b := newBrowser(t, env)
	framing := func(what string, p page) {
		t.Helper()
		if p.header.Get("X-Frame-Options") != "DENY" || !strings.Contains(p.header.Get("Content-Security-Policy"), "frame-ancestors 'none'") {
			t.Errorf("%s: may be framed (X-Frame-Options %q, CSP %q)", what, p.header.Get("X-Frame-Options"), p.header.Get("Content-Security-Policy"))
		}
	}
	for _, path := range []string{"/ui/runs", "/ui/runs/0.00000000-0000-0000-0000-000000000000",
		"/ui/runs/0.00000000-0000-0000-0000-000000000000/cancel", "/ui/bulk?state=running",
		"/ui/executions/0.00000000-0000-0000-0000-000000000000", "/ui/templates", "/ui/templates/pipe",
		"/ui/schedules", "/ui/schedules/s/delete", "/ui/workers", "/ui/limits", "/ui/budgets/reset?id=default/b",
		"/ui/nope"} {
		p := b.get(path)
		if p.status != http.StatusSeeOther || !strings.HasPrefix(p.location, "/ui/login?next=") {
			t.Errorf("GET %s without a session: %d %q, want 303 to the sign-in page", path, p.status, p.location)
		}
		framing("GET "+path, p)
	}
	form := url.Values{"input": {`{"url":"u"}`}, "state": {"running"}, "id": {"default/b"}, "minutes": {"5"}}
	for _, path := range []string{"/ui/runs/0.00000000-0000-0000-0000-000000000000/cancel",
		"/ui/runs/0.00000000-0000-0000-0000-000000000000/replay", "/ui/bulk", "/ui/templates/pipe/runs",
		"/ui/schedules/s/delete", "/ui/schedules/s/run", "/ui/budgets/reset", "/ui/quotas/pause", "/ui/quotas/resume"} {
		p := b.post(path, form)
		if p.status != http.StatusUnauthorized || !strings.Contains(p.body, "nothing was done") {
			t.Errorf("POST %s without a session: %d, want 401 signed out", path, p.status)
		}
		framing("POST "+path, p)
	}
	list, err := env.Client.ListRuns(ctxT(t), client.RunListOptions{})
	if err != nil || len(list.Runs) != 0 {
		t.Fatalf("a form posted without a session started a run: %+v, %v", list, err)
	}
	login := b.get("/ui/login")
	login.want(t, http.StatusOK, `name="token"`)
	framing("GET /ui/login", login)
	framing("cross-site POST", b.do(http.MethodPost, "/ui/login", url.Values{"token": {"x"}}, map[string]string{"Origin": "https://evil.example"}))
	framing("GET /ui/static/app.css", b.get("/ui/static/app.css"))
}
