package api

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/labstack/echo/v4"

	"github.com/flowfabric/ff/runtime/internal/outage"
)

// Server failures reach the error log; requests cancelled by their client
// or by shutdown answer 503 but stay out of it.
func TestErrorHandlerLogLevels(t *testing.T) {
	tests := []struct {
		name   string
		err    error
		status int
		logged bool
	}{
		{"internal", errors.New("disk on fire"), http.StatusInternalServerError, true},
		{"cancelled", &Error{Status: http.StatusServiceUnavailable, Code: "unavailable", Message: "request cancelled or timed out", Err: fmt.Errorf("claim: %w", context.Canceled)}, http.StatusServiceUnavailable, false},
		{"deadline", &Error{Status: http.StatusServiceUnavailable, Code: "unavailable", Message: "request cancelled or timed out", Err: context.DeadlineExceeded}, http.StatusServiceUnavailable, false},
		{"client error", Errorf(http.StatusBadRequest, "validation_failed", "bad"), http.StatusBadRequest, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var logs bytes.Buffer
			e := echo.New()
			e.HTTPErrorHandler = errorHandler(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo})), &outage.Log{})
			e.GET("/x", func(echo.Context) error { return tt.err })
			rec := httptest.NewRecorder()
			e.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/x", nil))
			if rec.Code != tt.status {
				t.Errorf("status %d, want %d", rec.Code, tt.status)
			}
			if got := strings.Contains(logs.String(), "request failed"); got != tt.logged {
				t.Errorf("logged = %v, want %v; log: %q", got, tt.logged, logs.String())
			}
		})
	}
}

// TestUnavailableLoggedOncePerOutage: the 503 unavailable answers of one
// outage are logged once at warn level, the next ones at debug level; a
// request to /v1 answered 2xx ends the outage (the next 503 is warned of
// again), one that does not reach Valkey (/healthz) does not; 500s stay
// at error level throughout.
func TestUnavailableLoggedOncePerOutage(t *testing.T) {
	var logs bytes.Buffer
	s := &Server{}
	e := echo.New()
	e.HTTPErrorHandler = errorHandler(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})), &s.outage)
	e.Use(s.endOutage)
	down := &Error{Status: http.StatusServiceUnavailable, Code: "unavailable", Message: "Valkey away", Err: errors.New("dial: refused")}
	e.GET("/v1/down", func(echo.Context) error { return down })
	e.GET("/v1/up", func(c echo.Context) error { return c.NoContent(http.StatusOK) })
	e.GET("/v1/bug", func(echo.Context) error { return errors.New("disk on fire") })
	e.GET("/healthz", func(c echo.Context) error { return c.NoContent(http.StatusOK) })
	levels := func(paths ...string) []string {
		t.Helper()
		logs.Reset()
		for _, p := range paths {
			e.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, p, nil))
		}
		var out []string
		for line := range strings.Lines(logs.String()) {
			_, rest, _ := strings.Cut(line, "level=")
			level, _, _ := strings.Cut(rest, " ")
			out = append(out, level)
		}
		return out
	}
	for _, tt := range []struct {
		paths []string
		want  []string
	}{
		{[]string{"/v1/down", "/v1/down", "/healthz", "/v1/down", "/v1/bug", "/v1/down"}, []string{"WARN", "DEBUG", "DEBUG", "ERROR", "DEBUG"}},
		{[]string{"/v1/up", "/v1/down", "/v1/down"}, []string{"WARN", "DEBUG"}},
	} {
		if diff := cmp.Diff(tt.want, levels(tt.paths...)); diff != "" {
			t.Errorf("levels of the log lines of %q (-want +got):\n%s\n%s", tt.paths, diff, logs.String())
		}
	}
}
