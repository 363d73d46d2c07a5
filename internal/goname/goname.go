// Package goname holds the rule that turns .ff names into Go identifiers
// and the list of package-level identifiers that generated code declares
// for each flow. The compiler uses it to report .ff names that would
// collide in generated code; the code generator uses it to name what it
// writes, so the two cannot disagree.
package goname

import (
	"go/token"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/flowfabric/ff/compiler/plan"
)

// initialisms are the words written in upper case when they form a whole
// part of a Go name ("user_id" becomes "UserID", "api_url" "APIURL").
var initialisms = map[string]bool{
	"ACL": true, "API": true, "ASCII": true, "CPU": true, "CSS": true,
	"CSV": true, "DB": true, "DNS": true, "EOF": true, "ETA": true, "ETL": true,
	"GPU": true, "GUID": true, "HTML": true, "HTTP": true, "HTTPS": true,
	"ID": true, "IP": true, "JSON": true, "JWT": true,
	"LLM": true, "OS": true, "QPS": true, "RAM": true, "RPC": true,
	"SHA": true, "SKU": true, "SLA": true, "SMTP": true, "SQL": true, "SSH": true,
	"TCP": true, "TLS": true, "TTL": true, "UDP": true, "UI": true,
	"UID": true, "URI": true, "URL": true, "UTF8": true, "UUID": true,
	"VM": true, "XML": true, "XSRF": true, "XSS": true,
}

