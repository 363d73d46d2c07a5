package api

import (
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
// too), the token is compared in constant time (authlimit.Token). A
// request with credentials has them judged at lim's pace: while its
// address is limited it waits its turn, or is refused at once
// (AuthRefused) without their being compared, right or wrong. A request
// without credentials is no guess: it is answered 401 at once.
//
// OPTIONS passes unchecked: a browser's CORS preflight never carries
// credentials (Fetch standard), and the answer, 204 with the route's
// Allow header (or 404 for no route), does nothing and tells no more
// than the route index does. The request the preflight asks about is
// checked, and a cross-origin write refused (crossOrigin), as ever.
func bearerAuth(token string, lim *authlimit.Limiter) echo.MiddlewareFunc {
	want := authlimit.NewToken(token)
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			r := c.Request()
			if r.Method == http.MethodOptions {
				return next(c)
			}
			h := r.Header.Get(echo.HeaderAuthorization)
			if h == "" {
				return unauthorized(c)
			}
			scheme, got, ok := strings.Cut(h, " ")
			if !ok || !strings.EqualFold(scheme, "Bearer") {
				got = "" // judged, and counted, as a wrong token
			}
			v, retry, err := lim.Check(r.Context(), authlimit.Addr(r), want, strings.TrimSpace(got))
			switch {
			case err != nil:
				return err
			case v == authlimit.Refused:
				return AuthRefused(c.Response().Header(), retry)
			case v != authlimit.Admitted:
				return unauthorized(c)
			}
			return next(c)
		}
	}
}

func unauthorized(c echo.Context) error {
	c.Response().Header().Set("WWW-Authenticate", `Bearer realm="ffrun"`)
	return Errorf(http.StatusUnauthorized, wire.CodeUnauthorized, "missing or invalid bearer token")
}

// AuthRefused is the answer to a request whose credentials an
// authlimit.Limiter refused to judge (its address is limited and its turn
// too far off): 429 rate_limited, with Retry-After (whole seconds, at
// least one) set in h.
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
			if under(c.Request().URL.Path, prefix) {
				return guarded(c)
			}
			return next(c)
		}
	}
}

// crossOrigin refuses the unsafe requests a browser sends from another
// origin (by Sec-Fetch-Site or Origin; http.CrossOriginProtection): 403
// forbidden, before anything is done. Without a token (or with a page's
// cookies, were there any) any web page could otherwise write through the
// API with a form or a "simple" fetch, which no CORS preflight stops.
// Requests without those headers (scripts, curl, the Go client and
// worker) pass. Paths skip says true of pass unchecked: the handlers
// mounted there (the console) make the same check themselves, answering
// with a page of their own.
func crossOrigin(skip func(path string) bool) echo.MiddlewareFunc {
	cop := http.NewCrossOriginProtection()
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			r := c.Request()
			if skip(r.URL.Path) {
				return next(c)
			}
			if err := cop.Check(r); err != nil {
				return Errorf(http.StatusForbidden, wire.CodeForbidden,
					"a browser's request from another origin: refused (a script sends no Origin or Sec-Fetch-Site header)")
			}
			return next(c)
		}
	}
}

// under says whether path is prefix or lies under it.
func under(path, prefix string) bool {
	return path == prefix || strings.HasPrefix(path, prefix+"/")
}
