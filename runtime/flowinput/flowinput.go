// Package flowinput checks a JSON value against a type of a compiled flow
// (plan.TypeRef and the flow's declared plan.Type records): a run's input
// before anything is staged (Flow), so that a run never starts with an
// input its generated Go handlers cannot decode, and, in those handlers
// (package gen/bind), each exec's input and the upstream outputs it reads
// before they are decoded (Checker), so that a value that does not match
// its type never reaches a handler as zero values.
//
// The rules follow the JSON encoding of the generated Go types: records are
// objects whose required fields must be present and not null, optional
// fields may be absent or null, and unknown fields and keys given twice in
// one object (outside json values) are rejected; int is an
// integer literal in the int64 range; float any number; bytes a base64
// (standard alphabet, padded) string; time an RFC 3339 string; duration an
// integer number of nanoseconds; json any value. Lists, maps, bytes and json
// also accept null, as Go encodes their zero values.
package flowinput

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/flowfabric/ff/compiler/plan"
	"github.com/flowfabric/ff/dsl"
)

// MaxDepth bounds the nesting of a checked value and of type references:
// plan.MaxInputDepth, which ffc holds flow input types and schedule inputs
// to.
const MaxDepth = plan.MaxInputDepth

// Error is a value that does not match its type. Path names the offending
// value from the root ("input.tags[2]", `input.labels["k"]`).
type Error struct {
	Path string
	Msg  string
}

func (e *Error) Error() string { return e.Path + ": " + e.Msg }

// Flow checks the input of a run of f. root is the name of the value in
// paths ("input"). A flow without an input type accepts only an absent
// (empty) or null input. The error is the first mismatch found, an *Error.
func Flow(f *plan.Flow, root string, input []byte) error {
	return (&checker{}).flow(f, root, input)
}

// FlowErrors checks the input as Flow does, but goes on past a mismatch:
// it returns every mismatch, in the order Flow meets them, up to limit (at
// least 1), and whether there were more. An input that is not one JSON
// value has one error. ffc reports a schedule's input this way.
func FlowErrors(f *plan.Flow, root string, input []byte, limit int) ([]*Error, bool) {
	c := &checker{collect: true, limit: max(limit, 1)}
	_ = c.flow(f, root, input) // the errors are in c.errs
	return c.errs, c.more
}

func (c *checker) flow(f *plan.Flow, root string, input []byte) error {
	c.types = make(map[string]*plan.Type, len(f.Types))
	for i := range f.Types {
		c.types[f.Types[i].Name] = &f.Types[i]
	}
	trimmed := bytes.TrimSpace(input)
	if f.Input == nil {
		if len(trimmed) == 0 || string(trimmed) == "null" {
			return nil
		}
		return c.report(&Error{Path: root, Msg: fmt.Sprintf("flow %q takes no input; send none or null", f.Name)})
	}
	if len(trimmed) == 0 {
		return c.report(&Error{Path: root, Msg: fmt.Sprintf("is required: flow %q takes %s", f.Name, plan.TypeString(f.Input))})
	}
	return c.value(root, f.Input, trimmed)
}

// value checks data, one JSON value without white space around it,
// against t.
func (c *checker) value(root string, t *plan.TypeRef, data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	val, err := decode(dec, 0)
	if err != nil {
		return c.report(&Error{Path: root, Msg: fmt.Sprintf("is not valid JSON: %v", err)})
	}
	// More is false before a stray ']' or '}': read to the end instead.
	if _, err := dec.Token(); err != io.EOF {
		return c.report(&Error{Path: root, Msg: "has data after the JSON value"})
	}
	return c.check(root, t, val, 0)
}

// repeated stands for the value of a member whose key appears more than
// once in its object. Go's decoder assigns every occurrence in turn, so a
// handler could get a value other than the one checked (or fail on an
// earlier one): such an input is refused.
type repeated struct{}

// decodeNestingMax is encoding/json's own nesting limit.
const decodeNestingMax = 10000

// decode reads one JSON value as encoding/json decodes into any (with
// UseNumber), except that a repeated key's value is repeated{}.
func decode(dec *json.Decoder, depth int) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	d, ok := tok.(json.Delim)
	if !ok {
		return tok, nil // null, bool, json.Number or string
	}
	if depth >= decodeNestingMax {
		return nil, fmt.Errorf("exceeded max depth")
	}
	if d == '[' {
		a := []any{}
		for dec.More() {
			v, err := decode(dec, depth+1)
			if err != nil {
				return nil, err
			}
			a = append(a, v)
		}
		_, err := dec.Token() // ']'
		return a, err
	}
	m := map[string]any{}
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			return nil, err
		}
		v, err := decode(dec, depth+1)
		if err != nil {
			return nil, err
		}
		key := k.(string) // the decoder returns object keys as strings
		if _, seen := m[key]; seen {
			v = repeated{}
		}
		m[key] = v
	}
	_, err = dec.Token() // '}'
	return m, err
}

