package dashboard

import (
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/flowfabric/ff/runtime/wire"
)

// onUnknown marks an edge whose condition is not known: a run's edge its
// flow's template (if served) does not have.
const onUnknown = "unknown"

// GraphMax is the most execs a drawn graph has, GraphEdgesMax the most
// edges and waypoints (an edge's lane through a column it crosses);
// larger flows are listed only.
const (
	GraphMax      = 300
	GraphEdgesMax = 1500
)

// Geometry of the drawing, in SVG units.
const (
	nodeW   = 168
	nodeH   = 40
	colGap  = 56
	rowGap  = 14
	margin  = 8
	laneH   = 16 // height of the lane an edge takes through a column
	nameMax = 22 // characters of a name drawn; the tooltip has all of it
)

// graph is a flow drawn left to right, each exec in the column after its
// deepest upstream.
type graph struct {
	Width, Height int
	NodeW, NodeH  int
	Unknown       bool // an edge's condition is not known
	Nodes         []node
	Edges         []edge
}

type node struct {
	Name, Label string
	Kind        string // in the tooltip
	KindLabel   string // drawn
	State       string // the member's public state; "" in a template
	Href        string // the member's execution page; "" in a template
	X, Y        int
	TextX       int
	NameY       int
	StateY      int
}

type edge struct {
	Path string
	On   string // plan.OnSuccess, OnFailure, OnDone or onUnknown
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
	parts := 0
	for i, x := range t.Execs {
		for _, u := range x.Upstreams {
			if j, ok := index[u]; ok {
				parts += col[i] - col[j]
			}
		}
	}
	if parts > GraphEdgesMax {
		return nil
	}
	// Slots: the execs, and for each edge that spans columns a waypoint in
	// every column it crosses, so that it runs between the execs of those
	// columns instead of through them.
	type slot struct {
		col   int
		exec  int   // index in t.Execs; -1 for a waypoint
		preds []int // slots in the previous column that lead here
		succs []int
		y     int
	}
	slots := make([]slot, len(t.Execs))
	for i := range t.Execs {
		slots[i] = slot{col: col[i], exec: i}
	}
	type route struct {
		from, to int   // exec indexes
		via      []int // waypoint slots, left to right
	}
	var routes []route
	for i, x := range t.Execs {
		for _, u := range x.Upstreams {
			j, ok := index[u]
			if !ok {
				continue
			}
			r := route{from: j, to: i}
			prev := j
			for c := col[j] + 1; c < col[i]; c++ {
				slots = append(slots, slot{col: c, exec: -1})
				w := len(slots) - 1
				r.via = append(r.via, w)
				slots[w].preds = append(slots[w].preds, prev)
				slots[prev].succs = append(slots[prev].succs, w)
				prev = w
			}
			slots[i].preds = append(slots[i].preds, prev)
			slots[prev].succs = append(slots[prev].succs, i)
			routes = append(routes, r)
		}
	}
	// Order within columns: flow order first, then sweeps that sort each
	// column by the mean position of its neighbours in the column before
	// (left to right) or after (right to left), which keeps most edges
	// short and uncrossed.
	byCol := make([][]int, cols)
	for k := range slots {
		byCol[slots[k].col] = append(byCol[slots[k].col], k)
	}
	pos := make([]float64, len(slots))
	number := func(c int) {
		for r, k := range byCol[c] {
			pos[k] = float64(r)
		}
	}
	for c := range byCol {
		number(c)
	}
	sortBy := func(c int, next func(k int) []int) {
		key := make(map[int]float64, len(byCol[c]))
		for _, k := range byCol[c] {
			key[k] = pos[k] // no neighbour: stay
			if ns := next(k); len(ns) > 0 {
				sum := 0.0
				for _, n := range ns {
					sum += pos[n]
				}
				key[k] = sum / float64(len(ns))
			}
		}
		slices.SortStableFunc(byCol[c], func(a, b int) int {
			switch {
			case key[a] < key[b]:
				return -1
			case key[a] > key[b]:
				return 1
			}
			return 0
		})
		number(c)
	}
	for range 2 {
		for c := 1; c < cols; c++ {
			sortBy(c, func(k int) []int { return slots[k].preds })
		}
		for c := cols - 2; c >= 0; c-- {
			sortBy(c, func(k int) []int { return slots[k].succs })
		}
	}
	for c := 1; c < cols; c++ {
		sortBy(c, func(k int) []int { return slots[k].preds })
	}
	// Heights: an exec takes a node and a gap, a waypoint a lane of its
	// own; each column is centred against the tallest.
	height := func(k int) int {
		if slots[k].exec < 0 {
			return laneH
		}
		return nodeH + rowGap
	}
	tallest := 0
	for _, ks := range byCol {
		h := 0
		for _, k := range ks {
			h += height(k)
		}
		tallest = max(tallest, h)
	}
	for _, ks := range byCol {
		h := 0
		for _, k := range ks {
			h += height(k)
		}
		y := margin + (tallest-h)/2
		for _, k := range ks {
			slots[k].y = y
			y += height(k)
		}
	}
	g := &graph{
		NodeW:  nodeW,
		NodeH:  nodeH,
		Width:  2*margin + cols*nodeW + (cols-1)*colGap,
		Height: 2*margin + tallest - rowGap,
	}
	members := map[string]wire.FlowExec{}
	if run != nil {
		for _, x := range run.Execs {
			members[x.Name] = x
		}
	}
	left := func(c int) int { return margin + c*(nodeW+colGap) }
	for i, x := range t.Execs {
		n := node{Name: x.Name, Label: shorten(x.Name, nameMax), Kind: x.Kind, KindLabel: shorten(x.Kind, nameMax+4), X: left(col[i]), Y: slots[i].y}
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
	for _, r := range routes {
		from, to := t.Execs[r.from].Name, t.Execs[r.to].Name
		kind := on[[2]string{from, to}]
		tip := fmt.Sprintf("%s → %s (on %s)", from, to, kind)
		if kind == "" {
			kind, tip = onUnknown, fmt.Sprintf("%s → %s (condition not recorded)", from, to)
		}
		var path strings.Builder
		x, y := left(col[r.from])+nodeW, slots[r.from].y+nodeH/2
		fmt.Fprintf(&path, "M%d %d", x, y)
		curve := func(x2, y2 int) {
			mid := (x + x2) / 2
			fmt.Fprintf(&path, " C%d %d %d %d %d %d", mid, y, mid, y2, x2, y2)
			x, y = x2, y2
		}
		for _, w := range r.via {
			c := slots[w].col
			curve(left(c), slots[w].y+laneH/2)
			x = left(c) + nodeW
			fmt.Fprintf(&path, " H%d", x)
		}
		curve(left(col[r.to])-4, slots[r.to].y+nodeH/2)
		g.Edges = append(g.Edges, edge{Path: path.String(), On: kind, Tip: tip})
		g.Unknown = g.Unknown || kind == onUnknown
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
