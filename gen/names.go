package gen

import (
	"fmt"
	"slices"
	"strings"

	"github.com/flowfabric/ff/internal/goname"
)

// GoName returns the exported Go identifier generated code uses for a .ff
// name: each underscore-separated part capitalised, common initialisms in
// upper case ("user_id" becomes "UserID", "ids" "IDs", "api_url"
// "APIURL"), a mixed-case part kept as written, and an underscore kept
// between two digits ("e1_10" becomes "E1_10"). It returns "" when the
// name has no letter or digit to build on.
func GoName(name string) string { return goname.Of(name) }

// nameTable records every package-level Go identifier the generated file
// declares, with a description of what it was made for, so that two .ff
// names that end up as one Go name are reported instead of producing code
// that does not compile. Its scopes do the same inside one struct or
// interface. check adds the other problems it finds with names (an exec
// whose method go vet rejects, two execs of a flow sharing a kind).
type nameTable struct {
	pkg  *scope // the package-level identifiers
	errs []string
}

func newNameTable() *nameTable {
	t := &nameTable{}
	t.pkg = t.scope("")
	return t
}

// claim declares the package-level ident on behalf of what (for example
// `type "Clip"`).
func (t *nameTable) claim(ident, what string) { t.pkg.claim(ident, what) }

// scope checks names inside one Go scope (the package, the fields of a
// struct, the methods of an interface) for collisions.
type scope struct {
	prefix string            // what the scope belongs to and ": ", for messages; "" for the package
	owner  map[string]string // Go identifier -> what declared it
	t      *nameTable
}

// scope returns a new scope; where names what it belongs to.
func (t *nameTable) scope(where string) *scope {
	s := &scope{owner: map[string]string{}, t: t}
	if where != "" {
		s.prefix = where + ": "
	}
	return s
}

func (s *scope) claim(ident, what string) {
	if !goname.Exported(ident) {
		s.t.errs = append(s.t.errs, fmt.Sprintf("%s%s: cannot form an exported Go identifier (got %q)", s.prefix, what, ident))
		return
	}
	if prev, ok := s.owner[ident]; ok {
		s.t.errs = append(s.t.errs, fmt.Sprintf("%s%s and %s both become the Go identifier %s; rename one of them", s.prefix, prev, what, ident))
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
	return fmt.Errorf("gen: Go names generated code cannot use:\n\t%s", strings.Join(errs, "\n\t"))
}
