// Package compiler checks parsed .ff files and compiles them into the plan
// (package compiler/plan) that the code generator and the runtime consume.
// It reports every problem it can find in one run as dsl diagnostics.
package compiler

import (
	"fmt"
	"go/token"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/flowfabric/ff/compiler/plan"
	"github.com/flowfabric/ff/dsl"
)

// CompileFiles reads and compiles the .ff files named by paths as one
// package. A directory stands for the *.ff files directly inside it, in
// name order, except those whose names start with "." or "_" (as the go
// tool ignores such files); a file named twice is read once. The plan is
// nil when there is any error.
func CompileFiles(paths ...string) (*plan.Package, dsl.Diagnostics) {
	srcs, diags := ReadSources(paths...)
	if diags.HasErrors() {
		diags.Sort()
		return nil, diags
	}
	return Compile(srcs) // ReadSources reports only errors: there is nothing to merge
}

// ReadSources reads the .ff files named by paths (files or directories).
func ReadSources(paths ...string) ([]dsl.Source, dsl.Diagnostics) {
	var (
		srcs  []dsl.Source
		diags dsl.Diagnostics
		seen  = map[string]bool{}
	)
	fail := func(path, format string, args ...any) {
		diags.Errorf(dsl.Range{Start: dsl.Position{File: path}, End: dsl.Position{File: path}}, dsl.CodeIO, format, args...)
	}
	read := func(path string) {
		// One file named twice (a.ff, ./a.ff, /abs/a.ff) is read once.
		key, err := filepath.Abs(path)
		if err != nil {
			key = filepath.Clean(path)
		}
		if seen[key] {
			return
		}
		seen[key] = true
		data, err := os.ReadFile(path)
		if err != nil {
			fail(path, "cannot read file: %v", unwrapPathError(err))
			return
		}
		srcs = append(srcs, dsl.Source{Name: path, Data: data})
	}
	if len(paths) == 0 {
		fail("", "no input files")
	}
	for _, p := range paths {
		info, err := os.Stat(p)
		if err != nil {
			fail(p, "cannot read: %v", unwrapPathError(err))
			continue
		}
		if !info.IsDir() {
			read(p)
			continue
		}
		entries, err := os.ReadDir(p)
		if err != nil {
			fail(p, "cannot read directory: %v", unwrapPathError(err))
			continue
		}
		n := 0
		for _, e := range entries { // ReadDir sorts by name
			// As the go tool, names starting with "." or "_" are left
			// out: editors' lock and backup files (.#x.ff).
			name := e.Name()
			if !e.IsDir() && strings.HasSuffix(name, ".ff") && !strings.HasPrefix(name, ".") && !strings.HasPrefix(name, "_") {
				read(filepath.Join(p, e.Name()))
				n++
			}
		}
		if n == 0 {
			fail(p, "directory contains no .ff files")
		}
	}
	return srcs, diags
}

func unwrapPathError(err error) error {
	if pe, ok := err.(*os.PathError); ok {
		return pe.Err
	}
	return err
}

// Compile parses and checks srcs as one package and returns its plan, or
// nil when there is any error, together with every diagnostic, sorted.
func Compile(srcs []dsl.Source) (pkg *plan.Package, diags dsl.Diagnostics) {
	defer func() {
		if r := recover(); r != nil {
			pkg = nil
			pos := dsl.Position{}
			if len(srcs) > 0 {
				pos = dsl.Position{File: srcs[0].Name, Line: 1, Col: 1}
			}
			diags.Errorf(dsl.Range{Start: pos, End: pos}, dsl.CodeSyntax, "internal compiler error: %v (please report this)", r)
			diags.Sort()
		}
	}()
	files := make([]*dsl.File, 0, len(srcs))
	for _, s := range srcs {
		f, d := dsl.Parse(s.Name, s.Data)
		files = append(files, f)
		diags = append(diags, d...)
	}
	c := newChecker()
	pkg = c.check(files)
	diags = append(diags, c.diags...)
	diags.Sort()
	if diags.HasErrors() {
		return nil, diags
	}
	return pkg, diags
}

// declKind names the kinds of top-level declarations.
type declKind string

