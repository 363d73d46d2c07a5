package compiler

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/flowfabric/ff/compiler/plan"
	"github.com/flowfabric/ff/dsl"
	"github.com/flowfabric/ff/internal/goname"
)

// settings holds the values of the settings of one flow or exec body.
// Pointers are nil when the setting is absent.
type settings struct {
	namespace   *string
	lane        *string
	kind        *string
	priority    *int
	timeout     *int64
	deadline    *int64
	attempts    *int
	backoff     *string
	delay       *int64
	delayLit    *dsl.DurationLit
	maxDelay    *int64
	maxDelayAt  dsl.Range // the max_delay item
	maxDelayLit *dsl.DurationLit
	jitter      bool
	requires    []string
	reqRange    dsl.Range
	budgets     []*dsl.Ident
	quotas      []*dsl.Ident
	input       *dsl.Ident
	join        *dsl.Join
	joinAt      dsl.Range
}

// readSettings checks and collects the settings of a flow (isFlow) or exec
// body.
func (c *checker) readSettings(list []*dsl.Setting, isFlow bool) *settings {
	s := &settings{}
	block := "exec"
	if isFlow {
		block = "flow"
	}
	seen := c.newSeen()
	for _, st := range list {
		kw := st.Keyword()
		r := st.Range()
		switch kw {
		case "kind", "input", "join":
			if isFlow {
				c.diags.Errorf(r, dsl.CodeMisplaced, "%s is a setting of an exec, not of a flow", kw)
				continue
			}
		case "namespace":
			if !isFlow {
				c.diags.Errorf(r, dsl.CodeMisplaced, "namespace is a setting of a flow, not of an exec")
				continue
			}
		}
		if kw != "budget" && kw != "quota" && !seen.first(kw, r, block) {
			continue
		}
		switch kw {
		case "namespace":
			if v, ok := c.nameValue(st.Namespace, "namespace"); ok {
				s.namespace = &v
			}
		case "lane":
			if v, ok := c.nameValue(st.Lane, "lane"); ok {
				s.lane = &v
			}
		case "kind":
			if v, ok := c.nameValue(st.Kind, "kind"); ok {
				s.kind = &v
			}
		case "priority":
			if v, ok := c.intValue(st.Priority); ok {
				if v < plan.PriorityMin || v > plan.PriorityMax {
					c.diags.Errorf(st.Priority.Range(), dsl.CodePriority, "priority %d is out of range: use %d to %d (higher runs first)", v, plan.PriorityMin, plan.PriorityMax)
				} else {
					p := int(v)
					s.priority = &p
				}
			}
		case "timeout":
			if v, ok := c.settingDuration(st.Timeout, "timeout", true); ok {
				s.timeout = &v
			}
		case "deadline":
			if v, ok := c.settingDuration(st.Deadline, "deadline", true); ok {
				s.deadline = &v
			}
		case "retry":
			c.readRetry(st.Retry, s)
		case "requires":
			c.readRequires(st.Requires, s)
		case "budget":
			s.budgets = append(s.budgets, st.Budgets...)
		case "quota":
			s.quotas = append(s.quotas, st.Quotas...)
		case "input":
			s.input = st.Input
		case "join":
			s.join, s.joinAt = st.Join, r
		}
	}
	return s
}

func (c *checker) readRetry(rb *dsl.RetryBlock, s *settings) {
	seen := c.newSeen()
	for _, it := range rb.Items {
		kw := it.Keyword()
		if !seen.first(kw, it.Range(), "retry block") {
			continue
		}
		switch kw {
		case "attempts":
			if v, ok := c.intValue(it.Attempts); ok {
				if v < 1 || v > plan.MaxAttempts {
					c.diags.Errorf(it.Attempts.Range(), dsl.CodeRetry, "attempts must be between 1 and %d (it counts the first attempt)", plan.MaxAttempts)
				} else {
					n := int(v)
					s.attempts = &n
				}
			}
		case "backoff":
			switch v := it.Backoff.Name; v {
			case plan.BackoffFixed, plan.BackoffExponential:
				s.backoff = &v
			default:
				c.badValue(it.Backoff, "backoff", plan.BackoffFixed, plan.BackoffExponential)
			}
		case "delay":
			if v, ok := c.settingDuration(it.Delay, "delay", false); ok {
				s.delay, s.delayLit = &v, it.Delay
			}
		case "max_delay":
			if v, ok := c.settingDuration(it.MaxDelay, "max_delay", true); ok {
				s.maxDelay, s.maxDelayLit, s.maxDelayAt = &v, it.MaxDelay, it.Range()
			}
		case "jitter":
			s.jitter = true
		}
	}
}

func (c *checker) readRequires(l *dsl.StringList, s *settings) {
	s.reqRange = dsl.Range{Start: dsl.ToPosition(l.Pos), End: dsl.ToPosition(l.Pos)}
	if len(l.Items) > 0 {
		s.reqRange.End = l.Items[len(l.Items)-1].Range().End
	}
	seen := map[string]bool{}
	for _, it := range l.Items {
		v := it.Value()
		if !it.Valid() {
			continue // reported by the parser
		}
		if err := plan.CheckCapability(v); err != nil {
			c.diags.Errorf(it.Range(), dsl.CodeCapability, "invalid capability: %v", err)
			continue
		}
		if !seen[v] {
			seen[v] = true
			s.requires = append(s.requires, v)
		}
	}
	if len(s.requires) > plan.MaxCapabilities {
		c.diags.Errorf(s.reqRange, dsl.CodeCapabilities, "%d capabilities required: at most %d are allowed", len(s.requires), plan.MaxCapabilities)
	}
}

