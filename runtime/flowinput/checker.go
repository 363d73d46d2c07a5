package flowinput

import (
	"bytes"
	"fmt"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/flowfabric/ff/compiler/plan"
)

// Types holds the declared types of a flow, from which Checker prepares
// checkers that share what they know of each record. It is not safe for
// concurrent use; the checkers it returns are.
type Types struct {
	decl    map[string]*plan.Type
	records map[string]*record
}

// NewTypes returns the Types of a flow whose plan declares types (the
// Types of a plan.Flow).
func NewTypes(types []plan.Type) *Types {
	decl := make(map[string]*plan.Type, len(types))
	for i := range types {
		decl[types[i].Name] = &types[i]
	}
	return &Types{decl: decl, records: map[string]*record{}}
}

// A Checker checks JSON values against one type with the rules of Flow:
// the input of an exec or the output of one of its upstreams, as a
// generated binding decodes them for every task. It is prepared once, and
// a value that matches is checked in one pass over its bytes, without
// decoding it or allocating (but for floats written with an exponent and
// maps whose keys are not in order). A value that does not match, or that
// this pass does not settle (escapes in keys, bytes and times, invalid
// UTF-8 in keys, white space other than JSON's), is checked again the way
// Flow does, which gives the error: Check answers as Flow would for a
// flow taking that type, an absent value aside.
type Checker struct {
	t     *plan.TypeRef
	root  *node
	types map[string]*plan.Type // for the full check
}

// Checker returns a checker for values of type t. It fails when t, or a
// type it refers to, is a kind or a name the plan does not declare.
func (ts *Types) Checker(t *plan.TypeRef) (*Checker, error) {
	n, err := ts.node(t, 0)
	if err != nil {
		return nil, err
	}
	return &Checker{t: t, root: n, types: ts.decl}, nil
}

// Check reports whether data, the value called root in paths ("input"),
// matches the checker's type: nil, or the first mismatch as Flow finds it,
// an *Error. Absent (empty) data is a mismatch.
func (c *Checker) Check(root string, data []byte) error {
	s := scanner{data: data}
	if s.value(c.root, 0) && s.end() {
		return nil
	}
	full := &checker{types: c.types}
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 {
		return &Error{Path: root, Msg: fmt.Sprintf("is required (%s) but missing", describe(c.t))}
	}
	return full.value(root, c.t, trimmed)
}

// node is a type prepared for the scan: kind as in plan.TypeRef, elem the
// element of a list or map, rec the record of a named type.
type node struct {
	kind string
	elem *node
	rec  *record
}

// record is a declared type prepared for the scan.
type record struct {
	fields   []field
	index    map[string]int // field name -> index in fields
	required []int          // indexes of the required fields
	// oddNames: a field name is not valid UTF-8 (a plan built by hand):
	// the scan leaves such records to the full check.
	oddNames bool
}

type field struct {
	node     *node
	optional bool
}

// node prepares t; depth counts the lists and maps t nests.
func (ts *Types) node(t *plan.TypeRef, depth int) (*node, error) {
	if t == nil {
		return nil, fmt.Errorf("flowinput: no type")
	}
	switch t.Kind {
	case plan.KindString, plan.KindInt, plan.KindFloat, plan.KindBool, plan.KindBytes, plan.KindTime, plan.KindDuration, plan.KindJSON:
		return &node{kind: t.Kind}, nil
	case plan.KindList, plan.KindMap:
		if depth >= plan.MaxTypeDepth {
			return nil, fmt.Errorf("flowinput: %s nests more than %d lists and maps", plan.TypeString(t), plan.MaxTypeDepth)
		}
		e, err := ts.node(t.Elem, depth+1)
		if err != nil {
			return nil, err
		}
		return &node{kind: t.Kind, elem: e}, nil
	case plan.KindNamed:
		rec, err := ts.record(t.Name)
		if err != nil {
			return nil, err
		}
		return &node{kind: t.Kind, rec: rec}, nil
	}
	return nil, fmt.Errorf("flowinput: unknown type kind %q", t.Kind)
}

