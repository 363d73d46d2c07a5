package gen

import (
	"fmt"
	"go/token"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
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

// GoName converts a .ff name (snake_case, or already camelCase) into an
// exported Go identifier: each underscore-separated part is capitalised,
// and a part that is a common initialism is written in upper case, so
// "user_id" becomes "UserID", "http_url" "HTTPURL" and "publish" "Publish".
// The plural of an initialism keeps a lower-case s ("ids" becomes "IDs",
// "skus" "SKUs"). An underscore between two digits is kept ("e1_10"
// becomes "E1_10"). It returns "" when the name has no letter or
// digit to build on.
func GoName(name string) string {
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
			// A part written in mixed case on purpose ("Api", "userId")
			// is kept as written.
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

// validExported reports whether s can be used as an exported Go
// identifier.
func validExported(s string) bool {
	return token.IsIdentifier(s) && token.IsExported(s)
}

// nameTable records every package-level Go identifier the generated file
// declares, with a description of what it was made for, so that two .ff
// names that end up as one Go name are reported instead of producing code
// that does not compile.
type nameTable struct {
	owner map[string]string // Go identifier -> what declared it
	errs  []string
}

func newNameTable() *nameTable {
	return &nameTable{owner: map[string]string{}}
}

// claim declares ident on behalf of what (for example `type "Clip"`).
func (t *nameTable) claim(ident, what string) {
	if !validExported(ident) {
		t.errs = append(t.errs, fmt.Sprintf("%s: cannot form an exported Go identifier (got %q)", what, ident))
		return
	}
	if prev, ok := t.owner[ident]; ok {
		t.errs = append(t.errs, fmt.Sprintf("%s and %s both become the Go identifier %s; rename one of them", prev, what, ident))
		return
	}
	t.owner[ident] = what
}

// scope checks names inside one Go scope (the fields of a struct, the
// methods of an interface) for collisions.
type scope struct {
	where string // what the scope belongs to, for messages
	owner map[string]string
	t     *nameTable
}

func (t *nameTable) scope(where string) *scope {
	return &scope{where: where, owner: map[string]string{}, t: t}
}

func (s *scope) claim(ident, what string) {
	if !validExported(ident) {
		s.t.errs = append(s.t.errs, fmt.Sprintf("%s: %s: cannot form an exported Go identifier (got %q)", s.where, what, ident))
		return
	}
	if prev, ok := s.owner[ident]; ok {
		s.t.errs = append(s.t.errs, fmt.Sprintf("%s: %s and %s both become the Go identifier %s; rename one of them", s.where, prev, what, ident))
		return
	}
	s.owner[ident] = what
}

// maxReported is the number of problems listed in one error; the rest are
// counted.
const maxReported = 20

// err returns every recorded problem as one error, sorted, or nil.
func (t *nameTable) err() error {
	if len(t.errs) == 0 {
		return nil
	}
	errs := slices.Clone(t.errs)
	slices.Sort(errs)
	errs = slices.Compact(errs)
	if len(errs) > maxReported {
		errs = append(errs[:maxReported], fmt.Sprintf("and %d more", len(errs)-maxReported))
	}
	return fmt.Errorf("gen: Go name collisions:\n\t%s", strings.Join(errs, "\n\t"))
}
