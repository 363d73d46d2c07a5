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

	"github.com/labstack/echo/v4"
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
			e.HTTPErrorHandler = errorHandler(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo})))
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
