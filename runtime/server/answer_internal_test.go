package server

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/flowfabric/ff/runtime/wire"
)

// TestAnswerBodyNotHTMLEscaped: the answers ffrun writes outside Echo (a
// Front's while it starts, the refusals of loopbackHosts) are encoded as
// the API's are, without HTML escaping: a message keeps its "<", ">" and
// "&" rather than reading "\u003c", "\u003e" and "\u0026".
func TestAnswerBodyNotHTMLEscaped(t *testing.T) {
	msg := `set FF_API_TOKEN & ask for <namespace>/<name>`
	got := string(answerBody(wire.ErrorEnvelope{Error: wire.ErrorBody{Code: wire.CodeForbidden, Message: msg}}))
	want := `{"error":{"code":"forbidden","message":"` + msg + `"}}` + "\n"
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("answerBody (-want +got):\n%s", diff)
	}
}

// TestAnswersOutsideEcho: the answers a starting Front and loopbackHosts
// write are JSON with a final newline, and a HEAD request gets none.
func TestAnswersOutsideEcho(t *testing.T) {
	front := newFront(nil, FrontConfig{})
	hosts := loopbackHosts(http.NotFoundHandler(), slog.New(slog.DiscardHandler))
	for _, tc := range []struct {
		name   string
		h      http.Handler
		method string
		path   string
		host   string
		status int
		code   string
	}{
		{"front", front, http.MethodGet, "/v1/executions", "127.0.0.1", http.StatusServiceUnavailable, wire.CodeUnavailable},
		{"front health", front, http.MethodGet, "/healthz", "127.0.0.1", http.StatusOK, ""},
		{"front head", front, http.MethodHead, "/v1/executions", "127.0.0.1", http.StatusServiceUnavailable, ""},
		{"hosts", hosts, http.MethodGet, "/v1/executions", "attacker.example", http.StatusForbidden, wire.CodeForbidden},
		{"hosts head", hosts, http.MethodHead, "/v1/executions", "attacker.example", http.StatusForbidden, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(tc.method, tc.path, nil)
			r.Host = tc.host
			rec := httptest.NewRecorder()
			tc.h.ServeHTTP(rec, r)
			body := rec.Body.String()
			if rec.Code != tc.status || rec.Header().Get("Content-Type") != "application/json" {
				t.Fatalf("%d %q %s; want %d application/json", rec.Code, rec.Header().Get("Content-Type"), body, tc.status)
			}
			if tc.method == http.MethodHead {
				if body != "" {
					t.Errorf("HEAD answered a body: %s", body)
				}
				return
			}
			if !strings.HasSuffix(body, "}\n") {
				t.Errorf("body %q does not end with a newline", body)
			}
			var env wire.ErrorEnvelope
			if err := json.Unmarshal([]byte(body), &env); err != nil {
				t.Fatalf("body %q: %v", body, err)
			}
			if env.Error.Code != tc.code {
				t.Errorf("code %q, want %q", env.Error.Code, tc.code)
			}
		})
	}
}
