package api

import (
	"bytes"
	"encoding"
	"encoding/json"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/flowfabric/ff/runtime/internal/jsonscan"
)

// This file finds where in a request body a decoding problem is, for the
// error: encoding/json names neither the path of an unknown field nor the
// array indices on the way to a value of the wrong type, and it matches
// member names to fields case-insensitively, which the API does not (a
// member "PLAN" is not "plan"). The body is valid JSON (the decoder read it
// whole); nothing here runs on a body that decoded cleanly unless it may
// hold such a name (mayFoldKey).

// bodyWalk walks the JSON text of a body along the Go type it decodes to.
type bodyWalk struct {
	data []byte
	// fields caches the JSON names of the struct types met, per walk.
	fields map[reflect.Type]map[string]reflect.Type

	// offset, when positive, asks for the innermost value around that
	// byte offset (a *json.UnmarshalTypeError's): its path goes to at.
	offset int64
	at     string
	atSet  bool

	// The first member whose name is not exactly a field's JSON name: its
	// path, and the field it matches case-insensitively ("" for none).
	bad     string
	badWant string
	badSet  bool

	// path is where the walk is, built into a string only when needed.
	path []segment
}

// segment is one step of a path: a member name, or an index when name is
// nil.
type segment struct {
	name  []byte
	index int
	key   bool // name is a map's key: written ["name"]
}

// pathString returns the walk's path as the API writes field paths:
// "plan.execs[0].kind", `tags["a.b"]` (a map's key quoted, as flow input
// paths write them: a key may hold a '.').
func (w *bodyWalk) pathString() string {
	var b strings.Builder
	for _, s := range w.path {
		switch {
		case s.key:
			b.WriteByte('[')
			b.WriteString(strconv.Quote(string(s.name)))
			b.WriteByte(']')
		case s.name == nil:
			b.WriteByte('[')
			b.WriteString(strconv.Itoa(s.index))
			b.WriteByte(']')
		case b.Len() > 0:
			b.WriteByte('.')
			fallthrough
		default:
			b.Write(s.name)
		}
	}
	return b.String()
}

var (
	jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// mayFoldKey reports whether valid JSON text data may hold a member name
// that matches a field's only when case is ignored. The API's JSON names
// are lower-case ASCII, so such a name has an upper-case letter, an
// escape, or one of the two non-ASCII letters that encoding/json folds to
// ASCII (U+017F 'ſ' to s, U+212A Kelvin sign to k, whose UTF-8 starts with
// 0xC5 and 0xE2). It reads only the names (a string followed by ':'), and
// allocates nothing: values in upper case cost no walk.
func mayFoldKey(data []byte) bool {
	for i := 0; ; {
		q := bytes.IndexByte(data[i:], '"')
		if q < 0 {
			return false
		}
		start := i + q + 1 // first byte of the string's text
		end := start       // its closing quote
		for {
			e := bytes.IndexByte(data[end:], '"')
			if e < 0 {
				return false
			}
			end += e
			bs := 0 // backslashes before the quote: an odd count escapes it
			for bs < end-start && data[end-1-bs] == '\\' {
				bs++
			}
			if bs%2 == 0 {
				break
			}
			end++
		}
		if j := jsonscan.SkipSpace(data, end+1); j < len(data) && data[j] == ':' {
			for _, b := range data[start:end] {
				if b-'A' < 26 || b == '\\' || b == 0xC5 || b == 0xE2 {
					return true
				}
			}
		}
		i = end + 1
	}
}

// inexactKey returns the path of the first member of data (decoding to a
// value of type t) whose name is not exactly the JSON name of a field, and
// the name of the field it matches case-insensitively ("" when none).
func inexactKey(data []byte, t reflect.Type) (path, want string, ok bool) {
	w := bodyWalk{data: data}
	w.value(jsonscan.SkipSpace(data, 0), t)
	return w.bad, w.badWant, w.badSet
}

// pathAt returns the path of the innermost value of data around offset
// (as a *json.UnmarshalTypeError reports it), or "" when there is none.
func pathAt(data []byte, t reflect.Type, offset int64) string {
	w := bodyWalk{data: data, offset: offset}
	w.value(jsonscan.SkipSpace(data, 0), t)
	return w.at
}

// concrete returns the type a JSON value decodes into for a field of type
// t, or nil when its decoding is its own (an Unmarshaler, an interface).
func concrete(t reflect.Type) reflect.Type {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t.Kind() == reflect.Interface {
		return nil
	}
	if p := reflect.PointerTo(t); p.Implements(jsonUnmarshaler) || p.Implements(textUnmarshaler) {
		return nil
	}
	return t
}

// value walks the value at data[i] (no white space before it), which
// decodes to t (nil: unknown), at w.path; it returns the index after it.
func (w *bodyWalk) value(i int, t reflect.Type) int {
	if i >= len(w.data) {
		return len(w.data)
	}
	t = concrete(t)
	start := i
	var end int
	switch w.data[i] {
	case '{':
		end = w.object(i, t)
	case '[':
		var elem reflect.Type
		if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
			elem = t.Elem()
		}
		i = jsonscan.SkipSpace(w.data, i+1)
		for n := 0; i < len(w.data) && w.data[i] != ']'; n++ {
			w.path = append(w.path, segment{index: n})
			i = jsonscan.SkipSpace(w.data, w.value(i, elem))
			w.path = w.path[:len(w.path)-1]
			if i < len(w.data) && w.data[i] == ',' {
				i = jsonscan.SkipSpace(w.data, i+1)
			}
		}
		end = i + 1
	case '"':
		if end = jsonscan.StringEnd(w.data, i); end < 0 {
			end = len(w.data)
		}
	default: // a number, true, false or null
		end = i
	literal:
		for ; end < len(w.data); end++ {
			switch w.data[end] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				break literal
			}
		}
	}
	if w.offset > 0 && !w.atSet && int64(start) < w.offset && w.offset <= int64(end) {
		w.at, w.atSet = w.pathString(), true
	}
	return end
}

