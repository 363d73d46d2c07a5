package dashboard

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/flowfabric/ff/compiler/plan"
	"github.com/flowfabric/ff/runtime/client"
	"github.com/flowfabric/ff/runtime/wire"
)

// MembersShown is the most members a run page lists, FailuresShown the
// most of those that did not succeed; the counts cover the rest.
const (
	MembersShown  = 2000
	FailuresShown = 100
)

// runsData is the runs page.
type runsData struct {
	Namespace, Flow, State string
	Namespaces             []string // of the templates, to choose from
	States                 []string
	Runs                   []wire.FlowRun
	Next                   string // the next page's URL; "" on the last
}

func (d *Dashboard) runs(q *request) (*view, error) {
	v := q.r.URL.Query()
	o := client.RunListOptions{Namespace: v.Get("namespace"), Flow: v.Get("flow"), State: v.Get("state"), Cursor: v.Get("cursor")}
	list, err := q.api.ListRuns(q.ctx(), o)
	if err != nil {
		return nil, err
	}
	data := runsData{Namespace: o.Namespace, Flow: o.Flow, State: o.State, Runs: list.Runs,
		States:     []string{wire.RunRunning, wire.RunSucceeded, wire.RunFailed, wire.RunCancelled},
		Namespaces: namespaces(q, o.Namespace)}
	if list.NextCursor != "" {
		nv := url.Values{}
		for k, x := range map[string]string{"namespace": o.Namespace, "flow": o.Flow, "state": o.State, "cursor": list.NextCursor} {
			if x != "" {
				nv.Set(k, x)
			}
		}
		data.Next = Prefix + "/runs?" + nv.Encode()
	}
	// The first page reloads while it shows running work; a later page
	// would move under the reader.
	refresh := o.Cursor == "" && slices.ContainsFunc(list.Runs, func(r wire.FlowRun) bool { return r.State == wire.RunRunning })
	return &view{page: "runs", title: "Runs", data: data, refresh: refresh}, nil
}

// runData is the run page.
type runData struct {
	Run     *wire.FlowRun
	Graph   *graph // nil when the run's template is not served or differs
	Members []wire.FlowExec
	Hidden  int // members not listed (over MembersShown)
	// Failures are the members that did not succeed, the first
	// FailuresShown of them.
	Failures       []wire.ExecFailure
	FailuresHidden int
	Result         string // the result, indented
	Notice         string // what the last action did
	Error          string // why the last action was refused
}

func (d *Dashboard) run(q *request) (*view, error) {
	return d.showRun(q, "", "")
}

func (d *Dashboard) showRun(q *request, notice, refused string) (*view, error) {
	id := q.r.PathValue("id")
	run, err := q.api.GetRun(q.ctx(), id)
	if err != nil {
		return nil, err
	}
	data := runData{Run: run, Members: run.Execs, Failures: run.Failures, Result: indent(run.Result), Notice: notice, Error: refused}
	if notice == "" {
		data.Notice = noticeText(q.r.URL.Query().Get("done"))
	}
	if len(data.Failures) > FailuresShown {
		data.FailuresHidden = len(data.Failures) - FailuresShown
		data.Failures = data.Failures[:FailuresShown]
	}
	if len(data.Members) > MembersShown {
		data.Hidden = len(data.Members) - MembersShown
		data.Members = data.Members[:MembersShown]
	}
	// The graph comes from the template of the same name, when it is
	// served here and has exactly the run's members.
	if t, err := q.api.Template(q.ctx(), run.Flow); err == nil && sameMembers(t, run) {
		data.Graph = layoutGraph(t, run)
	}
	v := &view{page: "run", title: "Run " + run.ID, data: data, refresh: run.State == wire.RunRunning && refused == ""}
	if refused != "" {
		v.status = http.StatusConflict
	}
	return v, nil
}

