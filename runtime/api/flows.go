package api

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/flowfabric/ff/compiler/plan"
	"github.com/flowfabric/ff/runtime/flowinput"
	"github.com/flowfabric/ff/runtime/internal/jsonscan"
	"github.com/flowfabric/ff/runtime/store"
	"github.com/flowfabric/ff/runtime/wire"
)

// ScheduleKeyPrefix starts the idempotency keys of the runs ffrun's
// schedules start (runtime/server); a caller's key may not.
const ScheduleKeyPrefix = "ffrun-schedule:"

// Limits of the flow routes.
const (
	// BodyLimitFlow bounds POST /v1/flows: a plan of up to 10,000 execs
	// with the run's input.
	BodyLimitFlow = plan.MaxStageBodyBytes
	// RunWaitMaxMs bounds the wait_ms of GET /v1/flows/{id}/result and of
	// the staging routes.
	RunWaitMaxMs = 60_000
)

// FlowService runs flows. The API validates the plan and the input before
// calling StageFlow. Errors should be *Error values, as for Service.
type FlowService interface {
	// StageFlow stages a run; created is false when the idempotency key
	// matched an earlier run, which is returned. With req.Wait > 0 it
	// returns the run as RunResult would once it ended within the wait,
	// else the run as staged: a wait never turns a staged run into an
	// error.
	StageFlow(ctx context.Context, req FlowRequest) (run *wire.FlowRun, created bool, err error)
	// GetRun returns a run with one page of its members (and the cursor of
	// the next page when members are left).
	GetRun(ctx context.Context, id string, page ExecsPage) (*wire.FlowRun, error)
	// RunResult returns a run without its members once it ended, waiting
	// up to wait for it to end; a run still running after the wait is an
	// *Error with code wire.CodeNotTerminal.
	RunResult(ctx context.Context, id string, wait time.Duration) (*wire.FlowRun, error)
	CancelRun(ctx context.Context, id, reason string) (*wire.FlowRun, error)
	ReplayRun(ctx context.Context, id string) (*wire.FlowRun, error)
	// ListRuns returns one page of runs, newest first.
	ListRuns(ctx context.Context, q RunListQuery) (*wire.FlowRunList, error)
	// CancelRuns cancels the running runs that match q (its State is
	// running), newest first, reading the run index from q.Cursor and
	// acting on at most q.Limit of them; ReplayRuns replays the failed or
	// cancelled ones alike. Each run's change is atomic, the whole is not.
	CancelRuns(ctx context.Context, q RunListQuery, reason string) (*wire.BulkRunsResult, error)
	ReplayRuns(ctx context.Context, q RunListQuery) (*wire.BulkRunsResult, error)
}

// ExecsPage selects the members of a run that GET /v1/flows/{id} answers
// with (execs_limit, execs_cursor).
type ExecsPage struct {
	Cursor string // execs_next_cursor of the page before; "" = from the first member
	Limit  int    // 1..ExecsLimitMax; 0 = ExecsLimitMax, the default page
}

// ExecsLimitMax bounds the members of one run answer (execs_limit), and
// is the default page: a run of more members is answered with its first
// ExecsLimitMax members and the cursor of the next page.
const ExecsLimitMax = store.RunPageMax

// BulkLimitDef and BulkLimitMax bound the runs one bulk cancel or replay
// acts on.
const (
	BulkLimitDef = 100
	BulkLimitMax = 1000
)

// RunListQuery is the filter of GET /v1/flows; the service validates its
// values.
type RunListQuery struct {
	Namespace string // "" = the default namespace
	Flow      string // "" = every flow
	State     string // "" = every state
	Cursor    string
	Limit     int
}

// FlowRequest is a validated request to stage a run.
type FlowRequest struct {
	// Flow is read only: the API hands the same plan to every run of a
	// template, and of a plan whose JSON text it has seen before, possibly
	// at once.
	Flow *plan.Flow
	// Shared says Flow is shared by many runs (a template, a plan from the
	// cache of plans): the service may keep what it derives from it.
	Shared         bool
	Input          json.RawMessage
	Namespace      string
	IdempotencyKey string
	IdempotencyTTL time.Duration // how long the key is held; 0 = the store's default
	Wait           time.Duration // wait_ms of the staging routes
}