const (
	kindType     declKind = "type"
	kindBudget   declKind = "budget"
	kindQuota    declKind = "quota"
	kindFlow     declKind = "flow"
	kindSchedule declKind = "schedule"
)

type topDecl struct {
	kind declKind
	name *dsl.Ident
}

// checker holds the state of one compilation.
type checker struct {
	diags   dsl.Diagnostics
	names   map[string]topDecl // every top-level name
	broken  map[string]bool    // names of declarations with syntax errors
	types   map[string]*dsl.TypeDecl
	budgets map[string]*dsl.BudgetDecl
	quotas  map[string]*dsl.QuotaDecl
	flows   []*dsl.FlowDecl
	scheds  []*dsl.ScheduleDecl

	typesBroken bool // a type declaration has an error
	planTypes   map[string]*plan.Type
	planBudgets map[string]*plan.Budget
	planQuotas  map[string]*plan.Quota
	quotaKeys   map[string]*dsl.Path
	minDepths   map[string]int // minDepth of each record type computed so far

	// unresolvedFields holds, by type, the fields whose type has an error
	// (reported, or a use of a broken declaration): they are left out of
	// the plan's type, but they are declared.
	unresolvedFields map[string]map[string]bool
	// inputUnresolved holds the flows whose input type has an error: their
	// plan has no input type, yet they take an input.
	inputUnresolved map[string]bool
}

func newChecker() *checker {
	return &checker{
		names:       map[string]topDecl{},
		broken:      map[string]bool{},
		types:       map[string]*dsl.TypeDecl{},
		budgets:     map[string]*dsl.BudgetDecl{},
		quotas:      map[string]*dsl.QuotaDecl{},
		planTypes:   map[string]*plan.Type{},
		planBudgets: map[string]*plan.Budget{},
		planQuotas:  map[string]*plan.Quota{},
		quotaKeys:   map[string]*dsl.Path{},
		minDepths:   map[string]int{},

		unresolvedFields: map[string]map[string]bool{},
		inputUnresolved:  map[string]bool{},
	}
}

// builtinTypes are the scalar type names.
var builtinTypes = []string{
	plan.KindBool, plan.KindBytes, plan.KindDuration, plan.KindFloat, plan.KindInt, plan.KindJSON, plan.KindString, plan.KindTime,
}

