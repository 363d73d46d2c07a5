package api

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/flowfabric/ff/runtime/metrics"
	"github.com/flowfabric/ff/runtime/wire"
)

// httpDurationBounds are the upper bounds (seconds) of the request
// duration histogram: from a quick report to the long-polls. A claim, a
// lease watch or a run result waits up to 60 s (wire.ClaimWaitMaxMs,
// RunWaitMaxMs) and answers just after its wait: 30 holds those answered
// early, 60 those answered within the longest wait (the worker SDK's
// default 30 s waited out among them), 90 those that waited it all, and
// past 90 s no request should be: one that is, is stuck. Two bounds more
// than a top at 30 s, where a 31 s claim and a 60 s one were both +Inf:
// two series per method and route.
var httpDurationBounds = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 90}

// httpMetrics counts the requests the API answers and what the worker
// protocol did. A nil *httpMetrics counts nothing (Config.Metrics unset).
type httpMetrics struct {
	inFlight atomic.Int64 // requests being answered
	requests *metrics.CounterVec
	duration *metrics.HistogramVec
	grants   *metrics.CounterVec
	reports  *metrics.CounterVec
}

func newHTTPMetrics(r *metrics.Registry) *httpMetrics {
	m := &httpMetrics{
		requests: r.Counter("ff_http_requests_total",
			"HTTP requests answered, by method, route pattern and status code.", "method", "route", "code"),
		duration: r.Histogram("ff_http_request_duration_seconds",
			"Time to answer an HTTP request, by method and route pattern (a long-poll claim includes its wait).",
			httpDurationBounds, "method", "route"),
		grants: r.Counter("ff_tasks_granted_total",
			"Tasks granted to workers: by a claim, or handed off with a completion of their upstream.", "how"),
		reports: r.Counter("ff_reports_total",
			"Worker reports by kind (renew, complete, fail) and result: ok, or the item's error code (stale_lease, ...).", "report", "result"),
	}
	r.AddCollector(func(context.Context) []metrics.GaugeFamily {
		return []metrics.GaugeFamily{{Name: "ff_http_requests_in_flight",
			Help:    "HTTP requests being answered now (waiting long-polls included).",
			Samples: []metrics.Sample{{Value: float64(m.inFlight.Load())}}}}
	})
	// Series that exist from the start, so that rate() sees the first one.
	for _, how := range []string{"claim", "handoff"} {
		m.grants.Add(0, how)
	}
	for _, report := range []string{"renew", "complete", "fail"} {
		m.reports.Add(0, report, "ok")
		m.reports.Add(0, report, wire.CodeStaleLease)
	}
	return m
}

// granted counts n tasks granted by how ("claim", "handoff").
func (m *httpMetrics) granted(how string, n int) {
	if m != nil && n > 0 {
		m.grants.Add(uint64(n), how)
	}
}

// reported counts the results of a batch of reports of one kind.
func (m *httpMetrics) reported(report string, res []wire.LeaseResult) {
	if m == nil {
		return
	}
	for _, r := range res {
		switch {
		case r.Error != nil:
			m.reports.Inc(report, r.Error.Code)
		case r.OK:
			m.reports.Inc(report, "ok")
		}
	}
}

// middleware counts every request by its route pattern (/v1/executions/:id,
// never the id itself, so that series stay few). A request no route took
// counts as route "unmatched" (a handler's own 404, an unknown id, keeps its
// route); one that matched a path but not its method keeps the pattern
// (Echo's router gives patterns only).
func (m *httpMetrics) middleware(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if uncounted(c.Request().Context()) {
			return next(c)
		}
		start := time.Now()
		m.inFlight.Add(1)
		// Deferred: a handler that panics with http.ErrAbortHandler (which
		// the recoverer inside lets through, to abort the connection) ends
		// the request too.
		defer m.inFlight.Add(-1)
		err := next(c)
		status := c.Response().Status
		if err != nil {
			status = asError(err).Status
		}
		route := c.Path()
		if route == "" || errors.Is(err, echo.ErrNotFound) {
			// Echo's own not-found handler: no route took the request,
			// whatever catch-all pattern the router reports for it.
			route = "unmatched"
		}
		method := methodLabel(c.Request().Method)
		m.requests.Inc(method, route, statusCode(status))
		m.duration.Observe(time.Since(start).Seconds(), method, route)
		return err
	}
}

// uncountedKey is the context key of Uncounted.
type uncountedKey struct{}

// Uncounted returns ctx marked so that a request made with it through the
// API's handler in process (client.HandlerTransport) is answered as any
// other but left out of the HTTP metrics (ff_http_requests_total,
// ff_http_request_duration_seconds, ff_http_requests_in_flight), which
// count what clients ask: for the server's own calls, such as the
// registration of declared schedules at start. A context cannot cross the
// network, so no client can hide its requests with it.
func Uncounted(ctx context.Context) context.Context {
	return context.WithValue(ctx, uncountedKey{}, true)
}

func uncounted(ctx context.Context) bool {
	v, _ := ctx.Value(uncountedKey{}).(bool)
	return v
}

// methodLabel bounds the method label to the standard methods: a client
// can send any token as a method.
func methodLabel(m string) string {
	switch m {
	case http.MethodGet, http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodPatch, http.MethodHead, http.MethodOptions:
		return m
	}
	return "other"
}

// statusCode formats an HTTP status without allocating for the usual ones.
func statusCode(status int) string {
	switch status {
	case http.StatusOK:
		return "200"
	case http.StatusCreated:
		return "201"
	case http.StatusAccepted:
		return "202"
	case http.StatusNoContent:
		return "204"
	case http.StatusBadRequest:
		return "400"
	case http.StatusUnauthorized:
		return "401"
	case http.StatusNotFound:
		return "404"
	case http.StatusConflict:
		return "409"
	case http.StatusRequestEntityTooLarge:
		return "413"
	case http.StatusInternalServerError:
		return "500"
	case http.StatusServiceUnavailable:
		return "503"
	}
	return strconv.Itoa(status)
}

// metricsPage serves GET /metrics: the registry in the Prometheus text
// format. A collector's failure shows in its own gauges (ff_valkey_up);
// the page is answered all the same.
func (s *Server) metricsPage(c echo.Context) error {
	ctx, cancel := context.WithTimeout(c.Request().Context(), 5*time.Second)
	defer cancel()
	c.Response().Header().Set(echo.HeaderContentType, metrics.ContentType)
	c.Response().WriteHeader(http.StatusOK)
	if err := s.cfg.Metrics.Write(ctx, c.Response()); err != nil {
		s.log.WarnContext(ctx, "metrics page incomplete", attrError, err)
	}
	return nil
}
