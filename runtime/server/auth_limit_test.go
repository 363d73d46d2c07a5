package server_test

import (
	"fmt"
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

// TestAuthLimit: past the free failures of an address, its requests with
// credentials are judged one per turn; one whose turn is too far off is
// refused with 429 rate_limited and Retry-After without its token being
// compared, the right token like a wrong one (a 429 says nothing of the
// token); the console's sign-in counts and is paced with the API; a
// request without credentials is not counted.
func TestAuthLimit(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t, func(c *server.Config) {
		c.Token = "the-right-token-0123"
		c.AuthLimit = authlimit.Config{Free: 2, Interval: time.Hour, MaxWait: time.Millisecond}
	})
	wrong := map[string]string{"Authorization": "Bearer guess"}
	right := map[string]string{"Authorization": "Bearer the-right-token-0123"}
	for range 5 { // not counted
		if r := env.Do(t, http.MethodGet, "/v1/namespaces", nil, ""); r.Status != http.StatusUnauthorized {
			t.Fatalf("without credentials: %d %s", r.Status, r.Body)
		}
	}
	if r := env.Do(t, http.MethodGet, "/v1/namespaces", right, ""); r.Status != http.StatusOK {
		t.Fatalf("the right token: %d %s", r.Status, r.Body)
	}
	// Two free failures, then one whose turn is now.
	for i := range 3 {
		if r := env.Do(t, http.MethodGet, "/v1/namespaces", wrong, ""); r.Status != http.StatusUnauthorized {
			t.Fatalf("wrong token %d: %d %s; want 401", i+1, r.Status, r.Body)
		}
	}
	// The next turn (one an hour) is past the wait allowed: refused,
	// whatever the token.
	for what, h := range map[string]map[string]string{"wrong token": wrong, "right token": right} {
		r := env.Do(t, http.MethodGet, "/v1/namespaces", h, "")
		if r.Status != http.StatusTooManyRequests || r.Err.Code != wire.CodeRateLimited || r.Header.Get("Retry-After") == "" {
			t.Fatalf("%s past the limit: %d %s (Retry-After %q); want 429 rate_limited", what, r.Status, r.Body, r.Header.Get("Retry-After"))
		}
	}
	// The console's sign-in is paced with the API: refused too, the right
	// token as a wrong one.
	for _, token := range []string{"guess", "the-right-token-0123"} {
		res, body := signIn(t, env, token)
		if res.StatusCode != http.StatusTooManyRequests || !strings.Contains(body, "Too many wrong tokens from this address") ||
			res.Header.Get("Retry-After") == "" || res.Header.Get("Set-Cookie") != "" {
			t.Fatalf("console sign-in with %q while limited: %d %s", token, res.StatusCode, body)
		}
	}
}

// TestAuthLimitPacesEveryVerdict: a guesser past the limit learns no
// verdict faster than the limiter's pace: with 2 free failures and one
// turn an hour, of 100 guesses sent at once 97 are refused unjudged, and
// the right token that follows is refused as well.
func TestAuthLimitPacesEveryVerdict(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t, func(c *server.Config) {
		c.Token = "the-right-token-0123"
		c.AuthLimit = authlimit.Config{Free: 2, Interval: time.Hour, MaxWait: time.Millisecond}
	})
	judged := 0
	for i := range 100 {
		r := env.Do(t, http.MethodGet, "/v1/namespaces", map[string]string{"Authorization": fmt.Sprintf("Bearer guess-%d", i)}, "")
		switch r.Status {
		case http.StatusUnauthorized:
			judged++
		case http.StatusTooManyRequests:
		default:
			t.Fatalf("wrong guess %d: %d %s", i, r.Status, r.Body)
		}
	}
	if judged != 3 {
		t.Fatalf("%d of 100 guesses judged; want 3 (2 free, then one an hour)", judged)
	}
	if r := env.Do(t, http.MethodGet, "/v1/namespaces", map[string]string{"Authorization": "Bearer the-right-token-0123"}, ""); r.Status != http.StatusTooManyRequests {
		t.Fatalf("the right token after 97 refused guesses: %d %s; want 429, not judged", r.Status, r.Body)
	}
}

// TestAuthLimitRightTokenWaitsItsTurn: a client whose address is limited
// (sharing it with a guesser) is not locked out: its right token waits
// its turn and is then admitted, at the API and at the console's sign-in.
func TestAuthLimitRightTokenWaitsItsTurn(t *testing.T) {
	t.Parallel()
	const interval = 300 * time.Millisecond
	env := servertest.Start(t, func(c *server.Config) {
		c.Token = "the-right-token-0123"
		c.AuthLimit = authlimit.Config{Free: 1, Interval: interval, MaxWait: 10 * interval}
	})
	for i := range 2 { // the free failure, then one at its turn (now)
		if r := env.Do(t, http.MethodGet, "/v1/namespaces", map[string]string{"Authorization": "Bearer guess"}, ""); r.Status != http.StatusUnauthorized {
			t.Fatalf("wrong token %d: %d %s", i+1, r.Status, r.Body)
		}
	}
	start := time.Now()
	if r := env.Do(t, http.MethodGet, "/v1/namespaces", map[string]string{"Authorization": "Bearer the-right-token-0123"}, ""); r.Status != http.StatusOK {
		t.Fatalf("the right token from a limited address: %d %s", r.Status, r.Body)
	}
	if d := time.Since(start); d < interval*3/4 {
		t.Fatalf("the right token from a limited address was admitted after %s, before its turn (%s)", d, interval)
	}
	start = time.Now()
	if res, body := signIn(t, env, "the-right-token-0123"); res.StatusCode != http.StatusSeeOther || res.Header.Get("Set-Cookie") == "" {
		t.Fatalf("console sign-in with the right token from a limited address: %d %s", res.StatusCode, body)
	}
	if d := time.Since(start); d < interval*3/4 {
		t.Fatalf("the console sign-in from a limited address was judged after %s, before its turn (%s)", d, interval)
	}
}

// signIn posts token to the console's sign-in form as its own page does.
func signIn(t *testing.T, env *servertest.Env, token string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctxT(t), http.MethodPost, env.URL+"/ui/login", strings.NewReader(url.Values{"token": {token}}.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", env.URL)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	hc := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	return res, string(body)
}
