package flowinput

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flowfabric/ff/compiler/plan"
)

func typeRef(kind string) plan.TypeRef { return plan.TypeRef{Kind: kind} }

func listOf(kind string, e plan.TypeRef) plan.TypeRef { return plan.TypeRef{Kind: kind, Elem: &e} }

// orderTypes declares a record of every kind of type, and one that refers
// to itself.
var orderTypes = []plan.Type{
	{Name: "Order", Fields: []plan.Field{
		{Name: "id", Type: typeRef(plan.KindString)},
		{Name: "cents", Type: typeRef(plan.KindInt)},
		{Name: "rate", Type: typeRef(plan.KindFloat)},
		{Name: "paid", Type: typeRef(plan.KindBool)},
		{Name: "lines", Type: listOf(plan.KindList, plan.TypeRef{Kind: plan.KindNamed, Name: "Line"})},
		{Name: "labels", Type: listOf(plan.KindMap, typeRef(plan.KindString))},
		{Name: "blob", Type: typeRef(plan.KindBytes), Optional: true},
		{Name: "meta", Type: typeRef(plan.KindJSON)},
		{Name: "at", Type: typeRef(plan.KindTime)},
		{Name: "ttl", Type: typeRef(plan.KindDuration)},
		{Name: "next", Type: plan.TypeRef{Kind: plan.KindNamed, Name: "Order"}, Optional: true},
		{Name: "note", Type: typeRef(plan.KindString), Optional: true},
	}},
	{Name: "Line", Fields: []plan.Field{
		{Name: "sku", Type: typeRef(plan.KindString)},
		{Name: "qty", Type: typeRef(plan.KindInt)},
	}},
}

var orderRef = &plan.TypeRef{Kind: plan.KindNamed, Name: "Order"}

// goOrder and goLine are the Go types ffc generates for Order and Line.
type goOrder struct {
	ID     string            `json:"id"`
	Cents  int64             `json:"cents"`
	Rate   float64           `json:"rate"`
	Paid   bool              `json:"paid"`
	Lines  []goLine          `json:"lines"`
	Labels map[string]string `json:"labels"`
	Blob   []byte            `json:"blob,omitempty"`
	Meta   json.RawMessage   `json:"meta"`
	At     time.Time         `json:"at"`
	TTL    time.Duration     `json:"ttl"`
	Next   *goOrder          `json:"next,omitempty"`
	Note   *string           `json:"note,omitempty"`
}

type goLine struct {
	SKU string `json:"sku"`
	Qty int64  `json:"qty"`
}

