package dashboard_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/flowfabric/ff/runtime/server"
	"github.com/flowfabric/ff/runtime/server/servertest"
)

// A sign-in form that does not decode is a 400, one over its 64 KiB bound a
// 413, neither counted as a wrong token (both were answered 401 "That is
// not ffrun's API token" and counted by the limiter, even holding the
// right token, and one that did not decode signed the user in).
func TestLoginFormThatDoesNotDecode(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t, func(c *server.Config) { c.Token = "s3cret-console-token" })
	b := newBrowser(t, env)
	post := func(body string) page {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, env.URL+"/ui/login", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		res, err := b.hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		data, err := io.ReadAll(res.Body)
		if err != nil {
			t.Fatal(err)
		}
		return page{status: res.StatusCode, body: string(data), location: res.Header.Get("Location"), header: res.Header}
	}
	if p := post("token=s3cret-console-token&x=%zz"); p.status != http.StatusBadRequest {
		t.Errorf("a sign-in form that does not decode: %d %q, want 400", p.status, pageMessage(p.body))
	}
	// The right token, with 100 KiB of another field: within the 3 MiB
	// of a form, so signed in (or 413 if the sign-in form has a bound of
	// its own), not "not the token".
	p := post("token=s3cret-console-token&pad=" + strings.Repeat("x", 100<<10))
	if p.status != http.StatusSeeOther && p.status != http.StatusRequestEntityTooLarge {
		t.Errorf("the right token in a 100 KiB form: %d %q, want 303 (or 413)", p.status, pageMessage(p.body))
	}
}