// flows serves the /v1/flows and /v1/templates routes.
type flows struct {
	s         *Server
	svc       FlowService
	templates map[string]*plan.Flow
	checks    map[string]*flowinput.Checker // the input checkers of the templates (runPlan), by name
	names     []string                      // sorted
	plans     planCache
}

// AddFlows serves the flow routes (/v1/flows) over svc and the given
// compiled flows as templates by name (/v1/templates). Every template must
// validate and names must be unique. Call it once, before serving.
func (s *Server) AddFlows(svc FlowService, templates []*plan.Flow) error {
	if svc == nil {
		return errors.New("api: AddFlows: nil FlowService")
	}
	f, err := newFlows(s, svc, templates)
	if err != nil {
		return err
	}
	s.flows = f
	s.v1.POST("/flows", f.stage)
	s.v1.GET("/flows", f.list)
	s.v1.GET("/flows/:id", f.get)
	s.v1.GET("/flows/:id/result", f.result)
	s.v1.POST("/flows/:id/cancel", f.cancel)
	s.v1.POST("/flows/:id/replay", f.replay)
	s.v1.POST("/flows/cancel", f.cancelMany)
	s.v1.POST("/flows/replay", f.replayMany)
	s.v1.GET("/templates", f.listTemplates)
	s.v1.GET("/templates/:name", f.getTemplate)
	s.v1.POST("/templates/:name/runs", f.stageTemplate)
	return nil
}

// newFlows returns the flow routes of s over svc with templates, each
// validated and with the checker of its runs' input prepared.
func newFlows(s *Server, svc FlowService, templates []*plan.Flow) (*flows, error) {
	f := &flows{s: s, svc: svc, templates: map[string]*plan.Flow{}, checks: map[string]*flowinput.Checker{}}
	for _, t := range templates {
		if err := t.Validate(); err != nil {
			return nil, fmt.Errorf("api: template %s: %w", t.Name, err)
		}
		if _, dup := f.templates[t.Name]; dup {
			return nil, fmt.Errorf("api: two templates are named %s", t.Name)
		}
		f.templates[t.Name] = t
		f.checks[t.Name] = newRunPlan(t).input
		f.names = append(f.names, t.Name)
	}
	slices.Sort(f.names)
	return f, nil
}

// checkPlan validates a plan that came over HTTP; the first problem's path
// is reported under field (prefixed with "plan.").
func checkPlan(p *plan.Flow) *Error {
	if p == nil {
		return invalid("plan", "is required: the JSON of one compiled flow (ffc plan)")
	}
	err := p.Validate()
	if err == nil {
		return nil
	}
	lines := strings.Split(err.Error(), "\n")
	field := "plan"
	if path, _, ok := strings.Cut(lines[0], ": "); ok && !strings.ContainsAny(path, " \t") {
		field = "plan." + path
	}
	e := Errorf(http.StatusBadRequest, wire.CodeValidation, "plan of flow %q is not valid: %s", p.Name, strings.Join(lines, "; "))
	e.Details = map[string]any{"field": field}
	return e
}

// checkInput validates a run's input against the flow's input type.
func checkInput(f *plan.Flow, input json.RawMessage) *Error {
	return inputError(flowinput.Flow(f, "input", input))
}

// checkRunInput is checkInput with chk, the input checker of f prepared
// once (runPlan; nil: none), which checks an input that matches in one
// pass without decoding it, and answers any other as flowinput.Flow
// does. An absent input is left to checkInput, whose message names the
// flow.
func checkRunInput(f *plan.Flow, chk *flowinput.Checker, input json.RawMessage) *Error {
	if chk == nil || len(bytes.TrimSpace(input)) == 0 {
		return checkInput(f, input)
	}
	return inputError(chk.Check("input", input))
}

// inputError is the answer to err, the mismatch of a run's input with its
// flow's input type (nil: none).
func inputError(err error) *Error {
	if err == nil {
		return nil
	}
	var fe *flowinput.Error
	if errors.As(err, &fe) {
		return invalid(fe.Path, "%s", fe.Msg)
	}
	return invalid("input", "%v", err)
}

// waitParam reads the wait_ms query parameter of a route that may wait for
// a run to end (0 when absent; present, it needs a value). onlyQuery has
// refused it given twice.
func waitParam(c echo.Context) (time.Duration, *Error) {
	vs, ok := c.QueryParams()["wait_ms"]
	if !ok {
		return 0, nil
	}
	v := vs[0]
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 || n > RunWaitMaxMs {
		return 0, invalid("wait_ms", "%q is not an integer in 0..%d", v, RunWaitMaxMs)
	}
	return time.Duration(n) * time.Millisecond, nil
}

