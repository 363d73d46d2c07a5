package wire

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// The answers every task passes through (the tasks of a claim answer, the
// results and hand-off tasks of a complete answer), and the run a staging
// request that waited or a result answers, are encoded and decoded here
// without reflection, several times faster than encoding/json, which
// stays the definition: the encoders write exactly the bytes Marshal
// writes, and the decoders give exactly what json.Unmarshal gives. Each
// handles the plain shapes the server sends and hands anything else (an
// escaped string, a null, an unknown or repeated field, a number with a
// fraction, an error body) to encoding/json, so the two never disagree;
// the fuzz tests hold them to that. They are functions, not MarshalJSON
// and UnmarshalJSON methods: encoding/json re-scans what a method writes
// (slower than its own encoding), and a method would escape the strict
// decoding of the spec's examples.

// Marshal returns the JSON encoding of v as json.Marshal does, except that
// <, > and & are written as they are, not as \u003c, \u003e and \u0026
// (nor U+2028 and U+2029 inside a json.RawMessage as escapes): the wire
// carries JSON for programs, not for HTML pages, and an input or output
// of HTML would otherwise grow up to six times on its way, past the
// limits the server measures it by (1 MiB). A json.RawMessage is
// compacted, as json.Marshal compacts it. Everything this module sends
// on the wire (the client's requests, the server's answers) is encoded
// so.
func Marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte{'\n'}), nil
}

// AppendLeaseResults appends v encoded as Marshal encodes it.
func AppendLeaseResults(b []byte, v *LeaseResults) ([]byte, error) {
	n := len(b)
	b = slices.Grow(b, 32+96*len(v.Results)+tasksSize(v.Tasks))
	b = append(b, `{"results":`...)
	var ok bool
	if b, ok = appendList(b, v.Results, appendLeaseResult); ok && len(v.Tasks) > 0 {
		b = append(b, `,"tasks":`...)
		b, ok = appendList(b, v.Tasks, appendTask)
	}
	if ok {
		return append(b, '}'), nil
	}
	data, err := Marshal(*v) // *v, not v: the caller's value stays off the heap
	return append(b[:n], data...), err
}

// AppendFlowRun appends v encoded as Marshal encodes it. The answer of a
// run that ended (a staging request that waited for it, a result) takes
// the fast path; one that lists members or failures is encoding/json's.
func AppendFlowRun(b []byte, v *FlowRun) ([]byte, error) {
	n := len(b)
	b, ok := appendFlowRun(b, v)
	if ok {
		return b, nil
	}
	data, err := Marshal(*v)
	return append(b[:n], data...), err
}

func appendFlowRun(b []byte, r *FlowRun) ([]byte, bool) {
	if len(r.Failures) > 0 || len(r.Execs) > 0 {
		return b, false
	}
	b = slices.Grow(b, 320+len(r.ID)+len(r.Result)+len(r.Input)+len(r.Error))
	ok := true
	b = append(b, `{"id":`...)
	b, ok = appendString(b, r.ID, ok)
	if r.Namespace != "" {
		b = append(b, `,"namespace":`...)
		b, ok = appendString(b, r.Namespace, ok)
	}
	b = append(b, `,"flow":`...)
	b, ok = appendString(b, r.Flow, ok)
	b = append(b, `,"state":`...)
	b, ok = appendString(b, r.State, ok)
	if r.Created != nil {
		b = append(b, `,"created":`...)
		b = strconv.AppendBool(b, *r.Created)
	}
	b = appendCount(b, `,"total":`, r.Total)
	b = appendCount(b, `,"done":`, r.Done)
	b = appendCount(b, `,"succeeded":`, r.Succeeded)
	b = appendCount(b, `,"failed":`, r.Failed)
	b = appendCount(b, `,"skipped":`, r.Skipped)
	b = appendCount(b, `,"cancelled":`, r.Cancelled)
	if r.ResultExec != "" {
		b = append(b, `,"result_exec":`...)
		b, ok = appendString(b, r.ResultExec, ok)
	}
	if len(r.Result) > 0 {
		b = append(b, `,"result":`...)
		b, ok = appendRaw(b, r.Result, ok)
	}
	if r.Error != "" {
		b = append(b, `,"error":`...)
		b, ok = appendString(b, r.Error, ok)
	}
	if r.CreatedAt != nil {
		b = append(b, `,"created_at":`...)
		b, ok = appendTime(b, *r.CreatedAt, ok)
	}
	if r.EndedAt != nil {
		b = append(b, `,"ended_at":`...)
		b, ok = appendTime(b, *r.EndedAt, ok)
	}
	b = appendCount(b, `,"replays":`, r.Replays)
	if r.ReplayedAt != nil {
		b = append(b, `,"replayed_at":`...)
		b, ok = appendTime(b, *r.ReplayedAt, ok)
	}
	if r.IdempotencyKey != "" {
		b = append(b, `,"idempotency_key":`...)
		b, ok = appendString(b, r.IdempotencyKey, ok)
	}
	if r.Schedule != "" {
		b = append(b, `,"schedule":`...)
		b, ok = appendString(b, r.Schedule, ok)
	}
	if r.ScheduledAt != nil {
		b = append(b, `,"scheduled_at":`...)
		b, ok = appendTime(b, *r.ScheduledAt, ok)
	}
	if r.ScheduleManual {
		b = append(b, `,"schedule_manual":true`...)
	}
	if len(r.Input) > 0 {
		b = append(b, `,"input":`...)
		b, ok = appendRaw(b, r.Input, ok)
	}
	if r.ExecsNextCursor != "" {
		b = append(b, `,"execs_next_cursor":`...)
		b, ok = appendString(b, r.ExecsNextCursor, ok)
	}
	return append(b, '}'), ok
}