// noticeText is the banner after an action (the ?done= of its redirect).
func noticeText(done string) string {
	switch done {
	case "cancelled":
		return "The run was cancelled: no member of it starts any more; running ones see their context cancelled."
	case "replayed":
		return "The run was replayed: its failed, cancelled and skipped members run again; succeeded ones keep their results."
	case "started":
		return "The run was started."
	case "existing":
		return "A run with that idempotency key exists already: this is it."
	case "budget-reset":
		return "The budget was reset: its usage is zero again."
	case "quota-paused":
		return "The quota was paused: nothing is admitted under it until the pause ends."
	case "quota-resumed":
		return "The quota was resumed."
	}
	return ""
}

// sameMembers says run has exactly t's members (in whatever namespace it
// was staged).
func sameMembers(t *wire.Template, run *wire.FlowRun) bool {
	if len(t.Execs) != len(run.Execs) {
		return false
	}
	names := make(map[string]bool, len(t.Execs))
	for _, x := range t.Execs {
		names[x.Name] = true
	}
	for _, x := range run.Execs {
		if !names[x.Name] {
			return false
		}
	}
	return true
}

// confirmCancel asks for a cancel's reason on a page that does not
// reload (the run's page does while it runs, and would lose what is
// typed).
func (d *Dashboard) confirmCancel(q *request) (*view, error) {
	run, err := q.api.GetRun(q.ctx(), q.r.PathValue("id"))
	if err != nil {
		return nil, err
	}
	return &view{page: "cancel", title: "Cancel run " + run.ID, data: run}, nil
}

func (d *Dashboard) cancelRun(q *request) (*view, error) {
	id := q.r.PathValue("id")
	reason := strings.TrimSpace(q.r.PostFormValue("reason"))
	if reason == "" {
		reason = "cancelled from the console"
	}
	if _, err := q.api.CancelRun(q.ctx(), id, reason); err != nil {
		return d.refused(q, err)
	}
	return &view{redirect: Prefix + "/runs/" + url.PathEscape(id) + "?done=cancelled"}, nil
}

func (d *Dashboard) replayRun(q *request) (*view, error) {
	id := q.r.PathValue("id")
	if _, err := q.api.ReplayRun(q.ctx(), id); err != nil {
		return d.refused(q, err)
	}
	return &view{redirect: Prefix + "/runs/" + url.PathEscape(id) + "?done=replayed"}, nil
}

// refused shows the run again with why the API refused an action on it
// (a run that ended meanwhile, one not failed, ...); other errors are the
// page's.
func (d *Dashboard) refused(q *request, err error) (*view, error) {
	var ae *client.APIError
	if !errors.As(err, &ae) || ae.Status != http.StatusConflict {
		return nil, err
	}
	v, rerr := d.showRun(q, "", ae.Message)
	if rerr != nil {
		return nil, err
	}
	return v, nil
}

// executionData is the execution page.
type executionData struct {
	X             *wire.Execution
	Input, Result string
	Run           string // the run the page was reached from
}

func (d *Dashboard) execution(q *request) (*view, error) {
	x, err := q.api.GetExecution(q.ctx(), q.r.PathValue("id"))
	if err != nil {
		return nil, err
	}
	running := x.State != "completed" && x.State != "failed" && x.State != "cancelled" && x.State != "expired" && x.State != "skipped"
	return &view{page: "execution", title: "Execution " + x.ID, refresh: running, data: executionData{
		X: x, Input: indent(x.Input), Result: indent(x.Result), Run: runParam(q.r),
	}}, nil
}

// runParam is the run an execution page was reached from (its ?run=), when
// it can be a run id: the page links back to it.
func runParam(r *http.Request) string {
	id := r.URL.Query().Get("run")
	if id == "" || len(id) > 200 || strings.ContainsAny(id, "/\\?#%") {
		return ""
	}
	return id
}

func (d *Dashboard) templates(q *request) (*view, error) {
	ts, err := q.api.Templates(q.ctx())
	if err != nil {
		return nil, err
	}
	return &view{page: "templates", title: "Templates", data: ts}, nil
}

// templateData is the template page.
type templateData struct {
	T     *wire.Template
	Graph *graph
	// The start form: what was typed, and why the API refused it.
	Input, Key string
	Error      string
	Field      string
}