// execInfo is the checker's view of one exec.
type execInfo struct {
	decl     *dsl.ExecDecl
	set      *settings
	in, out  *plan.TypeRef
	inOK     bool // input type declared and valid, or absent
	outOK    bool
	longName bool // the name is refused for its length (FF0107)
	// partialUps says that an edge into the exec names an unknown exec
	// (FF0205), or that an edge out of a known exec names an unknown one
	// close to this exec's name: its upstreams are not all known, so
	// the checks that count or name them are skipped.
	partialUps bool
	// partialDowns says that an edge out of the exec names an unknown
	// exec: one of its downstreams is not known.
	partialDowns bool
	ups          []*edgeInfo // incoming edges, in declaration order
	downs        []*edgeInfo // outgoing edges
	exec         *plan.Exec
}

// edgeInfo is one edge with the position of its target name.
type edgeInfo struct {
	from, to int
	on       string
	at       dsl.Range // the target name in the edge statement
	fromAt   dsl.Range
}

// flowCheck holds the state of checking one flow.
type flowCheck struct {
	*checker
	decl   *dsl.FlowDecl
	flow   *plan.Flow
	execs  []*execInfo
	byName map[string]int
	edges  map[[2]int]*edgeInfo // by (from, to)
	// unknownInEdge says that an edge names an unknown exec (FF0205): the
	// graph is not the one the author wrote, so the checks of the whole
	// graph (result inferred from its sinks, reachability, flow input
	// received) are skipped until the name is fixed.
	unknownInEdge bool
}

// checkFlow compiles one flow; it returns nil when the flow has errors
// that make a plan meaningless.
func (c *checker) checkFlow(fd *dsl.FlowDecl, pkgName string) *plan.Flow {
	fc := &flowCheck{checker: c, decl: fd, byName: map[string]int{}, edges: map[[2]int]*edgeInfo{}}
	f := &plan.Flow{
		Schema:    plan.SchemaVersion,
		Package:   pkgName,
		Name:      fd.Name.Name,
		Namespace: plan.DefaultNamespace,
		Lane:      plan.DefaultLane,
		Execs:     []plan.Exec{},
		Edges:     []plan.Edge{},
	}
	fc.flow = f
	inOK, outOK := true, true
	if fd.Input != nil {
		f.Input, inOK = c.resolveType(fd.Input)
		if inOK {
			c.checkInputDepth(fd, f.Input)
		} else {
			c.inputUnresolved[f.Name] = true
		}
	}
	if fd.Output != nil {
		f.Output, outOK = c.resolveType(fd.Output)
	}
	var flowSettings []*dsl.Setting
	var results []*dsl.Ident
	var edges []*dsl.Edge
	for _, it := range fd.Items {
		switch {
		case it.Exec != nil:
			fc.addExec(it.Exec)
		case it.Result != nil:
			results = append(results, it.Result)
		case it.Edge != nil:
			edges = append(edges, it.Edge)
		case it.Setting != nil:
			flowSettings = append(flowSettings, it.Setting)
		}
	}
	fs := c.readSettings(flowSettings, true)
	if fs.namespace != nil {
		f.Namespace = *fs.namespace
	}
	if fs.lane != nil {
		f.Lane = *fs.lane
	}
	f.Budgets = c.budgetRefs(fs.budgets)
	flowQuotas := c.quotaRefs(fs.quotas)
	fc.checkFlowRetry(fs)
	if len(fc.execs) == 0 {
		c.diags.Errorf(fd.Name.Range(), dsl.CodeEmptyFlow, "flow %q has no exec: declare at least one with `exec NAME() { }`", f.Name)
	}
	for _, e := range edges {
		fc.addEdges(e)
	}
	acyclic := fc.checkCycles()
	for _, ei := range fc.execs {
		fc.buildExec(ei, fs, flowQuotas)
	}
	for _, ei := range fc.execs {
		fc.checkDataFlow(ei, inOK)
	}
	if len(fc.execs) > plan.MaxExecs {
		c.diags.Errorf(fd.Name.Range(), dsl.CodeTooManyExecs, "flow %q has %d execs: a run stages at most %d; split it into several flows", f.Name, len(fc.execs), plan.MaxExecs)
	}
	fc.checkResult(results, outOK, acyclic)
	if acyclic && !fc.unknownInEdge {
		fc.checkReachable()
	}
	fc.checkKinds()
	// Flow input that nobody receives.
	if f.Input != nil && inOK && acyclic && !fc.unknownInEdge && len(fc.execs) > 0 {
		used := false
		for _, ei := range fc.execs {
			// A root exec with an input type receives the flow's input,
			// or has an error of its own saying why not.
			if ei.exec.InputFrom == plan.InputFlow || len(ei.ups) == 0 && ei.decl.Input != nil {
				used = true
			}
		}
		if !used {
			c.diags.Warnf(fd.Input.Range(), dsl.CodeUnusedUpstream, "no exec receives the input of flow %q: give a root exec the input type %s", f.Name, plan.TypeString(f.Input))
		}
	}
	for _, ei := range fc.execs {
		f.Execs = append(f.Execs, *ei.exec)
	}
	for _, ei := range fc.execs {
		for _, e := range ei.downs {
			f.Edges = append(f.Edges, plan.Edge{From: fc.execs[e.from].decl.Name.Name, To: fc.execs[e.to].decl.Name.Name, On: e.on})
		}
	}
	sort.Slice(f.Edges, func(i, j int) bool {
		if f.Edges[i].From != f.Edges[j].From {
			return f.Edges[i].From < f.Edges[j].From
		}
		return f.Edges[i].To < f.Edges[j].To
	})
	if acyclic {
		fc.checkInputJoins()
	}
	fc.closure()
	fc.checkPlanSize()
	return f
}

