package server_test

import (
	"net/http"
	"testing"

	"github.com/flowfabric/ff/runtime/server"
	"github.com/flowfabric/ff/runtime/server/servertest"
	"github.com/flowfabric/ff/runtime/wire"
)

// TestQuotaReadRefusesKeyAsPauseDoes: GET /v1/quotas/{id}?key= takes the
// key values pause and resume take (store.QuotaKeyProblem): one no
// execution's input can give, such as "a,b", is 400 validation_failed
// naming key on all three, not a read of a made-up subject.
func TestQuotaReadRefusesKeyAsPauseDoes(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t, func(c *server.Config) { c.DisableScanners = true })
	if _, _, err := env.Client.PutQuota(ctxT(t), wire.PutQuota{Name: "mail", Rate: 10, Key: "tenant"}); err != nil {
		t.Fatal(err)
	}
	if res := env.Do(t, http.MethodGet, "/v1/quotas/default/mail?key=acme", nil, ""); res.Status != http.StatusOK {
		t.Fatalf("GET ?key=acme = %d %s, want 200", res.Status, clipBody(res.Body))
	}
	for _, r := range []struct{ method, path, body string }{
		{http.MethodGet, "/v1/quotas/default/mail?key=a,b", ""},
		{http.MethodGet, "/v1/quotas/default/mail?key=a%7Fb", ""},
		{http.MethodPost, "/v1/quotas/default/mail/pause", `{"key":"a,b","for_ms":1000}`},
		{http.MethodPost, "/v1/quotas/default/mail/resume", `{"key":"a,b"}`},
	} {
		res := env.Do(t, r.method, r.path, nil, r.body)
		if res.Status != http.StatusBadRequest || res.Err.Code != wire.CodeValidation || res.Field() != "key" {
			t.Errorf("%s %s %s = %d %s, want 400 validation_failed naming key", r.method, r.path, r.body, res.Status, clipBody(res.Body))
		}
	}
}