// appendCount appends the member key (with its leading comma) and n,
// unless n is 0 (omitempty).
func appendCount(b []byte, key string, n int) []byte {
	if n == 0 {
		return b
	}
	b = append(b, key...)
	return strconv.AppendInt(b, int64(n), 10)
}

// AppendClaimResponse appends v encoded as Marshal encodes it.
func AppendClaimResponse(b []byte, v *ClaimResponse) ([]byte, error) {
	n := len(b)
	b = slices.Grow(b, 16+tasksSize(v.Tasks))
	b = append(b, `{"tasks":`...)
	b, ok := appendList(b, v.Tasks, appendTask)
	if ok {
		return append(b, '}'), nil
	}
	data, err := Marshal(*v)
	return append(b[:n], data...), err
}

// tasksSize estimates the encoded size of tasks.
func tasksSize(tasks []Task) int {
	n := 0
	for i := range tasks {
		t := &tasks[i]
		n += 320 + len(t.ExecutionID) + len(t.Kind) + len(t.Input)
		for k, v := range t.Upstreams {
			n += 4 + len(k) + len(v)
		}
		for k, v := range t.Tags {
			n += 6 + len(k) + len(v)
		}
		for k, v := range t.UpstreamErrors {
			n += 30 + len(k) + len(v.State) + len(v.Error)
		}
		for k, v := range t.UpstreamsOmitted {
			n += 6 + len(k) + len(v)
		}
	}
	return n
}

// appendList appends the JSON array of list (null when nil), each element
// by add; ok is false when one of them was not plain.
func appendList[T any](b []byte, list []T, add func([]byte, *T) ([]byte, bool)) ([]byte, bool) {
	if list == nil {
		return append(b, "null"...), true
	}
	b = append(b, '[')
	for i := range list {
		if i > 0 {
			b = append(b, ',')
		}
		var ok bool
		if b, ok = add(b, &list[i]); !ok {
			return b, false
		}
	}
	return append(b, ']'), true
}