// checkPlanSize reports a flow whose plan, as Stage<Flow> sends it, does
// not fit in the body ffrun takes with the run's input (FF0513).
func (fc *flowCheck) checkPlanSize() {
	text, err := json.MarshalIndent(fc.flow, "", "  ")
	if err != nil {
		panic(err) // a plan always encodes
	}
	if len(text) > plan.MaxPlanBytes {
		fc.diags.Errorf(fc.decl.Name.Range(), dsl.CodePlanSize, "the plan of flow %q is %d bytes; ffrun stages plans of at most %d bytes: split it into several flows (a plan grows with its execs, its edges and settings repeated per exec such as `requires`)",
			fc.flow.Name, len(text), plan.MaxPlanBytes)
	}
}

// checkInputJoins reports execs whose join any or join N can start them
// before the upstream feeding their input has succeeded (FF0309), using
// the analysis plan validation applies to every plan.
func (fc *flowCheck) checkInputJoins() {
	f := fc.flow
	for _, u := range f.UnsureInputs() {
		x := &f.Execs[u.Exec]
		ei := fc.execs[fc.byName[x.Name]]
		if ei.partialUps {
			continue
		}
		at := ei.decl.Name.Range()
		if ei.set.input != nil {
			at = ei.set.input.Range()
		}
		d := fc.diags.Errorf(at, dsl.CodeInputJoin,
			"exec %q takes its input from %q, but its `%s` can be met by %s before %q has succeeded, starting it without input; use `join all`, or only edges from execs that run after %q succeeds",
			x.Name, x.InputExec, plan.JoinString(x.Join), plan.EdgeList(f, u.Edges), x.InputExec, x.InputExec)
		d.With(ei.set.joinAt, "join set here")
		for _, i := range u.Edges {
			e := f.Edges[i]
			d.With(fc.edges[[2]int{fc.byName[e.From], fc.byName[e.To]}].fromAt, "edge from "+quote(e.From)+" declared here")
		}
	}
}

func (fc *flowCheck) addExec(ed *dsl.ExecDecl) {
	name := ed.Name.Name
	if prev, ok := fc.byName[name]; ok {
		fc.diags.Errorf(ed.Name.Range(), dsl.CodeDuplicate, "exec %q is already declared in flow %q", name, fc.flow.Name).
			With(fc.execs[prev].decl.Name.Range(), "previous declaration here")
		return
	}
	// A name refused for its length is reported once: the exec still
	// takes part in the flow (its edges, input and result), so that its
	// uses are not unknown execs and the rest of the graph is checked as
	// written.
	ei := &execInfo{decl: ed, inOK: true, outOK: true, longName: !fc.checkIdentLen(ed.Name)}
	if ed.Input != nil {
		ei.in, ei.inOK = fc.resolveType(ed.Input)
	}
	if ed.Output != nil {
		ei.out, ei.outOK = fc.resolveType(ed.Output)
	}
	var list []*dsl.Setting
	if ed.Body != nil {
		list = ed.Body.Settings
	}
	ei.set = fc.readSettings(list, false)
	fc.byName[name] = len(fc.execs)
	fc.execs = append(fc.execs, ei)
}

// maxListedExecs is how many execs a flow may have for an unknown exec's
// diagnostic to list them all, when no name is close to the unknown one.
const maxListedExecs = 10

// lookupExec resolves an exec name used in the flow body.
func (fc *flowCheck) lookupExec(id *dsl.Ident, context string) (int, bool) {
	if i, ok := fc.byName[id.Name]; ok {
		return i, true
	}
	names := slices.Sorted(maps.Keys(fc.byName))
	if len(names) > 0 && len(names) <= maxListedExecs && dsl.Suggest(id.Name, names) == "" {
		context += " (its execs: " + strings.Join(names, ", ") + ")"
	}
	fc.unknown(id, dsl.CodeUnknownExec, "exec", names, context)
	return 0, false
}

