package api

import (
	"crypto/subtle"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/flowfabric/ff/runtime/authlimit"
	"github.com/flowfabric/ff/runtime/wire"
)

// bearerAuth admits a request only when it carries "Authorization: Bearer
// <token>"; the scheme's case does not matter (RFC 7235: "bearer" works
// too), the token's comparison takes constant time. With lim, a request
// with wrong credentials waits its turn among its address's failures, or
// is refused at once (AuthRefused).
func bearerAuth(token string, lim *authlimit.Limiter) echo.MiddlewareFunc {
	want := []byte(token)
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			h := c.Request().Header.Get(echo.HeaderAuthorization)
			scheme, got, ok := strings.Cut(h, " ")
			if !ok || !strings.EqualFold(scheme, "Bearer") || subtle.ConstantTimeCompare([]byte(strings.TrimSpace(got)), want) != 1 {
				if lim != nil && h != "" { // a guess: a request without credentials is not one
					r := c.Request()
					wait, ok := lim.Failed(authlimit.Addr(r))
					if !ok {
						return AuthRefused(c.Response().Header(), wait)
					}
					authlimit.Sleep(r.Context(), wait)
				}
				c.Response().Header().Set("WWW-Authenticate", `Bearer realm="ffrun"`)
				return Errorf(http.StatusUnauthorized, wire.CodeUnauthorized, "missing or invalid bearer token")
			}
			return next(c)
		}
	}
}

// AuthRefused is the answer to a failed authentication that an
// authlimit.Limiter refused: 429 rate_limited, with Retry-After (whole
// seconds, at least one) set in h.
func AuthRefused(h http.Header, retry time.Duration) *Error {
	secs := int((retry + time.Second - 1) / time.Second)
	h.Set("Retry-After", strconv.Itoa(max(secs, 1)))
	e := Errorf(http.StatusTooManyRequests, wire.CodeRateLimited,
		"too many failed authentications from this address: try again in %d s", max(secs, 1))
	e.Details = map[string]any{"retry_after_ms": retry.Milliseconds()}
	return e
}

// guardPrefix applies mw to the requests whose path is prefix or lies
// under it (unknown paths and methods included), and lets others pass.
func guardPrefix(prefix string, mw echo.MiddlewareFunc) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		guarded := mw(next)
		return func(c echo.Context) error {
			if p := c.Request().URL.Path; p == prefix || strings.HasPrefix(p, prefix+"/") {
				return guarded(c)
			}
			return next(c)
		}
	}
}
