package api

import (
	"fmt"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/flowfabric/ff/compiler/plan"
	"github.com/flowfabric/ff/dsl"
	"github.com/flowfabric/ff/runtime/wire"
)

// template describes a flow served by name; withPlan adds the whole plan.
func template(f *plan.Flow, withPlan bool) wire.Template {
	t := wire.Template{
		Name: f.Name, Namespace: f.Namespace, Lane: f.Lane,
		Input: f.Input, Output: f.Output, Result: f.Result,
		Types: f.Types, Edges: f.Edges, Execs: make([]wire.TemplateExec, len(f.Execs)),
	}
	for i, x := range f.Execs {
		t.Execs[i] = wire.TemplateExec{
			Name: x.Name, Kind: x.Kind, Lane: x.Lane, Input: x.Input, Output: x.Output,
			Join: x.Join, Upstreams: x.Upstreams, Requires: x.Requires,
		}
	}
	if withPlan {
		t.Plan = f
	}
	return t
}

func (f *flows) lookup(c echo.Context) (*plan.Flow, *Error) {
	name, e := pathParam(c, "name", "name")
	if e != nil {
		return nil, e
	}
	fl, ok := f.templates[name]
	if !ok {
		e := Errorf(http.StatusNotFound, wire.CodeNotFound, "no such template %q%s (GET /v1/templates lists them)", name, f.didYouMean(name))
		e.Details = map[string]any{"template": name}
		if s := f.closest(name); s != "" {
			e.Details["suggestion"] = s
		}
		return nil, e
	}
	return fl, nil
}

// closest returns the served template whose name name is likely a
// misspelling of, or "".
func (f *flows) closest(name string) string { return dsl.Suggest(name, f.names) }

// didYouMean is `; did you mean "<template>"?` when a served template's
// name is close to name, else "".
func (f *flows) didYouMean(name string) string {
	if s := f.closest(name); s != "" {
		return fmt.Sprintf("; did you mean %q?", s)
	}
	return ""
}

func (f *flows) listTemplates(c echo.Context) error {
	if e := onlyQuery(c); e != nil {
		return e
	}
	out := wire.TemplateList{Templates: make([]wire.Template, 0, len(f.names))}
	for _, name := range f.names {
		out.Templates = append(out.Templates, template(f.templates[name], false))
	}
	return c.JSON(http.StatusOK, out)
}

func (f *flows) getTemplate(c echo.Context) error {
	if e := onlyQuery(c); e != nil {
		return e
	}
	fl, e := f.lookup(c)
	if e != nil {
		return e
	}
	return c.JSON(http.StatusOK, template(fl, true))
}

func (f *flows) stageTemplate(c echo.Context) error {
	fl, e := f.lookup(c)
	if e != nil {
		return e
	}
	var req wire.StageTemplate
	if err := Decode(c, f.s.limit(BodyLimitCreate), true, &req); err != nil {
		return err
	}
	return f.stageChecked(c, fl, f.checks[fl.Name], true, req.Input, req.Namespace, req.IdempotencyKey)
}