func orderChecker(t testing.TB) *Checker {
	t.Helper()
	c, err := NewTypes(orderTypes).Checker(orderRef)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// scans reports whether the one-pass scan of c accepts data.
func scans(c *Checker, data []byte) bool {
	s := scanner{data: data}
	return s.value(c.root, 0) && s.end()
}

// sampleOrders are values of goOrder as generated handlers return them.
func sampleOrders() []goOrder {
	note := "fragile <&>"
	at := time.Date(2026, 11, 21, 19, 0, 0, 123456789, time.FixedZone("x", 5*3600+30*60))
	return []goOrder{
		{}, // zero values: null lists, maps and json, the zero time
		{ID: "o-1", Cents: -9223372036854775808, Rate: 1e21, Paid: true, Lines: []goLine{{"a", 1}, {"b\u00e9\"\\\n", 9223372036854775807}},
			Labels: map[string]string{"z": "1", "a": "2", "": "3", "\u00e9": "4"}, Blob: []byte{0, 1, 2, 255}, Meta: json.RawMessage(`{"x":[1,{"x":1,"x":2}],"y":null}`),
			At: at, TTL: 90 * time.Second, Note: &note, Next: &goOrder{ID: "o-2", Rate: 1e-7, Meta: json.RawMessage(`"s"`), Labels: map[string]string{}, Lines: []goLine{}}},
		{ID: strings.Repeat("x", 1000), Rate: 123.456, Blob: []byte{1}, Meta: json.RawMessage(`1.5e300`), At: at.UTC()},
		{Blob: []byte{1, 2}, Meta: json.RawMessage(`[]`), Rate: 5e-324},
	}
}

// TestCheckerScansGoOutputs: what a generated handler writes for a type
// passes the one-pass scan, without the full check.
func TestCheckerScansGoOutputs(t *testing.T) {
	c := orderChecker(t)
	for i, o := range sampleOrders() {
		data, err := json.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		if !scans(c, data) {
			t.Errorf("order %d: the scan does not accept %s", i, data)
		}
		if err := c.Check("output", data); err != nil {
			t.Errorf("order %d: %v", i, err)
		}
	}
}

// TestCheckerAllocations: checking a value that matches allocates nothing
// (no float with an exponent, no time, keys in order).
func TestCheckerAllocations(t *testing.T) {
	data := []byte(`{"id":"o-1","cents":100,"rate":0.5,"paid":true,"lines":[{"sku":"a","qty":1},{"qty":2,"sku":"b"}],` +
		`"labels":{"a":"x","b":"y"},"blob":"AAEC","meta":{"k":[1,2,{"z":null}]},"ttl":1000}`)
	// Order with its time optional: the scan parses a time from a string.
	types := append([]plan.Type(nil), orderTypes...)
	types[0].Fields = append([]plan.Field(nil), types[0].Fields...)
	for i := range types[0].Fields {
		if types[0].Fields[i].Name == "at" {
			types[0].Fields[i].Optional = true
		}
	}
	c, err := NewTypes(types).Checker(orderRef)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Check("input", data); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(100, func() { _ = c.Check("input", data) }); n != 0 {
		t.Errorf("Check allocates %v times per value, want 0", n)
	}
}

// checkerInputs are values for orderChecker, valid or not, each case the
// full check reports.
var checkerInputs = []string{
	`{"id":"o","cents":1,"rate":1,"paid":false,"lines":null,"labels":null,"meta":null,"at":"2026-11-21T19:00:00Z","ttl":0}`,
	`{"id":"o","cents":1,"rate":1,"paid":false,"lines":[],"labels":{},"meta":1,"at":"2026-11-21T19:00:00Z","ttl":0,"blob":null,"next":null,"note":null}`,
	`{"id":"o","cents":1,"rate":1,"paid":false,"lines":[],"labels":{"b":"1","a":"2"},"meta":1,"at":"2026-11-21T19:00:00Z","ttl":0}`,
	`{"id":"o","cents":1,"rate":1,"paid":false,"lines":[],"labels":{"b":"1","a":"2","b":"3"},"meta":1,"at":"2026-11-21T19:00:00Z","ttl":0}`,
	`{"id":"o","cents":1,"rate":1,"paid":false,"lines":[],"labels":{"\u0061":"1","a":"2"},"meta":1,"at":"2026-11-21T19:00:00Z","ttl":0}`,
	"{\"id\":\"o\",\"cents\":1,\"rate\":1,\"paid\":false,\"lines\":[],\"labels\":{\"\xff\":\"1\",\"\xfe\":\"2\"},\"meta\":1,\"at\":\"2026-11-21T19:00:00Z\",\"ttl\":0}",
	`{"\u0069d":"o","cents":1,"rate":1,"paid":false,"lines":[],"labels":{},"meta":1,"at":"2026-11-21T19:00:00Z","ttl":0}`,
	`{"id":"o","cents":1,"rate":1,"paid":false,"lines":[],"labels":{},"meta":1,"at":"2026-11-21T19:00:00Z","ttl":0,"id":"p"}`,
	`{"ID":"o","cents":1,"rate":1,"paid":false,"lines":[],"labels":{},"meta":1,"at":"2026-11-21T19:00:00Z","ttl":0}`,
	`{"order_id":"o"}`,
	`{"id":"o","cents":1,"rate":1,"paid":false,"lines":[{"sku":"a"}],"labels":{},"meta":1,"at":"2026-11-21T19:00:00Z","ttl":0}`,
	`{"id":"o","cents":1.0,"rate":1,"paid":false,"lines":[],"labels":{},"meta":1,"at":"2026-11-21T19:00:00Z","ttl":0}`,
	`{"id":"o","cents":-9223372036854775809,"rate":1,"paid":false,"lines":[],"labels":{},"meta":1,"at":"2026-11-21T19:00:00Z","ttl":0}`,
	`{"id":"o","cents":1,"rate":1e309,"paid":false,"lines":[],"labels":{},"meta":1,"at":"2026-11-21T19:00:00Z","ttl":0}`,
	`{"id":"o","cents":1,"rate":1,"paid":false,"lines":[],"labels":{},"meta":1,"at":"2026-11-21T19:00:00Z","ttl":0,"blob":"AAE"}`,
	`{"id":"o","cents":1,"rate":1,"paid":false,"lines":[],"labels":{},"meta":1,"at":"2026-11-21T19:00:00Z","ttl":0,"blob":"AA\u003d\u003d"}`,
	`{"id":"o","cents":1,"rate":1,"paid":false,"lines":[],"labels":{},"meta":1,"at":"2026-11-21 19:00:00Z","ttl":0}`,
	`{"id":"o","cents":1,"rate":1,"paid":false,"lines":[],"labels":{},"meta":1,"at":"2026-11-21T19:00:00\u005a","ttl":0}`,
	`{"id":"o","cents":1,"rate":1,"paid":false,"lines":[],"labels":{},"at":"2026-11-21T19:00:00Z","ttl":0}`,
	`{"id":"o","cents":1,"rate":1,"paid":false,"lines":[],"labels":{},"meta":1,"at":"2026-11-21T19:00:00Z","ttl":0,"next":{"id":"p"}}`,
	"\u00a0{\"id\":\"o\",\"cents\":1,\"rate\":1,\"paid\":false,\"lines\":[],\"labels\":{},\"meta\":1,\"at\":\"2026-11-21T19:00:00Z\",\"ttl\":0}",
	`{"id":"o","cents":1,"rate":1,"paid":false,"lines":[],"labels":{},"meta":1,"at":"2026-11-21T19:00:00Z","ttl":0} x`,
	`{"id":"o","cents":1,"rate":1,"paid":false,"lines":[],"labels":{},"meta":1,"at":"2026-11-21T19:00:00Z","ttl":0}}`,
	`{"id":"o","cents":1,"rate":1,"paid":false,"lines":[],"labels":{},"meta":` + strings.Repeat("[", 9999) + strings.Repeat("]", 9999) + `,"at":"2026-11-21T19:00:00Z","ttl":0}`,
	`{"id":"o","cents":1,"rate":1,"paid":false,"lines":[],"labels":{},"meta":` + strings.Repeat("[", 10000) + strings.Repeat("]", 10000) + `,"at":"2026-11-21T19:00:00Z","ttl":0}`,
	`null`, `[]`, `"x"`, `{`, `{"id":}`, `{"id":"o",}`, `{,}`, `{"id" "o"}`, `01`, `-`, `"\x"`, "\"\x01\"",
}

// TestCheckerAgreesWithFlow: Check answers as Flow does for a flow taking
// the same type, and whatever the scan accepts Flow accepts.
func TestCheckerAgreesWithFlow(t *testing.T) {
	c := orderChecker(t)
	inputs := append([]string(nil), checkerInputs...)
	for _, o := range sampleOrders() {
		data, err := json.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		inputs = append(inputs, string(data))
	}
	for _, in := range inputs {
		agree(t, c, in)
	}
}

// agree fails when Check and Flow disagree on in, or the scan accepts what
// Flow refuses.
func agree(t *testing.T, c *Checker, in string) {
	t.Helper()
	fl := &plan.Flow{Name: "f", Input: orderRef, Types: orderTypes}
	want := Flow(fl, "input", []byte(in))
	if len(bytes.TrimSpace([]byte(in))) == 0 {
		want = &Error{Path: "input", Msg: "is required (Order (an object)) but missing"}
	}
	got := c.Check("input", []byte(in))
	if !cmp.Equal(want, got) {
		t.Errorf("%.200q: Check = %v, Flow = %v", in, got, want)
	}
	if want != nil && scans(c, []byte(in)) {
		t.Errorf("%.200q: the scan accepts it, Flow says %v", in, want)
	}
	var fe *Error
	if got != nil && !errors.As(got, &fe) {
		t.Errorf("%.200q: %v is not an *Error", in, got)
	}
}

// FuzzChecker: Check answers as Flow does, and the scan accepts nothing
// Flow refuses.
func FuzzChecker(f *testing.F) {
	for _, in := range checkerInputs {
		if len(in) < 1000 {
			f.Add(in)
		}
	}
	for _, o := range sampleOrders() {
		data, err := json.Marshal(o)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(data))
	}
	c := orderChecker(f)
	f.Fuzz(func(t *testing.T, in string) { agree(t, c, in) })
}