func (c *checker) check(files []*dsl.File) *plan.Package {
	pkg := &plan.Package{Schema: plan.SchemaVersion, Types: []plan.Type{}, Budgets: []plan.Budget{}, Quotas: []plan.Quota{}, Flows: []plan.Flow{}}
	var pkgName *dsl.Ident
	for _, f := range files {
		for _, d := range f.Decls {
			switch {
			case d.Bad:
				if n := badDeclName(d); n != "" {
					c.broken[n] = true
				}
				if d.Type != nil {
					c.typesBroken = true // its syntax error is reported by the parser
				}
			case d.Package != nil:
				id := d.Package.Name
				if pkgName == nil {
					pkgName = id
					if !isGoIdent(id.Name) {
						c.diags.Errorf(id.Range(), dsl.CodePackage, "package name %q is not a valid Go package name", id.Name)
					}
				} else if id.Name != pkgName.Name {
					c.diags.Errorf(id.Range(), dsl.CodePackage, "package %q disagrees with package %q declared earlier", id.Name, pkgName.Name).
						With(pkgName.Range(), "package "+pkgName.Name+" declared here")
				}
			case d.Type != nil:
				if c.declare(kindType, d.Type.Name) {
					c.types[d.Type.Name.Name] = d.Type
				} else {
					c.typesBroken = true
				}
			case d.Budget != nil:
				if c.declare(kindBudget, d.Budget.Name) {
					c.budgets[d.Budget.Name.Name] = d.Budget
				}
			case d.Quota != nil:
				if c.declare(kindQuota, d.Quota.Name) {
					c.quotas[d.Quota.Name.Name] = d.Quota
				}
			case d.Flow != nil:
				if c.declare(kindFlow, d.Flow.Name) {
					c.flows = append(c.flows, d.Flow)
				}
			case d.Schedule != nil:
				if c.declare(kindSchedule, d.Schedule.Name) {
					if len(c.scheds) == plan.MaxSchedules {
						c.diags.Errorf(d.Schedule.Name.Range(), dsl.CodeTooManyExecs, "schedule %q is one too many: ffrun keeps at most %d schedules", d.Schedule.Name.Name, plan.MaxSchedules)
						continue
					}
					c.scheds = append(c.scheds, d.Schedule)
				}
			}
		}
	}
	if pkgName != nil {
		pkg.Package = pkgName.Name
	}
	typeErrs, _ := c.diags.Count()
	for _, name := range slices.Sorted(maps.Keys(c.types)) {
		c.checkType(c.types[name])
	}
	c.checkRecursiveTypes()
	// With a broken type, a schedule's input is not checked against the
	// types: what the check would say is the type's error again, or a
	// false one about a field left out of its plan type. A type is broken
	// by a syntax error, a refused name (both noted above) or an error
	// found here.
	afterTypes, _ := c.diags.Count()
	c.typesBroken = c.typesBroken || afterTypes > typeErrs || len(c.unresolvedFields) > 0
	for _, name := range slices.Sorted(maps.Keys(c.budgets)) {
		c.checkBudget(c.budgets[name])
	}
	for _, name := range slices.Sorted(maps.Keys(c.quotas)) {
		c.checkQuota(c.quotas[name])
	}
	for _, name := range slices.Sorted(maps.Keys(c.planTypes)) {
		pkg.Types = append(pkg.Types, *c.planTypes[name])
	}
	for _, name := range slices.Sorted(maps.Keys(c.planBudgets)) {
		pkg.Budgets = append(pkg.Budgets, *c.planBudgets[name])
	}
	for _, name := range slices.Sorted(maps.Keys(c.planQuotas)) {
		pkg.Quotas = append(pkg.Quotas, *c.planQuotas[name])
	}
	flows, clean := map[string]*plan.Flow{}, map[string]bool{}
	for _, fd := range c.flows {
		before, _ := c.diags.Count()
		if f := c.checkFlow(fd, pkg.Package); f != nil {
			pkg.Flows = append(pkg.Flows, *f)
			flows[f.Name] = f
			after, _ := c.diags.Count()
			clean[f.Name] = after == before
		}
	}
	sort.Slice(pkg.Flows, func(i, j int) bool { return pkg.Flows[i].Name < pkg.Flows[j].Name })
	for _, sd := range c.scheds {
		if s, ok := c.checkSchedule(sd, flows, clean); ok {
			pkg.Schedules = append(pkg.Schedules, s)
		}
	}
	sort.Slice(pkg.Schedules, func(i, j int) bool { return pkg.Schedules[i].Name < pkg.Schedules[j].Name })
	c.checkSharedKinds(pkg.Flows)
	c.checkGoNames(pkg.Flows)
	return pkg
}

// badDeclName returns the name of a declaration with a syntax error, if
// the parser got that far.
func badDeclName(d *dsl.Decl) string {
	var id *dsl.Ident
	switch {
	case d.Type != nil:
		id = d.Type.Name
	case d.Budget != nil:
		id = d.Budget.Name
	case d.Quota != nil:
		id = d.Quota.Name
	case d.Flow != nil:
		id = d.Flow.Name
	case d.Schedule != nil:
		id = d.Schedule.Name
	}
	if id == nil {
		return ""
	}
	return id.Name
}

// declare records a top-level name and reports duplicates and reserved or
// overlong names. It returns false when the name cannot be used.
func (c *checker) declare(kind declKind, id *dsl.Ident) bool {
	if prev, ok := c.names[id.Name]; ok {
		msg := fmt.Sprintf("%s %q is already declared", kind, id.Name)
		if prev.kind != kind {
			msg += " as a " + string(prev.kind)
		}
		c.diags.Errorf(id.Range(), dsl.CodeDuplicate, "%s", msg).With(prev.name.Range(), "previous declaration here")
		return false
	}
	if kind == kindType && slices.Contains(builtinTypes, id.Name) {
		c.diags.Errorf(id.Range(), dsl.CodeReserved, "type %q has the name of a built-in type; choose another name", id.Name)
		return false
	}
	limit := 0
	switch kind {
	case kindSchedule:
		limit = plan.MaxScheduleNameLen
	case kindBudget, kindQuota:
		limit = plan.MaxResourceNameLen // ffrun's limit for budget and quota names
	}
	if limit > 0 && len(id.Name) > limit {
		c.diags.Errorf(id.Range(), dsl.CodeBadName, "%s name is %d bytes long; the limit is %d", kind, len(id.Name), limit)
		c.broken[id.Name] = true
		return false
	}
	if !c.checkIdentLen(id) {
		c.broken[id.Name] = true // its uses are not unknown names
		return false
	}
	c.names[id.Name] = topDecl{kind: kind, name: id}
	return true
}

