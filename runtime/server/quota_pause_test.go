package server_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/flowfabric/ff/runtime/server/servertest"
	"github.com/flowfabric/ff/runtime/wire"
)

// TestQuotaPauseRoutes: POST /v1/quotas/{id}/pause and /resume through
// real HTTP: bad requests are 400 naming the field (nothing paused), an
// unknown quota 404, an unknown action 404 unknown_route; a pause shows
// on the quota's subject until it is resumed.
func TestQuotaPauseRoutes(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	c := env.Client
	ctx := ctxT(t)
	if _, _, err := c.PutQuota(ctx, wire.PutQuota{Name: "api", Rate: 10}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.PutQuota(ctx, wire.PutQuota{Name: "per_tenant", Concurrency: 2, Key: "tenant"}); err != nil {
		t.Fatal(err)
	}
	past := time.Now().Add(-time.Minute).Format(time.RFC3339)
	far := time.Now().Add(8 * 24 * time.Hour).Format(time.RFC3339)
	for _, tc := range []struct {
		name, id string
		req      wire.QuotaPause
		field    string
	}{
		{"neither until nor for_ms", "default/api", wire.QuotaPause{}, "until"},
		{"both", "default/api", wire.QuotaPause{Until: far, ForMs: 1000}, "for_ms"},
		{"an end without its zone", "default/api", wire.QuotaPause{Until: "2026-11-22T13:00:00"}, "until"},
		{"an end in words", "default/api", wire.QuotaPause{Until: "tomorrow"}, "until"},
		{"a negative length", "default/api", wire.QuotaPause{ForMs: -1}, "for_ms"},
		{"a length over 7 days", "default/api", wire.QuotaPause{ForMs: 8 * 24 * 3600 * 1000}, "for_ms"},
		{"an end that passed", "default/api", wire.QuotaPause{Until: past}, "until"},
		{"an end too far", "default/api", wire.QuotaPause{Until: far}, "until"},
		{"a reason too long", "default/api", wire.QuotaPause{ForMs: 1000, Reason: strings.Repeat("r", 513)}, "reason"},
		{"a key value too long", "default/per_tenant", wire.QuotaPause{ForMs: 1000, Key: strings.Repeat("k", 129)}, "key"},
		{"a keyed quota without its key", "default/per_tenant", wire.QuotaPause{ForMs: 1000}, "key"},
		{"a key for an unkeyed quota", "default/api", wire.QuotaPause{ForMs: 1000, Key: "acme"}, "key"},
		{"a key no input can give", "default/per_tenant", wire.QuotaPause{ForMs: 1000, Key: "Acme Corp"}, "key"},
		{"a key with a comma", "default/per_tenant", wire.QuotaPause{ForMs: 1000, Key: "a,b"}, "key"},
		{"a key with a newline", "default/per_tenant", wire.QuotaPause{ForMs: 1000, Key: "x\ny"}, "key"},
		{"a reason with a newline", "default/api", wire.QuotaPause{ForMs: 1000, Reason: "a\nb"}, "reason"},
	} {
		_, err := c.PauseQuota(ctx, tc.id, tc.req)
		ae := apiErr(t, err)
		if ae.Status != http.StatusBadRequest || ae.Code != wire.CodeValidation || ae.Details["field"] != tc.field {
			t.Errorf("%s: %d %s %v %q, want 400 on %s", tc.name, ae.Status, ae.Code, ae.Details, ae.Message, tc.field)
		}
	}
	if _, err := c.PauseQuota(ctx, "default/nope", wire.QuotaPause{ForMs: 1000}); apiErr(t, err).Status != http.StatusNotFound {
		t.Errorf("pausing an unknown quota: %v, want 404", err)
	}
	// Answers are not HTML-escaped: the id's form reads as written.
	if resp := rawDo(t, env, http.MethodPost, "/v1/quotas/upstream/pause", "", `{"for_ms":1000}`); resp.status != http.StatusBadRequest ||
		!strings.Contains(string(resp.body), "want <namespace>/<name>") {
		t.Errorf("pausing quota id upstream: %d %s, want 400 saying <namespace>/<name> as is", resp.status, resp.body)
	}
	if resp := rawDo(t, env, http.MethodPost, "/v1/quotas/default/api/stop", "", `{}`); resp.status != http.StatusNotFound ||
		resp.err.Code != wire.CodeUnknownRoute {
		t.Errorf("an unknown action: %d %s, want 404 unknown_route", resp.status, resp.err.Code)
	}
	for _, id := range []string{"default/api", "default/per_tenant"} {
		q, err := c.GetQuota(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range q.Subjects {
			if s.PausedUntil != nil {
				t.Fatalf("%s paused after bad requests: %+v", id, s)
			}
		}
	}

	q, err := c.PauseQuota(ctx, "default/per_tenant", wire.QuotaPause{Key: "acme", ForMs: 60_000, Reason: "429"})
	if err != nil {
		t.Fatal(err)
	}
	if len(q.Subjects) != 1 || q.Subjects[0].Key != "acme" || q.Subjects[0].PausedUntil == nil ||
		time.Until(*q.Subjects[0].PausedUntil) < 50*time.Second || q.Subjects[0].PauseReason != "429" {
		t.Fatalf("paused quota %+v", q.Subjects)
	}
	q, err = c.ResumeQuota(ctx, "default/per_tenant", wire.QuotaResume{Key: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	if q.Subjects[0].PausedUntil != nil {
		t.Fatalf("resumed quota %+v", q.Subjects)
	}
	// Until a time given with its zone.
	end := time.Now().Add(time.Hour).Truncate(time.Second)
	q, err = c.PauseQuota(ctx, "default/api", wire.QuotaPause{Until: end.In(time.FixedZone("X", 3600)).Format(time.RFC3339)})
	if err != nil || len(q.Subjects) != 1 || q.Subjects[0].PausedUntil == nil || !q.Subjects[0].PausedUntil.Equal(end) {
		t.Fatalf("pause until %v: %+v, %v", end, q, err)
	}
	if _, err := c.ResumeQuota(ctx, "default/api", wire.QuotaResume{}); err != nil {
		t.Fatal(err)
	}
	// Resuming what is not paused answers the quota as it is.
	if _, err := c.ResumeQuota(ctx, "default/api", wire.QuotaResume{}); err != nil {
		t.Fatalf("resume of a quota not paused: %v", err)
	}
}