// Of converts a .ff name (snake_case, or already camelCase) into an
// exported Go identifier: each underscore-separated part is capitalised,
// and a part that is a common initialism is written in upper case, so
// "user_id" becomes "UserID", "http_url" "HTTPURL" and "publish" "Publish".
// The plural of an initialism keeps a lower-case s ("ids" becomes "IDs",
// "skus" "SKUs"). A part written in mixed case is kept as written
// ("userId" becomes "UserId"). An underscore between two digits is kept
// ("e1_10" becomes "E1_10"). The result is "" when the name has no letter
// or digit to build on, and is not an identifier when it would start with
// a digit; Exported tells.
func Of(name string) string {
	var b strings.Builder
	for part := range strings.SplitSeq(name, "_") {
		if part == "" {
			continue
		}
		// Keep the underscore between two digits, so that "e1_10" and
		// "e11_0" stay apart (E1_10, E11_0).
		if out := b.String(); out != "" && isDigit(out[len(out)-1]) && isDigit(part[0]) {
			b.WriteByte('_')
		}
		upper := strings.ToUpper(part)
		switch {
		case part != strings.ToLower(part) && part != upper:
			b.WriteString(capitalize(part))
		case initialisms[upper]:
			b.WriteString(upper)
		case len(upper) > 2 && strings.HasSuffix(upper, "S") && initialisms[upper[:len(upper)-1]]:
			b.WriteString(upper[:len(upper)-1] + "s")
		default:
			b.WriteString(capitalize(part))
		}
	}
	return b.String()
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// capitalize upper-cases the first letter of s.
func capitalize(s string) string {
	r, size := utf8.DecodeRuneInString(s)
	return string(unicode.ToUpper(r)) + s[size:]
}

// Exported reports whether ident can be used as an exported Go identifier.
func Exported(ident string) bool {
	return token.IsIdentifier(ident) && token.IsExported(ident)
}

// Flow holds the package-level identifiers generated for one flow.
type Flow struct {
	Base     string // Of(flow name)
	PlanJSON string // constant: the plan as JSON
	Plan     string // func returning the decoded plan
	Stage    string // func starting a run
	Run      string // run handle type
	Handlers string // interface with one method per exec
	Register string // func binding Handlers to a worker
}

// ForFlow returns the identifiers generated for the flow called name.
func ForFlow(name string) Flow {
	b := Of(name)
	return Flow{
		Base:     b,
		PlanJSON: b + "PlanJSON",
		Plan:     b + "Plan",
		Stage:    "Stage" + b,
		Run:      b + "Run",
		Handlers: b + "Handlers",
		Register: "Register" + b,
	}
}

// Upstream returns the name of the struct that carries the upstream
// outputs passed to the method of exec.
func (f Flow) Upstream(exec string) string {
	return f.Base + Of(exec) + "Upstream"
}

// Decl is one package-level identifier that generated code declares for a
// flow.
type Decl struct {
	Ident string
	// Exec is the exec the identifier is generated for (an upstream
	// struct), or "" when it is generated for the flow itself.
	Exec string
}

// Decls returns every package-level identifier generated for fl: the
// flow's own, in the order of the Flow fields, then an upstream struct
// for each exec, in plan order, that has an upstream declaring an output
// (see Upstreams).
func Decls(fl *plan.Flow) []Decl {
	n := ForFlow(fl.Name)
	out := []Decl{{Ident: n.PlanJSON}, {Ident: n.Plan}, {Ident: n.Stage}, {Ident: n.Run}, {Ident: n.Handlers}, {Ident: n.Register}}
	outputs := Outputs(fl)
	for i := range fl.Execs {
		if ex := &fl.Execs[i]; len(Upstreams(ex, outputs)) > 0 {
			out = append(out, Decl{Ident: n.Upstream(ex.Name), Exec: ex.Name})
		}
	}
	return out
}

// Outputs maps each exec of fl to its output type, nil when it has none.
func Outputs(fl *plan.Flow) map[string]*plan.TypeRef {
	m := make(map[string]*plan.TypeRef, len(fl.Execs))
	for i := range fl.Execs {
		m[fl.Execs[i].Name] = fl.Execs[i].Output
	}
	return m
}

// Upstreams returns the upstreams of ex, in plan order, whose output a
// handler can read: those that declare an output. outputs is Outputs of
// the flow. The generated upstream struct has one field per name
// returned, and exists only when there is at least one.
func Upstreams(ex *plan.Exec, outputs map[string]*plan.TypeRef) []string {
	var out []string
	for _, u := range ex.Upstreams {
		if outputs[u] != nil {
			out = append(out, u)
		}
	}
	return out
}

// vetMethods maps the method names that go vet's stdmethods check holds
// to one signature, whatever the receiver, to that signature and the
// interface it is for. The methods of a <Flow>Handlers interface take a
// context.Context first, so one named so can never have it: vet rejects
// the generated interface and the user's type that implements it. (The
// check knows Format, ReadFrom, Scan, Seek and WriteTo too, but holds them
// to a signature only when their first parameter has the interface's
// type, never a context.Context; and Is, As and Unwrap only on types that
// implement error, which a Handlers interface does not.)
var vetMethods = map[string]string{
	"GobDecode":     "GobDecode([]byte) error, of gob.GobDecoder",
	"GobEncode":     "GobEncode() ([]byte, error), of gob.GobEncoder",
	"MarshalJSON":   "MarshalJSON() ([]byte, error), of json.Marshaler",
	"MarshalXML":    "MarshalXML(*xml.Encoder, xml.StartElement) error, of xml.Marshaler",
	"ReadByte":      "ReadByte() (byte, error), of io.ByteReader",
	"ReadRune":      "ReadRune() (rune, int, error), of io.RuneReader",
	"UnmarshalJSON": "UnmarshalJSON([]byte) error, of json.Unmarshaler",
	"UnmarshalXML":  "UnmarshalXML(*xml.Decoder, xml.StartElement) error, of xml.Unmarshaler",
	"UnreadByte":    "UnreadByte() error, of io.ByteScanner",
	"UnreadRune":    "UnreadRune() error, of io.RuneScanner",
	"WriteByte":     "WriteByte(byte) error, of io.ByteWriter",
}

// VetMethod reports whether go vet requires every method named ident to
// have one signature, which no method of a <Flow>Handlers interface has,
// and returns that signature and the interface it is for
// ("MarshalJSON() ([]byte, error), of json.Marshaler"). An exec whose Go
// name is one of them (marshal_json, unmarshal_xml, read_byte, ...) would
// give generated code that go vet rejects.
func VetMethod(ident string) (signature string, ok bool) {
	signature, ok = vetMethods[ident]
	return signature, ok
}
