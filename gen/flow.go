package gen

import (
	"fmt"
	"reflect"
	"strings"

	"github.com/dave/jennifer/jen"

	"github.com/flowfabric/ff/compiler/plan"
)

// upstreamField is one upstream of an exec whose output a handler can read.
type upstreamField struct {
	Name   string
	Output *plan.TypeRef
}

// upstreamFields lists the upstreams of ex that declare an output, in the
// plan's (sorted) order. Upstreams without an output have nothing to read
// and get no field.
func (g *generator) upstreamFields(fl *plan.Flow, ex *plan.Exec) []upstreamField {
	var out []upstreamField
	for _, name := range ex.Upstreams {
		up := g.findExec(fl, name)
		if up == nil || up.Output == nil {
			continue
		}
		out = append(out, upstreamField{Name: name, Output: up.Output})
	}
	return out
}

// findExec returns the exec of fl called name, or nil.
func (g *generator) findExec(fl *plan.Flow, name string) *plan.Exec {
	idx, ok := g.execIndex[fl.Name]
	if !ok {
		idx = make(map[string]int, len(fl.Execs))
		for i := range fl.Execs {
			idx[fl.Execs[i].Name] = i
		}
		g.execIndex[fl.Name] = idx
	}
	if i, ok := idx[name]; ok && i < len(fl.Execs) && fl.Execs[i].Name == name {
		return &fl.Execs[i]
	}
	return nil
}

// inputSource says in words where an exec's input comes from.
func inputSource(ex *plan.Exec) string {
	switch ex.InputFrom {
	case plan.InputFlow:
		return "the flow input"
	case plan.InputExec:
		return fmt.Sprintf("the output of exec %q", ex.InputExec)
	default:
		return "no input"
	}
}

// genFlow writes everything generated for one flow.
func (g *generator) genFlow(f *jen.File, fl *plan.Flow) error {
	n := flowNames(fl.Name)
	for _, ex := range fl.Execs {
		for _, u := range ex.Upstreams {
			if g.findExec(fl, u) == nil {
				return fmt.Errorf("gen: flow %q: exec %q: unknown upstream %q", fl.Name, ex.Name, u)
			}
		}
	}

	// <Flow>Plan: the compiled plan as a literal. The execs and edges,
	// one line each, are written directly in gofmt's form and spliced in
	// after formatting: a flow of 10,000 execs would otherwise take gofmt
	// most of the generation time.
	head := *fl
	head.Execs, head.Edges = nil, nil
	body, err := literal(reflect.ValueOf(&head))
	if err != nil {
		return fmt.Errorf("gen: flow %q: embedding the plan: %w", fl.Name, err)
	}
	stmts := []jen.Code{jen.Id("f").Op(":=").Add(body)}
	for _, list := range []struct {
		field string
		v     reflect.Value
	}{{"Execs", reflect.ValueOf(fl.Execs)}, {"Edges", reflect.ValueOf(fl.Edges)}} {
		if list.v.IsNil() {
			continue
		}
		var b strings.Builder
		b.WriteString("\tf." + list.field + " = ")
		if err := typeText(&b, list.v.Type()); err != nil {
			return fmt.Errorf("gen: flow %q: embedding the plan: %w", fl.Name, err)
		}
		b.WriteString("{")
		for i := range list.v.Len() {
			b.WriteString("\n\t\t")
			if err := oneLine(&b, list.v.Index(i), false); err != nil {
				return fmt.Errorf("gen: flow %q: embedding the plan: %s[%d]: %w", fl.Name, list.field, i, err)
			}
			b.WriteString(",")
		}
		if list.v.Len() > 0 {
			b.WriteString("\n\t")
		}
		b.WriteString("}\n")
		stmts = append(stmts, g.splice(b.String()))
	}
	stmts = append(stmts, jen.Return(jen.Id("f")))
	g.top(f, "%s returns the compiled plan of flow %q: everything a runtime needs to stage a run of it. Each call returns a new value.", n.plan, fl.Name)
	f.Func().Id(n.plan).Params().Op("*").Qual(pathPlan, "Flow").Block(stmts...)
	f.Line()

	if err := g.genStage(f, fl, n); err != nil {
		return err
	}
	if err := g.genHandlers(f, fl, n); err != nil {
		return err
	}
	return g.genRegister(f, fl, n)
}