// TestScalars: the scan's own reading of numbers and base64 agrees with
// strconv and encoding/base64, which the full check uses.
func TestScalars(t *testing.T) {
	for _, n := range []string{"0", "-0", "9223372036854775807", "9223372036854775808", "-9223372036854775808", "-9223372036854775809",
		"10000000000000000000", "00", "1.5", "1e3", "123456789012345678"} {
		_, err := strconv.ParseInt(n, 10, 64)
		if got := intInRange([]byte(n)); got != (err == nil) && !strings.ContainsAny(n, ".eE") && n != "00" {
			t.Errorf("intInRange(%s) = %v, ParseInt err %v", n, got, err)
		}
	}
	for _, n := range []string{"1e308", "1.7976931348623157e308", "1.8e308", "-1e400", "1e-400", "5e-324", "0.5",
		strings.Repeat("9", 308), strings.Repeat("9", 309), "-" + strings.Repeat("9", 309) + ".5", "0." + strings.Repeat("0", 400) + "1"} {
		_, err := strconv.ParseFloat(n, 64)
		if got := floatInRange([]byte(n)); got != (err == nil) {
			t.Errorf("floatInRange(%.40s) = %v, ParseFloat err %v", n, got, err)
		}
	}
	for _, b := range []string{"", "A", "AA", "AAA", "AAAA", "AA==", "AAA=", "A===", "====", "AA=A", "A=AA", "AAAAAA==", "AAAA====", "AB+/", "AB-_", "AB\u00e9=", "AAA==", "AAAA=", "QUJD", "QUI=", "QUJ="} {
		_, err := base64.StdEncoding.DecodeString(b)
		if got := validBase64([]byte(b)); got != (err == nil) {
			t.Errorf("validBase64(%q) = %v, DecodeString err %v", b, got, err)
		}
	}
}