func (fc *flowCheck) addEdges(e *dsl.Edge) {
	on := plan.OnSuccess
	if e.On != nil {
		switch e.On.Name {
		case plan.OnSuccess, plan.OnFailure, plan.OnDone:
			on = e.On.Name
		default:
			fc.badValue(e.On, "edge condition", plan.OnSuccess, plan.OnFailure, plan.OnDone)
		}
	}
	type named struct {
		idx int
		id  *dsl.Ident
	}
	var unknown []*dsl.Ident
	resolve := func(l *dsl.NameList) ([]named, bool) {
		var out []named
		known := true
		for _, id := range l.Names {
			if i, ok := fc.lookupExec(id, " in flow "+quote(fc.flow.Name)); ok {
				out = append(out, named{i, id})
			} else {
				known = false
				unknown = append(unknown, id)
			}
		}
		return out, known
	}
	prev, prevKnown := resolve(e.From)
	for _, g := range e.To {
		cur, curKnown := resolve(g)
		for _, to := range cur {
			for _, from := range prev {
				fc.addEdge(from.idx, to.idx, on, from.id.Range(), to.id.Range())
			}
			fc.execs[to.idx].partialUps = fc.execs[to.idx].partialUps || !prevKnown
		}
		if !curKnown {
			for _, from := range prev {
				fc.execs[from.idx].partialDowns = true
			}
		}
		prev, prevKnown = cur, curKnown
	}
	if len(unknown) == 0 {
		return
	}
	// One misspelt name is one mistake: the execs it was meant to connect
	// are not checked against a graph that lacks its edges.
	fc.unknownInEdge = true
	names := slices.Sorted(maps.Keys(fc.byName))
	for _, id := range unknown {
		if s := dsl.Suggest(id.Name, names); s != "" {
			fc.execs[fc.byName[s]].partialUps = true
			fc.execs[fc.byName[s]].partialDowns = true
		}
	}
}

func (fc *flowCheck) addEdge(from, to int, on string, fromAt, at dsl.Range) {
	target := fc.execs[to]
	if prev, ok := fc.edges[[2]int{from, to}]; ok {
		fc.diags.Errorf(at, dsl.CodeDupEdge, "edge %s -> %s is already declared", fc.execs[from].decl.Name.Name, target.decl.Name.Name).
			With(prev.at, "previous declaration here")
		return
	}
	e := &edgeInfo{from: from, to: to, on: on, at: at, fromAt: fromAt}
	fc.edges[[2]int{from, to}] = e
	target.ups = append(target.ups, e)
	fc.execs[from].downs = append(fc.execs[from].downs, e)
}

// maxCycleReports is how many cycles of one flow are reported, each with
// its path: a dense flow can close a cycle with most of its edges.
const maxCycleReports = 20

// checkCycles reports the cycle each back edge of a depth-first search
// closes, at that edge, and returns true when the flow is acyclic. Each
// edge is followed once, so no cycle is reported twice; every cycle of the
// flow holds a back edge, so the flow is acyclic once the edges reported
// are gone. Past maxCycleReports, one more error counts the rest.
func (fc *flowCheck) checkCycles() bool {
	const (
		white = iota
		grey
		black
	)
	n := len(fc.execs)
	color := make([]int, n)
	var stack []int
	found := 0
	// Iterative depth-first search: each frame is an exec and the index of
	// its next outgoing edge.
	type frame struct{ node, next int }
	for root := 0; root < n; root++ {
		if color[root] != white {
			continue
		}
		frames := []frame{{root, 0}}
		color[root] = grey
		stack = append(stack[:0], root)
		for len(frames) > 0 {
			top := &frames[len(frames)-1]
			downs := fc.execs[top.node].downs
			if top.next == len(downs) {
				color[top.node] = black
				frames = frames[:len(frames)-1]
				stack = stack[:len(stack)-1]
				continue
			}
			e := downs[top.next]
			top.next++
			switch color[e.to] {
			case white:
				color[e.to] = grey
				frames = append(frames, frame{e.to, 0})
				stack = append(stack, e.to)
			case grey:
				found++
				if found > maxCycleReports {
					continue
				}
				i := len(stack) - 1
				for stack[i] != e.to {
					i--
				}
				names := make([]string, 0, len(stack)-i+1)
				for _, x := range stack[i:] {
					names = append(names, fc.execs[x].decl.Name.Name)
				}
				names = append(names, fc.execs[e.to].decl.Name.Name)
				fc.diags.Errorf(e.at, dsl.CodeCycle, "cycle in flow %q: %s", fc.flow.Name, strings.Join(names, " -> "))
			}
		}
	}
	if more := found - maxCycleReports; more > 0 {
		fc.diags.Errorf(fc.decl.Name.Range(), dsl.CodeCycle, "flow %q has %s more than the %d reported: break those and check again", fc.flow.Name, plural(more, "cycle"), maxCycleReports)
	}
	return found == 0
}

// budgetRefs resolves budget names, sorted and without repeats.
func (c *checker) budgetRefs(ids []*dsl.Ident) []string {
	var out []string
	for _, id := range resolveRefs(c, ids, "budget", dsl.CodeUnknownBudget, c.budgets) {
		out = append(out, id.Name)
	}
	sort.Strings(out)
	return out
}

// quotaRefs resolves quota names, keeping their positions.
func (c *checker) quotaRefs(ids []*dsl.Ident) []*dsl.Ident {
	return resolveRefs(c, ids, "quota", dsl.CodeUnknownQuota, c.quotas)
}

