package dashboard_test

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flowfabric/ff/runtime/dashboard"
	"github.com/flowfabric/ff/runtime/server"
	"github.com/flowfabric/ff/runtime/server/servertest"
)

// TestConsoleSessionExpires: a session opens the console until its 12 h
// are over, not after.
func TestConsoleSessionExpires(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t, func(c *server.Config) { c.Token = "s3cret-console-token"; c.DisableUI = true })
	var offset atomic.Int64
	d, err := dashboard.New(dashboard.Config{API: env.Server.API(), Token: "s3cret-console-token",
		Now: func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(d)
	t.Cleanup(srv.Close)
	b := newBrowser(t, &servertest.Env{URL: srv.URL})
	b.post("/ui/login", url.Values{"token": {"s3cret-console-token"}, "next": {"/ui/templates"}}).wantRedirect(t, "/ui/templates")
	b.get("/ui/templates").want(t, http.StatusOK)
	offset.Store(int64(dashboard.SessionTTL - time.Minute))
	b.get("/ui/templates").want(t, http.StatusOK)
	offset.Store(int64(dashboard.SessionTTL + time.Second))
	b.get("/ui/templates").wantRedirect(t, "/ui/login?next=%2Fui%2Ftemplates")
}

// TestConsoleValkeyDown: with Valkey gone, a page answers 503 and says
// why (the session cannot be checked), instead of hanging or asking to
// sign in again; HEAD is answered as GET.
func TestConsoleValkeyDown(t *testing.T) {
	t.Parallel()
	env, stopValkey := servertest.StartOwnValkey(t, func(c *server.Config) { c.Token = "s3cret-console-token" })
	b := newBrowser(t, env)
	b.post("/ui/login", url.Values{"token": {"s3cret-console-token"}}).wantRedirect(t, "/ui/runs")
	b.get("/ui/runs").want(t, http.StatusOK)
	if p := b.do(http.MethodHead, "/ui/runs", nil, nil); p.status != http.StatusOK || p.body != "" {
		t.Fatalf("HEAD /ui/runs: %d, %d bytes", p.status, len(p.body))
	}
	stopValkey()
	b.hc.Timeout = 60 * time.Second
	b.get("/ui/runs").want(t, http.StatusServiceUnavailable, "The session cannot be checked")
}