// stageChecked stages a run of fl (a valid plan, chk the checker of its
// input: runPlan) with input in, once the input, namespace and key are
// valid. With wait_ms the answer waits up to
// that long for the run to end and is then what GET /v1/flows/{id}/result
// answers (no members); a run still running after the wait is answered as
// without wait_ms. A wait never turns a staged run into an error: the run
// exists, and its result can still be asked for.
func (f *flows) stageChecked(c echo.Context, fl *plan.Flow, chk *flowinput.Checker, shared bool, in json.RawMessage,
	ns, key string) error {
	if e := onlyQuery(c, "wait_ms"); e != nil {
		return e
	}
	wait, e := waitParam(c)
	if e != nil {
		return e
	}
	if ns != "" {
		if e := checkName("namespace", ns); e != nil {
			return e
		}
	}
	if e := checkIdemKey("idempotency_key", key); e != nil {
		return e
	}
	if strings.HasPrefix(key, ScheduleKeyPrefix) {
		// A caller's run under a fire's key would be taken for that fire
		// (its input instead of the schedule's, and the schedule's name).
		return invalid("idempotency_key", "keys starting with %q are ffrun's own (schedule fires)", ScheduleKeyPrefix)
	}
	if e := checkRunInput(fl, chk, in); e != nil {
		return e
	}
	run, created, err := f.svc.StageFlow(c.Request().Context(), FlowRequest{Flow: fl, Shared: shared, Input: in, Namespace: ns,
		IdempotencyKey: key, Wait: wait})
	if err != nil {
		return err
	}
	return staged(c, run, created)
}

// staged answers a staging route: 201 with the new run, or 200 with the
// one its idempotency key matched; the run says which (created).
func staged(c echo.Context, run *wire.FlowRun, created bool) error {
	status := http.StatusCreated
	if !created {
		status = http.StatusOK
	}
	run.Created = &created
	return runAnswer(c, status, run)
}

// runAnswer answers run with status as c.JSON would, through the run's
// fast encoder (wire.AppendFlowRun: a run that ended, as a staging request
// that waited and a result answer it), with its length.
func runAnswer(c echo.Context, status int, run *wire.FlowRun) error {
	if run == nil {
		return c.JSON(status, run)
	}
	b, err := wire.AppendFlowRun(nil, run)
	if err != nil {
		return fmt.Errorf("encode answer: %w", err)
	}
	b = append(b, '\n')
	c.Response().Header().Set(echo.HeaderContentLength, strconv.Itoa(len(b)))
	return c.JSONBlob(status, b)
}

// stage serves POST /v1/flows. The plan is cut out of the body and looked
// up in the cache of plans by its text; a plan not seen before is decoded
// and validated, then cached with the checker of its input. The rest of
// the body is decoded on its own. Anything that fails on this path
// decodes the body again as wire.StageFlow, whose errors (and their field
// paths) are the route's.
func (f *flows) stage(c echo.Context) error {
	data, err := readBody(c, f.s.limit(BodyLimitFlow))
	if err != nil {
		return err
	}
	if rp, req, shared := f.cachedStage(data); rp.flow != nil {
		return f.stageChecked(c, rp.flow, rp.input, shared, req.Input, req.Namespace, req.IdempotencyKey)
	}
	var req wire.StageFlow
	if err := decodeBody(data, false, &req); err != nil {
		return packageHint(data, err)
	}
	if e := checkPlan(req.Plan); e != nil {
		return e
	}
	return f.stageChecked(c, req.Plan, nil, false, req.Input, req.Namespace, req.IdempotencyKey)
}

// packageHint adds to err, a stage body's decoding error, a hint when the
// body is not what the route takes but a plan: the plan of a whole package
// (it has "flows"; `ffc plan` writes it without -flow), as the body's plan
// or as the body itself, or one flow's plan sent as the body.
func packageHint(data []byte, err error) error {
	var e *Error
	if !errors.As(err, &e) {
		return err
	}
	const onePlan = "stage one flow's plan, from `ffc plan -flow NAME`"
	if start, end, ok := jsonscan.Member(data, "plan"); ok {
		if _, _, ok := jsonscan.Member(data[start:end], "flows"); ok {
			e.Message += "; this plan is a whole package's: " + onePlan
		}
		return e
	}
	if _, _, ok := jsonscan.Member(data, "flows"); ok {
		e.Message += `; this body is a whole package's plan: ` + onePlan + `, as {"plan": …, "input": …}`
	} else if _, _, ok := jsonscan.Member(data, "execs"); ok {
		e.Message += `; this body looks like a plan: send it as {"plan": …, "input": …}`
	}
	return e
}