func (c *checker) checkIdentLen(id *dsl.Ident) bool {
	if len(id.Name) > MaxNameLen {
		c.diags.Errorf(id.Range(), dsl.CodeBadName, "name is %d bytes long; the limit is %d", len(id.Name), MaxNameLen)
		return false
	}
	return true
}

// isGoIdent reports whether s is usable as a Go package name.
func isGoIdent(s string) bool { return s != "_" && token.IsIdentifier(s) }

// unknown reports an unknown name with a suggestion from candidates.
func (c *checker) unknown(id *dsl.Ident, code dsl.Code, what string, candidates []string, context string) {
	if c.broken[id.Name] {
		return // declared, but with a syntax error already reported
	}
	msg := fmt.Sprintf("unknown %s %q%s", what, id.Name, context)
	if s := dsl.Suggest(id.Name, candidates); s != "" {
		msg += fmt.Sprintf("; did you mean %q?", s)
	}
	c.diags.Errorf(id.Range(), code, "%s", msg)
}

// intValue parses an integer literal, reporting errors.
func (c *checker) intValue(l *dsl.IntLit) (int64, bool) {
	v, err := parseInt(l.Text)
	if err != nil {
		c.diags.Errorf(l.Range(), dsl.CodeBadInt, "%v", err)
		return 0, false
	}
	return v, true
}

// durationValue parses a duration literal in milliseconds, reporting
// errors; positive requires it to be above zero.
func (c *checker) durationValue(l *dsl.DurationLit, what string, positive bool) (int64, bool) {
	v, err := parseDuration(l.Text)
	if err != nil {
		c.diags.Errorf(l.Range(), dsl.CodeBadDuration, "%v", err)
		return 0, false
	}
	if positive && v == 0 {
		c.diags.Errorf(l.Range(), dsl.CodeDurationRange, "%s must be longer than zero", what)
		return 0, false
	}
	return v, true
}

// settingDuration is durationValue for the duration of a setting (a
// timeout, deadline, retry delay, budget reset, quota window or jitter),
// which is also at most plan.MaxDurationMs: 366 days, as ffrun takes.
func (c *checker) settingDuration(l *dsl.DurationLit, what string, positive bool) (int64, bool) {
	v, ok := c.durationValue(l, what, positive)
	if ok && v > plan.MaxDurationMs {
		c.diags.Errorf(l.Range(), dsl.CodeDurationRange, "%s %s is longer than 366 days (%s), the longest duration ffrun takes", what, l.Text, formatMs(plan.MaxDurationMs))
		return 0, false
	}
	return v, ok
}

// nameValue returns a string setting checked as a kind, lane or namespace.
func (c *checker) nameValue(l *dsl.StringLit, what string) (string, bool) {
	v := l.Value()
	if !l.Valid() {
		return v, false // reported by the parser
	}
	check := plan.ValidateLabel
	if what == "kind" {
		check = plan.ValidateKind
	}
	if err := check(v); err != nil {
		c.diags.Errorf(l.Range(), dsl.CodeEmptyString, "%s %v", what, err)
		return v, false
	}
	return v, true
}

// seenSet reports settings given twice in one block.
type seenSet struct {
	c    *checker
	seen map[string]dsl.Range
}

func (c *checker) newSeen() *seenSet { return &seenSet{c: c, seen: map[string]dsl.Range{}} }

// first reports whether keyword kw is seen for the first time in the block.
func (s *seenSet) first(kw string, r dsl.Range, block string) bool {
	if prev, ok := s.seen[kw]; ok {
		s.c.diags.Errorf(r, dsl.CodeDupSetting, "%s is already set in this %s", kw, block).With(prev, "first set here")
		return false
	}
	s.seen[kw] = r
	return true
}
