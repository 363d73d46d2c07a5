// Package api is ffrun's HTTP API, served through Echo: JSON in and out,
// stable error codes (wire.Code…), bearer-token auth on every /v1 route,
// the refusal of browsers' cross-origin writes, body limits, and the
// worker protocol (claim, renew, complete, fail).
//
// The package validates and translates; the work itself is done by a
// Service (runtime/server wires one over the store and the scheduler).
package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/flowfabric/ff/runtime/authlimit"
	"github.com/flowfabric/ff/runtime/internal/outage"
	"github.com/flowfabric/ff/runtime/metrics"
	"github.com/flowfabric/ff/runtime/wire"
)

// Service does what the routes ask. Errors should be *Error values (the
// service maps store errors to codes); anything else becomes a 500.
// Per-item errors of batch calls are reported in the results.
type Service interface {
	// Ready reports whether Valkey is reachable and the library loaded.
	Ready(ctx context.Context) error
	// Create writes already validated executions; one result per item.
	Create(ctx context.Context, reqs []wire.CreateExecution) ([]Created, error)
	Get(ctx context.Context, id string) (*wire.Execution, error)
	// Result returns the outcome of a terminal execution, or an *Error with
	// code wire.CodeNotTerminal.
	Result(ctx context.Context, id string) (*wire.ExecutionResult, error)
	List(ctx context.Context, q ListQuery) (*wire.ExecutionList, error)
	Cancel(ctx context.Context, id, reason string) (*wire.Execution, error)
	SetPriority(ctx context.Context, id string, priority int) (*wire.Execution, error)
	// RevokeLease ends the running attempt of id as revoked; with lease,
	// only that lease (another is a stale lease).
	RevokeLease(ctx context.Context, id, reason string, lease *wire.Lease) (*wire.Execution, error)
	// Claim grants up to req.Max tasks, waiting up to req.WaitMs for work.
	Claim(ctx context.Context, req wire.ClaimRequest) ([]wire.Task, error)
	Renew(ctx context.Context, leases []wire.Lease, lease time.Duration) ([]wire.LeaseResult, error)
	// Complete records successful attempts; with req.Handoff it also
	// returns the tasks granted to the worker (validated by the API).
	Complete(ctx context.Context, req wire.CompleteRequest) ([]wire.LeaseResult, []wire.Task, error)
	Fail(ctx context.Context, items []wire.Failure) ([]wire.LeaseResult, error)
	// Namespaces sums up every namespace (or only q.Namespace): its runs,
	// connected workers and, with q.Lanes, its lanes' counts.
	Namespaces(ctx context.Context, q NamespaceQuery) (*wire.NamespaceList, error)
}

// Created is the outcome of one create: the execution (new, or the first
// one of its idempotency key), or the error of that item.
type Created struct {
	Execution *wire.Execution
	Created   bool
	Error     *wire.ErrorBody
}

// ListQuery is a validated list filter.
type ListQuery struct {
	Namespace string
	Lane      string
	State     string
	Cursor    string
	Limit     int
}

// Config configures the API server.
type Config struct {
	Service Service
	// Token, when set, is required as a bearer token on every /v1 route.
	Token string
	// Logger receives request logs (debug) and server errors (error).
	Logger *slog.Logger
	// BodyLimit overrides the default per-route limits when positive: every
	// route then accepts at most this many bytes.
	BodyLimit int64
	// LeaseDefault is the lease of claims and renewals that name none.
	LeaseDefault time.Duration
	// Metrics, when set, receives the HTTP request metrics and is served
	// at GET /metrics (behind the bearer token when one is set).
	Metrics *metrics.Registry
	// AuthLimiter, when set, paces the judging of credentials from a
	// client address that failed too often: its requests with credentials,
	// right or wrong, wait their turn, or are refused (429 rate_limited)
	// without being judged when it is too far off.
	AuthLimiter *authlimit.Limiter
}

func (c Config) withDefaults() Config {
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.LeaseDefault <= 0 {
		c.LeaseDefault = wire.LeaseMsDefault * time.Millisecond
	}
	return c
}