// FuzzBase64: validBase64 agrees with base64.StdEncoding on every string
// without line breaks (a JSON string holds them only escaped, which the
// scan leaves to the full check).
func FuzzBase64(f *testing.F) {
	for _, s := range []string{"", "AA==", "AAA=", "A===", "QUJD", "AB\u00e9="} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if strings.ContainsAny(s, "\r\n") {
			return
		}
		_, err := base64.StdEncoding.DecodeString(s)
		if got := validBase64([]byte(s)); got != (err == nil) {
			t.Errorf("validBase64(%q) = %v, DecodeString err %v", s, got, err)
		}
	})
}

// TestCheckerTypes: a checker is refused for a type the plan does not
// declare, or of an unknown kind.
func TestCheckerTypes(t *testing.T) {
	ts := NewTypes(orderTypes)
	for _, tt := range []struct {
		t    *plan.TypeRef
		want string
	}{
		{&plan.TypeRef{Kind: plan.KindNamed, Name: "Nope"}, `flowinput: type "Nope" is not declared in the plan`},
		{&plan.TypeRef{Kind: "tuple"}, `flowinput: unknown type kind "tuple"`},
		{&plan.TypeRef{Kind: plan.KindList}, "flowinput: no type"},
	} {
		if _, err := ts.Checker(tt.t); err == nil || err.Error() != tt.want {
			t.Errorf("Checker(%+v) = %v, want %s", tt.t, err, tt.want)
		}
	}
	// A record referring to itself is prepared once.
	c, err := ts.Checker(&plan.TypeRef{Kind: plan.KindList, Elem: orderRef})
	if err != nil {
		t.Fatal(err)
	}
	next := c.root.elem.rec.fields[c.root.elem.rec.index["next"]].node.rec
	if next != c.root.elem.rec {
		t.Errorf("Order.next is prepared anew")
	}
}