// resolveRefs reports names listed twice and names not in declared, and
// returns the others in order.
func resolveRefs[V any](c *checker, ids []*dsl.Ident, what string, unknown dsl.Code, declared map[string]V) []*dsl.Ident {
	var out []*dsl.Ident
	seen := map[string]*dsl.Ident{}
	for _, id := range ids {
		if prev, ok := seen[id.Name]; ok {
			c.diags.Errorf(id.Range(), dsl.CodeDupSetting, "%s %q is already listed", what, id.Name).With(prev.Range(), "first listed here")
			continue
		}
		seen[id.Name] = id
		if _, ok := declared[id.Name]; !ok {
			c.unknown(id, unknown, what, slices.Sorted(maps.Keys(declared)), "")
			continue
		}
		out = append(out, id)
	}
	return out
}

// buildExec fills the plan exec from its settings and the flow defaults.
func (fc *flowCheck) buildExec(ei *execInfo, fs *settings, flowQuotas []*dsl.Ident) {
	s := ei.set
	name := ei.decl.Name.Name
	x := &plan.Exec{
		Name:     name,
		Kind:     fc.flow.Name + "." + name,
		Lane:     fc.flow.Lane,
		Priority: plan.PriorityDefault,
		Input:    ei.in,
		Output:   ei.out,
		Join:     plan.Join{Kind: plan.JoinAll},
		Retry: plan.Retry{
			Attempts:   plan.DefaultAttempts,
			Backoff:    plan.BackoffExponential,
			DelayMs:    plan.DefaultDelayMs,
			MaxDelayMs: plan.DefaultMaxDelayMs,
		},
	}
	if s.kind != nil {
		x.Kind = *s.kind
	} else if len(x.Kind) > plan.MaxKindLen && !ei.longName { // a long name is FF0107 already
		fc.diags.Errorf(ei.decl.Name.Range(), dsl.CodeEmptyString, "the default kind %q of exec %q is %d bytes long; the limit is %d: set a shorter one with `kind \"...\"`",
			x.Kind, name, len(x.Kind), plan.MaxKindLen)
	}
	if v := pick(s.lane, fs.lane); v != nil {
		x.Lane = *v
	}
	if v := pick(s.priority, fs.priority); v != nil {
		x.Priority = *v
	}
	if v := pick(s.timeout, fs.timeout); v != nil {
		x.TimeoutMs = *v
	}
	if v := pick(s.deadline, fs.deadline); v != nil {
		x.DeadlineMs = *v
	}
	if v := pick(s.attempts, fs.attempts); v != nil {
		x.Retry.Attempts = *v
	}
	if v := pick(s.backoff, fs.backoff); v != nil {
		x.Retry.Backoff = *v
	}
	if v := pick(s.delay, fs.delay); v != nil {
		x.Retry.DelayMs = *v
	}
	maxDelay := pick(s.maxDelay, fs.maxDelay)
	if maxDelay != nil {
		x.Retry.MaxDelayMs = *maxDelay
		// With neither delay set by the exec, the flow's retry is what
		// is wrong: checkFlowRetry reports it once.
		if x.Retry.MaxDelayMs < x.Retry.DelayMs && (s.maxDelay != nil || s.delay != nil) {
			fc.maxDelayError(fmt.Sprintf("exec %q", name), s, fs, x.Retry.DelayMs)
		}
	} else if x.Retry.MaxDelayMs < x.Retry.DelayMs {
		x.Retry.MaxDelayMs = x.Retry.DelayMs
	}
	x.Retry.Jitter = s.jitter || fs.jitter
	req := append(append([]string{}, fs.requires...), s.requires...)
	slices.Sort(req)
	req = slices.Compact(req)
	if len(req) > 0 {
		if err := plan.ValidateCapabilities(req); err != nil && len(s.requires) <= plan.MaxCapabilities && len(fs.requires) <= plan.MaxCapabilities {
			r := s.reqRange
			if len(s.requires) == 0 {
				r = fs.reqRange
			}
			fc.diags.Errorf(r, dsl.CodeCapabilities, "exec %q requires too many capabilities: %v", name, err)
		}
		x.Requires = req
	}
	x.Budgets = fc.budgetRefs(s.budgets)
	quotas := append(append([]*dsl.Ident{}, flowQuotas...), fc.quotaRefs(s.quotas)...)
	for _, q := range quotas {
		if !slices.Contains(x.Quotas, q.Name) {
			x.Quotas = append(x.Quotas, q.Name)
		}
		fc.checkQuotaKey(ei, q)
	}
	sort.Strings(x.Quotas)
	for _, e := range ei.ups {
		x.Upstreams = append(x.Upstreams, fc.execs[e.from].decl.Name.Name)
	}
	sort.Strings(x.Upstreams)
	ei.exec = x
}

// checkFlowRetry reports a flow's retry whose max_delay is below its delay
// (or the default delay): once, at the flow's max_delay, rather than once
// per exec that inherits both.
func (fc *flowCheck) checkFlowRetry(fs *settings) {
	if fs.maxDelay == nil {
		return
	}
	delay := int64(plan.DefaultDelayMs)
	if fs.delay != nil {
		delay = *fs.delay
	}
	if *fs.maxDelay < delay {
		fc.maxDelayError(fmt.Sprintf("flow %q", fc.flow.Name), &settings{}, fs, delay)
	}
}

