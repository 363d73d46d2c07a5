package api_test

import (
	"net/http"
	"testing"

	"github.com/flowfabric/ff/runtime/server/servertest"
)

// TestBodyContentType: a body sent as something other than JSON (text,
// a multipart form, XML, JSON in another encoding than UTF-8) was read
// as JSON anyway; it is now refused 415 unsupported_media_type, before
// anything is written. A body without a Content-Type, or sent as a form
// (what curl -d does: curl -d '{...}' is how most people try an API),
// is still read as JSON, as is one of a +json type; a write without a
// body is not asked for a type.
func TestBodyContentType(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	const body = `{"kind":"k"}`
	for _, ct := range []string{
		"text/plain", "text/plain; charset=utf-8", "multipart/form-data; boundary=x", "application/xml",
		"application/json; charset=utf-16", "application/octet-stream", "json", ";",
	} {
		r := env.Do(t, http.MethodPost, "/v1/executions", map[string]string{"Content-Type": ct}, body)
		if r.Status != http.StatusUnsupportedMediaType || r.Err.Code != "unsupported_media_type" {
			t.Errorf("create sent as %q: %d %s (%s), want 415 unsupported_media_type", ct, r.Status, r.Err.Code, r.Err.Message)
		}
	}
	if r := env.Do(t, http.MethodPut, "/v1/executions/1.x/priority", map[string]string{"Content-Type": "text/plain"}, `{"priority":5}`); r.Status != http.StatusUnsupportedMediaType {
		t.Errorf("priority sent as text/plain: %d %s, want 415", r.Status, r.Err.Code)
	}
	assertNothingWritten(t, env)
	for _, ct := range []string{
		"application/json", "Application/JSON; charset=UTF-8", "application/x-www-form-urlencoded",
		"application/vnd.example+json", "", "application/json; charset=utf8",
	} {
		if r := env.Do(t, http.MethodPost, "/v1/executions", map[string]string{"Content-Type": ct}, body); r.Status != http.StatusCreated {
			t.Errorf("create sent as %q: %d %s (%s), want 201", ct, r.Status, r.Err.Code, r.Err.Message)
		}
	}
	// No body: a cancel without a reason, whatever type curl -X POST -H
	// sends, is not refused for its type (404: no such execution).
	if r := env.Do(t, http.MethodPost, "/v1/executions/1.x/cancel", map[string]string{"Content-Type": "text/plain"}, ""); r.Status != http.StatusNotFound {
		t.Errorf("cancel without a body sent as text/plain: %d %s, want 404", r.Status, r.Err.Code)
	}
}
