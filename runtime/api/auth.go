package api

import (
	"crypto/subtle"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/flowfabric/ff/runtime/wire"
)

// bearerAuth admits a request only when it carries "Authorization: Bearer
// <token>"; the scheme's case does not matter (RFC 7235: "bearer" works
// too), the token's comparison takes constant time.
func bearerAuth(token string) echo.MiddlewareFunc {
	want := []byte(token)
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			h := c.Request().Header.Get(echo.HeaderAuthorization)
			scheme, got, ok := strings.Cut(h, " ")
			if !ok || !strings.EqualFold(scheme, "Bearer") || subtle.ConstantTimeCompare([]byte(strings.TrimSpace(got)), want) != 1 {
				c.Response().Header().Set("WWW-Authenticate", `Bearer realm="ffrun"`)
				return Errorf(http.StatusUnauthorized, wire.CodeUnauthorized, "missing or invalid bearer token")
			}
			return next(c)
		}
	}
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
