package server_test

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/flowfabric/ff/runtime/authlimit"
	"github.com/flowfabric/ff/runtime/server"
	"github.com/flowfabric/ff/runtime/server/servertest"
	"github.com/flowfabric/ff/runtime/wire"
)

// TestAuthLimit: past the free failures of an address, wrong bearer
// tokens (and wrong tokens at the console's sign-in, counted with them)
// are refused with 429 rate_limited and Retry-After when their turn is
// too far off; the right token is never held back, and a request without
// credentials is not counted.
func TestAuthLimit(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t, func(c *server.Config) {
		c.Token = "the-right-token"
		c.AuthLimit = authlimit.Config{Free: 2, Interval: time.Hour, MaxWait: time.Millisecond}
	})
	wrong := map[string]string{"Authorization": "Bearer guess"}
	right := map[string]string{"Authorization": "Bearer the-right-token"}
	for range 5 { // not counted
		if r := env.Do(t, http.MethodGet, "/v1/namespaces", nil, ""); r.Status != http.StatusUnauthorized {
			t.Fatalf("without credentials: %d %s", r.Status, r.Body)
		}
	}
	// Two free failures, then one whose turn is now.
	for i := range 3 {
		if r := env.Do(t, http.MethodGet, "/v1/namespaces", wrong, ""); r.Status != http.StatusUnauthorized {
			t.Fatalf("wrong token %d: %d %s; want 401", i+1, r.Status, r.Body)
		}
	}
	// The fourth: its turn (one an hour) is past the wait allowed.
	r := env.Do(t, http.MethodGet, "/v1/namespaces", wrong, "")
	if r.Status != http.StatusTooManyRequests || r.Err.Code != wire.CodeRateLimited || r.Header.Get("Retry-After") == "" {
		t.Fatalf("wrong token past the limit: %d %s (Retry-After %q); want 429 rate_limited", r.Status, r.Body, r.Header.Get("Retry-After"))
	}
	if r := env.Do(t, http.MethodGet, "/v1/namespaces", right, ""); r.Status != http.StatusOK {
		t.Fatalf("the right token while limited: %d %s", r.Status, r.Body)
	}
	// The console's sign-in counts with the API: a wrong token is refused.
	req, err := http.NewRequestWithContext(ctxT(t), http.MethodPost, env.URL+"/ui/login", strings.NewReader(url.Values{"token": {"guess"}}.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", env.URL)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusTooManyRequests || !strings.Contains(string(body), "Too many wrong tokens from this address") ||
		res.Header.Get("Retry-After") == "" {
		t.Fatalf("console sign-in with a wrong token while limited: %d %s", res.StatusCode, body)
	}
}