// maxDelayError reports a max_delay below the delay of an exec or flow
// (who), at the max_delay setting (the exec's, or else the flow's: fs),
// with both durations as written.
func (fc *flowCheck) maxDelayError(who string, s, fs *settings, delayMs int64) {
	at, maxLit := s.maxDelayAt, s.maxDelayLit
	if s.maxDelay == nil {
		at, maxLit = fs.maxDelayAt, fs.maxDelayLit
	}
	delayLit := s.delayLit
	if s.delay == nil {
		delayLit = fs.delayLit
	}
	if delayLit == nil {
		fc.diags.Errorf(at, dsl.CodeRetry, "%s: retry max_delay %s is shorter than the default delay %s; raise max_delay or set a shorter delay",
			who, maxLit.Text, formatMs(delayMs))
		return
	}
	fc.diags.Errorf(at, dsl.CodeRetry, "%s: retry max_delay %s is shorter than its delay %s", who, maxLit.Text, delayLit.Text).
		With(delayLit.Range(), "delay set here")
}

func pick[T any](exec, flow *T) *T {
	if exec != nil {
		return exec
	}
	return flow
}

// checkQuotaKey checks that the key of a keyed quota names a string or int
// field of the exec's input.
func (fc *flowCheck) checkQuotaKey(ei *execInfo, q *dsl.Ident) {
	pq := fc.planQuotas[q.Name]
	if pq == nil || pq.Key == "" || !ei.inOK {
		return
	}
	keyAt := fc.quotaKeys[q.Name].Range()
	name := ei.decl.Name.Name
	if ei.in == nil {
		fc.diags.Errorf(q.Range(), dsl.CodeQuotaKey, "quota %q is keyed by %q, but exec %q takes no input", q.Name, pq.Key, name).
			With(keyAt, "key declared here")
		return
	}
	parts := strings.Split(pq.Key, ".")
	t, n := plan.FieldAt(ei.in, parts, func(typ string) *plan.Type { return fc.planTypes[typ] })
	if n < len(parts) && t.Kind == plan.KindNamed && fc.unresolvedFields[t.Name][parts[n]] {
		return // the field is declared, but its type has an error (reported)
	}
	if n < len(parts) {
		var why string
		switch {
		case t.Kind != plan.KindNamed && n == 0:
			why = fmt.Sprintf("exec %q takes %s, not a record type", name, plan.TypeString(t))
		case t.Kind != plan.KindNamed:
			why = fmt.Sprintf("in the input of exec %q %q is %s, not a record type", name, strings.Join(parts[:n], "."), plan.TypeString(t))
		case fc.planTypes[t.Name] == nil:
			why = fmt.Sprintf("in the input of exec %q type %s is not known", name, t.Name)
		default:
			why = fmt.Sprintf("in the input of exec %q type %s has no field %q", name, t.Name, parts[n])
			var fields []string
			for _, f := range fc.planTypes[t.Name].Fields {
				fields = append(fields, f.Name)
			}
			if s := dsl.Suggest(parts[n], fields); s != "" {
				why += fmt.Sprintf("; did you mean %q?", s)
			}
		}
		fc.diags.Errorf(q.Range(), dsl.CodeQuotaKey, "quota %q is keyed by %q, but %s", q.Name, pq.Key, why).
			With(keyAt, "key declared here")
		return
	}
	if t.Kind != plan.KindString && t.Kind != plan.KindInt {
		fc.diags.Errorf(q.Range(), dsl.CodeQuotaKey, "quota %q is keyed by %q, which is %s in the input of exec %q; a key must be a string or int", q.Name, pq.Key, plan.TypeString(t), name).
			With(keyAt, "key declared here")
		return
	}
	// An exec fed by an upstream keeps "<namespace>/<quota>?<key path>"
	// until it is claimed, and ffrun bounds that reference.
	refLen := plan.QuotaRefLen(fc.flow.Namespace, q.Name, pq.Key)
	if len(ei.ups) > 0 && len(pq.Key) <= plan.MaxQuotaKeyLen && refLen > plan.MaxQuotaRefLen {
		fc.diags.Errorf(q.Range(), dsl.CodeQuotaKey, "quota %q keyed by %q in namespace %q makes a reference of %d bytes for exec %q, which takes its input from an upstream; the limit is %d: shorten the namespace, the quota's name or its key path",
			q.Name, pq.Key, fc.flow.Namespace, refLen, name, plan.MaxQuotaRefLen).With(keyAt, "key declared here")
	}
}

