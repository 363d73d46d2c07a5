package dashboard

import (
	"bytes"
	"cmp"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/flowfabric/ff/compiler/plan"
	"github.com/flowfabric/ff/runtime/api"
	"github.com/flowfabric/ff/runtime/client"
	"github.com/flowfabric/ff/runtime/internal/jsonscan"
	"github.com/flowfabric/ff/runtime/internal/utf8cut"
	"github.com/flowfabric/ff/runtime/wire"
)

// MembersShown is the most members a run page lists: one page of GET
// /v1/flows/{id}, with a link to the next; FailuresShown the most of those
// that did not succeed, whose count covers the rest.
const (
	MembersShown  = api.ExecsLimitMax
	FailuresShown = 100
)

// runsData is the runs page.
type runsData struct {
	Namespace, Flow, State string
	Namespaces             []string // of the templates, to choose from
	Auto                   bool     // no namespace was asked for: the page chose one
	Why                    string   // why it chose this one, when not the default
	States                 []string
	Runs                   []wire.FlowRun
	Next                   string // the next page's URL; "" on the last
	First                  string // the first page's URL, on a later page
	// Bulk is the page of the bulk action the filters allow (cancel the
	// running runs, replay the failed or cancelled ones), "" for none.
	Bulk   template.URL
	Notice string // what the last bulk action did
}

func (d *Dashboard) runs(q *request) (*view, error) {
	v := q.r.URL.Query()
	o := client.RunListOptions{Namespace: v.Get("namespace"), Flow: v.Get("flow"), State: v.Get("state"), Cursor: v.Get("cursor")}
	// A run id typed in the filter's box opens the run.
	if id := strings.TrimSpace(v.Get("run")); id != "" {
		return &view{redirect: Prefix + "/runs/" + url.PathEscape(id)}, nil
	}
	ts, _ := q.api.Templates(q.ctx()) // none served: only the default namespace is offered
	known, err := q.api.Namespaces(q.ctx(), client.NamespaceOptions{WithoutLanes: true})
	if err != nil {
		return nil, err
	}
	nss := namespaces(ts, known, o.Namespace)
	auto, why := o.Namespace == "", ""
	if auto {
		// The flow of a template is in the template's namespace; else the
		// first namespace holding runs (that match the filters: one such
		// namespace is asked), so that a console whose flows are all
		// outside the default namespace does not open empty.
		for _, t := range ts {
			if t.Name == o.Flow {
				o.Namespace, why = t.Namespace, "the namespace of template "+t.Name
			}
		}
		runs := map[string]int64{}
		for _, ns := range known.Namespaces {
			runs[ns.Name] = ns.Runs
		}
		for _, ns := range nss {
			if o.Namespace != "" {
				break
			}
			if runs[ns] == 0 {
				continue
			}
			found := o.Flow == "" && o.State == ""
			if !found {
				probe, err := q.api.ListRuns(q.ctx(), client.RunListOptions{Namespace: ns, Flow: o.Flow, State: o.State, Limit: 1})
				if err != nil {
					return nil, err
				}
				found = len(probe.Runs) > 0 || probe.NextCursor != ""
			}
			if found {
				o.Namespace = ns
				if ns != plan.DefaultNamespace {
					why = "the default one has none"
					if o.Flow != "" {
						why += " of " + o.Flow
					}
				}
			}
		}
		if o.Namespace == "" {
			o.Namespace = plan.DefaultNamespace
		}
	}
	list, err := q.api.ListRuns(q.ctx(), o)
	if err != nil {
		return nil, err
	}
	data := runsData{Namespace: o.Namespace, Flow: o.Flow, State: o.State, Runs: list.Runs, Auto: auto, Why: why,
		States:     []string{wire.RunRunning, wire.RunSucceeded, wire.RunFailed, wire.RunCancelled},
		Namespaces: nss}
	if o.Cursor != "" {
		data.First = runsURL(o, "")
	}
	if list.NextCursor != "" {
		data.Next = runsURL(o, list.NextCursor)
	}
	if len(list.Runs) > 0 && (o.State == wire.RunRunning || o.State == wire.RunFailed || o.State == wire.RunCancelled) {
		data.Bulk = template.URL(Prefix + "/bulk?" + bulkQuery(o.Namespace, o.Flow, o.State)) // encoded: safe
	}
	data.Notice = bulkNotice(v.Get("done"))
	// The first page reloads while it shows running work; a later page
	// would move under the reader.
	refresh := o.Cursor == "" && slices.ContainsFunc(list.Runs, func(r wire.FlowRun) bool { return r.State == wire.RunRunning })
	return &view{page: "runs", title: "Runs", data: data, refresh: refresh}, nil
}