func (c Config) validate() error {
	if c.Service == nil {
		return errors.New("api: Config.Service is required")
	}
	if c.BodyLimit < 0 || c.BodyLimit > BodyLimitMax {
		return fmt.Errorf("api: Config.BodyLimit %d is outside 0..%d", c.BodyLimit, BodyLimitMax)
	}
	if c.Token != "" {
		if err := wire.CheckToken(c.Token); err != nil {
			return fmt.Errorf("api: Config.Token: %w", err)
		}
	}
	if c.LeaseDefault < wire.LeaseMsMin*time.Millisecond || c.LeaseDefault > wire.LeaseMsMax*time.Millisecond {
		return fmt.Errorf("api: Config.LeaseDefault %s is outside %dms..%dms", c.LeaseDefault, wire.LeaseMsMin, wire.LeaseMsMax)
	}
	return nil
}

// Server is the HTTP API. It is an http.Handler.
type Server struct {
	cfg  Config
	echo *echo.Echo
	v1   *echo.Group
	log  *slog.Logger
	met  *httpMetrics // nil without Config.Metrics

	flows   *flows   // set by AddFlows: the templates schedules refer to
	mounted []string // the prefixes of Mount, which check requests themselves

	unready outage.Log // the last /readyz found the service not ready
	ready   readyCheck // the readiness checks, shared by the probes of a second
	outage  outage.Log // a 503 unavailable was logged; no request succeeded since
}

// New builds the API server.
func New(cfg Config) (*Server, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, log: cfg.Logger}
	if cfg.Token == "" {
		s.log.Warn("FF_API_TOKEN is not set: the /v1 API accepts requests from ANYONE who can reach it; set a token before exposing ffrun")
	}
	e := echo.New()
	e.HideBanner = true
	e.HidePort = true
	e.HTTPErrorHandler = errorHandler(s.log, &s.outage)
	e.JSONSerializer = plainJSON{}
	if cfg.Metrics != nil {
		s.met = newHTTPMetrics(cfg.Metrics)
		// Outside the recoverer, so that a panic counts as the 500 it becomes.
		e.Use(s.met.middleware)
	}
	e.Use(noSniff, s.recoverer, s.requestLog, s.endOutage, crossOrigin(s.mountedPath))
	e.GET("/healthz", s.healthz)
	e.GET("/readyz", s.readyz)
	if cfg.Metrics != nil {
		var mw []echo.MiddlewareFunc
		if cfg.Token != "" {
			mw = append(mw, bearerAuth(cfg.Token, cfg.AuthLimiter))
		}
		e.GET("/metrics", s.metricsPage, mw...)
	}

	// The token guards /v1 from the Echo instance, not the group: a group
	// middleware makes Echo route every unknown method of a /v1 path to a
	// catch-all 404, so a wrong method would be unknown_route instead of
	// method_not_allowed once a token is set.
	if cfg.Token != "" {
		e.Use(guardPrefix("/v1", bearerAuth(cfg.Token, cfg.AuthLimiter)))
	}
	v1 := e.Group("/v1")
	v1.POST("/executions", s.create)
	v1.POST("/executions/batch", s.createBatch)
	v1.GET("/executions", s.list)
	v1.GET("/namespaces", s.namespaces)
	v1.GET("/executions/:id", s.get)
	v1.GET("/executions/:id/result", s.result)
	v1.POST("/executions/:id/cancel", s.cancel)
	v1.PUT("/executions/:id/priority", s.setPriority)
	v1.POST("/executions/:id/revoke-lease", s.revokeLease)
	v1.POST("/executions/:id/renew", s.renewOne)
	v1.POST("/executions/:id/complete", s.completeOne)
	v1.POST("/executions/:id/fail", s.failOne)
	v1.POST("/worker/claim", s.claim)
	v1.POST("/worker/renew", s.renew)
	v1.POST("/worker/complete", s.complete)
	v1.POST("/worker/fail", s.fail)
	s.echo, s.v1 = e, v1
	return s, nil
}

// ServeHTTP serves one request.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.echo.ServeHTTP(w, r) }

// Echo returns the underlying Echo instance; call it before serving.
func (s *Server) Echo() *echo.Echo { return s.echo }