type checker struct {
	types map[string]*plan.Type

	// In collect mode (FlowErrors) a mismatch is kept in errs and the
	// check goes on, until errs holds limit errors and one more is found.
	collect bool
	limit   int
	errs    []*Error
	more    bool
}

// errEnough ends a check in collect mode that found more than its limit.
var errEnough = errors.New("flowinput: too many errors")

// report returns e, which ends the check, or in collect mode keeps it and
// returns nil so that the check goes on (errEnough past the limit).
func (c *checker) report(e *Error) error {
	if !c.collect {
		return e
	}
	if len(c.errs) == c.limit {
		c.more = true
		return errEnough
	}
	c.errs = append(c.errs, e)
	return nil
}

func kindName(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case json.Number:
		return "a number"
	case string:
		return "a string"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}

func (c *checker) check(path string, t *plan.TypeRef, v any, depth int) error {
	if depth > MaxDepth {
		return c.report(&Error{Path: path, Msg: fmt.Sprintf("nests deeper than %d levels", MaxDepth)})
	}
	if _, ok := v.(repeated); ok {
		return c.report(&Error{Path: path, Msg: "is given more than once in its object"})
	}
	want := func() error {
		return c.report(&Error{Path: path, Msg: fmt.Sprintf("want %s, got %s", describe(t), kindName(v))})
	}
	switch t.Kind {
	case plan.KindJSON:
		return nil
	case plan.KindString:
		if _, ok := v.(string); !ok {
			return want()
		}
	case plan.KindBool:
		if _, ok := v.(bool); !ok {
			return want()
		}
	case plan.KindFloat:
		n, ok := v.(json.Number)
		if !ok {
			return want()
		}
		if _, err := strconv.ParseFloat(string(n), 64); err != nil {
			return c.report(&Error{Path: path, Msg: fmt.Sprintf("%s is out of the float64 range", n)})
		}
	case plan.KindInt, plan.KindDuration:
		n, ok := v.(json.Number)
		if !ok {
			return want()
		}
		if _, err := strconv.ParseInt(string(n), 10, 64); err != nil {
			if !strings.ContainsAny(string(n), ".eE") {
				return c.report(&Error{Path: path, Msg: fmt.Sprintf("%s is outside the int64 range", n)})
			}
			return c.report(&Error{Path: path, Msg: fmt.Sprintf("want %s, got %s (not an integer literal)", describe(t), n)})
		}
	case plan.KindBytes:
		if v == nil {
			return nil
		}
		s, ok := v.(string)
		if !ok {
			return want()
		}
		if _, err := base64.StdEncoding.DecodeString(s); err != nil {
			return c.report(&Error{Path: path, Msg: fmt.Sprintf("want base64 (standard, padded) bytes: %v", err)})
		}
	case plan.KindTime:
		s, ok := v.(string)
		if !ok {
			return want()
		}
		if _, err := time.Parse(time.RFC3339Nano, s); err != nil || !strictRFC3339(s) {
			return c.report(&Error{Path: path, Msg: fmt.Sprintf("want an RFC 3339 time like 2026-11-21T19:00:00Z, got %q", s)})
		}
	case plan.KindList:
		if v == nil {
			return nil
		}
		a, ok := v.([]any)
		if !ok {
			return want()
		}
		for i, e := range a {
			if err := c.check(fmt.Sprintf("%s[%d]", path, i), t.Elem, e, depth+1); err != nil {
				return err
			}
		}
	case plan.KindMap:
		if v == nil {
			return nil
		}
		m, ok := v.(map[string]any)
		if !ok {
			return want()
		}
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			if err := c.check(path+"["+strconv.Quote(k)+"]", t.Elem, m[k], depth+1); err != nil {
				return err
			}
		}
	case plan.KindNamed:
		return c.record(path, t, v, depth)
	default:
		return c.report(&Error{Path: path, Msg: fmt.Sprintf("the plan declares an unknown type kind %q", t.Kind)})
	}
	return nil
}

