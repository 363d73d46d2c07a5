package dashboard

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html/template"
	"io/fs"
	"strings"
	"time"

	"github.com/flowfabric/ff/compiler/plan"
	"github.com/flowfabric/ff/runtime/wire"
)

// parsePages parses every page with the layout and the graph, one
// template set per page (each defines its own "content").
func parsePages() (map[string]*template.Template, error) {
	names, err := fs.Glob(files, "templates/*.html")
	if err != nil {
		return nil, err
	}
	pages := map[string]*template.Template{}
	for _, n := range names {
		page := strings.TrimSuffix(strings.TrimPrefix(n, "templates/"), ".html")
		if page == "layout" || page == "graph" {
			continue
		}
		t, err := template.New(page).Funcs(funcs).ParseFS(files, "templates/layout.html", "templates/graph.html", n)
		if err != nil {
			return nil, fmt.Errorf("dashboard: page %s: %w", page, err)
		}
		pages[page] = t
	}
	return pages, nil
}

var funcs = template.FuncMap{
	"when":       when,
	"took":       took,
	"inZone":     inZone,
	"stateClass": stateClass,
	"join":       strings.Join,
	"typeName":   typeName,
	"joinName":   joinName,
	"waits":      waits,
	"indent":     indent,
	"attemptClass": func(outcome string) string {
		switch outcome {
		case "success":
			return "s-good"
		case "running":
			return "s-run"
		case "cancelled":
			return "s-off"
		}
		return "s-bad"
	},
	"ms": func(ms int64) string { return short(time.Duration(ms) * time.Millisecond) },
}

// when shows an instant in UTC to the second ("—" for none).
func when(t *time.Time) string {
	if t == nil || t.IsZero() {
		return "—"
	}
	return t.UTC().Format("2006-01-02 15:04:05 UTC")
}

// inZone shows an instant in a schedule's zone (UTC when the zone is not
// known here).
func inZone(t *time.Time, zone string) string {
	if t == nil || t.IsZero() {
		return "—"
	}
	loc, err := time.LoadLocation(zone)
	if err != nil {
		return when(t)
	}
	in := t.In(loc)
	if _, off := in.Zone(); off == 0 {
		return in.Format("2006-01-02 15:04:05 MST")
	}
	return in.Format("2006-01-02 15:04:05 MST") + " (" + t.UTC().Format("15:04 UTC") + ")"
}

// took is the time from start to end, or since start while it runs.
func took(start, end *time.Time) string {
	if start == nil || start.IsZero() {
		return ""
	}
	to := time.Now()
	if end != nil && !end.IsZero() {
		to = *end
	}
	return short(to.Sub(*start))
}

// short writes a duration with at most three significant digits and no
// zero tail ("1m", not "1m0s").
func short(d time.Duration) string {
	switch {
	case d < 0:
		return "0s"
	case d < time.Millisecond:
		return d.Round(time.Microsecond).String()
	case d < time.Second:
		return d.Round(time.Millisecond / 10).String()
	case d < time.Minute:
		return d.Round(10 * time.Millisecond).String()
	case d < time.Hour:
		d = d.Round(time.Second)
	default:
		d = d.Round(time.Minute)
	}
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// stateClass is the CSS class of a run's or member's state.
func stateClass(state string) string {
	switch state {
	case wire.RunSucceeded, "completed":
		return "s-good"
	case wire.RunFailed, "expired":
		return "s-bad"
	case wire.RunCancelled, "skipped":
		return "s-off"
	case wire.RunRunning, "active":
		return "s-run"
	case "blocked", "delayed":
		return "s-wait"
	case "waiting", "pending":
		return "s-idle"
	}
	return "s-none"
}

// typeName writes a type as the .ff language does.
func typeName(t *plan.TypeRef) string {
	if t == nil {
		return "—"
	}
	switch t.Kind {
	case plan.KindList:
		return "[" + typeName(t.Elem) + "]"
	case plan.KindMap:
		return "{string: " + typeName(t.Elem) + "}"
	case plan.KindNamed:
		return t.Name
	}
	return t.Kind
}

// waits lists the upstreams of x with the condition of each edge that is
// not "on success".
func waits(t *wire.Template, x wire.TemplateExec) string {
	on := map[string]string{}
	for _, e := range t.Edges {
		if e.To == x.Name {
			on[e.From] = e.On
		}
	}
	parts := make([]string, len(x.Upstreams))
	for i, u := range x.Upstreams {
		parts[i] = u
		if c := on[u]; c != "" && c != plan.OnSuccess {
			parts[i] += " (on " + c + ")"
		}
	}
	return strings.Join(parts, ", ")
}

func joinName(j plan.Join) string {
	if j.Kind == plan.JoinCount {
		return fmt.Sprintf("join %d", j.N)
	}
	return "join " + j.Kind
}

// skeleton is a JSON value of type t to start the run form from: every
// required field present with an empty value, the optional ones left out
// (left as they are, they would send values the user did not choose), and
// those left out, for the form to name.
func skeleton(t *plan.TypeRef, types []plan.Type) (string, []optionalField) {
	if t == nil {
		return "", nil
	}
	byName := make(map[string]plan.Type, len(types))
	for _, ty := range types {
		byName[ty.Name] = ty
	}
	var optional []optionalField
	v := sample(t, byName, map[string]bool{}, "", &optional)
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return "", nil
	}
	return strings.TrimSpace(buf.String()), optional
}

// optionalField is an optional field of a run's input type, which the
// start form leaves out: its path from the input ("meta.level") and type.
type optionalField struct{ Path, Type string }

// sample is an empty value of t, at path (its fields' paths start with
// it); a type met again inside itself is null. The optional fields it
// leaves out are added to optional.
func sample(t *plan.TypeRef, types map[string]plan.Type, open map[string]bool, path string, optional *[]optionalField) any {
	switch t.Kind {
	case plan.KindString, plan.KindBytes:
		return ""
	case plan.KindInt, plan.KindFloat, plan.KindDuration:
		return 0
	case plan.KindBool:
		return false
	case plan.KindTime:
		return time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Format(time.RFC3339)
	case plan.KindList:
		return []any{}
	case plan.KindMap:
		return map[string]any{}
	case plan.KindNamed:
		ty, ok := types[t.Name]
		if !ok || open[t.Name] {
			return nil
		}
		open[t.Name] = true
		defer delete(open, t.Name)
		obj := orderedObject{}
		for _, f := range ty.Fields {
			if f.Optional {
				*optional = append(*optional, optionalField{Path: path + f.Name, Type: typeName(&f.Type)})
				continue
			}
			obj = append(obj, member{f.Name, sample(&f.Type, types, open, path+f.Name+".", optional)})
		}
		return obj
	}
	return nil
}

// orderedObject encodes its members in order (the type's field order).
type orderedObject []member

type member struct {
	name  string
	value any
}

// MarshalJSON writes the members in order.
func (o orderedObject) MarshalJSON() ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteByte('{')
	for i, m := range o {
		if i > 0 {
			buf.WriteByte(',')
		}
		k, err := json.Marshal(m.name)
		if err != nil {
			return nil, err
		}
		v, err := json.Marshal(m.value)
		if err != nil {
			return nil, err
		}
		buf.Write(k)
		buf.WriteByte(':')
		buf.Write(v)
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}