// checkDataFlow decides where an exec's input comes from and checks the
// types and the join.
func (fc *flowCheck) checkDataFlow(ei *execInfo, flowInOK bool) {
	x := ei.exec // built by buildExec, Upstreams sorted
	name := x.Name
	s := ei.set
	nUp := len(ei.ups)
	x.InputFrom = plan.InputNone

	// Join.
	if j := s.join; j != nil {
		switch {
		case j.Mode != nil && j.Mode.Name == plan.JoinAll:
		case j.Mode != nil && j.Mode.Name == plan.JoinAny:
			x.Join = plan.Join{Kind: plan.JoinAny}
			if nUp == 0 && !ei.partialUps {
				fc.diags.Errorf(j.Mode.Range(), dsl.CodeJoin, "exec %q has no upstream, so `join any` has nothing to wait for", name)
			}
		case j.Mode != nil:
			fc.badValue(j.Mode, "join", plan.JoinAll, plan.JoinAny)
		case j.Count != nil:
			if n, ok := fc.intValue(j.Count); ok {
				switch {
				case n < 1:
					fc.diags.Errorf(j.Count.Range(), dsl.CodeJoin, "join count must be at least 1")
				case n > int64(nUp) && ei.partialUps:
					// Its upstreams are not all known (FF0205).
				case n > int64(nUp):
					has := "only " + plural(nUp, "upstream")
					if nUp == 0 {
						has = "no upstream"
					}
					fc.diags.Errorf(j.Count.Range(), dsl.CodeJoin, "join %d on exec %q, which has %s", n, name, has)
				default:
					x.Join = plan.Join{Kind: plan.JoinCount, N: int(n)}
				}
			}
		}
	}

	// Input source.
	if sel := s.input; sel != nil {
		idx, known := fc.lookupExec(sel, " in flow "+quote(fc.flow.Name))
		var edge *edgeInfo
		if known {
			for _, e := range ei.ups {
				if e.from == idx {
					edge = e
				}
			}
			if edge == nil && !ei.partialUps && !fc.execs[idx].partialDowns {
				msg := fmt.Sprintf("input %q of exec %q is not one of its upstreams", sel.Name, name)
				switch {
				case idx == fc.byName[name] && nUp == 0:
					msg = fmt.Sprintf("exec %q cannot take its input from itself; as a root exec it receives the flow's input: remove `input %s`", name, sel.Name)
				case idx == fc.byName[name]:
					msg = fmt.Sprintf("exec %q cannot take its input from itself: name one of its upstreams (%s)", name, strings.Join(x.Upstreams, ", "))
				case nUp == 0:
					msg += "; it has none: add an edge " + sel.Name + " -> " + name
				default:
					msg += " (" + strings.Join(x.Upstreams, ", ") + "): add an edge " + sel.Name + " -> " + name + ", or name one of those"
				}
				fc.diags.Errorf(sel.Range(), dsl.CodeNotUpstream, "%s", msg)
			}
		}
		if ei.decl.Input == nil {
			fc.diags.Errorf(sel.Range(), dsl.CodeInputNoType, "exec %q declares no input type, so `input %s` has nothing to receive; declare one, e.g. exec %s(T)", name, sel.Name, name)
			return
		}
		if edge != nil {
			fc.useInput(ei, edge, sel.Range())
		}
		return
	}
	if ei.decl.Input == nil || ei.partialUps && nUp < 2 {
		// Without all its upstreams known, whether it is a root exec or
		// which upstream feeds it is in doubt (FF0205 says why).
		return
	}
	switch nUp {
	case 0:
		if !ei.inOK || !flowInOK {
			return
		}
		x.InputFrom = plan.InputFlow
		if !plan.SameType(ei.in, fc.flow.Input) {
			if fc.flow.Input == nil {
				fc.diags.Errorf(ei.decl.Input.Range(), dsl.CodeRootType, "root exec %q takes %s, but flow %q has no input", name, plan.TypeString(ei.in), fc.flow.Name)
			} else {
				fc.diags.Errorf(ei.decl.Input.Range(), dsl.CodeRootType, "root exec %q takes %s, but flow %q receives %s", name, plan.TypeString(ei.in), fc.flow.Name, plan.TypeString(fc.flow.Input))
			}
		}
	case 1:
		fc.useInput(ei, ei.ups[0], ei.decl.Input.Range())
	default:
		fc.diags.Errorf(ei.decl.Input.Range(), dsl.CodeMissingInput, "exec %q takes %s and has %d upstreams (%s): say which one feeds it with `input NAME`",
			name, plan.TypeString(ei.in), nUp, strings.Join(x.Upstreams, ", "))
	}
}

// useInput makes the exec receive the output of edge's upstream.
func (fc *flowCheck) useInput(ei *execInfo, e *edgeInfo, at dsl.Range) {
	up := fc.execs[e.from]
	x := ei.exec
	x.InputFrom = plan.InputExec
	x.InputExec = up.decl.Name.Name
	if e.on != plan.OnSuccess {
		fc.diags.Errorf(at, dsl.CodeInputNotOK, "exec %q takes its input from %q over an `on %s` edge, but %q has no output unless it succeeds: "+
			"declare %s without an input type (its handler reads how %s ended with Task.UpstreamError), or feed it over a success edge with `input NAME`",
			x.Name, up.decl.Name.Name, e.on, up.decl.Name.Name, x.Name, up.decl.Name.Name).With(e.at, "edge declared here")
		return
	}
	if !ei.inOK || !up.outOK {
		return
	}
	if !plan.SameType(ei.in, up.out) {
		fc.diags.Errorf(at, dsl.CodeEdgeType, "exec %q takes %s, but its upstream %q returns %s", x.Name, plan.TypeString(ei.in), up.decl.Name.Name, plan.TypeString(up.out)).
			With(e.at, "edge declared here")
	}
}

