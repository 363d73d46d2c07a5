package api

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/flowfabric/ff/runtime/internal/outage"
	"github.com/flowfabric/ff/runtime/wire"
)

// Error is an API error: an HTTP status, a stable code from the wire.Code…
// constants and a message for humans. Handlers and the Service return it;
// the error handler writes it as a wire.ErrorEnvelope.
type Error struct {
	Status  int
	Code    string
	Message string
	Details map[string]any
	Err     error // cause, logged for 5xx, never sent
}

func (e *Error) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%s: %s: %v", e.Code, e.Message, e.Err)
	}
	return e.Code + ": " + e.Message
}

func (e *Error) Unwrap() error { return e.Err }

// Body returns the wire form of e.
func (e *Error) Body() *wire.ErrorBody {
	return &wire.ErrorBody{Code: e.Code, Message: e.Message, Details: e.Details}
}

// Errorf returns an *Error with a formatted message.
func Errorf(status int, code, format string, args ...any) *Error {
	return &Error{Status: status, Code: code, Message: fmt.Sprintf(format, args...)}
}

// invalid returns a validation error naming field.
func invalid(field, format string, args ...any) *Error {
	e := Errorf(http.StatusBadRequest, wire.CodeValidation, "%s: "+format, append([]any{field}, args...)...)
	e.Details = map[string]any{"field": field}
	return e
}

// Internal wraps an unexpected error as a 500 whose cause is logged.
func Internal(err error) *Error {
	return &Error{Status: http.StatusInternalServerError, Code: wire.CodeInternal, Message: "internal error", Err: err}
}

// asError converts any error a handler returned into an *Error.
func asError(err error) *Error {
	var ae *Error
	if errors.As(err, &ae) {
		return ae
	}
	var he *echo.HTTPError
	if errors.As(err, &he) {
		switch he.Code {
		case http.StatusNotFound:
			return Errorf(he.Code, wire.CodeUnknownRoute, "no such route")
		case http.StatusMethodNotAllowed:
			return Errorf(he.Code, wire.CodeMethodNotAllowed, "method not allowed on this route")
		case http.StatusRequestEntityTooLarge:
			return Errorf(he.Code, wire.CodePayloadTooLarge, "request body too large")
		case http.StatusUnauthorized:
			return Errorf(he.Code, wire.CodeUnauthorized, "missing or invalid bearer token")
		case http.StatusServiceUnavailable:
			return Errorf(he.Code, wire.CodeUnavailable, "%v", he.Message)
		}
		if he.Code >= 400 && he.Code < 500 {
			return Errorf(he.Code, wire.CodeValidation, "%v", he.Message)
		}
		return Internal(err)
	}
	return Internal(err)
}

// errorHandler writes every error as a JSON wire.ErrorEnvelope. 5xx causes
// are logged at error level, but 503 unavailable ones (Valkey away or
// refusing writes: the client retries) once per outage at warn level
// (unavailable: the next ones at debug level until a request succeeds,
// endOutage), and for cancelled requests at debug level.
func errorHandler(log *slog.Logger, unavailable *outage.Log) echo.HTTPErrorHandler {
	return func(err error, c echo.Context) {
		if c.Response().Committed {
			return
		}
		ae := asError(err)
		req := c.Request()
		if ae.Status >= 500 {
			// A request whose client went away or that shutdown ended is
			// not a server failure: keep it out of the error log.
			level, msg := slog.LevelError, "request failed"
			switch {
			case errors.Is(ae, context.Canceled) || errors.Is(ae, context.DeadlineExceeded):
				level = slog.LevelDebug
			case ae.Status == http.StatusServiceUnavailable && ae.Code == wire.CodeUnavailable:
				var first bool
				if level, first = unavailable.Failed(); first {
					msg = "request failed: unavailable (the next ones at debug level, until a request succeeds)"
				}
			}
			log.Log(req.Context(), level, msg,
				slog.String(attrMethod, req.Method), slog.String(attrPath, req.URL.Path),
				slog.Int(attrStatus, ae.Status), slog.String(attrCode, ae.Code), slog.Any(attrError, ae))
		}
		if req.Method == http.MethodHead {
			_ = c.NoContent(ae.Status)
			return
		}
		_ = c.JSON(ae.Status, wire.ErrorEnvelope{Error: *ae.Body()})
	}
}

// endOutage ends the outage of the 503 answers at the first request to /v1
// answered 2xx: one that reached Valkey, for nearly every route. (/healthz
// and /metrics answer 200 whatever Valkey's state; a 200 of /readyz ends
// it too, in readyz.)
func (s *Server) endOutage(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		err := next(c)
		if st := c.Response().Status; err == nil && c.Response().Committed && st >= 200 && st < 300 && under(c.Request().URL.Path, "/v1") {
			s.outage.Ended()
		}
		return err
	}
}
