package api

import (
	"crypto/subtle"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/flowfabric/ff/runtime/wire"
)

// bearerAuth admits a request only when it carries "Authorization: Bearer
// <token>"; the comparison takes constant time.
func bearerAuth(token string) echo.MiddlewareFunc {
	want := []byte(token)
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			h := c.Request().Header.Get(echo.HeaderAuthorization)
			got, ok := strings.CutPrefix(h, "Bearer ")
			if !ok || subtle.ConstantTimeCompare([]byte(strings.TrimSpace(got)), want) != 1 {
				c.Response().Header().Set("WWW-Authenticate", `Bearer realm="ffrun"`)
				return Errorf(http.StatusUnauthorized, wire.CodeUnauthorized, "missing or invalid bearer token")
			}
			return next(c)
		}
	}
}
