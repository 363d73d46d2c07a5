package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/flowfabric/ff/runtime/internal/bodyread"
	"github.com/flowfabric/ff/runtime/wire"
)

// Body size limits per route family.
const (
	BodyLimitDefault = 64 << 10  // operator calls, claims, renewals
	BodyLimitCreate  = 1 << 20   // one execution with its input
	BodyLimitBatch   = 16 << 20  // batch create, batched complete/fail
	BodyLimitMax     = 256 << 20 // upper bound of any configured limit
)

// Decode reads the request body (at most limit bytes) into v, rejecting
// malformed JSON, unknown fields and trailing data with the API's stable
// errors. An empty body is an error unless optional is set, in which case v
// keeps its zero value. Routes added by other packages use it too.
func Decode(c echo.Context, limit int64, optional bool, v any) error {
	data, err := readBody(c, limit)
	if err != nil {
		return err
	}
	return decodeBody(data, optional, v)
}

// readBody reads the request body, at most limit bytes.
func readBody(c echo.Context, limit int64) ([]byte, error) {
	req := c.Request()
	if req.ContentLength > limit {
		return nil, tooLarge(limit)
	}
	data, err := bodyread.All(http.MaxBytesReader(c.Response(), req.Body, limit), req.ContentLength)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, tooLarge(limit)
		}
		return nil, Errorf(http.StatusBadRequest, wire.CodeInvalidJSON, "read body: %v", err)
	}
	return data, nil
}

// decodeBody decodes a request body read by readBody into v, as Decode.
func decodeBody(data []byte, optional bool, v any) error {
	if len(bytes.TrimSpace(data)) == 0 {
		if optional {
			return nil
		}
		return Errorf(http.StatusBadRequest, wire.CodeInvalidJSON, "request body is empty; a JSON object is required")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return decodeError(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return Errorf(http.StatusBadRequest, wire.CodeInvalidJSON, "request body has data after the JSON value")
	}
	return nil
}

func tooLarge(limit int64) *Error {
	e := Errorf(http.StatusRequestEntityTooLarge, wire.CodePayloadTooLarge, "request body exceeds %d bytes", limit)
	e.Details = map[string]any{"limit_bytes": limit}
	return e
}

// decodeError classifies an encoding/json error.
func decodeError(err error) *Error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		e := Errorf(http.StatusBadRequest, wire.CodeInvalidJSON, "malformed JSON at byte %d: %v", syn.Offset, syn)
		e.Details = map[string]any{"offset": syn.Offset}
		return e
	case errors.As(err, &typ):
		field := typ.Field
		if field == "" {
			field = "(body)"
		}
		e := Errorf(http.StatusBadRequest, wire.CodeInvalidJSON, "field %q: expected %s, got JSON %s", field, typ.Type, typ.Value)
		e.Details = map[string]any{"field": field}
		return e
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return Errorf(http.StatusBadRequest, wire.CodeInvalidJSON, "malformed JSON: unexpected end of body")
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		name := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		e := Errorf(http.StatusBadRequest, wire.CodeUnknownField, "unknown field %q", name)
		e.Details = map[string]any{"field": name}
		return e
	default:
		return Errorf(http.StatusBadRequest, wire.CodeInvalidJSON, "malformed JSON: %v", err)
	}
}