// checkResult determines the exec whose output is the flow's result. outOK
// says that the flow's output type resolved. An explicit `result` is
// checked against it in any flow, cyclic or not; the result is inferred
// from the sinks only when the flow is acyclic: with a cycle, which execs
// end the flow is in doubt until the cycle is fixed.
func (fc *flowCheck) checkResult(results []*dsl.Ident, outOK, acyclic bool) {
	f := fc.flow
	for i, r := range results {
		if i > 0 {
			fc.diags.Errorf(r.Range(), dsl.CodeDupSetting, "result is already set in this flow").With(results[0].Range(), "first set here")
		}
	}
	if len(results) > 0 {
		r := results[0]
		idx, ok := fc.lookupExec(r, " in flow "+quote(f.Name))
		if !ok {
			return
		}
		if fc.decl.Output == nil {
			fc.diags.Errorf(r.Range(), dsl.CodeResult, "flow %q declares no output type, so it has no result; declare one, e.g. flow %s(...) -> T", f.Name, f.Name)
			return
		}
		ei := fc.execs[idx]
		f.Result = ei.decl.Name.Name
		if outOK && ei.outOK && !plan.SameType(f.Output, ei.out) {
			fc.diags.Errorf(r.Range(), dsl.CodeResultType, "result exec %q returns %s, but flow %q returns %s", f.Result, plan.TypeString(ei.out), f.Name, plan.TypeString(f.Output))
		}
		return
	}
	if fc.decl.Output == nil || !outOK || !acyclic || fc.unknownInEdge || len(fc.execs) == 0 {
		return
	}
	var match, sinks []string
	unresolved := false // a sink whose output type was already reported
	for _, ei := range fc.execs {
		if len(ei.downs) == 0 {
			sinks = append(sinks, ei.decl.Name.Name)
			if ei.outOK && plan.SameType(ei.out, f.Output) {
				match = append(match, ei.decl.Name.Name)
			}
			unresolved = unresolved || !ei.outOK
		}
	}
	if len(match) == 1 || len(match) == 0 && unresolved {
		if len(match) == 1 {
			f.Result = match[0]
		}
		return
	}
	var msg string
	if len(match) == 0 {
		msg = fmt.Sprintf("cannot determine the result of flow %q: no sink exec (%s) returns %s; add `result NAME`",
			f.Name, strings.Join(sinks, ", "), plan.TypeString(f.Output))
	} else {
		msg = fmt.Sprintf("cannot determine the result of flow %q: %d sink execs return %s (%s); add `result NAME`",
			f.Name, len(match), plan.TypeString(f.Output), strings.Join(match, ", "))
	}
	fc.diags.Errorf(fc.decl.Output.Range(), dsl.CodeResult, "%s", msg)
}

// checkKinds reports execs of the flow that share a handler kind.
func (fc *flowCheck) checkKinds() {
	seen := map[string]*execInfo{}
	for _, ei := range fc.execs {
		if prev, ok := seen[ei.exec.Kind]; ok {
			fc.diags.Errorf(ei.decl.Name.Range(), dsl.CodeDupKind, "execs %q and %q of flow %q share the kind %q; give each its own `kind`",
				prev.decl.Name.Name, ei.decl.Name.Name, fc.flow.Name, ei.exec.Kind).With(prev.decl.Name.Range(), "other exec declared here")
			continue
		}
		seen[ei.exec.Kind] = ei
	}
}

// checkSharedKinds warns about handler kinds used by several flows.
func (c *checker) checkSharedKinds(flows []plan.Flow) {
	byName := map[string]*plan.Flow{}
	for i := range flows {
		byName[flows[i].Name] = &flows[i]
	}
	owner := map[string]string{}
	for _, fd := range c.flows { // declaration order
		f := byName[fd.Name.Name]
		if f == nil {
			continue
		}
		for _, x := range f.Execs {
			prev, ok := owner[x.Kind]
			if !ok {
				owner[x.Kind] = f.Name
				continue
			}
			if prev == f.Name {
				continue
			}
			at := fd.Name.Range()
			for _, it := range fd.Items {
				if it.Exec != nil && it.Exec.Name.Name == x.Name {
					at = it.Exec.Name.Range()
					break
				}
			}
			c.diags.Warnf(at, dsl.CodeSharedKind, "kind %q of exec %q is also used by flow %q: one worker cannot register both flows (the second of %s and %s fails: the kind already has a handler); give this exec a `kind` of its own unless separate workers run them", x.Kind, x.Name, prev, goname.ForFlow(prev).Register, goname.ForFlow(f.Name).Register)
		}
	}
}

// closure fills the flow's Types, BudgetDefs and QuotaDefs.
func (fc *flowCheck) closure() {
	f := fc.flow
	types := map[string]bool{}
	fc.typeClosure(f.Input, types)
	fc.typeClosure(f.Output, types)
	budgets := map[string]bool{}
	quotas := map[string]bool{}
	for _, b := range f.Budgets {
		budgets[b] = true
	}
	for _, x := range f.Execs {
		fc.typeClosure(x.Input, types)
		fc.typeClosure(x.Output, types)
		for _, b := range x.Budgets {
			budgets[b] = true
		}
		for _, q := range x.Quotas {
			quotas[q] = true
		}
	}
	for _, n := range slices.Sorted(maps.Keys(types)) {
		if t := fc.planTypes[n]; t != nil {
			f.Types = append(f.Types, *t)
		}
	}
	for _, n := range slices.Sorted(maps.Keys(budgets)) {
		if b := fc.planBudgets[n]; b != nil {
			f.BudgetDefs = append(f.BudgetDefs, *b)
		}
	}
	for _, n := range slices.Sorted(maps.Keys(quotas)) {
		if q := fc.planQuotas[n]; q != nil {
			f.QuotaDefs = append(f.QuotaDefs, *q)
		}
	}
}