// bulkQuery is the query of a bulk action's pages: its filters.
func bulkQuery(ns, flow, state string) string {
	v := url.Values{"namespace": {ns}, "state": {state}}
	if flow != "" {
		v.Set("flow", flow)
	}
	return v.Encode()
}

// bulkData is the page that asks before a bulk cancel or replay.
type bulkData struct {
	Namespace, Flow, State string
	Cancel                 bool // a cancel of the running runs, else a replay
	Max                    int
	// Seen counts the matching runs of the index's first page; More says
	// that the page did not reach the index's end (there may be more).
	Seen int
	More bool
	Back template.URL // the runs page of the filters
}

// confirmBulk asks before cancelling every running run of the filters, or
// replaying every failed or cancelled one.
func (d *Dashboard) confirmBulk(q *request) (*view, error) {
	v := q.r.URL.Query()
	b := bulkData{Namespace: cmp.Or(v.Get("namespace"), plan.DefaultNamespace), Flow: v.Get("flow"), State: v.Get("state"),
		Cancel: v.Get("state") == wire.RunRunning, Max: BulkMax}
	b.Back = template.URL(Prefix + "/runs?" + bulkQuery(b.Namespace, b.Flow, b.State)) // encoded: safe
	if !b.Cancel && b.State != wire.RunFailed && b.State != wire.RunCancelled {
		return nil, &pageError{status: http.StatusBadRequest, msg: "Choose the runs first: running ones to cancel, failed or cancelled ones to replay."}
	}
	page, err := q.api.ListRuns(q.ctx(), client.RunListOptions{Namespace: b.Namespace, Flow: b.Flow, State: b.State, Limit: 500})
	if err != nil {
		return nil, err
	}
	b.Seen, b.More = len(page.Runs), page.NextCursor != ""
	title := "Replay the " + b.State + " runs"
	if b.Cancel {
		title = "Cancel the running runs"
	}
	return &view{page: "bulk", title: title, data: b}, nil
}

// BulkMax is the most runs one bulk action of the console lists and acts
// on (the API's limit).
const BulkMax = 1000

// bulkAct cancels (or replays) the runs of the filters, up to BulkMax,
// and shows the runs page with what it did.
func (d *Dashboard) bulkAct(q *request) (*view, error) {
	b := wire.BulkRuns{Namespace: cmp.Or(q.r.PostFormValue("namespace"), plan.DefaultNamespace), Flow: q.r.PostFormValue("flow"),
		State: q.r.PostFormValue("state"), Limit: BulkMax}
	if b.State != wire.RunRunning && b.State != wire.RunFailed && b.State != wire.RunCancelled {
		return nil, &pageError{status: http.StatusBadRequest, msg: "Choose the runs first: running ones to cancel, failed or cancelled ones to replay."}
	}
	var res *wire.BulkRunsResult
	var err error
	verb := "cancelled"
	if b.State == wire.RunRunning {
		// The form counts characters, the API bytes: cut, rather than
		// lose what was typed to a refusal.
		b.Reason = cmp.Or(utf8cut.Cut(strings.TrimSpace(q.r.PostFormValue("reason")), api.ReasonMaxBytes), "cancelled from the console")
		res, err = q.api.CancelRuns(q.ctx(), b)
	} else {
		verb = "replayed"
		res, err = q.api.ReplayRuns(q.ctx(), b)
	}
	if err != nil {
		return nil, err
	}
	more := 0
	if res.NextCursor != "" {
		more = 1
	}
	o := client.RunListOptions{Namespace: b.Namespace, Flow: b.Flow, State: b.State}
	if verb == "replayed" {
		o.State = "" // they are running, or ended again already
	}
	u := runsURL(o, "") + "&done=" + fmt.Sprintf("bulk.%s.%d.%d.%d", verb, len(res.Runs), len(res.Refused), more)
	return &view{redirect: u}, nil
}