// record prepares the declared type name once; a type that refers to
// itself (through an optional field, a list or a map) refers to the same
// record.
func (ts *Types) record(name string) (*record, error) {
	if rec, ok := ts.records[name]; ok {
		return rec, nil
	}
	decl, ok := ts.decl[name]
	if !ok {
		return nil, fmt.Errorf("flowinput: type %q is not declared in the plan", name)
	}
	rec := &record{fields: make([]field, len(decl.Fields)), index: make(map[string]int, len(decl.Fields))}
	ts.records[name] = rec
	for i := range decl.Fields {
		f := &decl.Fields[i]
		n, err := ts.node(&f.Type, 0)
		if err != nil {
			delete(ts.records, name)
			return nil, fmt.Errorf("flowinput: type %s: field %s: %w", name, f.Name, err)
		}
		if _, dup := rec.index[f.Name]; dup {
			delete(ts.records, name)
			return nil, fmt.Errorf("flowinput: type %s: field %s declared twice", name, f.Name)
		}
		rec.fields[i] = field{node: n, optional: f.Optional}
		rec.oddNames = rec.oddNames || !utf8.ValidString(f.Name)
		rec.index[f.Name] = i
		if !f.Optional {
			rec.required = append(rec.required, i)
		}
	}
	return rec, nil
}

// nullable reports whether null is a value of n's kind, as nullable does
// for a plan.TypeRef.
func (n *node) nullable() bool {
	switch n.kind {
	case plan.KindList, plan.KindMap, plan.KindBytes, plan.KindJSON:
		return true
	}
	return false
}

// scanner reads one JSON value from data and reports whether it matches,
// in one pass; false means a mismatch, invalid JSON or a case it leaves
// to the full check (the decoding check of Flow).
type scanner struct {
	data []byte
	i    int
	// level is the nesting of arrays and objects at i, which the full
	// check bounds at decodeNestingMax as encoding/json does.
	level int
}