func appendTask(b []byte, t *Task) ([]byte, bool) {
	ok := true
	b = append(b, `{"execution_id":`...)
	b, ok = appendString(b, t.ExecutionID, ok)
	b = append(b, `,"kind":`...)
	b, ok = appendString(b, t.Kind, ok)
	b = append(b, `,"namespace":`...)
	b, ok = appendString(b, t.Namespace, ok)
	b = append(b, `,"lane":`...)
	b, ok = appendString(b, t.Lane, ok)
	b = append(b, `,"attempt":`...)
	b = strconv.AppendInt(b, int64(t.Attempt), 10)
	if t.MaxAttempts != 0 {
		b = append(b, `,"max_attempts":`...)
		b = strconv.AppendInt(b, int64(t.MaxAttempts), 10)
	}
	b = append(b, `,"lease_id":`...)
	b, ok = appendString(b, t.LeaseID, ok)
	b = append(b, `,"epoch":`...)
	b = strconv.AppendInt(b, t.Epoch, 10)
	b = append(b, `,"lease_expires_at":`...)
	b, ok = appendTime(b, t.LeaseExpiresAt, ok)
	if t.DeadlineAt != nil {
		b = append(b, `,"deadline_at":`...)
		b, ok = appendTime(b, *t.DeadlineAt, ok)
	}
	if len(t.Tags) > 0 {
		b = append(b, `,"tags":`...)
		b, ok = appendStringMap(b, t.Tags, ok)
	}
	if len(t.Input) > 0 {
		b = append(b, `,"input":`...)
		b, ok = appendRaw(b, t.Input, ok)
	}
	if len(t.Upstreams) > 0 {
		b = append(b, `,"upstreams":{`...)
		var buf keysBuf
		for i, k := range sortedKeys(t.Upstreams, buf[:]) {
			if i > 0 {
				b = append(b, ',')
			}
			b, ok = appendString(b, k, ok)
			b = append(b, ':')
			b, ok = appendRaw(b, t.Upstreams[k], ok)
		}
		b = append(b, '}')
	}
	if len(t.UpstreamErrors) > 0 {
		b = append(b, `,"upstream_errors":{`...)
		var buf keysBuf
		for i, k := range sortedKeys(t.UpstreamErrors, buf[:]) {
			if i > 0 {
				b = append(b, ',')
			}
			v := t.UpstreamErrors[k]
			b, ok = appendString(b, k, ok)
			b = append(b, `:{"state":`...)
			b, ok = appendString(b, v.State, ok)
			b = append(b, `,"error":`...)
			b, ok = appendString(b, v.Error, ok)
			b = append(b, '}')
		}
		b = append(b, '}')
	}
	if len(t.UpstreamsOmitted) > 0 {
		b = append(b, `,"upstreams_omitted":`...)
		b, ok = appendStringMap(b, t.UpstreamsOmitted, ok)
	}
	if t.Downstream {
		b = append(b, `,"downstream":true`...)
	}
	return append(b, '}'), ok
}

func appendLeaseResult(b []byte, r *LeaseResult) ([]byte, bool) {
	if r.Error != nil {
		return b, false // details of any type: encoding/json's
	}
	ok := true
	b = append(b, `{"execution_id":`...)
	b, ok = appendString(b, r.ExecutionID, ok)
	b = append(b, `,"ok":`...)
	b = strconv.AppendBool(b, r.OK)
	if r.LeaseExpiresAt != nil {
		b = append(b, `,"lease_expires_at":`...)
		b, ok = appendTime(b, *r.LeaseExpiresAt, ok)
	}
	if r.State != "" {
		b = append(b, `,"state":`...)
		b, ok = appendString(b, r.State, ok)
	}
	return append(b, '}'), ok
}