// genStage writes Stage<Flow>, <Flow>Run and its Result method.
func (g *generator) genStage(f *jen.File, fl *plan.Flow, n flowIdents) error {
	params := []jen.Code{
		jen.Id("ctx").Qual(pathContext, "Context"),
		jen.Id("c").Qual(pathClient, "Stager"),
	}
	input := jen.Nil()
	inDoc := "It takes no input."
	if fl.Input != nil {
		typ, err := g.goType(fl.Input)
		if err != nil {
			return fmt.Errorf("gen: flow %q: input: %w", fl.Name, err)
		}
		params = append(params, jen.Id("in").Add(typ))
		input = jen.Id("in")
		inDoc = fmt.Sprintf("The input in (.ff type %s) is sent as JSON.", describe(fl.Input))
	}
	params = append(params, jen.Id("opts").Op("...").Qual(pathClient, "StageOption"))

	g.top(f, "%s starts a run of flow %q through c, with the plan returned by %s. %s", n.stage, fl.Name, n.plan, inDoc)
	f.Func().Id(n.stage).Params(params...).Params(jen.Op("*").Id(n.run), jen.Error()).Block(
		jen.List(jen.Id("r"), jen.Err()).Op(":=").Id("c").Dot("StageFlow").Call(
			jen.Id("ctx"), jen.Id(n.plan).Call(), input, jen.Id("opts").Op("..."),
		),
		jen.If(jen.Err().Op("!=").Nil()).Block(
			jen.Return(jen.Nil(), jen.Qual(pathFmt, "Errorf").Call(jen.Lit(escapeVerbs("stage flow "+fl.Name+": ")+"%w"), jen.Err())),
		),
		jen.Return(jen.Op("&").Id(n.run).Values(jen.Dict{jen.Id("Run"): jen.Id("r")}), jen.Nil()),
	)
	f.Line()

	g.top(f, "%s is a handle on one run of flow %q.", n.run, fl.Name)
	f.Type().Id(n.run).Struct(jen.Op("*").Qual(pathClient, "Run"))
	f.Line()

	recv := jen.Id("r").Op("*").Id(n.run)
	ctxParam := jen.Id("ctx").Qual(pathContext, "Context")
	if fl.Output == nil {
		g.top(f, "Result waits until the run is terminal and returns nil if it succeeded. Flow %q has no output.", fl.Name)
		f.Func().Params(recv).Id("Result").Params(ctxParam).Error().Block(
			jen.List(jen.Id("_"), jen.Err()).Op(":=").Id("r").Dot("Run").Dot("Result").Call(jen.Id("ctx")),
			jen.Return(jen.Err()),
		)
		f.Line()
		return nil
	}
	typ, err := g.goType(fl.Output)
	if err != nil {
		return fmt.Errorf("gen: flow %q: output: %w", fl.Name, err)
	}
	g.top(f, "Result waits until the run is terminal and returns its result (.ff type %s), decoded from JSON. A run that did not succeed yields the error of client.Run.Result.", describe(fl.Output))
	f.Func().Params(recv).Id("Result").Params(ctxParam).Params(typ.Clone(), jen.Error()).Block(
		jen.Var().Id("out").Add(typ.Clone()),
		jen.List(jen.Id("raw"), jen.Err()).Op(":=").Id("r").Dot("Run").Dot("Result").Call(jen.Id("ctx")),
		jen.If(jen.Err().Op("!=").Nil()).Block(jen.Return(jen.Id("out"), jen.Err())),
		jen.If(
			jen.Err().Op(":=").Qual(pathJSON, "Unmarshal").Call(jen.Id("raw"), jen.Op("&").Id("out")),
			jen.Err().Op("!=").Nil(),
		).Block(
			jen.Return(jen.Id("out"), jen.Qual(pathFmt, "Errorf").Call(
				jen.Lit(escapeVerbs("flow "+fl.Name+": decode result: ")+"%w"), jen.Err())),
		),
		jen.Return(jen.Id("out"), jen.Nil()),
	)
	f.Line()
	return nil
}

// method describes the Go method generated for one exec.
type method struct {
	name string
	in   *plan.TypeRef // nil: no input parameter
	out  *plan.TypeRef // nil: returns only error
	up   string        // upstream struct name; "" when there is none
	ups  []upstreamField
}

func (g *generator) method(fl *plan.Flow, ex *plan.Exec, n flowIdents) method {
	m := method{name: GoName(ex.Name), in: ex.Input, out: ex.Output}
	if ex.InputFrom == plan.InputNone {
		m.in = nil
	}
	if ups := g.upstreamFields(fl, ex); len(ups) > 0 {
		m.up = n.upstream(ex.Name)
		m.ups = ups
	}
	return m
}