func (s *scanner) space() {
	for s.i < len(s.data) {
		switch s.data[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// end reports whether only white space is left.
func (s *scanner) end() bool {
	s.space()
	return s.i == len(s.data)
}

// peek skips white space and returns the next byte, or 0 at the end.
func (s *scanner) peek() byte {
	s.space()
	if s.i == len(s.data) {
		return 0
	}
	return s.data[s.i]
}

// literal reads word (true, false, null) at i.
func (s *scanner) literal(word string) bool {
	if !bytes.HasPrefix(s.data[s.i:], []byte(word)) {
		return false
	}
	s.i += len(word)
	return true
}

// value reads a value of n, depth typed levels deep (as the full check
// counts them).
func (s *scanner) value(n *node, depth int) bool {
	if depth > MaxDepth {
		return false
	}
	c := s.peek()
	if c == 'n' {
		return n.nullable() && s.literal("null")
	}
	switch n.kind {
	case plan.KindJSON:
		return s.skip()
	case plan.KindString:
		_, _, ok := s.str()
		return ok
	case plan.KindBool:
		return c == 't' && s.literal("true") || c == 'f' && s.literal("false")
	case plan.KindInt, plan.KindDuration:
		num, frac, ok := s.number()
		return ok && !frac && intInRange(num)
	case plan.KindFloat:
		num, _, ok := s.number()
		return ok && floatInRange(num)
	case plan.KindBytes:
		raw, escaped, ok := s.str()
		return ok && !escaped && validBase64(raw)
	case plan.KindTime:
		raw, escaped, ok := s.str()
		if !ok || escaped {
			return false
		}
		text := string(raw)
		_, err := time.Parse(time.RFC3339Nano, text)
		return err == nil && strictRFC3339(text)
	case plan.KindList:
		return s.list(n.elem, depth)
	case plan.KindMap:
		return s.mapValue(n.elem, depth)
	case plan.KindNamed:
		return s.record(n.rec, depth)
	}
	return false
}

// open reads the delimiter c that opens an array or object.
func (s *scanner) open(c byte) bool {
	if s.peek() != c || s.level >= decodeNestingMax {
		return false
	}
	s.i++
	s.level++
	return true
}

// next reads what follows a member or element: the closing delimiter
// (more is false) or a comma.
func (s *scanner) next(closing byte) (more, ok bool) {
	switch s.peek() {
	case ',':
		s.i++
		return true, true
	case closing:
		s.i++
		s.level--
		return false, true
	}
	return false, false
}

// empty reads the closing delimiter of an empty array or object, if it
// is next.
func (s *scanner) empty(closing byte) bool {
	if s.peek() != closing {
		return false
	}
	s.i++
	s.level--
	return true
}

func (s *scanner) list(elem *node, depth int) bool {
	if !s.open('[') {
		return false
	}
	if s.empty(']') {
		return true
	}
	for {
		if !s.value(elem, depth+1) {
			return false
		}
		more, ok := s.next(']')
		if !ok || !more {
			return ok
		}
	}
}

// key reads an object key and its colon. It returns the key's bytes,
// which are its text when it holds no escape (escaped is false) and is
// valid UTF-8 (Go's decoder turns bytes that are not into U+FFFD).
func (s *scanner) key() (key []byte, escaped, ok bool) {
	if s.peek() != '"' {
		return nil, false, false
	}
	key, escaped, ok = s.str()
	if !ok || s.peek() != ':' {
		return nil, false, false
	}
	s.i++
	return key, escaped, true
}

// mapValue reads an object of elem values. Its keys must differ: when
// they are not in increasing order (as Go writes them), the object is
// read again to compare them.
func (s *scanner) mapValue(elem *node, depth int) bool {
	start := s.i
	if !s.open('{') {
		return false
	}
	if s.empty('}') {
		return true
	}
	var prev []byte
	sorted := true
	for {
		key, escaped, ok := s.key()
		if !ok || escaped || !utf8.Valid(key) {
			return false
		}
		if prev != nil && bytes.Compare(prev, key) >= 0 {
			sorted = false
		}
		prev = key
		if !s.value(elem, depth+1) {
			return false
		}
		more, ok := s.next('}')
		if !ok {
			return false
		}
		if !more {
			break
		}
	}
	return sorted || distinctKeys(s.data[start:s.i])
}

// distinctKeys reports whether the keys of obj, a valid JSON object whose
// keys are plain, differ.
func distinctKeys(obj []byte) bool {
	r := scanner{data: obj}
	r.open('{')
	var keys [][]byte
	for {
		key, _, _ := r.key()
		keys = append(keys, key)
		r.skip()
		if more, _ := r.next('}'); !more {
			break
		}
	}
	slices.SortFunc(keys, bytes.Compare)
	for i := 1; i < len(keys); i++ {
		if bytes.Equal(keys[i-1], keys[i]) {
			return false
		}
	}
	return true
}

func (s *scanner) record(rec *record, depth int) bool {
	if rec.oddNames || !s.open('{') {
		return false
	}
	var seen uint64 // fields seen, when there are at most 64
	var seenMany []bool
	if len(rec.fields) > 64 {
		seenMany = make([]bool, len(rec.fields))
	}
	if !s.empty('}') {
		for {
			// The field names are valid UTF-8: a key that is not
			// matches none, here as in the full check.
			key, escaped, ok := s.key()
			if !ok || escaped {
				return false
			}
			i, known := rec.index[string(key)]
			if !known {
				return false
			}
			if seenMany != nil {
				if seenMany[i] {
					return false
				}
				seenMany[i] = true
			} else {
				if seen&(1<<i) != 0 {
					return false
				}
				seen |= 1 << i
			}
			f := &rec.fields[i]
			if f.optional && s.peek() == 'n' {
				if !s.literal("null") {
					return false
				}
			} else if !s.value(f.node, depth+1) {
				return false
			}
			more, ok := s.next('}')
			if !ok {
				return false
			}
			if !more {
				break
			}
		}
	}
	for _, i := range rec.required {
		if seenMany != nil && !seenMany[i] || seenMany == nil && seen&(1<<i) == 0 {
			return false
		}
	}
	return true
}

// str reads a string and returns its bytes between the quotes, and
// whether they hold an escape.
func (s *scanner) str() (raw []byte, escaped, ok bool) {
	if s.peek() != '"' {
		return nil, false, false
	}
	start := s.i + 1
	for i := start; i < len(s.data); i++ {
		switch c := s.data[i]; {
		case c == '"':
			s.i = i + 1
			return s.data[start:i], escaped, true
		case c < 0x20:
			return nil, false, false
		case c == '\\':
			escaped = true
			i++
			if i == len(s.data) {
				return nil, false, false
			}
			switch s.data[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if i+4 >= len(s.data) {
					return nil, false, false
				}
				for _, h := range s.data[i+1 : i+5] {
					if !('0' <= h && h <= '9' || 'a' <= h && h <= 'f' || 'A' <= h && h <= 'F') {
						return nil, false, false
					}
				}
				i += 4
			default:
				return nil, false, false
			}
		}
	}
	return nil, false, false
}

// number reads a JSON number and returns its text, and whether it has a
// fraction or an exponent.
func (s *scanner) number() (num []byte, fracOrExp bool, ok bool) {
	start := s.i
	d := s.data
	i := s.i
	if i < len(d) && d[i] == '-' {
		i++
	}
	digits := func() bool {
		j := i
		for i < len(d) && '0' <= d[i] && d[i] <= '9' {
			i++
		}
		return i > j
	}
	switch {
	case i < len(d) && d[i] == '0':
		i++
	case !digits():
		return nil, false, false
	}
	if i < len(d) && d[i] == '.' {
		i++
		if !digits() {
			return nil, false, false
		}
		fracOrExp = true
	}
	if i < len(d) && (d[i] == 'e' || d[i] == 'E') {
		i++
		if i < len(d) && (d[i] == '+' || d[i] == '-') {
			i++
		}
		if !digits() {
			return nil, false, false
		}
		fracOrExp = true
	}
	s.i = i
	return d[start:i], fracOrExp, true
}

// intInRange reports whether num, an integer literal, is in the int64
// range.
func intInRange(num []byte) bool {
	limit := "9223372036854775807"
	if num[0] == '-' {
		num, limit = num[1:], "9223372036854775808"
	}
	switch {
	case len(num) < len(limit):
		return true
	case len(num) > len(limit):
		return false
	}
	return string(num) <= limit
}

// floatInRange reports whether num, a JSON number, is in the float64
// range: a number without an exponent and with at most 308 digits before
// its point is below 1e308; others are parsed.
func floatInRange(num []byte) bool {
	if !bytes.ContainsAny(num, "eE") {
		whole := num
		if i := bytes.IndexByte(num, '.'); i >= 0 {
			whole = num[:i]
		}
		if len(bytes.TrimPrefix(whole, []byte("-"))) <= 308 {
			return true
		}
	}
	_, err := strconv.ParseFloat(string(num), 64)
	return err == nil
}

// validBase64 reports whether b is standard base64 with padding, as
// base64.StdEncoding decodes it: groups of four characters of its
// alphabet, the last ending in "=" or "==" when it stands for fewer than
// three bytes (the line breaks it skips cannot appear in a JSON string
// without an escape).
func validBase64(b []byte) bool {
	if len(b)%4 != 0 {
		return false
	}
	n := len(b)
	switch {
	case n >= 2 && b[n-1] == '=' && b[n-2] == '=':
		n -= 2
	case n >= 1 && b[n-1] == '=':
		n--
	}
	for _, c := range b[:n] {
		if !('A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '+' || c == '/') {
			return false
		}
	}
	return true
}

// skip reads any JSON value (a json value, which keeps its text: repeated
// keys are the handler's business).
func (s *scanner) skip() bool {
	switch s.peek() {
	case '"':
		_, _, ok := s.str()
		return ok
	case 't':
		return s.literal("true")
	case 'f':
		return s.literal("false")
	case 'n':
		return s.literal("null")
	case '[':
		if !s.open('[') {
			return false
		}
		if s.empty(']') {
			return true
		}
		for {
			if !s.skip() {
				return false
			}
			more, ok := s.next(']')
			if !ok || !more {
				return ok
			}
		}
	case '{':
		if !s.open('{') {
			return false
		}
		if s.empty('}') {
			return true
		}
		for {
			if _, _, ok := s.key(); !ok || !s.skip() {
				return false
			}
			more, ok := s.next('}')
			if !ok || !more {
				return ok
			}
		}
	}
	_, _, ok := s.number()
	return ok
}