// bulkNotice says what a bulk action did, from the runs page's done
// ("bulk.<verb>.<acted>.<refused>.<more>"); "" for anything else.
func bulkNotice(done string) string {
	var verb string
	var n, refused, more int
	if _, err := fmt.Sscanf(strings.ReplaceAll(done, ".", " "), "bulk %s %d %d %d", &verb, &n, &refused, &more); err != nil ||
		(verb != "cancelled" && verb != "replayed") {
		return ""
	}
	s := fmt.Sprintf("%d runs were %s.", n, verb)
	if n == 1 {
		s = fmt.Sprintf("1 run was %s.", verb)
	}
	switch {
	case refused == 1:
		s += " 1 could not be (it changed meanwhile)."
	case refused > 1:
		s += fmt.Sprintf(" %d could not be (they changed meanwhile).", refused)
	}
	if more > 0 {
		s += fmt.Sprintf(" More may be left past the first %d: do it again.", BulkMax)
	}
	return s
}

// runsURL is the runs page of o's filters at cursor ("" = the first page).
func runsURL(o client.RunListOptions, cursor string) string {
	v := url.Values{}
	for k, x := range map[string]string{"namespace": o.Namespace, "flow": o.Flow, "state": o.State, "cursor": cursor} {
		if x != "" {
			v.Set(k, x)
		}
	}
	return Prefix + "/runs?" + v.Encode()
}

// runData is the run page.
type runData struct {
	Run     *wire.FlowRun
	Graph   *graph          // nil when the run's template is not served or differs
	Members []wire.FlowExec // a page of them: every one of a run of up to MembersShown
	// Paged says Members are not all of the run; NextMembers is the link
	// to the page after them ("" on the last), FirstMembers to the first
	// ("" on the first).
	Paged                     bool
	NextMembers, FirstMembers string
	// Failures are the members that did not succeed, the first
	// FailuresShown of them.
	Failures       []wire.ExecFailure
	FailuresHidden int
	Result         string // the result, indented
	Input          string // the run's input, indented
	Template       string // the served template of the run's flow, if any
	Notice         string // what the last action did
	Error          string // why the last action was refused
}

func (d *Dashboard) run(q *request) (*view, error) {
	return d.showRun(q, "", "")
}