func (c *checker) record(path string, t *plan.TypeRef, v any, depth int) error {
	rec, ok := c.types[t.Name]
	if !ok {
		return c.report(&Error{Path: path, Msg: fmt.Sprintf("the plan does not declare type %q", t.Name)})
	}
	m, ok := v.(map[string]any)
	if !ok {
		return c.report(&Error{Path: path, Msg: fmt.Sprintf("want %s, got %s", describe(t), kindName(v))})
	}
	known := make(map[string]bool, len(rec.Fields))
	names := make([]string, len(rec.Fields))
	for i, f := range rec.Fields {
		known[f.Name] = true
		names[i] = f.Name
	}
	var unknown []string
	for k := range m {
		if !known[k] {
			unknown = append(unknown, k)
		}
	}
	slices.Sort(unknown)
	for _, f := range rec.Fields {
		fp := path + "." + f.Name
		fv, present := m[f.Name]
		switch {
		case !present || fv == nil && !nullable(&f.Type):
			if f.Optional {
				continue
			}
			msg := fmt.Sprintf("is required (%s) but missing", describe(&f.Type))
			if present {
				msg = fmt.Sprintf("is required (%s) and must not be null", describe(&f.Type))
			} else if k := misspelt(f.Name, unknown, names); k != "" && !c.collect {
				// The check ends here: name the unknown field that is
				// likely this one, which FlowErrors reports on its own.
				msg += fmt.Sprintf("; the object has an unknown field %q: did you mean %q?", k, f.Name)
			}
			if err := c.report(&Error{Path: fp, Msg: msg}); err != nil {
				return err
			}
			continue
		}
		if err := c.check(fp, &f.Type, fv, depth+1); err != nil {
			return err
		}
	}
	for _, k := range unknown {
		msg := fmt.Sprintf("unknown field of %s (fields: %s)", t.Name, strings.Join(names, ", "))
		if s := dsl.Suggest(k, names); s != "" {
			msg += fmt.Sprintf("; did you mean %q?", s)
		}
		if err := c.report(&Error{Path: path + "." + k, Msg: msg}); err != nil {
			return err
		}
	}
	return nil
}

// misspelt returns the first of the unknown keys of an object that is
// likely a misspelling of its field name (of the fields names), or "".
func misspelt(name string, unknown, names []string) string {
	for _, k := range unknown {
		if dsl.Suggest(k, names) == name {
			return k
		}
	}
	return ""
}

// nullable reports whether null is the JSON form of a Go zero value of t.
func nullable(t *plan.TypeRef) bool {
	switch t.Kind {
	case plan.KindList, plan.KindMap, plan.KindBytes, plan.KindJSON:
		return true
	}
	return false
}

func describe(t *plan.TypeRef) string {
	switch t.Kind {
	case plan.KindInt:
		return "int (an integer)"
	case plan.KindDuration:
		return "duration (integer nanoseconds)"
	case plan.KindNamed:
		return t.Name + " (an object)"
	case plan.KindList, plan.KindMap:
		return plan.TypeString(t) + " (an " + map[string]string{plan.KindList: "array", plan.KindMap: "object"}[t.Kind] + ")"
	}
	return plan.TypeString(t)
}

// strictRFC3339 reports whether s has the exact shape of an RFC 3339
// date-time, which time.Parse checks only loosely (a one-digit hour, a
// comma before the fraction and zone offsets of 24 hours or 60 minutes
// pass it): YYYY-MM-DDTHH:MM:SS, an optional '.' and digits, then Z or
// ±HH:MM with HH < 24 and MM < 60. Go's own encoder writes only this
// shape; decoders elsewhere refuse the others.
func strictRFC3339(s string) bool {
	digits := func(i, n int) bool {
		if i+n > len(s) {
			return false
		}
		for _, c := range []byte(s[i : i+n]) {
			if c < '0' || c > '9' {
				return false
			}
		}
		return true
	}
	if len(s) < 20 || !digits(0, 4) || s[4] != '-' || !digits(5, 2) || s[7] != '-' || !digits(8, 2) ||
		s[10] != 'T' || !digits(11, 2) || s[13] != ':' || !digits(14, 2) || s[16] != ':' || !digits(17, 2) {
		return false
	}
	i := 19
	if s[i] == '.' {
		j := i + 1
		for j < len(s) && s[j] >= '0' && s[j] <= '9' {
			j++
		}
		if j == i+1 {
			return false
		}
		i = j
	}
	switch rest := s[i:]; {
	case rest == "Z":
		return true
	case len(rest) == 6 && (rest[0] == '+' || rest[0] == '-') && rest[3] == ':' && digits(i+1, 2) && digits(i+4, 2):
		return rest[1:3] < "24" && rest[4:6] < "60"
	}
	return false
}