// Mount serves h for GET and HEAD of prefix and for GET, HEAD and POST of
// every path under it (web pages and their forms; other methods are the API's 405),
// with the API's logging, metrics and panic recovery but not its token
// check nor its refusal of cross-origin requests: h does its own. Call it
// before serving.
func (s *Server) Mount(prefix string, h http.Handler) {
	s.mounted = append(s.mounted, prefix)
	wrapped := echo.WrapHandler(h)
	s.echo.Match([]string{http.MethodGet, http.MethodHead}, prefix, wrapped)
	s.echo.Match([]string{http.MethodGet, http.MethodHead, http.MethodPost}, prefix+"/*", wrapped)
}

func (s *Server) mountedPath(path string) bool {
	for _, p := range s.mounted {
		if under(path, p) {
			return true
		}
	}
	return false
}

// V1 returns the /v1 route group, behind the bearer-token check when a
// token is configured, so that later features (flows, budgets) add their
// routes with the same auth; call it before serving.
func (s *Server) V1() *echo.Group { return s.v1 }

func (s *Server) limit(def int64) int64 {
	if s.cfg.BodyLimit > 0 {
		return s.cfg.BodyLimit
	}
	return def
}

func (s *Server) recoverer(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) (err error) {
		defer func() {
			if r := recover(); r != nil {
				if r == http.ErrAbortHandler {
					panic(r)
				}
				err = Internal(fmt.Errorf("panic: %v", r))
			}
		}()
		return next(c)
	}
}

func (s *Server) requestLog(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		req := c.Request()
		if !s.log.Enabled(req.Context(), slog.LevelDebug) {
			return next(c)
		}
		start := time.Now()
		err := next(c)
		status := c.Response().Status
		if err != nil {
			status = asError(err).Status
		}
		attrs := []slog.Attr{slog.String(attrMethod, req.Method), slog.String(attrPath, req.URL.Path),
			slog.Int(attrStatus, status), slog.Duration(attrDuration, time.Since(start)),
			// The connection's address: a forwarding header is only what
			// the client claims, logged apart.
			slog.String(attrRemote, authlimit.Addr(req))}
		if fwd := req.Header.Values(echo.HeaderXForwardedFor); len(fwd) > 0 {
			attrs = append(attrs, slog.String(attrForwardedFor, strings.Join(fwd, ", ")))
		}
		s.log.LogAttrs(req.Context(), slog.LevelDebug, "request", attrs...)
		return err
	}
}

// noSniff tells browsers to take every answer for the type it says
// (X-Content-Type-Options: nosniff): a JSON answer that echoes what a
// client sent is never run as a script or rendered as a page.
func noSniff(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		c.Response().Header().Set(echo.HeaderXContentTypeOptions, "nosniff")
		return next(c)
	}
}

func (s *Server) healthz(c echo.Context) error {
	return c.JSON(http.StatusOK, wire.Health{Status: "ok"})
}

func (s *Server) readyz(c echo.Context) error {
	ctx, cancel := context.WithTimeout(c.Request().Context(), readyTimeout)
	defer cancel()
	if err := s.ready.check(ctx, s.cfg.Service.Ready); err != nil {
		// The probe is open to anyone: the reason (addresses, dial errors)
		// goes to the log, once per spell of unreadiness.
		if _, first := s.unready.Failed(); first {
			s.log.WarnContext(ctx, "not ready", attrError, err)
		}
		// Written here, not returned: the error handler would log every
		// probe of an orchestrator at error level.
		ae := Errorf(http.StatusServiceUnavailable, wire.CodeUnavailable, "not ready: Valkey does not answer, does not take writes, or the functions library is not loaded (the reason is in ffrun's log)")
		return c.JSON(ae.Status, wire.ErrorEnvelope{Error: *ae.Body()})
	}
	if s.unready.Ended() {
		s.log.InfoContext(ctx, "ready again")
	}
	s.outage.Ended()
	return c.JSON(http.StatusOK, wire.Health{Status: "ok"})
}

// plainJSON is Echo's JSON serializer without HTML escaping: answers are
// read by programs and by people at a terminal, not embedded in pages, and
// "<namespace>/<name>" should not read "\u003cnamespace\u003e/\u003cname\u003e".
type plainJSON struct{ echo.DefaultJSONSerializer }

func (plainJSON) Serialize(c echo.Context, i any, indent string) error {
	enc := json.NewEncoder(c.Response())
	enc.SetEscapeHTML(false)
	if indent != "" {
		enc.SetIndent("", indent)
	}
	return enc.Encode(i)
}