func (d *Dashboard) template(q *request) (*view, error) {
	t, err := q.api.Template(q.ctx(), q.r.PathValue("name"))
	if err != nil {
		return nil, err
	}
	return &view{page: "template", title: "Template " + t.Name, data: templateData{
		T: t, Graph: layoutGraph(t, nil), Input: skeleton(t.Input, t.Types)}}, nil
}

// InputMax is the largest run input the start form takes.
const InputMax = 1 << 20

func (d *Dashboard) startRun(q *request) (*view, error) {
	name := q.r.PathValue("name")
	// page() has read the form, bounded.
	input := strings.TrimSpace(q.r.PostFormValue("input"))
	if len(input) > InputMax {
		return nil, &pageError{status: http.StatusRequestEntityTooLarge, msg: "The input is too large: a run's input may be at most 1 MiB."}
	}
	key := strings.TrimSpace(q.r.PostFormValue("key"))
	again := func(msg, field string) (*view, error) {
		t, err := q.api.Template(q.ctx(), name)
		if err != nil {
			return nil, err
		}
		return &view{page: "template", title: "Template " + t.Name, data: templateData{
			T: t, Graph: layoutGraph(t, nil), Input: input, Key: key, Error: msg, Field: field}}, nil
	}
	var in any
	if input != "" {
		if !json.Valid([]byte(input)) {
			return again("The input is not valid JSON.", "")
		}
		in = json.RawMessage(input)
	}
	var opts []client.StageOption
	if key != "" {
		opts = append(opts, client.WithIdempotencyKey(key))
	}
	run, err := q.api.StageTemplate(q.ctx(), name, in, opts...)
	if err != nil {
		var ae *client.APIError
		if errors.As(err, &ae) && ae.Status >= 400 && ae.Status < 500 && ae.Status != http.StatusNotFound {
			field, _ := ae.Details["field"].(string)
			if strings.Contains(ae.Message, field) {
				field = "" // the message names it
			}
			return again(ae.Message, field)
		}
		return nil, err
	}
	done := "started"
	if !run.Created {
		done = "existing"
	}
	return &view{redirect: Prefix + "/runs/" + url.PathEscape(run.ID) + "?done=" + done}, nil
}

func (d *Dashboard) schedules(q *request) (*view, error) {
	list, err := q.api.ListSchedules(q.ctx())
	if err != nil {
		return nil, err
	}
	return &view{page: "schedules", title: "Schedules", data: list.Schedules}, nil
}

// workersData is the workers page.
type workersData struct {
	Namespace  string
	Namespaces []string
	Workers    []wire.Worker
	Truncated  bool
}

func (d *Dashboard) workers(q *request) (*view, error) {
	ns := q.r.URL.Query().Get("namespace")
	list, err := q.api.Workers(q.ctx(), ns)
	if err != nil {
		return nil, err
	}
	return &view{page: "workers", title: "Workers", refresh: true,
		data: workersData{Namespace: ns, Namespaces: namespaces(q, ns), Workers: list.Workers, Truncated: list.LeasesTruncated}}, nil
}

// namespaces are the namespaces of the served templates and the default
// one, sorted: runs and workers are listed a namespace at a time, and a
// newcomer's flows are often not in the default one.
func namespaces(q *request, current string) []string {
	ns := []string{plan.DefaultNamespace}
	if current != "" {
		ns = append(ns, current)
	}
	if ts, err := q.api.Templates(q.ctx()); err == nil {
		for _, t := range ts {
			ns = append(ns, t.Namespace)
		}
	}
	slices.Sort(ns)
	return slices.Compact(ns)
}

// JSONShown is the most bytes of an input, output or result a page shows.
const JSONShown = 256 << 10

// indent returns JSON indented for reading ("" for none), cut after
// JSONShown bytes; what is not JSON is shown as it is.
func indent(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, "", "  "); err != nil {
		buf.Reset()
		buf.Write(raw)
	}
	if buf.Len() > JSONShown {
		cut := buf.Bytes()[:JSONShown]
		for len(cut) > 0 && !utf8.Valid(cut) {
			cut = cut[:len(cut)-1]
		}
		return string(cut) + "\n… (" + strconv.Itoa(buf.Len()-len(cut)) + " more bytes: GET the API for all of it)"
	}
	return buf.String()
}