// cachedStage decodes a stage body through the cache of plans: the plan's
// text (found by jsonscan.Member) comes from the cache or is decoded
// strictly and validated, and the body with null in place of the plan is decoded
// strictly as a stageBody, where a second plan member shows. When both
// succeed, the body decodes as wire.StageFlow to the same plan and fields;
// otherwise it returns no plan (flow nil). shared reports that the plan is
// the cache's, shared by every run staged from the same text. A plan too
// large for the cache comes without an input checker (one check of its
// input by flowinput.Flow costs less than preparing one).
func (f *flows) cachedStage(data []byte) (rp runPlan, req stageBody, shared bool) {
	start, end, ok := jsonscan.Member(data, "plan")
	if !ok {
		return rp, req, false
	}
	rest := make([]byte, 0, len(data)-(end-start)+len("null"))
	rest = append(append(append(rest, data[:start]...), "null"...), data[end:]...)
	if decodeBody(rest, false, &req) != nil || req.Plan != 1 {
		return rp, req, false
	}
	text := data[start:end]
	if rp := f.plans.get(text); rp.flow != nil {
		return rp, req, true
	}
	fl, ok := decodePlan(text)
	if !ok || checkPlan(fl) != nil {
		return rp, req, false
	}
	if len(text) > planCacheMaxBytes {
		return runPlan{flow: fl}, req, false
	}
	rp = newRunPlan(fl)
	return rp, req, f.plans.add(text, rp)
}

func (f *flows) get(c echo.Context) error {
	if e := onlyQuery(c, "execs_limit", "execs_cursor"); e != nil {
		return e
	}
	id, e := pathParam(c, "id", "id")
	if e != nil {
		return e
	}
	page := ExecsPage{Cursor: c.QueryParam("execs_cursor")}
	if vs, ok := c.QueryParams()["execs_limit"]; ok {
		n, err := strconv.Atoi(vs[0])
		if err != nil || n < 1 || n > ExecsLimitMax {
			return invalid("execs_limit", "%q is not an integer in 1..%d", vs[0], ExecsLimitMax)
		}
		page.Limit = n
	}
	run, err := f.svc.GetRun(c.Request().Context(), id, page)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, run)
}

func (f *flows) list(c echo.Context) error {
	if e := onlyQuery(c, "namespace", "flow", "state", "cursor", "limit"); e != nil {
		return e
	}
	q := RunListQuery{
		Namespace: c.QueryParam("namespace"),
		Flow:      c.QueryParam("flow"),
		State:     c.QueryParam("state"),
		Cursor:    c.QueryParam("cursor"),
		Limit:     ListLimitDef,
	}
	n, e := limitParam(c)
	if e != nil {
		return e
	}
	if n > 0 {
		q.Limit = n
	}
	out, err := f.svc.ListRuns(c.Request().Context(), q)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}

func (f *flows) result(c echo.Context) error {
	if e := onlyQuery(c, "wait_ms"); e != nil {
		return e
	}
	wait, e := waitParam(c)
	if e != nil {
		return e
	}
	id, e := pathParam(c, "id", "id")
	if e != nil {
		return e
	}
	run, err := f.svc.RunResult(c.Request().Context(), id, wait)
	if err != nil {
		return err
	}
	return runAnswer(c, http.StatusOK, run)
}

