package client

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/flowfabric/ff/compiler/plan"
	"github.com/flowfabric/ff/runtime/internal/jsonscan"
	"github.com/flowfabric/ff/runtime/wire"
)

// StageFlow starts a run of flow with input, which is encoded as JSON. The
// server validates the plan and the input before writing anything.
// StageFlowJSON stages the same run from the plan's JSON text, at less
// cost.
func (c *Client) StageFlow(ctx context.Context, flow *plan.Flow, input any, opts ...StageOption) (*Run, error) {
	if flow == nil {
		return nil, errors.New("client: stage flow: nil plan")
	}
	o := stageOptions(opts)
	raw, err := wire.Marshal(input)
	if err != nil {
		return nil, fmt.Errorf("client: stage flow %q: encode input: %w", flow.Name, err)
	}
	req := wire.StageFlow{Plan: flow, Input: raw, Namespace: o.Namespace, IdempotencyKey: o.IdempotencyKey}
	var out wire.FlowRun
	if err := c.do(ctx, http.MethodPost, "/v1/flows", o.query(c), req, &out); err != nil {
		return nil, c.flowsError("stage flow "+flow.Name, err)
	}
	return c.newRun(&out, flow.Name), nil
}

// StageFlowJSON starts a run of the flow whose compiled plan is planJSON
// (the JSON of one flow of `ffc plan`, as generated code embeds it in its
// <Flow>PlanJSON constant), with input encoded as JSON. The plan is sent as
// it is, neither decoded, encoded nor checked on the way. The server
// validates the plan and the input before writing anything (text that is
// not JSON is refused with code invalid_json) and keeps the plans it
// validated by their text, so that staging the same plan repeatedly this
// way costs much less than with StageFlow, on both sides.
func (c *Client) StageFlowJSON(ctx context.Context, planJSON []byte, input any, opts ...StageOption) (*Run, error) {
	if len(bytes.TrimSpace(planJSON)) == 0 {
		return nil, errors.New("client: stage flow: empty plan")
	}
	name := planName(planJSON)
	o := stageOptions(opts)
	raw, err := wire.Marshal(input)
	if err != nil {
		return nil, fmt.Errorf("client: stage flow %q: encode input: %w", name, err)
	}
	// The body wire.StageFlow would encode to, with the plan as sent; the
	// plan first, where the server looks for it.
	b := make([]byte, 0, len(planJSON)+len(raw)+len(o.Namespace)+len(o.IdempotencyKey)+64)
	b = append(append(b, `{"plan":`...), planJSON...)
	b = append(append(b, `,"input":`...), raw...)
	for _, kv := range [][2]string{{"namespace", o.Namespace}, {"idempotency_key", o.IdempotencyKey}} {
		if kv[1] == "" {
			continue
		}
		v, err := json.Marshal(kv[1])
		if err != nil {
			return nil, fmt.Errorf("client: stage flow %q: encode %s: %w", name, kv[0], err)
		}
		b = append(append(b, `,"`+kv[0]+`":`...), v...)
	}
	b = append(b, '}')
	var out wire.FlowRun
	if err := c.do(ctx, http.MethodPost, "/v1/flows", o.query(c), encodedBody(b), &out); err != nil {
		return nil, c.flowsError("stage flow "+name, err)
	}
	return c.newRun(&out, name), nil
}

// encodedBody is a request body already encoded as JSON, which do sends as
// it is.
type encodedBody []byte

// planName returns the name of the flow whose plan is the JSON text
// planJSON, or "" when it has none: the server's answer names the flow
// anyway.
func planName(planJSON []byte) string {
	start, end, ok := jsonscan.Member(planJSON, "name")
	if !ok {
		return ""
	}
	var name string
	if json.Unmarshal(planJSON[start:end], &name) != nil {
		return ""
	}
	return name
}

