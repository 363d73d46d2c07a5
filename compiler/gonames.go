package compiler

import (
	"fmt"
	"maps"
	"slices"

	"github.com/flowfabric/ff/compiler/plan"
	"github.com/flowfabric/ff/dsl"
	"github.com/flowfabric/ff/internal/goname"
)

// goClaim is one Go identifier that generated code would declare for a
// .ff declaration. Descriptions are built only for messages.
type goClaim struct {
	ident string
	id    *dsl.Ident // the name of the .ff declaration
	kind  string     // "type", "field", "exec" or "flow"
	flow  string     // for an exec: its flow
	gen   bool       // the identifier is generated for the declaration, not its own name
}

// what describes the claim: `type "Clip"`, `the PublishRun generated for
// flow "publish"`.
func (cl goClaim) what() string {
	if cl.gen {
		return fmt.Sprintf("the %s generated for %s", cl.ident, cl.decl())
	}
	return cl.decl()
}

// decl describes the declaration: `exec "probe" of flow "publish"`.
func (cl goClaim) decl() string {
	if cl.gen && cl.kind == "exec" {
		return fmt.Sprintf("exec %q of flow %q", cl.id.Name, cl.flow)
	}
	return fmt.Sprintf("%s %q", cl.kind, cl.id.Name)
}

// goScope is one Go scope of the generated code: the package, the fields
// of a struct or the methods of an interface.
type goScope struct {
	// as says what an identifier becomes in this scope, for messages:
	// "the Go identifier %s in generated code".
	as     string
	claims []goClaim
}

// checkGoNames reports .ff names that the code generator could not use:
// names that give no Go identifier, and names that become the same Go
// identifier in one Go scope of the generated file (types Clip and clip,
// fields user_id and UserID, a type named PublishRun next to flow
// publish). It applies the naming rule and the list of generated
// identifiers of package goname, which gen uses too, so that what `ffc
// check` accepts `ffc gen` can write. flows are the compiled flows.
func (c *checker) checkGoNames(flows []plan.Flow) {
	byName := map[string]*plan.Flow{}
	for i := range flows {
		byName[flows[i].Name] = &flows[i]
	}
	pkg := &goScope{as: "the Go identifier %s in generated code"}
	for _, name := range slices.Sorted(maps.Keys(c.types)) {
		td := c.types[name]
		ident, ok := c.goIdent(goClaim{id: td.Name, kind: "type"})
		if !ok {
			continue
		}
		pkg.claims = append(pkg.claims, goClaim{ident: ident, id: td.Name, kind: "type"})
		fields := &goScope{as: "the field %s of the Go struct " + ident + " in generated code"}
		seen := map[string]bool{}
		for _, f := range td.Fields {
			if seen[f.Name.Name] {
				continue // a duplicate, reported already
			}
			seen[f.Name.Name] = true
			cl := goClaim{id: f.Name, kind: "field"}
			if cl.ident, ok = c.goIdent(cl); ok {
				fields.claims = append(fields.claims, cl)
			}
		}
		c.goClashes(fields)
	}

	// Two flows with one Go name clash on every generated identifier:
	// report that once, as a clash of flow names.
	bases := &goScope{as: "%s in the names of generated Go declarations"}
	decls := map[*dsl.Ident]*dsl.FlowDecl{}
	for _, fd := range c.flows {
		cl := goClaim{id: fd.Name, kind: "flow"}
		var ok bool
		if cl.ident, ok = c.goIdent(cl); ok && byName[fd.Name.Name] != nil {
			bases.claims = append(bases.claims, cl)
			decls[fd.Name] = fd
		}
	}
	sameBase := c.goClashes(bases)
	for _, base := range bases.claims {
		fd := base.id
		fl := byName[fd.Name]
		n := goname.ForFlow(fl.Name)
		methods := &goScope{as: "the method %s of the Go interface " + n.Handlers + " in generated code"}
		execs := map[string]*dsl.Ident{} // first declaration of each exec with a Go name
		for _, it := range decls[fd].Items {
			if it.Exec == nil {
				continue
			}
			id := it.Exec.Name
			if _, dup := execs[id.Name]; dup {
				continue // reported already
			}
			execs[id.Name] = nil
			cl := goClaim{id: id, kind: "exec"}
			var ok bool
			if cl.ident, ok = c.goIdent(cl); ok {
				execs[id.Name] = id
				methods.claims = append(methods.claims, cl)
				c.goVetMethod(cl, n.Handlers)
			}
		}
		// Two execs whose methods clash also clash in the names of
		// their upstream structs: report the methods only.
		sameMethod := c.goClashes(methods)
		if sameBase[fd] {
			continue
		}
		for _, d := range goname.Decls(fl) {
			switch id := execs[d.Exec]; {
			case d.Exec == "":
				pkg.claims = append(pkg.claims, goClaim{ident: d.Ident, id: fd, kind: "flow", gen: true})
			case id != nil && !sameMethod[id]:
				pkg.claims = append(pkg.claims, goClaim{ident: d.Ident, id: id, kind: "exec", flow: fl.Name, gen: true})
			}
		}
	}
	c.goClashes(pkg)
}

// goIdent returns the Go identifier of the name cl declares, or reports
// that it has none.
func (c *checker) goIdent(cl goClaim) (string, bool) {
	ident := goname.Of(cl.id.Name)
	if !goname.Exported(ident) {
		c.diags.Errorf(cl.id.Range(), dsl.CodeGoName,
			"%s gives no Go identifier for generated code (underscores are dropped and what is left must start with a letter); rename it", cl.what())
		return "", false
	}
	return ident, true
}

// goVetMethod reports an exec whose method of the Go interface handlers
// has a name go vet holds to the signature of a well-known interface
// (marshal_json becomes MarshalJSON): vet would reject the generated file
// and the user's type that implements it.
func (c *checker) goVetMethod(cl goClaim, handlers string) {
	sig, ok := goname.VetMethod(cl.ident)
	if !ok {
		return
	}
	c.diags.Errorf(cl.id.Range(), dsl.CodeGoName,
		"%s becomes the method %s of the Go interface %s in generated code, a name go vet reserves for %s: vet would reject the generated code and your handlers; rename the exec (%s_step, say)",
		cl.what(), cl.ident, handlers, sig, cl.id.Name)
}

// goClashes reports every claim of s on an identifier claimed earlier in
// source order, at most once per pair of declarations, and returns the
// names of the later declarations it reported.
func (c *checker) goClashes(s *goScope) map[*dsl.Ident]bool {
	slices.SortStableFunc(s.claims, func(a, b goClaim) int {
		return dsl.ToPosition(a.id.Pos).Compare(dsl.ToPosition(b.id.Pos))
	})
	owner := make(map[string]goClaim, len(s.claims))
	reported := map[[2]*dsl.Ident]bool{}
	clashed := map[*dsl.Ident]bool{}
	for _, cl := range s.claims {
		prev, ok := owner[cl.ident]
		if !ok {
			owner[cl.ident] = cl
			continue
		}
		pair := [2]*dsl.Ident{cl.id, prev.id}
		if reported[pair] {
			continue
		}
		reported[pair] = true
		clashed[cl.id] = true
		c.diags.Errorf(cl.id.Range(), dsl.CodeGoName, "%s and %s both become %s; rename one of them",
			cl.what(), prev.what(), fmt.Sprintf(s.as, cl.ident)).With(prev.id.Range(), prev.decl()+" declared here")
	}
	return clashed
}