// genHandlers writes the upstream structs and the <Flow>Handlers interface.
func (g *generator) genHandlers(f *jen.File, fl *plan.Flow, n flowIdents) error {
	var methods []jen.Code
	for i := range fl.Execs {
		ex := &fl.Execs[i]
		m := g.method(fl, ex, n)
		if m.up != "" {
			var fields []jen.Code
			for _, u := range m.ups {
				typ, err := g.goType(u.Output)
				if err != nil {
					return fmt.Errorf("gen: flow %q: exec %q: output: %w", fl.Name, u.Name, err)
				}
				fields = append(fields, jen.Id(GoName(u.Name)).Op("*").Add(typ).Tag(map[string]string{"json": u.Name + ",omitempty"}))
			}
			g.top(f, "%s holds the upstream outputs passed to %s.%s.", m.up, n.handlers, m.name)
			f.Type().Id(m.up).Struct(fields...)
			f.Line()
		}

		params := []jen.Code{jen.Id("ctx").Qual(pathContext, "Context")}
		if m.in != nil {
			typ, err := g.goType(m.in)
			if err != nil {
				return fmt.Errorf("gen: flow %q: exec %q: input: %w", fl.Name, ex.Name, err)
			}
			params = append(params, jen.Id("in").Add(typ))
		}
		if m.up != "" {
			params = append(params, jen.Id("up").Id(m.up))
		}
		var results *jen.Statement
		if m.out != nil {
			typ, err := g.goType(m.out)
			if err != nil {
				return fmt.Errorf("gen: flow %q: exec %q: output: %w", fl.Name, ex.Name, err)
			}
			results = jen.Params(typ, jen.Error())
		} else {
			results = jen.Error()
		}
		words := []string{fmt.Sprintf("%s runs exec %q (kind %q).", m.name, ex.Name, ex.Kind)}
		if m.in != nil {
			words = append(words, fmt.Sprintf("Its input in (%s) is %s.", describe(m.in), inputSource(ex)))
		} else {
			words = append(words, "It takes no input.")
		}
		if m.up != "" {
			names := make([]string, len(m.ups))
			for i, u := range m.ups {
				names[i] = u.Name
			}
			if len(names) == 1 {
				words = append(words, fmt.Sprintf("up has the output of upstream %s.", names[0]))
			} else {
				words = append(words, fmt.Sprintf("up has the outputs of upstreams %s and %s.", strings.Join(names[:len(names)-1], ", "), names[len(names)-1]))
			}
		}
		if m.out != nil {
			words = append(words, fmt.Sprintf("It returns its output (%s).", describe(m.out)))
		} else {
			words = append(words, "It has no output.")
		}
		methods = append(methods,
			doc("%s", strings.Join(words, " ")),
			jen.Id(m.name).Params(params...).Add(results),
		)
	}
	g.top(f, "%s implements the execs of flow %q, one method per exec: typed input in, typed output out, and, when it has upstreams that declare an output, a struct up with one pointer field per such upstream, named after it and nil when that upstream produced no output (it failed or was skipped). An error fails the attempt, which is retried per the exec's policy unless the error is wrapped with worker.Permanent. Bind an implementation to a worker with %s.", n.handlers, fl.Name, n.register)
	f.Type().Id(n.handlers).Interface(methods...)
	f.Line()
	return nil
}

// genRegister writes Register<Flow>: one bind constructor per exec,
// chosen by the shape of its method.
func (g *generator) genRegister(f *jen.File, fl *plan.Flow, n flowIdents) error {
	bindings := []jen.Code{jen.Id("w"), jen.Lit(fl.Name)}
	for i := range fl.Execs {
		ex := &fl.Execs[i]
		m := g.method(fl, ex, n)
		ctor := ""
		if m.in != nil {
			ctor += "In"
		}
		if m.up != "" {
			ctor += "Up"
		}
		if m.out != nil {
			ctor += "Out"
		}
		if ctor == "" {
			ctor = "Plain"
		}
		args := []jen.Code{jen.Lit(ex.Name), jen.Lit(ex.Kind), jen.Id("h").Dot(m.name)}
		for _, u := range m.ups {
			args = append(args, jen.Lit(u.Name))
		}
		bindings = append(bindings, jen.Line().Qual(pathBind, ctor).Call(args...))
	}
	bindings = append(bindings, jen.Line())

	g.top(f, "%s binds every exec of flow %q to w under the exec's kind. Each handler decodes the task input and the outputs of the upstreams from JSON (a decoding failure is permanent: a retry cannot fix it), calls the matching method of h and encodes its output. It stops at, and returns, the first registration error.", n.register, fl.Name)
	f.Func().Id(n.register).Params(
		jen.Id("w").Qual(pathWorker, "Registrar"),
		jen.Id("h").Id(n.handlers),
	).Error().Block(
		jen.If(jen.Id("h").Op("==").Nil()).Block(
			jen.Return(jen.Qual(pathErrors, "New").Call(jen.Lit(fmt.Sprintf("register flow %s: nil %s", fl.Name, n.handlers)))),
		),
		jen.Return(jen.Qual(pathBind, "Register").Call(bindings...)),
	)
	f.Line()
	return nil
}

// escapeVerbs doubles every % in s so that s can be used as literal text
// in a format string of the generated code.
func escapeVerbs(s string) string {
	return strings.ReplaceAll(s, "%", "%%")
}
