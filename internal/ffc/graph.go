package ffc

import (
	"fmt"
	"io"
	"strings"

	"github.com/flowfabric/ff/compiler/plan"
)

// joinLabel describes a non-default join, or "".
func joinLabel(j plan.Join) string {
	switch j.Kind {
	case plan.JoinAny:
		return "join any"
	case plan.JoinCount:
		return fmt.Sprintf("join %d", j.N)
	}
	return ""
}

// nodeLines are the lines of an exec's label: name, then kind and join.
func nodeLines(x plan.Exec) []string {
	lines := []string{x.Name, x.Kind}
	if j := joinLabel(x.Join); j != "" {
		lines = append(lines, j)
	}
	return lines
}

func dotQuote(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(s) + `"`
}

// writeDOT writes flows as Graphviz digraphs, one per flow.
func writeDOT(w io.Writer, flows []plan.Flow) error {
	var b strings.Builder
	for i, f := range flows {
		if i > 0 {
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "digraph %s {\n", dotQuote(f.Name))
		b.WriteString("  rankdir=LR;\n  node [shape=box, style=rounded];\n")
		for _, x := range f.Execs {
			attrs := []string{"label=" + dotQuote(strings.Join(nodeLines(x), "\n"))}
			if x.Name == f.Result {
				attrs = append(attrs, "peripheries=2")
			}
			fmt.Fprintf(&b, "  %s [%s];\n", dotQuote(x.Name), strings.Join(attrs, ", "))
		}
		for _, e := range f.Edges {
			attrs := []string{"label=" + dotQuote(e.On)}
			switch e.On {
			case plan.OnFailure:
				attrs = append(attrs, "color=red", "style=dashed")
			case plan.OnDone:
				attrs = append(attrs, "style=dotted")
			}
			fmt.Fprintf(&b, "  %s -> %s [%s];\n", dotQuote(e.From), dotQuote(e.To), strings.Join(attrs, ", "))
		}
		b.WriteString("}\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func mermaidText(s string) string {
	return strings.NewReplacer(`"`, "#quot;", "<", "#lt;", ">", "#gt;").Replace(s)
}

// writeMermaid writes flows as one Mermaid flowchart with a subgraph per
// flow. Node ids are "n<flow index>_<exec index>": unique whatever the
// names (flows sharing exec names stay apart, and names holding "_" cannot
// make two ids equal), and never a Mermaid keyword such as "end".
func writeMermaid(w io.Writer, flows []plan.Flow) error {
	var b strings.Builder
	b.WriteString("flowchart LR\n")
	for fi, f := range flows {
		indent := "  "
		if len(flows) > 1 {
			fmt.Fprintf(&b, "  subgraph g_%s [\"%s\"]\n", f.Name, mermaidText(f.Name))
			indent = "    "
		}
		ids := make(map[string]string, len(f.Execs))
		for xi, x := range f.Execs {
			ids[x.Name] = fmt.Sprintf("n%d_%d", fi, xi)
		}
		id := func(exec string) string { return ids[exec] }
		for _, x := range f.Execs {
			lines := nodeLines(x)
			for i := range lines {
				lines[i] = mermaidText(lines[i])
			}
			label := strings.Join(lines, "<br/>")
			if x.Name == f.Result {
				fmt.Fprintf(&b, "%s%s([\"%s\"])\n", indent, id(x.Name), label)
			} else {
				fmt.Fprintf(&b, "%s%s[\"%s\"]\n", indent, id(x.Name), label)
			}
		}
		for _, e := range f.Edges {
			arrow := "-->"
			switch e.On {
			case plan.OnFailure:
				arrow = "-.->"
			case plan.OnDone:
				arrow = "==>"
			}
			fmt.Fprintf(&b, "%s%s %s|%s| %s\n", indent, id(e.From), arrow, e.On, id(e.To))
		}
		if len(flows) > 1 {
			b.WriteString("  end\n")
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}
