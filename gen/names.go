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
	if !goname.Exported(ident) {
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
	if !goname.Exported(ident) {
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
