package api

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/flowfabric/ff/runtime/metrics"
)

// A handler that aborts its connection (panics with http.ErrAbortHandler,
// which the recoverer lets through) ends its request for the in-flight
// gauge too: it stayed counted.
func TestInFlightAfterAbort(t *testing.T) {
	m := newHTTPMetrics(metrics.NewRegistry())
	h := m.middleware(func(echo.Context) error { panic(http.ErrAbortHandler) })
	e := echo.New()
	c := e.NewContext(httptest.NewRequest(http.MethodGet, "/v1/x", nil), httptest.NewRecorder())
	func() {
		defer func() {
			if r := recover(); r != http.ErrAbortHandler {
				t.Fatalf("recovered %v, want http.ErrAbortHandler", r)
			}
		}()
		_ = h(c)
	}()
	if n := m.inFlight.Load(); n != 0 {
		t.Fatalf("in flight after an aborted request = %d, want 0", n)
	}
}