// object walks the object at data[i].
func (w *bodyWalk) object(i int, t reflect.Type) int {
	var names map[string]reflect.Type
	var values reflect.Type // of a map
	if t != nil {
		switch t.Kind() {
		case reflect.Struct:
			names = w.names(t)
		case reflect.Map:
			values = t.Elem()
		}
	}
	i = jsonscan.SkipSpace(w.data, i+1)
	for i < len(w.data) && w.data[i] == '"' {
		k := jsonscan.StringEnd(w.data, i) // -1 when it does not end
		if k < i+2 {
			return len(w.data)
		}
		key := w.data[i+1 : k-1]
		if slices.Contains(key, '\\') {
			var s string
			_ = json.Unmarshal(w.data[i:k], &s)
			key = []byte(s)
		}
		w.path = append(w.path, segment{name: key, key: names == nil && values != nil})
		i = jsonscan.SkipSpace(w.data, jsonscan.SkipSpace(w.data, k)+1) // past ':'
		ft := values
		if names != nil {
			var exact bool
			ft, exact = names[string(key)]
			if !exact && !w.badSet {
				w.bad, w.badSet = w.pathString(), true
				for name, typ := range names {
					if strings.EqualFold(name, string(key)) {
						w.badWant, ft = name, typ
					}
				}
			}
		}
		i = jsonscan.SkipSpace(w.data, w.value(i, ft))
		w.path = w.path[:len(w.path)-1]
		if i < len(w.data) && w.data[i] == ',' {
			i = jsonscan.SkipSpace(w.data, i+1)
		}
	}
	return i + 1
}

// names returns the JSON names of the fields of struct type t, as
// encoding/json names them (promoted fields of embedded structs included),
// with the type of each.
func (w *bodyWalk) names(t reflect.Type) map[string]reflect.Type {
	if m, ok := w.fields[t]; ok {
		return m
	}
	if w.fields == nil {
		w.fields = map[reflect.Type]map[string]reflect.Type{}
	}
	m := map[string]reflect.Type{}
	addFields(m, t, 0)
	w.fields[t] = m
	return m
}

// addFields adds the fields of struct type t to m; names already there
// (from a shallower level) win.
func addFields(m map[string]reflect.Type, t reflect.Type, depth int) {
	if depth > 8 {
		return
	}
	var embedded []reflect.Type
	for n := range t.NumField() {
		f := t.Field(n)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			et := f.Type
			if et.Kind() == reflect.Pointer {
				et = et.Elem()
			}
			if et.Kind() == reflect.Struct {
				embedded = append(embedded, et)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		if _, dup := m[name]; !dup {
			m[name] = f.Type
		}
	}
	for _, et := range embedded {
		addFields(m, et, depth+1)
	}
}