func (d *Dashboard) showRun(q *request, notice, refused string) (*view, error) {
	id := q.r.PathValue("id")
	// ?members= is the cursor of a page of members after the first.
	cursor := q.r.URL.Query().Get("members")
	run, next, err := q.api.GetRunPage(q.ctx(), id, cursor, MembersShown)
	if err != nil {
		return nil, err
	}
	data := runData{Run: run, Members: run.Execs, Failures: run.Failures, Result: indent(run.Result), Input: indent(run.Input),
		Notice: notice, Error: refused, Paged: cursor != "" || next != ""}
	if notice == "" {
		data.Notice = noticeText(q.r.URL.Query().Get("done"))
	}
	if len(data.Failures) > FailuresShown {
		data.FailuresHidden = len(data.Failures) - FailuresShown
		data.Failures = data.Failures[:FailuresShown]
	}
	if next != "" {
		data.NextMembers = Prefix + "/runs/" + url.PathEscape(id) + "?" + url.Values{"members": {next}}.Encode()
	}
	if cursor != "" {
		data.FirstMembers = Prefix + "/runs/" + url.PathEscape(id)
	}
	// The graph is the run's own: its members and their edges (all of
	// them: a page of a larger run is not drawn).
	if !data.Paged {
		data.Graph = layoutGraph(runShape(run), run)
	}
	// The flow links to its template only when one of that name is
	// served here (a run staged from a plan has none).
	if _, err := q.api.Template(q.ctx(), run.Flow); err == nil {
		data.Template = run.Flow
	}
	v := &view{page: "run", title: "Run " + run.ID, data: data, refresh: run.State == wire.RunRunning && refused == "",
		members: len(run.Execs) + run.Failed + run.Cancelled}
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
	case "ended":
		return "The run had ended already: nothing was cancelled."
	case "replayed":
		return "The run was replayed: its failed, cancelled and skipped members run again; succeeded ones keep their results."
	case "started":
		return "The run was started."
	case "existing":
		return "A run with that idempotency key exists already: this is it (its input is the first start's, whatever this one said)."
	case "resent":
		return "This form had been sent already: this is the run it started."
	case "schedule-deleted":
		return "The schedule was deleted: it fires no more. The runs it started are kept."
	case "budget-reset":
		return "The budget was reset: its usage is zero again."
	case "quota-paused":
		return "The quota was paused: nothing is admitted under it until the pause ends."
	case "quota-resumed":
		return "The quota was resumed."
	}
	return ""
}

// runShape is run's graph as a template: its members, what each waits
// for and on which condition.
func runShape(run *wire.FlowRun) *wire.Template {
	t := &wire.Template{Name: run.Flow}
	for _, x := range run.Execs {
		tx := wire.TemplateExec{Name: x.Name, Kind: x.Kind}
		for _, u := range x.Upstreams {
			tx.Upstreams = append(tx.Upstreams, u.Exec)
			if u.On != "" {
				t.Edges = append(t.Edges, plan.Edge{From: u.Exec, To: x.Name, On: u.On})
			}
		}
		t.Execs = append(t.Execs, tx)
	}
	return t
}

// confirmCancel asks for a cancel's reason on a page that does not
// reload (the run's page does while it runs, and would lose what is
// typed).
func (d *Dashboard) confirmCancel(q *request) (*view, error) {
	// The page shows the run's counts: one member is enough.
	run, _, err := q.api.GetRunPage(q.ctx(), q.r.PathValue("id"), "", 1)
	if err != nil {
		return nil, err
	}
	return &view{page: "cancel", title: "Cancel run " + run.ID, data: run}, nil
}

func (d *Dashboard) cancelRun(q *request) (*view, error) {
	id := q.r.PathValue("id")
	// The form counts characters, the API bytes: cut, rather than lose
	// what was typed to a refusal.
	reason := utf8cut.Cut(strings.TrimSpace(q.r.PostFormValue("reason")), api.ReasonMaxBytes)
	if reason == "" {
		reason = "cancelled from the console"
	}
	run, err := q.api.CancelRun(q.ctx(), id, reason)
	if err != nil {
		return d.refused(q, err)
	}
	done := "cancelled"
	if run.State != wire.RunCancelled || !strings.Contains(run.Error, reason) {
		// Cancelling is idempotent: a run that had ended (or was
		// cancelled before) is answered as it is.
		done = "ended"
	}
	return &view{redirect: Prefix + "/runs/" + url.PathEscape(id) + "?done=" + done}, nil
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
	Member        string // its name in that run, when it is one of it
	Ended         bool   // terminal
}