// StageTemplate starts a run of the template (a flow the server was
// started with, `ffrun --flows DIR`) named name.
func (c *Client) StageTemplate(ctx context.Context, name string, input any, opts ...StageOption) (*Run, error) {
	o := stageOptions(opts)
	raw, err := wire.Marshal(input)
	if err != nil {
		return nil, fmt.Errorf("client: stage template %q: encode input: %w", name, err)
	}
	req := wire.StageTemplate{Input: raw, Namespace: o.Namespace, IdempotencyKey: o.IdempotencyKey}
	var out wire.FlowRun
	if err := c.do(ctx, http.MethodPost, "/v1/templates/"+url.PathEscape(name)+"/runs", o.query(c), req, &out); err != nil {
		return nil, c.flowsError("stage template "+name, err)
	}
	return c.newRun(&out, name), nil
}

func stageOptions(opts []StageOption) StageOptions {
	var o StageOptions
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// query returns the query of a staging request of c: wait_ms with
// WithWait, bounded by the http.Client's Timeout (and its transport's
// ResponseHeaderTimeout) as Claim's wait is.
func (o StageOptions) query(c *Client) url.Values {
	if o.Wait <= 0 {
		return nil
	}
	return url.Values{"wait_ms": {strconv.FormatInt(max(c.boundWait(o.Wait).Milliseconds(), 1), 10)}}
}

// newRun returns the handle on the run of a staging answer w; a run that
// had ended (a staging request that waited) is kept for Wait and Result.
func (c *Client) newRun(w *wire.FlowRun, flow string) *Run {
	r := &Run{ID: w.ID, Flow: cmp.Or(w.Flow, flow), Namespace: w.Namespace, Created: true, c: c}
	if w.Created != nil {
		r.Created = *w.Created
	}
	if w.State != "" && w.State != wire.RunRunning {
		r.ended.Store(w)
	}
	return r
}

// flowsError wraps ErrFlowsUnsupported around the answer of a server that
// has no flow routes (404 on the route itself, 405 or 501). A base URL
// that ends in /v1 is the likelier cause: its routes are /v1/v1/….
func (c *Client) flowsError(op string, err error) error {
	var ae *APIError
	if errors.As(err, &ae) && (ae.Status == http.StatusNotImplemented || ae.Status == http.StatusMethodNotAllowed ||
		ae.Code == wire.CodeUnknownRoute) {
		if strings.HasSuffix(c.base.Path, "/v1") {
			return fmt.Errorf("client: %s: %w (%v; the base URL %s ends in /v1: give the server's root, the client adds /v1 itself)",
				op, ErrFlowsUnsupported, err, c.base)
		}
		return fmt.Errorf("client: %s: %w (%v)", op, ErrFlowsUnsupported, err)
	}
	return &opError{op: op, err: err}
}

// opError is err as the failure of op, without repeating the "client: "
// the request's own error starts with.
type opError struct {
	op  string
	err error
}

func (e *opError) Error() string {
	return "client: " + e.op + ": " + strings.TrimPrefix(e.err.Error(), "client: ")
}

func (e *opError) Unwrap() error { return e.err }

// Run returns a handle on an existing run.
func (c *Client) Run(id string) *Run { return &Run{ID: id, c: c} }

// GetRun returns a run with the state of every member, in flow order. A
// run of more members than one answer holds (1,000) is read a page at a
// time (GetRunPage), following the cursor: the members are those of the
// pages, each a live view when it was read (a member may have changed
// since an earlier page was read), and the run's other fields are the
// last page's. GetRun checks that the pages hold the run's total of
// members, each once.
func (c *Client) GetRun(ctx context.Context, id string) (*wire.FlowRun, error) {
	run, next, err := c.GetRunPage(ctx, id, "", 0)
	if err != nil || next == "" {
		return run, err
	}
	execs := make([]wire.FlowExec, 0, max(run.Total, len(run.Execs)))
	execs = append(execs, run.Execs...)
	seen := make(map[string]bool, cap(execs))
	for _, x := range run.Execs {
		seen[x.Name] = true
	}
	for next != "" {
		cursor := next
		if run, next, err = c.GetRunPage(ctx, id, cursor, 0); err != nil {
			return nil, err
		}
		if len(run.Execs) == 0 || next == cursor {
			return nil, fmt.Errorf("client: get run %s: the page at cursor %q holds %d members and the cursor %q", id, cursor, len(run.Execs), next)
		}
		for _, x := range run.Execs {
			if seen[x.Name] {
				return nil, fmt.Errorf("client: get run %s: member %q is on two pages", id, x.Name)
			}
			seen[x.Name] = true
		}
		if execs = append(execs, run.Execs...); len(execs) > run.Total {
			return nil, fmt.Errorf("client: get run %s: the pages hold more than the run's %d members", id, run.Total)
		}
	}
	if len(execs) != run.Total {
		return nil, fmt.Errorf("client: get run %s: the pages hold %d of the run's %d members", id, len(execs), run.Total)
	}
	run.Execs, run.ExecsNextCursor = execs, ""
	return run, nil
}

// GetRunPage returns a run with one page of its members: at most limit
// (1..1000; 0 = the server's default page, 1,000) in flow order from
// cursor ("" = the first member), and the cursor of the next page ("" once
// the page ends with the last member). The rest of the run (counts,
// state, error, failures, result, input) is the whole run's on every page.
// A cursor stays good for as long as the run exists; pages are a live view
// of the members' states.
func (c *Client) GetRunPage(ctx context.Context, id, cursor string, limit int) (*wire.FlowRun, string, error) {
	q := url.Values{}
	if cursor != "" {
		q.Set("execs_cursor", cursor)
	}
	if limit != 0 {
		q.Set("execs_limit", strconv.Itoa(limit))
	}
	var out wire.FlowRun
	if err := c.do(ctx, http.MethodGet, "/v1/flows/"+url.PathEscape(id), q, nil, &out); err != nil {
		return nil, "", c.flowsError("get run "+id, err)
	}
	return &out, out.ExecsNextCursor, nil
}

// RunListOptions filter ListRuns. Empty fields do not filter.
type RunListOptions struct {
	Namespace string // default: the server's default namespace
	Flow      string
	State     string // running, succeeded, failed or cancelled
	Cursor    string // NextCursor of the previous page
	Limit     int    // page size, at most 500; 0 = the server's default (50)
}

// ListRuns returns one page of runs, newest first, without their execs. A
// page may hold fewer runs than the limit, even none, and still have a
// NextCursor: the server applies the filters as it reads its index, a
// bounded number of entries per request.
func (c *Client) ListRuns(ctx context.Context, o RunListOptions) (*wire.FlowRunList, error) {
	q := url.Values{}
	for k, v := range map[string]string{"namespace": o.Namespace, "flow": o.Flow, "state": o.State, "cursor": o.Cursor} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if o.Limit > 0 {
		q.Set("limit", fmt.Sprint(o.Limit))
	}
	var out wire.FlowRunList
	if err := c.do(ctx, http.MethodGet, "/v1/flows", q, nil, &out); err != nil {
		return nil, c.flowsError("list runs", err)
	}
	return &out, nil
}

// RunResult asks once for the outcome of a run, letting the server wait up
// to wait (at most a minute; bounded by the http.Client's Timeout and its
// transport's ResponseHeaderTimeout as Claim's wait is) for it to end. A
// run still running afterwards is an *APIError with code
// wire.CodeNotTerminal.
func (c *Client) RunResult(ctx context.Context, id string, wait time.Duration) (*wire.FlowRun, error) {
	wait = c.boundWait(wait)
	var q url.Values
	if wait > 0 {
		q = url.Values{"wait_ms": {fmt.Sprint(wait.Milliseconds())}}
	}
	var out wire.FlowRun
	if err := c.do(ctx, http.MethodGet, "/v1/flows/"+url.PathEscape(id)+"/result", q, nil, &out); err != nil {
		return nil, c.flowsError("run "+id+" result", err)
	}
	return &out, nil
}

// CancelRun cancels every member of a run that has not ended; running
// members lose their lease, so their handlers see their context cancelled.
// Cancelling an ended run changes nothing.
func (c *Client) CancelRun(ctx context.Context, id, reason string) (*wire.FlowRun, error) {
	var body any
	if reason != "" {
		body = wire.Cancel{Reason: reason}
	}
	var out wire.FlowRun
	if err := c.do(ctx, http.MethodPost, "/v1/flows/"+url.PathEscape(id)+"/cancel", nil, body, &out); err != nil {
		return nil, c.flowsError("cancel run "+id, err)
	}
	return &out, nil
}

// ReplayRun runs a failed or cancelled run again from its failed, cancelled
// and skipped members; members that succeeded keep their results.
func (c *Client) ReplayRun(ctx context.Context, id string) (*wire.FlowRun, error) {
	var out wire.FlowRun
	if err := c.do(ctx, http.MethodPost, "/v1/flows/"+url.PathEscape(id)+"/replay", nil, nil, &out); err != nil {
		return nil, c.flowsError("replay run "+id, err)
	}
	return &out, nil
}

// CancelRuns cancels the running runs that match req's filters (POST
// /v1/flows/cancel), newest first, at most req.Limit of them; each run's
// cancel is atomic, the whole is not. When the answer has a NextCursor,
// matching runs may be left: send req again with it as Cursor.
func (c *Client) CancelRuns(ctx context.Context, req wire.BulkRuns) (*wire.BulkRunsResult, error) {
	var out wire.BulkRunsResult
	if err := c.do(ctx, http.MethodPost, "/v1/flows/cancel", nil, req, &out); err != nil {
		return nil, c.flowsError("cancel runs", err)
	}
	return &out, nil
}

// ReplayRuns replays the failed runs (req.State "cancelled": the
// cancelled ones) that match req's filters (POST /v1/flows/replay), as
// CancelRuns cancels.
func (c *Client) ReplayRuns(ctx context.Context, req wire.BulkRuns) (*wire.BulkRunsResult, error) {
	var out wire.BulkRunsResult
	if err := c.do(ctx, http.MethodPost, "/v1/flows/replay", nil, req, &out); err != nil {
		return nil, c.flowsError("replay runs", err)
	}
	return &out, nil
}

// Templates lists the flows the server serves by name.
func (c *Client) Templates(ctx context.Context) ([]wire.Template, error) {
	var out wire.TemplateList
	if err := c.do(ctx, http.MethodGet, "/v1/templates", nil, nil, &out); err != nil {
		return nil, c.flowsError("list templates", err)
	}
	return out.Templates, nil
}

// Template returns one template with its whole plan.
func (c *Client) Template(ctx context.Context, name string) (*wire.Template, error) {
	var out wire.Template
	if err := c.do(ctx, http.MethodGet, "/v1/templates/"+url.PathEscape(name), nil, nil, &out); err != nil {
		return nil, c.flowsError("template "+name, err)
	}
	return &out, nil
}

// Run is a handle on one staged run of a flow.
type Run struct {
	ID        string // run id
	Flow      string // flow name
	Namespace string
	// Created is false when staging matched an earlier run through its
	// idempotency key.
	Created bool

	c *Client
	// ended is the run as it ended, when staging waited for it (WithWait);
	// a replay clears it.
	ended atomic.Pointer[wire.FlowRun]
}

// RunError is the error of a run that ended without success.
type RunError struct {
	RunID    string
	State    string // failed or cancelled
	Message  string
	Failures []wire.ExecFailure // members that failed, expired or were cancelled
}

func (e *RunError) Error() string {
	return fmt.Sprintf("run %s %s: %s", e.RunID, e.State, e.Message)
}

// FailedExecs returns the names of the failed, expired or cancelled members.
func (e *RunError) FailedExecs() []string {
	out := make([]string, len(e.Failures))
	for i, f := range e.Failures {
		out[i] = f.Exec
	}
	return out
}

// runResultWait is how long one GET of a run's result may wait on the
// server before answering "not terminal yet".
const runResultWait = 30 * time.Second

// WaitOutageMax is how long Run.Wait keeps asking through failures that
// pass (Passing: ffrun restarting, the connection refused or cut; ffrun or
// a proxy answering a 5xx while Valkey is away; 429 rate_limited while the
// client's address is limited, 408) before it returns the last one:
// longer than a rolling restart, short enough that a server gone for good
// is reported.
const WaitOutageMax = 2 * time.Minute

// Wait waits until the run ends and returns it (without members). It
// rides out an ffrun restart, a Valkey outage or a rate limit of up to
// WaitOutageMax, asking again with a backoff (100 ms doubling to 5 s, or
// the answer's APIError.RetryAfter when longer); other errors (the run
// unknown, a refused token) are returned at once. Each request asks the
// server to wait up to 30 s, less with an http.Client whose Timeout, or
// transport's ResponseHeaderTimeout, is shorter (see Claim).
func (r *Run) Wait(ctx context.Context) (*wire.FlowRun, error) {
	if r.c == nil {
		return nil, errors.New("client: run: run has no client (construct runs with StageFlow or Client.Run)")
	}
	if out := r.ended.Load(); out != nil {
		return out, nil
	}
	var down Outage
	wait := r.c.boundWait(runResultWait)
	for {
		start := time.Now()
		out, err := r.c.RunResult(ctx, r.ID, wait)
		switch {
		case err == nil && out.State != wire.RunRunning:
			return out, nil
		case err == nil || IsCode(err, wire.CodeNotTerminal):
			down.OK()
			// A server that did not wait: do not spin.
			if time.Since(start) < wait/2 {
				t := time.NewTimer(100 * time.Millisecond)
				select {
				case <-ctx.Done():
					t.Stop()
					return nil, fmt.Errorf("client: run %s result: %w", r.ID, ctx.Err())
				case <-t.C:
				}
			}
			continue
		case ctx.Err() != nil:
			return nil, fmt.Errorf("client: run %s result: %w", r.ID, ctx.Err())
		}
		if err := down.Failed(ctx, err, time.Time{}); err != nil {
			if ctx.Err() != nil {
				return nil, fmt.Errorf("client: run %s result: %w", r.ID, ctx.Err())
			}
			if Passing(err) {
				return nil, fmt.Errorf("client: run %s result: %w", r.ID, err) // still failing after WaitOutageMax
			}
			return nil, err
		}
	}
}

// Passing reports whether err, the failure of a request, may pass by
// itself, so that the request is worth sending again: no answer at all (a
// transport error: ffrun restarting), a 5xx (500: a store error ffrun
// has no other code for; 502, 503, 504: ffrun without Valkey for a while,
// a proxy without ffrun), 429 (the client's address limited for a moment:
// a client behind the same proxy guessed tokens) or 408 (a proxy that
// timed the request out). 501 and 505 do not pass: the server does not do
// that at all. It is the one rule of every client that asks again: Run.Wait
// and ffrun's commands that wait, for up to WaitOutageMax, and the worker
// SDK, for its claims, reports, renewals and hand-backs.
func Passing(err error) bool {
	var ue *url.Error
	var ne net.Error
	if errors.As(err, &ue) || errors.As(err, &ne) || errors.Is(err, io.ErrUnexpectedEOF) {
		return true
	}
	var ae *APIError
	if !errors.As(err, &ae) {
		return false // an answer that does not decode will not decode next time
	}
	switch ae.Status {
	case http.StatusTooManyRequests, http.StatusRequestTimeout:
		return true
	case http.StatusNotImplemented, http.StatusHTTPVersionNotSupported:
		return false
	}
	return ae.Status >= 500 && ae.Status < 600
}

// Result waits until the run ends and returns the JSON output of the
// flow's result exec. A run that did not succeed yields a *RunError naming
// the members that failed and why.
func (r *Run) Result(ctx context.Context) (json.RawMessage, error) {
	out, err := r.Wait(ctx)
	if err != nil {
		return nil, err
	}
	if out.State != wire.RunSucceeded {
		return nil, &RunError{RunID: r.ID, State: out.State, Message: cmp.Or(out.Error, "run "+out.State), Failures: out.Failures}
	}
	return out.Result, nil
}

// Get returns the run with the state of every member (see Client.GetRun).
func (r *Run) Get(ctx context.Context) (*wire.FlowRun, error) { return r.c.GetRun(ctx, r.ID) }

// Cancel cancels the run (see Client.CancelRun).
func (r *Run) Cancel(ctx context.Context, reason string) (*wire.FlowRun, error) {
	return r.c.CancelRun(ctx, r.ID, reason)
}

// Replay replays the run (see Client.ReplayRun). The run runs again, so
// Wait and Result ask the server from then on.
func (r *Run) Replay(ctx context.Context) (*wire.FlowRun, error) {
	r.ended.Store(nil)
	return r.c.ReplayRun(ctx, r.ID)
}

// String returns "flow run <id>".
func (r *Run) String() string { return strings.TrimSpace(r.Flow + " run " + r.ID) }