func (f *flows) cancel(c echo.Context) error {
	if e := onlyQuery(c); e != nil {
		return e
	}
	id, e := pathParam(c, "id", "id")
	if e != nil {
		return e
	}
	var req wire.Cancel
	if err := Decode(c, f.s.limit(BodyLimitDefault), true, &req); err != nil {
		return err
	}
	if e := checkReason("reason", req.Reason); e != nil {
		return e
	}
	run, err := f.svc.CancelRun(c.Request().Context(), id, cmp.Or(req.Reason, "run cancelled through the API"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, run)
}

func (f *flows) replay(c echo.Context) error {
	if e := onlyQuery(c); e != nil {
		return e
	}
	id, e := pathParam(c, "id", "id")
	if e != nil {
		return e
	}
	var req struct{}
	if err := Decode(c, f.s.limit(BodyLimitDefault), true, &req); err != nil {
		return err
	}
	run, err := f.svc.ReplayRun(c.Request().Context(), id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, run)
}

// cancelMany serves POST /v1/flows/cancel: cancel the running runs that
// match a filter.
func (f *flows) cancelMany(c echo.Context) error {
	q, req, e := f.bulkQuery(c, "cancel")
	if e != nil {
		return e
	}
	out, err := f.svc.CancelRuns(c.Request().Context(), q, cmp.Or(req.Reason, "run cancelled through the API"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}

// replayMany serves POST /v1/flows/replay: replay the failed (or
// cancelled) runs that match a filter.
func (f *flows) replayMany(c echo.Context) error {
	q, _, e := f.bulkQuery(c, "replay")
	if e != nil {
		return e
	}
	out, err := f.svc.ReplayRuns(c.Request().Context(), q)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}

// bulkQuery reads and checks the body of a bulk cancel or replay (op).
// The body is required: an empty object acts on every matching run of
// the default namespace, and that should be asked for.
func (f *flows) bulkQuery(c echo.Context, op string) (RunListQuery, *wire.BulkRuns, *Error) {
	if e := onlyQuery(c); e != nil {
		return RunListQuery{}, nil, e
	}
	// wire.BulkRuns, with the limit's absence told from a 0. Decode
	// refuses null as it refuses an empty body.
	var body struct {
		Namespace string `json:"namespace"`
		Flow      string `json:"flow"`
		State     string `json:"state"`
		Reason    string `json:"reason"`
		Limit     *int   `json:"limit"`
		Cursor    string `json:"cursor"`
	}
	if err := Decode(c, f.s.limit(BodyLimitDefault), false, &body); err != nil {
		return RunListQuery{}, nil, asError(err)
	}
	req := wire.BulkRuns{Namespace: body.Namespace, Flow: body.Flow, State: body.State, Reason: body.Reason, Cursor: body.Cursor,
		Limit: BulkLimitDef}
	if body.Limit != nil {
		req.Limit = *body.Limit
	}
	if req.Namespace != "" {
		if e := checkName("namespace", req.Namespace); e != nil {
			return RunListQuery{}, nil, e
		}
	}
	q := RunListQuery{Namespace: req.Namespace, Flow: req.Flow, State: req.State, Cursor: req.Cursor, Limit: req.Limit}
	if q.Limit < 1 || q.Limit > BulkLimitMax {
		return q, nil, invalid("limit", "%d is outside 1..%d", req.Limit, BulkLimitMax)
	}
	switch op {
	case "cancel":
		if q.State != "" && q.State != wire.RunRunning {
			return q, nil, invalid("state", "%q: a cancel acts on running runs only", q.State)
		}
		q.State = wire.RunRunning
		if e := checkReason("reason", req.Reason); e != nil {
			return q, nil, e
		}
	default:
		q.State = cmp.Or(q.State, wire.RunFailed)
		if q.State != wire.RunFailed && q.State != wire.RunCancelled {
			return q, nil, invalid("state", "%q: a replay acts on failed or cancelled runs", q.State)
		}
		if req.Reason != "" {
			return q, nil, invalid("reason", "a replay takes none")
		}
	}
	return q, &req, nil
}

// onlyQuery rejects a query string that does not parse (a bad escape, a
// ';': Go would drop those parameters silently), parameters other than
// allowed, and any given more than once (which one would count is
// anyone's guess). The parameters are looked at in name order, unknown
// ones first, so one request always gets one answer.
func onlyQuery(c echo.Context, allowed ...string) *Error {
	raw := c.Request().URL.RawQuery
	if raw == "" {
		return nil
	}
	params, err := url.ParseQuery(raw)
	if err != nil {
		return Errorf(http.StatusBadRequest, wire.CodeValidation, "the query string does not parse: %v", err)
	}
	names := slices.Sorted(maps.Keys(params))
	for _, k := range names {
		if !slices.Contains(allowed, k) {
			e := Errorf(http.StatusBadRequest, wire.CodeUnknownField, "unknown query parameter %q", k)
			e.Details = map[string]any{"field": k}
			return e
		}
	}
	for _, k := range names {
		if n := len(params[k]); n > 1 {
			return invalid(k, "is given %d times; give it once", n)
		}
	}
	return nil
}