func (d *Dashboard) execution(q *request) (*view, error) {
	x, err := q.api.GetExecution(q.ctx(), q.r.PathValue("id"))
	if err != nil {
		return nil, err
	}
	ended := x.State == "completed" || x.State == "failed" || x.State == "cancelled" || x.State == "expired" || x.State == "skipped"
	data := executionData{X: x, Input: indent(x.Input), Result: indent(x.Result), Run: runParam(q.r), Ended: ended}
	// The member's name comes from the execution, not from the link: a
	// run id that is not the execution's run is not linked back to.
	if data.Run != "" && data.Run == x.RunID {
		data.Member = x.FlowNode
	} else {
		data.Run = ""
	}
	title := "Execution " + x.ID
	if data.Member != "" {
		title = "Member " + data.Member
	}
	return &view{page: "execution", title: title, refresh: !ended, data: data}, nil
}

// nonceRe is the shape of nonce().
var nonceRe = regexp.MustCompile(`^[A-Za-z0-9_-]{22}$`)

// nonce is 128 random bits, URL-safe.
func nonce() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// jsonError says where input stops being JSON.
func jsonError(input string, err error) string {
	var se *json.SyntaxError
	if !errors.As(err, &se) {
		return "The input is not valid JSON: " + err.Error() + "."
	}
	line, col := jsonscan.LineCol([]byte(input), se.Offset)
	return fmt.Sprintf("The input is not valid JSON: %s (line %d, column %d).", se.Error(), line, col)
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
	// Optional are the optional fields of the input type, which the
	// prefilled input leaves out.
	Optional []optionalField
	Error    string
	Field    string
	// Nonce is the form's own idempotency key when none is typed: a second
	// click on Start (or a resent form) shows the run the first started.
	Nonce string
}

