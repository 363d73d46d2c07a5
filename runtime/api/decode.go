package api

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"reflect"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/flowfabric/ff/runtime/internal/bodyread"
	"github.com/flowfabric/ff/runtime/wire"
)

// Body size limits per route family.
const (
	BodyLimitDefault = 64 << 10       // operator calls, renewals
	BodyLimitClaim   = 1 << 20        // claims and heartbeats: up to 1,024 kinds of up to 128 bytes, escaped
	BodyLimitCreate  = 1<<20 + 64<<10 // one execution with its input (up to 1 MiB) and the rest
	BodyLimitBatch   = 16 << 20       // batch create, batched complete/fail
	BodyLimitMax     = 256 << 20      // upper bound of any configured limit
)

// Decode reads the request body (at most limit bytes) into v, rejecting
// malformed JSON, unknown fields (member names are matched to fields
// exactly, not case-insensitively as encoding/json does) and trailing data
// with the API's stable errors, which name the field by its path
// ("plan.execs[0].kind"). An empty body, or null, is an error unless
// optional is set, in which case v keeps its zero value. Routes added by
// other packages use it too.
func Decode(c echo.Context, limit int64, optional bool, v any) error {
	data, err := readBody(c, limit)
	if err != nil {
		return err
	}
	return decodeBody(data, optional, v)
}

// readBody reads the request body, at most limit bytes, once its
// Content-Type passed jsonBody. A write without a body (a cancel without
// a reason) is not asked for a type, whether it says so (Content-Length:
// 0) or sends a body of unknown length (chunked) that turns out empty.
func readBody(c echo.Context, limit int64) ([]byte, error) {
	req := c.Request()
	if req.ContentLength > 0 {
		if err := jsonBody(req.Header.Get(echo.HeaderContentType)); err != nil {
			return nil, err
		}
	}
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
	if req.ContentLength < 0 && len(data) > 0 {
		if err := jsonBody(req.Header.Get(echo.HeaderContentType)); err != nil {
			return nil, err
		}
	}
	return data, nil
}

// jsonBody refuses (415 unsupported_media_type) a body whose Content-Type
// ct says it is not JSON: every body is read as JSON, so one sent as
// text, a multipart form, XML or JSON in another encoding than UTF-8 is
// a client mistaken about the API, better told so than answered with the
// JSON syntax error of its text. Taken: application/json and the +json
// types (application/vnd.x+json), with a UTF-8 (utf8 too) or US-ASCII
// charset or none; no Content-Type; and application/x-www-form-urlencoded, which
// curl -d sends for the JSON typed after it (a real form's body then
// fails as JSON would).
func jsonBody(ct string) *Error {
	if strings.TrimSpace(ct) == "" {
		return nil
	}
	mt, params, err := mime.ParseMediaType(ct)
	ok := err == nil && (mt == "application/json" || mt == "application/x-www-form-urlencoded" ||
		strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json"))
	if cs, has := params["charset"]; ok && has && !strings.EqualFold(cs, "utf-8") && !strings.EqualFold(cs, "utf8") &&
		!strings.EqualFold(cs, "us-ascii") {
		ok = false
	}
	if ok {
		return nil
	}
	e := Errorf(http.StatusUnsupportedMediaType, wire.CodeUnsupportedMediaType,
		"request body sent as %q: the API takes JSON in UTF-8 (Content-Type: application/json)", ct)
	e.Details = map[string]any{"content_type": ct}
	return e
}

// decodeBody decodes a request body read by readBody into v, as Decode.
// Where a body is required, a top-level null is refused as an empty body
// is: encoding/json would leave v as it was, the same as {}.
func decodeBody(data []byte, optional bool, v any) error {
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 {
		if optional {
			return nil
		}
		return Errorf(http.StatusBadRequest, wire.CodeInvalidJSON, "request body is empty; a JSON object is required")
	}
	if !optional && string(trimmed) == "null" {
		return Errorf(http.StatusBadRequest, wire.CodeInvalidJSON, "request body is null; a JSON object is required")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return decodeError(err, data, reflect.TypeOf(v))
	}
	if _, err := dec.Token(); err != io.EOF {
		return Errorf(http.StatusBadRequest, wire.CodeInvalidJSON, "request body has data after the JSON value")
	}
	if mayFoldKey(data) {
		if path, want, ok := inexactKey(data, reflect.TypeOf(v)); ok {
			return unknownField(path, want)
		}
	}
	return nil
}

// unknownField is the error for a member at path that names no field;
// want is the field it names when case is ignored ("" when none).
func unknownField(path, want string) *Error {
	e := Errorf(http.StatusBadRequest, wire.CodeUnknownField, "unknown field %q", path)
	if want != "" {
		e.Message += fmt.Sprintf(" (names are case-sensitive: did you mean %q?)", want)
	}
	e.Details = map[string]any{"field": path}
	return e
}

func tooLarge(limit int64) *Error {
	e := Errorf(http.StatusRequestEntityTooLarge, wire.CodePayloadTooLarge, "request body exceeds %d bytes", limit)
	e.Details = map[string]any{"limit_bytes": limit}
	return e
}

// decodeError classifies an encoding/json error in decoding data into a
// value of type t.
func decodeError(err error, data []byte, t reflect.Type) *Error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		e := Errorf(http.StatusBadRequest, wire.CodeInvalidJSON, "malformed JSON at byte %d: %v", syn.Offset, syn)
		e.Details = map[string]any{"offset": syn.Offset}
		return e
	case errors.As(err, &typ):
		field := cmp.Or(pathAt(data, t, typ.Offset), typ.Field)
		if field == "" {
			return Errorf(http.StatusBadRequest, wire.CodeInvalidJSON, "request body: expected %s, got JSON %s", describe(typ.Type), typ.Value)
		}
		e := Errorf(http.StatusBadRequest, wire.CodeInvalidJSON, "field %q: expected %s, got JSON %s", field, describe(typ.Type), typ.Value)
		e.Details = map[string]any{"field": field}
		return e
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return Errorf(http.StatusBadRequest, wire.CodeInvalidJSON, "malformed JSON: unexpected end of body")
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		if path, want, ok := inexactKey(data, t); ok {
			return unknownField(path, want)
		}
		return unknownField(strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`), "")
	default:
		return Errorf(http.StatusBadRequest, wire.CodeInvalidJSON, "malformed JSON: %v", err)
	}
}

// describe says in JSON terms what a value of type t is written as.
func describe(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == reflect.TypeFor[time.Time]() {
		return "a time string (RFC 3339)"
	}
	switch t.Kind() {
	case reflect.Struct, reflect.Map:
		return "a JSON object"
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return "a base64 string"
		}
		return "a JSON array"
	case reflect.Array:
		return "a JSON array"
	case reflect.String:
		return "a JSON string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	}
	return "a JSON value"
}
