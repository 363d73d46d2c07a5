package dashboard

import (
	"fmt"
	"net/url"
	"slices"

	"github.com/flowfabric/ff/compiler/plan"
	"github.com/flowfabric/ff/runtime/wire"
)

// GraphMax is the most execs a drawn graph has; larger flows are listed
// only.
const GraphMax = 300

// Geometry of the drawing, in SVG units.
const (
	nodeW   = 168
	nodeH   = 40
	colGap  = 56
	rowGap  = 14
	margin  = 8
	nameMax = 22 // characters of a name drawn; the tooltip has all of it
)

// graph is a flow drawn left to right, each exec in the column after its
// deepest upstream.
type graph struct {
	Width, Height int
	NodeW, NodeH  int
	Nodes         []node
	Edges         []edge
}

type node struct {
	Name, Label string
	Kind        string
	State       string // the member's public state; "" in a template
	Href        string // the member's execution page; "" in a template
	X, Y        int
	TextX       int
	NameY       int
	StateY      int
}

type edge struct {
	Path string
	On   string // plan.OnSuccess, OnFailure or OnDone
	Tip  string // "from → to (on ...)"
}

// layoutGraph draws t; with run, each node shows its member's state and
// links to it. It returns nil for a flow larger than GraphMax.
func layoutGraph(t *wire.Template, run *wire.FlowRun) *graph {
	if len(t.Execs) == 0 || len(t.Execs) > GraphMax {
		return nil
	}
	index := make(map[string]int, len(t.Execs))
	for i, x := range t.Execs {
		index[x.Name] = i
	}
	// Columns: longest path from a root. The compiler refuses cycles; a
	// template that had one anyway is not drawn.
	col := make([]int, len(t.Execs))
	state := make([]int, len(t.Execs)) // 0 new, 1 visiting, 2 done
	var depth func(i int) bool
	depth = func(i int) bool {
		switch state[i] {
		case 1:
			return false
		case 2:
			return true
		}
		state[i] = 1
		for _, u := range t.Execs[i].Upstreams {
			j, ok := index[u]
			if !ok {
				continue
			}
			if !depth(j) {
				return false
			}
			col[i] = max(col[i], col[j]+1)
		}
		state[i] = 2
		return true
	}
	cols := 0
	for i := range t.Execs {
		if !depth(i) {
			return nil
		}
		cols = max(cols, col[i]+1)
	}
	// Rows: in flow order within a column, then each column after the
	// first ordered by the mean row of its upstreams, which keeps most
	// edges short and uncrossed.
	row := make([]float64, len(t.Execs))
	byCol := make([][]int, cols)
	for i := range t.Execs {
		byCol[col[i]] = append(byCol[col[i]], i)
	}
	for c, members := range byCol {
		if c > 0 {
			key := make(map[int]float64, len(members))
			for _, i := range members {
				sum, n := 0.0, 0
				for _, u := range t.Execs[i].Upstreams {
					if j, ok := index[u]; ok {
						sum += row[j]
						n++
					}
				}
				key[i] = float64(i) / float64(len(t.Execs)) // ties keep flow order
				if n > 0 {
					key[i] += sum / float64(n)
				}
			}
			slices.SortStableFunc(members, func(a, b int) int {
				switch {
				case key[a] < key[b]:
					return -1
				case key[a] > key[b]:
					return 1
				}
				return 0
			})
		}
		for r, i := range members {
			row[i] = float64(r)
		}
	}
	rows := 0
	for _, members := range byCol {
		rows = max(rows, len(members))
	}
	g := &graph{
		NodeW:  nodeW,
		NodeH:  nodeH,
		Width:  2*margin + cols*nodeW + (cols-1)*colGap,
		Height: 2*margin + rows*nodeH + (rows-1)*rowGap,
	}
	members := map[string]wire.FlowExec{}
	if run != nil {
		for _, x := range run.Execs {
			members[x.Name] = x
		}
	}
	pos := make([][2]int, len(t.Execs))
	for c, ms := range byCol {
		// A shorter column is centred against the tallest.
		off := (rows - len(ms)) * (nodeH + rowGap) / 2
		for r, i := range ms {
			x := margin + c*(nodeW+colGap)
			y := margin + off + r*(nodeH+rowGap)
			pos[i] = [2]int{x, y}
		}
	}
	for i, x := range t.Execs {
		n := node{Name: x.Name, Label: shorten(x.Name, nameMax), Kind: x.Kind, X: pos[i][0], Y: pos[i][1]}
		n.TextX, n.NameY, n.StateY = n.X+10, n.Y+17, n.Y+32
		if m, ok := members[x.Name]; ok {
			n.State = m.State
			n.Href = Prefix + "/executions/" + url.PathEscape(m.ExecutionID) + "?run=" + url.QueryEscape(run.ID)
		}
		g.Nodes = append(g.Nodes, n)
	}
	on := map[[2]string]string{}
	for _, e := range t.Edges {
		on[[2]string{e.From, e.To}] = e.On
	}
	for i, x := range t.Execs {
		for _, u := range x.Upstreams {
			j, ok := index[u]
			if !ok {
				continue
			}
			kind := on[[2]string{u, x.Name}]
			if kind == "" {
				kind = plan.OnSuccess
			}
			x1, y1 := pos[j][0]+nodeW, pos[j][1]+nodeH/2
			x2, y2 := pos[i][0], pos[i][1]+nodeH/2
			mid := (x1 + x2) / 2
			g.Edges = append(g.Edges, edge{
				Path: fmt.Sprintf("M%d %d C%d %d %d %d %d %d", x1, y1, mid, y1, mid, y2, x2-4, y2),
				On:   kind,
				Tip:  fmt.Sprintf("%s → %s (on %s)", u, x.Name, kind),
			})
		}
	}
	return g
}

// shorten cuts s to n characters, marking the cut.
func shorten(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