// sortedKeys returns the keys of m, sorted, in buf when it has room (a
// caller's array of keysBuf: no allocation).
func sortedKeys[V any](m map[string]V, buf []string) []string {
	keys := buf[:0]
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// keysBuf is the room for the keys of the maps most tasks carry.
type keysBuf [8]string

// appendString appends s quoted when Marshal would write it as it is
// (printable ASCII but the quote and the backslash); ok turns false
// otherwise.
func appendString(b []byte, s string, ok bool) ([]byte, bool) {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			return b, false
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"'), ok
}

// appendStringMap appends m as encoding/json does: an object, its keys in
// order.
func appendStringMap(b []byte, m map[string]string, ok bool) ([]byte, bool) {
	b = append(b, '{')
	var buf keysBuf
	for i, k := range sortedKeys(m, buf[:]) {
		if i > 0 {
			b = append(b, ',')
		}
		b, ok = appendString(b, k, ok)
		b = append(b, ':')
		b, ok = appendString(b, m[k], ok)
	}
	return append(b, '}'), ok
}

// appendTime appends t as time.Time.MarshalJSON does, unless that is an
// error (a year outside 0..9999, a zone offset of a day or more).
func appendTime(b []byte, t time.Time, ok bool) ([]byte, bool) {
	n := len(b)
	b = append(b, '"')
	b = t.AppendFormat(b, time.RFC3339Nano)
	if b[n+5] != '-' {
		return b, false
	}
	if last := len(b) - 1; b[last] != 'Z' {
		if c := b[last-5]; c >= '0' && c <= '9' || (b[last-4]-'0')*10+(b[last-3]-'0') >= 24 {
			return b, false
		}
	}
	return append(b, '"'), ok
}

// appendRaw appends a raw JSON value when Marshal would copy it as it is:
// compact and valid (without HTML escaping, Marshal changes nothing else
// in it).
func appendRaw(b []byte, raw json.RawMessage, ok bool) ([]byte, bool) {
	inString := false
	for i := 0; i < len(raw); i++ {
		switch c := raw[i]; {
		case c == '"':
			inString = !inString
		case c == '\\':
			i++ // the escaped character
		case !inString && (c == ' ' || c == '\t' || c == '\n' || c == '\r'):
			return b, false
		}
	}
	if !json.Valid(raw) {
		return b, false
	}
	return append(b, raw...), ok
}

// UnmarshalClaimResponse decodes data into *v (a zero value) as
// json.Unmarshal does.
func UnmarshalClaimResponse(data []byte, v *ClaimResponse) error {
	if out, ok := fastClaimResponse(data); ok {
		*v = out
		return nil
	}
	return json.Unmarshal(data, v)
}

// UnmarshalLeaseResults decodes data into *v (a zero value) as
// json.Unmarshal does.
func UnmarshalLeaseResults(data []byte, v *LeaseResults) error {
	if out, ok := fastLeaseResults(data); ok {
		*v = out
		return nil
	}
	return json.Unmarshal(data, v)
}

// UnmarshalFlowRun decodes data into *v (a zero value) as json.Unmarshal
// does.
func UnmarshalFlowRun(data []byte, v *FlowRun) error {
	if out, ok := fastFlowRun(data); ok {
		*v = out
		return nil
	}
	return json.Unmarshal(data, v)
}

func fastFlowRun(data []byte) (FlowRun, bool) {
	d := decoder{b: data}
	var out FlowRun
	return out, heldFields(&d, &out, (*decoder).flowRunField) && d.end()
}

// flowRunField reads the members appendFlowRun writes; the members and
// failures of a run are encoding/json's.
func (d *decoder) flowRunField(r *FlowRun, key []byte) bool {
	switch string(key) {
	case "id":
		return d.hold(&r.ID)
	case "namespace":
		return d.hold(&r.Namespace)
	case "flow":
		return d.hold(&r.Flow)
	case "state":
		return d.hold(&r.State)
	case "created":
		c := new(bool)
		r.Created = c
		return d.bool(c)
	case "total":
		return d.count(&r.Total)
	case "done":
		return d.count(&r.Done)
	case "succeeded":
		return d.count(&r.Succeeded)
	case "failed":
		return d.count(&r.Failed)
	case "skipped":
		return d.count(&r.Skipped)
	case "cancelled":
		return d.count(&r.Cancelled)
	case "result_exec":
		return d.hold(&r.ResultExec)
	case "result":
		return d.raw(&r.Result)
	case "error":
		return d.str(&r.Error)
	case "created_at":
		return d.timePtr(&r.CreatedAt)
	case "ended_at":
		return d.timePtr(&r.EndedAt)
	case "replays":
		return d.count(&r.Replays)
	case "replayed_at":
		return d.timePtr(&r.ReplayedAt)
	case "idempotency_key":
		return d.str(&r.IdempotencyKey)
	case "schedule":
		return d.str(&r.Schedule)
	case "scheduled_at":
		return d.timePtr(&r.ScheduledAt)
	case "schedule_manual":
		return d.bool(&r.ScheduleManual)
	case "input":
		return d.raw(&r.Input)
	case "execs_next_cursor":
		return d.str(&r.ExecsNextCursor)
	}
	return false
}

// count reads an int into *n.
func (d *decoder) count(n *int) bool {
	v, ok := d.int(strconv.IntSize)
	*n = int(v)
	return ok
}

// timePtr reads a time into a new *time.Time at *t, as encoding/json
// reads a string into a pointer.
func (d *decoder) timePtr(t **time.Time) bool {
	*t = new(time.Time)
	return d.time(*t)
}

func fastClaimResponse(data []byte) (ClaimResponse, bool) {
	d := decoder{b: data}
	var out ClaimResponse
	return out, fields(&d, &out, (*decoder).claimResponseField) && d.end()
}

func (d *decoder) claimResponseField(v *ClaimResponse, key []byte) bool {
	return string(key) == "tasks" && array(d, &v.Tasks, (*decoder).task)
}

func fastLeaseResults(data []byte) (LeaseResults, bool) {
	d := decoder{b: data}
	var out LeaseResults
	return out, fields(&d, &out, (*decoder).leaseResultsField) && d.end()
}

func (d *decoder) leaseResultsField(v *LeaseResults, key []byte) bool {
	switch string(key) {
	case "results":
		return array(d, &v.Results, (*decoder).leaseResult)
	case "tasks":
		return array(d, &v.Tasks, (*decoder).task)
	}
	return false
}

// decoder reads the plain JSON the encoders above write. Every method
// reports false on anything else, and the caller then leaves the whole
// document to encoding/json.
type decoder struct {
	b  []byte
	i  int
	ok bool // set by member when an object ended well
	// held are the strings read by hold since the last flush, nheld of
	// them.
	held  [8]heldString
	nheld int
}

// heldString is a string read by hold: where it goes, and its bytes in
// the decoder's input.
type heldString struct {
	dst      *string
	from, to int
}

func (d *decoder) space() {
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

// byte consumes c, after white space.
func (d *decoder) byte(c byte) bool {
	d.space()
	if d.i < len(d.b) && d.b[d.i] == c {
		d.i++
		return true
	}
	return false
}

// end reports whether only white space is left.
func (d *decoder) end() bool {
	d.space()
	return d.i == len(d.b)
}

// object is the state of one object being read by member: the keys seen.
type object struct {
	n    int
	keys [16][]byte
}

// member moves to the next member of the object whose '{' was consumed
// and returns its key, the decoder at its value; more is false at the end
// of the object, with d.ok saying whether it ended well (a closing brace
// where one may be; keys plain, at most 16 and each once).
func (d *decoder) member(o *object) (key []byte, more bool) {
	d.ok = false
	if o.n == 0 {
		if d.byte('}') {
			d.ok = true
			return nil, false
		}
	} else if d.byte('}') {
		d.ok = true
		return nil, false
	} else if !d.byte(',') {
		return nil, false
	}
	key, ok := d.strBytes()
	if !ok || o.n == len(o.keys) || !d.byte(':') {
		return nil, false
	}
	for _, k := range o.keys[:o.n] {
		if string(k) == string(key) {
			return nil, false
		}
	}
	o.keys[o.n] = key
	o.n++
	return key, true
}

// list moves to the next element of the array whose '[' was consumed;
// more is false at its end, with d.ok saying whether it ended well.
func (d *decoder) list(n int) (more bool) {
	d.ok = false
	if d.byte(']') {
		d.ok = true
		return false
	}
	return n == 0 || d.byte(',')
}

// strBytes reads a string without escapes or control characters, in valid
// UTF-8 (encoding/json replaces invalid bytes; that path is its own), and
// returns its bytes in d.b.
func (d *decoder) strBytes() ([]byte, bool) {
	if !d.byte('"') {
		return nil, false
	}
	start := d.i
	ascii := true
	for ; d.i < len(d.b); d.i++ {
		c := d.b[d.i]
		if plainASCII[c] {
			continue
		}
		switch {
		case c == '"':
			s := d.b[start:d.i]
			d.i++
			// Checked only when the string has a byte outside ASCII:
			// ids, kinds, lanes and most keys have none.
			return s, ascii || utf8.Valid(s)
		case c == '\\' || c < 0x20:
			return nil, false
		}
		ascii = false
	}
	return nil, false
}

// plainASCII holds the bytes a string read by strBytes passes over
// without a second look: ASCII other than the quote, the backslash and
// the control characters.
var plainASCII = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// str is strBytes as a string.
func (d *decoder) str(s *string) bool {
	b, ok := d.strBytes()
	*s = string(b)
	return ok
}

// hold reads a string as str does, into *dst once flush is called: flush
// copies every string held since the last one out in one allocation (the
// ids, kind, namespace and lane of a task), shared by them only. The
// object that holds strings flushes before its list may grow, which would
// move the strings' destinations.
func (d *decoder) hold(dst *string) bool {
	if d.nheld == len(d.held) {
		return d.str(dst)
	}
	b, ok := d.strBytes()
	if !ok {
		return false
	}
	to := d.i - 1 // the closing quote
	d.held[d.nheld] = heldString{dst: dst, from: to - len(b), to: to}
	d.nheld++
	return true
}

// flush writes the strings held (hold).
func (d *decoder) flush() {
	n := 0
	for _, h := range d.held[:d.nheld] {
		n += h.to - h.from
	}
	var b strings.Builder
	b.Grow(n)
	for _, h := range d.held[:d.nheld] {
		b.Write(d.b[h.from:h.to])
	}
	all := b.String()
	for _, h := range d.held[:d.nheld] {
		*h.dst, all = all[:h.to-h.from], all[h.to-h.from:]
	}
	d.nheld = 0
}

// heldFields is fields for an object whose field reads hold strings: they
// are written when the object ends.
func heldFields[T any](d *decoder, v *T, field func(*decoder, *T, []byte) bool) bool {
	d.nheld = 0
	if !fields(d, v, field) {
		return false
	}
	d.flush()
	return true
}

// strs reads an array of strings as array(d, out, (*decoder).str) does,
// with one allocation for the text of all of them instead of one each (a
// hand-off names every kind the worker has handlers for, in every
// complete request): the strings are substrings of a copy of the array's
// text, so they keep no more than that text alive.
func (d *decoder) strs(out *[]string) bool {
	if !d.byte('[') {
		return false
	}
	from, n := d.i, 0
	for d.list(n) {
		if _, ok := d.strBytes(); !ok {
			return false
		}
		n++
	}
	if !d.ok {
		return false
	}
	end := d.i
	text := string(d.b[from:end])
	list := make([]string, n)
	d.i = from
	for i := range list {
		d.list(i)
		s, _ := d.strBytes()
		at := d.i - 1 - len(s) - from // s ends before the closing quote, at d.i-1
		list[i] = text[at : at+len(s)]
	}
	d.i = end
	*out = list
	return true
}

// int reads an integer literal (no fraction or exponent) that fits bits.
func (d *decoder) int(bits int) (int64, bool) {
	d.space()
	start := d.i
	if d.i < len(d.b) && d.b[d.i] == '-' {
		d.i++
	}
	digits := d.i
	for d.i < len(d.b) && d.b[d.i] >= '0' && d.b[d.i] <= '9' {
		d.i++
	}
	if d.i == digits || (d.b[digits] == '0' && d.i > digits+1) {
		return 0, false // no digits, or a leading zero
	}
	if d.i < len(d.b) {
		if c := d.b[d.i]; c == '.' || c == 'e' || c == 'E' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(string(d.b[start:d.i]), 10, bits)
	return n, err == nil
}

// bool reads true or false into *v.
func (d *decoder) bool(v *bool) bool {
	d.space()
	rest := d.b[d.i:]
	switch {
	case len(rest) >= 4 && string(rest[:4]) == "true":
		d.i += 4
		*v = true
		return true
	case len(rest) >= 5 && string(rest[:5]) == "false":
		d.i += 5
		*v = false
		return true
	}
	return false
}

// time reads a string as time.Time.UnmarshalJSON does.
func (d *decoder) time(t *time.Time) bool {
	d.space()
	start := d.i
	if _, ok := d.strBytes(); !ok {
		return false
	}
	return t.UnmarshalJSON(d.b[start:d.i]) == nil
}

// raw reads any JSON value but null, for a json.RawMessage. It finds the
// value's end by its brackets and strings, then checks the value.
func (d *decoder) raw(v *json.RawMessage) bool {
	d.space()
	start := d.i
	if start == len(d.b) {
		return false
	}
	switch d.b[start] {
	case '"':
		if !d.skipString() {
			return false
		}
	case '{', '[':
		depth := 0
		for d.i < len(d.b) {
			switch d.b[d.i] {
			case '"':
				if !d.skipString() {
					return false
				}
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
			}
			d.i++
			if depth == 0 {
				break
			}
		}
		if depth != 0 {
			return false
		}
	default: // a number or a literal: up to the next delimiter
		for d.i < len(d.b) {
			if c := d.b[d.i]; c == ',' || c == '}' || c == ']' || c == ' ' || c == '\t' || c == '\n' || c == '\r' {
				break
			}
			d.i++
		}
	}
	*v = d.b[start:d.i:d.i]
	return string(*v) != "null" && json.Valid(*v)
}

// skipString moves past the string that starts at d.i.
func (d *decoder) skipString() bool {
	for d.i++; d.i < len(d.b); d.i++ {
		switch d.b[d.i] {
		case '\\':
			d.i++
		case '"':
			d.i++
			return true
		}
	}
	return false
}

func (d *decoder) task(t *Task) bool { return heldFields(d, t, (*decoder).taskField) }

func (d *decoder) taskField(t *Task, key []byte) bool {
	switch string(key) {
	case "execution_id":
		return d.hold(&t.ExecutionID)
	case "kind":
		return d.hold(&t.Kind)
	case "namespace":
		return d.hold(&t.Namespace)
	case "lane":
		return d.hold(&t.Lane)
	case "attempt":
		n, ok := d.int(strconv.IntSize)
		t.Attempt = int(n)
		return ok
	case "max_attempts":
		n, ok := d.int(strconv.IntSize)
		t.MaxAttempts = int(n)
		return ok
	case "lease_id":
		return d.hold(&t.LeaseID)
	case "epoch":
		n, ok := d.int(64)
		t.Epoch = n
		return ok
	case "lease_expires_at":
		return d.time(&t.LeaseExpiresAt)
	case "deadline_at":
		t.DeadlineAt = new(time.Time)
		return d.time(t.DeadlineAt)
	case "tags":
		t.Tags = map[string]string{}
		return fields(d, &t.Tags, (*decoder).stringEntry)
	case "input":
		return d.raw(&t.Input)
	case "upstreams":
		t.Upstreams = map[string]json.RawMessage{}
		return fields(d, &t.Upstreams, (*decoder).rawEntry)
	case "upstream_errors":
		t.UpstreamErrors = map[string]UpstreamError{}
		return fields(d, &t.UpstreamErrors, (*decoder).upstreamErrorEntry)
	case "upstreams_omitted":
		t.UpstreamsOmitted = map[string]string{}
		return fields(d, &t.UpstreamsOmitted, (*decoder).stringEntry)
	case "downstream":
		return d.bool(&t.Downstream)
	}
	return false
}

// upstreamErrorEntry reads an UpstreamError into map *m under key.
func (d *decoder) upstreamErrorEntry(m *map[string]UpstreamError, key []byte) bool {
	var v UpstreamError
	if !fields(d, &v, (*decoder).upstreamErrorField) {
		return false
	}
	(*m)[string(key)] = v
	return true
}

func (d *decoder) upstreamErrorField(v *UpstreamError, key []byte) bool {
	switch string(key) {
	case "state":
		return d.str(&v.State)
	case "error":
		return d.str(&v.Error)
	}
	return false
}

// stringEntry reads a string into map *m under key.
func (d *decoder) stringEntry(m *map[string]string, key []byte) bool {
	var v string
	if !d.str(&v) {
		return false
	}
	(*m)[string(key)] = v
	return true
}

// rawEntry reads any value but null into map *m under key.
func (d *decoder) rawEntry(m *map[string]json.RawMessage, key []byte) bool {
	var v json.RawMessage
	if !d.raw(&v) {
		return false
	}
	(*m)[string(key)] = v
	return true
}

func (d *decoder) leaseResult(r *LeaseResult) bool {
	return heldFields(d, r, (*decoder).leaseResultField)
}

func (d *decoder) leaseResultField(r *LeaseResult, key []byte) bool {
	switch string(key) {
	case "execution_id":
		return d.hold(&r.ExecutionID)
	case "ok":
		return d.bool(&r.OK)
	case "lease_expires_at":
		r.LeaseExpiresAt = new(time.Time)
		return d.time(r.LeaseExpiresAt)
	case "state":
		return d.hold(&r.State)
	}
	return false
}

// AppendCompleteRequest appends v encoded as Marshal encodes it.
func AppendCompleteRequest(b []byte, v *CompleteRequest) ([]byte, error) {
	n := len(b)
	size := 128
	for i := range v.Completions {
		size += 96 + len(v.Completions[i].ExecutionID) + len(v.Completions[i].Output)
	}
	b = slices.Grow(b, size)
	ok := true
	b = append(b, '{')
	if v.WorkerID != "" {
		b = append(b, `"worker_id":`...)
		b, ok = appendString(b, v.WorkerID, ok)
		b = append(b, ',')
	}
	b = append(b, `"completions":`...)
	var listOK bool
	b, listOK = appendList(b, v.Completions, appendCompletion)
	ok = ok && listOK
	if h := v.Handoff; h != nil {
		b = append(b, `,"handoff":{`...)
		first := true
		for _, f := range [...]struct {
			key, value string
		}{{"instance_id", h.InstanceID}, {"namespace", h.Namespace}} {
			if f.value != "" {
				if !first {
					b = append(b, ',')
				}
				first = false
				b = append(b, '"')
				b = append(b, f.key...)
				b = append(b, `":`...)
				b, ok = appendString(b, f.value, ok)
			}
		}
		for _, f := range [...]struct {
			key  string
			list []string
		}{{"lanes", h.Lanes}, {"capabilities", h.Capabilities}, {"kinds", h.Kinds}} {
			if len(f.list) > 0 {
				if !first {
					b = append(b, ',')
				}
				first = false
				b = append(b, '"')
				b = append(b, f.key...)
				b = append(b, `":[`...)
				for i, s := range f.list {
					if i > 0 {
						b = append(b, ',')
					}
					b, ok = appendString(b, s, ok)
				}
				b = append(b, ']')
			}
		}
		if !first {
			b = append(b, ',')
		}
		b = append(b, `"max":`...)
		b = strconv.AppendInt(b, int64(h.Max), 10)
		if h.LeaseMs != 0 {
			b = append(b, `,"lease_ms":`...)
			b = strconv.AppendInt(b, h.LeaseMs, 10)
		}
		b = append(b, '}')
	}
	if ok {
		return append(b, '}'), nil
	}
	data, err := Marshal(*v)
	return append(b[:n], data...), err
}

func appendCompletion(b []byte, c *Completion) ([]byte, bool) {
	ok := true
	b = append(b, `{"execution_id":`...)
	b, ok = appendString(b, c.ExecutionID, ok)
	b = append(b, `,"lease_id":`...)
	b, ok = appendString(b, c.LeaseID, ok)
	b = append(b, `,"epoch":`...)
	b = strconv.AppendInt(b, c.Epoch, 10)
	if len(c.Output) > 0 {
		b = append(b, `,"output":`...)
		b, ok = appendRaw(b, c.Output, ok)
	}
	return append(b, '}'), ok
}

// FastCompleteRequest reads a complete request in the plain form
// AppendCompleteRequest writes (any white space between tokens). When ok,
// v is what a json.Decoder that disallows unknown fields decodes data to,
// with nothing after the value; otherwise the caller decodes data so, for
// the value or the error.
func FastCompleteRequest(data []byte) (v CompleteRequest, ok bool) {
	d := decoder{b: data}
	return v, fields(&d, &v, (*decoder).completeRequestField) && d.end()
}

func (d *decoder) completeRequestField(v *CompleteRequest, key []byte) bool {
	switch string(key) {
	case "worker_id":
		return d.str(&v.WorkerID)
	case "completions":
		return array(d, &v.Completions, (*decoder).completion)
	case "handoff":
		v.Handoff = new(Handoff)
		return fields(d, v.Handoff, (*decoder).handoffField)
	}
	return false
}

func (d *decoder) completion(c *Completion) bool { return heldFields(d, c, (*decoder).completionField) }

func (d *decoder) completionField(c *Completion, key []byte) bool {
	switch string(key) {
	case "execution_id":
		return d.hold(&c.ExecutionID)
	case "lease_id":
		return d.hold(&c.LeaseID)
	case "epoch":
		n, ok := d.int(64)
		c.Epoch = n
		return ok
	case "output":
		return d.raw(&c.Output)
	}
	return false
}

func (d *decoder) handoffField(h *Handoff, key []byte) bool {
	switch string(key) {
	case "instance_id":
		return d.str(&h.InstanceID)
	case "namespace":
		return d.str(&h.Namespace)
	case "lanes":
		return d.strs(&h.Lanes)
	case "capabilities":
		return d.strs(&h.Capabilities)
	case "kinds":
		return d.strs(&h.Kinds)
	case "max":
		n, ok := d.int(strconv.IntSize)
		h.Max = int(n)
		return ok
	case "lease_ms":
		n, ok := d.int(64)
		h.LeaseMs = n
		return ok
	}
	return false
}

// fields reads a JSON object into *v, calling field with the decoder at
// each member's value; an unknown key is field's false, which ends the
// read like any other surprise.
func fields[T any](d *decoder, v *T, field func(*decoder, *T, []byte) bool) bool {
	var o object
	if !d.byte('{') {
		return false
	}
	for {
		key, more := d.member(&o)
		if !more {
			return d.ok
		}
		if !field(d, v, key) {
			return false
		}
	}
}

// array reads a JSON array into *out, each element by elem (encoding/json
// makes [] an empty slice, not nil).
func array[T any](d *decoder, out *[]T, elem func(*decoder, *T) bool) bool {
	if !d.byte('[') {
		return false
	}
	list := []T{}
	for d.list(len(list)) {
		var zero T
		list = append(list, zero)
		if !elem(d, &list[len(list)-1]) {
			return false
		}
	}
	*out = list
	return d.ok
}