func (d *Dashboard) template(q *request) (*view, error) {
	t, err := q.api.Template(q.ctx(), q.r.PathValue("name"))
	if err != nil {
		return nil, err
	}
	input, optional := skeleton(t.Input, t.Types)
	return &view{page: "template", title: "Template " + t.Name, data: templateData{
		T: t, Graph: layoutGraph(t, nil), Input: input, Optional: optional, Nonce: nonce()}}, nil
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
	t, err := q.api.Template(q.ctx(), name)
	if err != nil {
		return nil, err
	}
	again := func(msg, field string) (*view, error) {
		_, optional := skeleton(t.Input, t.Types)
		return &view{page: "template", title: "Template " + t.Name, status: http.StatusBadRequest, data: templateData{
			T: t, Graph: layoutGraph(t, nil), Input: input, Key: key, Optional: optional, Error: msg, Field: field, Nonce: nonce()}}, nil
	}
	if input == "" && t.Input != nil {
		return again("The input is empty: the flow takes "+typeName(t.Input)+".", "input")
	}
	var in any
	if input != "" {
		var probe any
		if err := json.Unmarshal([]byte(input), &probe); err != nil {
			return again(jsonError(input, err), "")
		}
		in = json.RawMessage(input)
	}
	typed := key != ""
	if n := q.r.PostFormValue("nonce"); !typed && nonceRe.MatchString(n) {
		key = "console-" + n
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
	switch {
	case !run.Created && typed:
		done = "existing"
	case !run.Created:
		done = "resent" // the form's own key: sent twice
	}
	return &view{redirect: Prefix + "/runs/" + url.PathEscape(run.ID) + "?done=" + done}, nil
}

// schedulesData is the schedules page.
type schedulesData struct {
	Schedules []wire.Schedule
	Notice    string
	// Nonce is the Run now forms' idempotency key (with the schedule's
	// name): a second click shows the run the first started.
	Nonce string
}

func (d *Dashboard) schedules(q *request) (*view, error) {
	list, err := q.api.ListSchedules(q.ctx())
	if err != nil {
		return nil, err
	}
	return &view{page: "schedules", title: "Schedules", data: schedulesData{Schedules: list.Schedules,
		Notice: noticeText(q.r.URL.Query().Get("done")), Nonce: nonce()}}, nil
}

// runSchedule starts a run of a schedule now (its Run now button) and
// shows the run.
func (d *Dashboard) runSchedule(q *request) (*view, error) {
	var opts []client.StageOption
	if n := q.r.PostFormValue("nonce"); nonceRe.MatchString(n) {
		opts = append(opts, client.WithIdempotencyKey("console-"+n))
	}
	run, err := q.api.RunSchedule(q.ctx(), q.r.PathValue("name"), opts...)
	if err != nil {
		return nil, err
	}
	done := "started"
	if !run.Created {
		done = "resent" // the form's own key: sent twice
	}
	return &view{redirect: Prefix + "/runs/" + url.PathEscape(run.ID) + "?done=" + done}, nil
}

// confirmDelete asks before a schedule is deleted, on a page of its own.
func (d *Dashboard) confirmDelete(q *request) (*view, error) {
	s, err := q.api.GetSchedule(q.ctx(), q.r.PathValue("name"))
	if err != nil {
		return nil, err
	}
	return &view{page: "schedule_delete", title: "Delete schedule " + s.Name, data: s}, nil
}

func (d *Dashboard) deleteSchedule(q *request) (*view, error) {
	if err := q.api.DeleteSchedule(q.ctx(), q.r.PathValue("name")); err != nil {
		return nil, err
	}
	return &view{redirect: Prefix + "/schedules?done=schedule-deleted"}, nil
}

// workersData is the workers page: the workers of a namespace and the
// work its lanes hold.
type workersData struct {
	Namespace  string
	Namespaces []string
	Workers    []wire.Worker
	Truncated  bool
	Lanes      []wire.LaneCounts
}

func (d *Dashboard) workers(q *request) (*view, error) {
	ns := q.r.URL.Query().Get("namespace")
	ts, _ := q.api.Templates(q.ctx()) // none served: only the default namespace is offered
	known, err := q.api.Namespaces(q.ctx(), client.NamespaceOptions{WithoutLanes: true})
	if err != nil {
		return nil, err
	}
	nss := namespaces(ts, known, ns)
	if ns == "" {
		// The first namespace with workers connected, else the default.
		ns = plan.DefaultNamespace
		for _, n := range known.Namespaces {
			if n.Workers > 0 {
				ns = n.Name
				break
			}
		}
	}
	list, err := q.api.Workers(q.ctx(), ns)
	if err != nil {
		return nil, err
	}
	data := workersData{Namespace: ns, Namespaces: nss, Workers: list.Workers, Truncated: list.LeasesTruncated}
	// The lanes of this namespace only: their counts are the cost.
	one, err := q.api.Namespaces(q.ctx(), client.NamespaceOptions{Namespace: ns})
	if err != nil {
		return nil, err
	}
	for _, n := range one.Namespaces {
		data.Lanes = n.Lanes
	}
	return &view{page: "workers", title: "Workers", refresh: true, data: data}, nil
}

// namespaces are the default namespace, then those the server knows of
// (GET /v1/namespaces), those of the served templates and current,
// sorted: runs and workers are listed a namespace at a time, and a
// newcomer's flows are often not in the default one.
func namespaces(ts []wire.Template, known *wire.NamespaceList, current string) []string {
	var ns []string
	if current != "" && current != plan.DefaultNamespace {
		ns = append(ns, current)
	}
	for _, t := range ts {
		if t.Namespace != plan.DefaultNamespace {
			ns = append(ns, t.Namespace)
		}
	}
	for _, n := range known.Namespaces {
		if n.Name != plan.DefaultNamespace {
			ns = append(ns, n.Name)
		}
	}
	slices.Sort(ns)
	return append([]string{plan.DefaultNamespace}, slices.Compact(ns)...)
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
		cut := utf8cut.Cut(buf.String(), JSONShown)
		return cut + "\n… (" + strconv.Itoa(buf.Len()-len(cut)) + " more bytes: GET the API for all of it)"
	}
	return buf.String()
}
