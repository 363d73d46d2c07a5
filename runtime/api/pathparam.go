package api

import (
	"net/url"

	"github.com/labstack/echo/v4"
)

// pathParam returns the route's path parameter name ("id", "name", or "*"
// for the rest of the path, a budget's or quota's id), percent-decoded,
// the same on every route: "tw%6F" is template "two", "3%2E…" the id
// "3.…", "default%2Fgpu" the id "default/gpu" (RFC 3986: an escaped
// character is the character). Echo routes on the path as the request
// spelled it when that differs from the decoded path's own escaping
// (URL.RawPath is set) and then gives parameters still escaped; otherwise
// it routes on the decoded path, whose parameters must not be decoded
// again ("a%2541" is "a%41", not "aA"). field names the parameter in the
// error of a malformed escape.
func pathParam(c echo.Context, name, field string) (string, *Error) {
	raw := c.Param(name)
	if c.Request().URL.RawPath == "" {
		return raw, nil
	}
	v, err := url.PathUnescape(raw)
	if err != nil {
		return "", invalid(field, "%q is not a valid escaped path", raw)
	}
	return v, nil
}
