package server

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flowfabric/ff/compiler/plan"
	"github.com/flowfabric/ff/runtime/api"
	"github.com/flowfabric/ff/runtime/scheduler"
	"github.com/flowfabric/ff/runtime/store"
	"github.com/flowfabric/ff/runtime/wire"
)

// RunPollDefault is how often a waiting result request re-reads its run
// when no end notice arrived: the safety net for a lost pub/sub message.
const RunPollDefault = time.Second

// flowService implements api.FlowService over the store. Result requests
// that wait are woken by the run-end notices the store publishes.
type flowService struct {
	st     *store.Store
	hints  *waitHints
	notice *runNotices
	poll   time.Duration // RunPollDefault when 0
	// bulkMembers bounds the members of one bulk request's runs
	// (BulkRunMembersDefault when 0).
	bulkMembers int
}

func (f *flowService) StageFlow(ctx context.Context, req api.FlowRequest) (*wire.FlowRun, bool, error) {
	sr := store.StageRequest{Flow: req.Flow, Shared: req.Shared, Namespace: req.Namespace, Input: req.Input,
		IdempotencyKey: req.IdempotencyKey, IdempotencyTTL: req.IdempotencyTTL}
	// A wait watches for the run's end before the run is written, so it
	// cannot miss the end and needs no first read of the run.
	var watch *runWatch
	var watched string
	release := func() {}
	if req.Wait > 0 {
		sr.Staging = func(id store.RunID) {
			watched = string(id)
			watch, release = f.notice.watch(watched)
		}
	}
	defer func() { release() }()
	run, created, err := f.st.StageFlow(ctx, sr)
	if err != nil {
		// The store names a plan's parts "flow.…"; the API's body has the
		// plan under "plan" (a template's too, for the same paths).
		if ve := (*store.ValidationError)(nil); errors.As(err, &ve) && strings.HasPrefix(ve.Field, "flow.") {
			err = &store.ValidationError{Field: "plan." + strings.TrimPrefix(ve.Field, "flow."), Msg: ve.Msg, Err: ve.Err}
		}
		return nil, false, mapError(err)
	}
	if req.Wait > 0 {
		var ended *wire.FlowRun
		if watch != nil && string(run.ID) == watched {
			ended, err = f.await(ctx, run.ID, watch, req.Wait, false)
		} else {
			ended, err = f.RunResult(ctx, string(run.ID), req.Wait) // an earlier run (idempotency key)
		}
		if err == nil && ended != nil && ended.State != wire.RunRunning {
			return ended, created, nil
		}
	}
	// The staged run has every member: its answer has the first page, as
	// GET /v1/flows/{id} answers.
	w := toFlowRun(run.FirstPage(0), true)
	return &w, created, nil
}

func parseRunID(id string) (store.RunID, error) {
	if _, err := store.ParseExecutionID(id); err != nil {
		return "", api.Errorf(http.StatusNotFound, wire.CodeNotFound, "no such run %q", id)
	}
	return store.RunID(id), nil
}

func (f *flowService) GetRun(ctx context.Context, id string, page api.ExecsPage) (*wire.FlowRun, error) {
	rid, err := parseRunID(id)
	if err != nil {
		return nil, err
	}
	run, err := f.st.GetRunPage(ctx, rid, page.Cursor, page.Limit)
	if err != nil {
		return nil, mapIDError(err, "run", id)
	}
	w := toFlowRun(run, true)
	w.Input = rawJSON(run.Input)
	hints := f.hints.namespace(ctx, run.Namespace) // the registry is read for the first waiting member
	for i, n := range run.Nodes {
		// toFlowRun keeps the order of run.Nodes.
		if n.State.Public == store.StateWaiting && w.Execs[i].Blocked == "" {
			w.Execs[i].Blocked = hints.hint(n.Lane, n.Kind, n.RequiredCapabilities)
		}
	}
	return &w, nil
}

func (f *flowService) RunResult(ctx context.Context, id string, wait time.Duration) (*wire.FlowRun, error) {
	rid, err := parseRunID(id)
	if err != nil {
		return nil, err
	}
	if wait <= 0 {
		return orNotTerminal(f.ended(ctx, rid, true))
	}
	// Watch first, then read: a run that ends after the read is noticed.
	watch, release := f.notice.watch(string(rid))
	defer release()
	w, err := f.await(ctx, rid, watch, wait, true)
	if w == nil && err == nil {
		return orNotTerminal(nil, nil)
	}
	return w, err
}

// await waits up to wait for run rid to end, watched by watch (registered
// before the run could have ended unseen); with check it reads the run
// first. It returns the ended run, or nil when it still runs.
func (f *flowService) await(ctx context.Context, rid store.RunID, watch *runWatch, wait time.Duration, check bool) (*wire.FlowRun, error) {
	if check {
		if w, err := f.ended(ctx, rid, true); w != nil || err != nil {
			return w, err
		}
	}
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	poll := time.NewTicker(cmp.Or(f.poll, RunPollDefault))
	defer poll.Stop()
	for {
		cheap := true
		select {
		case <-ctx.Done():
			return nil, mapError(ctx.Err())
		case <-deadline.C:
			return f.ended(ctx, rid, true)
		case <-f.notice.closing():
			return f.ended(ctx, rid, true)
		case <-watch.ch:
			// The run ended (or, after a resubscription, may have).
			if run := watch.run.Load(); run != nil {
				w := toFlowRun(run, false)
				return &w, nil
			}
			cheap = false
		case <-poll.C:
		}
		if w, err := f.ended(ctx, rid, cheap); w != nil || err != nil {
			return w, err
		}
	}
}

// ended reads run rid when it has ended, else returns nil. With cheap it
// checks the state first (one HGET) and reads the run's outcome (its
// record, result and failures: store.GetRunOutcome) only once it has
// ended; a run-end notice skips the check.
func (f *flowService) ended(ctx context.Context, rid store.RunID, cheap bool) (*wire.FlowRun, error) {
	if cheap {
		state, err := f.st.RunState(ctx, rid)
		if err != nil {
			return nil, mapIDError(err, "run", string(rid))
		}
		if state == store.RunRunning {
			return nil, nil
		}
	}
	run, err := f.st.GetRunOutcome(ctx, rid)
	if err != nil {
		return nil, mapIDError(err, "run", string(rid))
	}
	if run.State == store.RunRunning {
		return nil, nil
	}
	w := toFlowRun(run, false)
	return &w, nil
}

func orNotTerminal(w *wire.FlowRun, err error) (*wire.FlowRun, error) {
	if err != nil || w != nil {
		return w, err
	}
	e := api.Errorf(http.StatusConflict, wire.CodeNotTerminal, "the run has not ended yet")
	e.Details = map[string]any{"state": wire.RunRunning}
	return nil, e
}

func (f *flowService) CancelRun(ctx context.Context, id, reason string) (*wire.FlowRun, error) {
	rid, err := parseRunID(id)
	if err != nil {
		return nil, err
	}
	run, err := f.st.CancelRun(ctx, rid, reason)
	if err != nil {
		return nil, mapIDError(err, "run", id)
	}
	w := toFlowRun(run, true)
	return &w, nil
}

func (f *flowService) ReplayRun(ctx context.Context, id string) (*wire.FlowRun, error) {
	rid, err := parseRunID(id)
	if err != nil {
		return nil, err
	}
	run, err := f.st.ReplayRun(ctx, rid)
	if err != nil {
		return nil, mapIDError(err, "run", id)
	}
	w := toFlowRun(run, true)
	return &w, nil
}

func (f *flowService) ListRuns(ctx context.Context, q api.RunListQuery) (*wire.FlowRunList, error) {
	page, err := f.st.ListRuns(ctx, store.RunListRequest{
		Namespace: cmp.Or(q.Namespace, plan.DefaultNamespace), Flow: q.Flow, State: store.RunState(q.State),
		Cursor: q.Cursor, Limit: q.Limit,
	})
	if err != nil {
		return nil, mapError(err)
	}
	out := &wire.FlowRunList{Runs: make([]wire.FlowRun, 0, len(page.Runs)), NextCursor: page.Cursor}
	for _, r := range page.Runs {
		out.Runs = append(out.Runs, wire.FlowRun{
			ID: string(r.ID), Namespace: r.Namespace, Flow: r.Flow, State: string(r.State),
			Total: r.Total, Done: r.Done, Succeeded: r.Succeeded, Failed: r.Failed, Skipped: r.Skipped, Cancelled: r.Cancelled,
			CreatedAt: timePtr(r.CreatedAt), EndedAt: timePtr(r.EndedAt),
		})
	}
	return out, nil
}

// bulkPagesMax bounds the pages of the run index one bulk cancel or
// replay reads (each at most store.ListLimitMax runs and a bounded scan):
// a filter matching few runs of a large index answers with a cursor to go
// on from rather than reading the whole index in one request.
const bulkPagesMax = 20

// BulkRunMembersDefault bounds the members of the runs one bulk cancel or
// replay acts on (at least one run is, whatever its size): a cancel of
// 1,000 runs of 10,000 members would take minutes in one request (each
// run's steps are hundreds of milliseconds of Valkey); the answer's cursor
// goes on.
const BulkRunMembersDefault = 50_000

func (f *flowService) CancelRuns(ctx context.Context, q api.RunListQuery, reason string) (*wire.BulkRunsResult, error) {
	return f.bulk(ctx, q, func(ids []store.RunID) ([]bool, []error) { return f.st.CancelRuns(ctx, ids, reason) })
}

func (f *flowService) ReplayRuns(ctx context.Context, q api.RunListQuery) (*wire.BulkRunsResult, error) {
	return f.bulk(ctx, q, func(ids []store.RunID) ([]bool, []error) {
		errs := f.st.ReplayRuns(ctx, ids)
		done := make([]bool, len(ids))
		for i, err := range errs {
			done[i] = err == nil
		}
		return done, errs
	})
}

// bulk lists the runs that match q, newest first from q.Cursor, a page at
// a time, and applies act to each page, until q.Limit runs were listed,
// the index ends or bulkPagesMax pages were read. A run act did not
// change is refused with why; a failure of Valkey itself fails the whole
// request (what was done stands: cancelling and replaying again are
// harmless, the runs no longer match).
func (f *flowService) bulk(ctx context.Context, q api.RunListQuery, act func([]store.RunID) ([]bool, []error)) (*wire.BulkRunsResult, error) {
	out := &wire.BulkRunsResult{Runs: []string{}}
	cursor, listed, members := q.Cursor, 0, 0
	for range bulkPagesMax {
		page, err := f.st.ListRuns(ctx, store.RunListRequest{Namespace: cmp.Or(q.Namespace, plan.DefaultNamespace), Flow: q.Flow,
			State: store.RunState(q.State), Cursor: cursor, Limit: min(q.Limit-listed, store.ListLimitMax)})
		if err != nil {
			return nil, mapError(err)
		}
		ids := make([]store.RunID, 0, len(page.Runs))
		full := false // the members' bound was reached
		for i, r := range page.Runs {
			if listed+i > 0 && members+r.Total > cmp.Or(f.bulkMembers, BulkRunMembersDefault) {
				full = true
				break
			}
			members += r.Total
			ids = append(ids, r.ID)
		}
		if full && len(ids) == 0 {
			break // cursor: where this page started
		}
		if full {
			page.Cursor = page.CursorAfter(len(ids) - 1)
		}
		done, errs := act(ids)
		for i, id := range ids {
			switch {
			case errs[i] != nil:
				e := mapIDError(errs[i], "run", string(id))
				if e.Status >= 500 {
					return nil, e
				}
				out.Refused = append(out.Refused, wire.BulkRunRefusal{RunID: string(id), Error: *e.Body()})
			case done[i]:
				out.Runs = append(out.Runs, string(id))
			default:
				out.Refused = append(out.Refused, wire.BulkRunRefusal{RunID: string(id), Error: wire.ErrorBody{
					Code: wire.CodeConflict, Message: fmt.Sprintf("run %s had ended: nothing to cancel", id)}})
			}
		}
		listed += len(ids)
		cursor = page.Cursor
		if cursor == "" || listed >= q.Limit || full {
			break
		}
	}
	out.NextCursor = cursor
	return out, nil
}

// RunErrorFailuresMax is how many members that did not succeed a run's
// error names; Failures lists them all (a cancelled run of ten thousand
// members would otherwise carry an error of ten thousand parts). Members
// that ended the same way with the same error are named together, in one
// part ("a, b and 3 more cancelled: enough").
const RunErrorFailuresMax = 5

// toFlowRun converts a run; withExecs adds the members it holds (a page:
// its failures are the whole run's) and the cursor of the next page.
func toFlowRun(r *store.Run, withExecs bool) wire.FlowRun {
	w := wire.FlowRun{
		ID: string(r.ID), Namespace: r.Namespace, Flow: r.Flow, State: string(r.State),
		Total: r.Total, Done: r.Done, Succeeded: r.Succeeded, Failed: r.Failed, Skipped: r.Skipped, Cancelled: r.Cancelled,
		ResultExec: r.ResultNode, Result: rawJSON(r.Result),
		CreatedAt: timePtr(r.CreatedAt), EndedAt: timePtr(r.EndedAt),
		Replays: r.Replays, ReplayedAt: timePtr(r.ReplayedAt), IdempotencyKey: r.IdempotencyKey,
	}
	if withExecs {
		w.ExecsNextCursor = r.NextCursor
	}
	if name, fire, manual, ok := scheduledBy(r.IdempotencyKey); ok {
		w.Schedule, w.ScheduledAt, w.ScheduleManual = name, &fire, manual
		if manual {
			w.ScheduledAt = w.CreatedAt
		}
	}
	if len(r.Failures) > 0 {
		w.Failures = make([]wire.ExecFailure, len(r.Failures))
		for i, x := range r.Failures {
			w.Failures[i] = wire.ExecFailure{Exec: x.Name, ExecutionID: string(x.ExecutionID), State: string(x.State), Error: x.Error}
		}
	}
	if withExecs && len(r.Nodes) > 0 {
		w.Execs = make([]wire.FlowExec, 0, len(r.Nodes))
		total := 0
		for _, n := range r.Nodes {
			total += len(n.Upstreams)
		}
		ups := make([]wire.FlowUpstream, 0, total) // the members' upstreams: one allocation
		for _, n := range r.Nodes {
			x := wire.FlowExec{
				Name: n.Name, ExecutionID: string(n.ExecutionID), Kind: n.Kind,
				State: string(n.State.Public), Outcome: string(n.State.Outcome), Attempts: n.Attempts,
				Error: n.Error, StartedAt: timePtr(n.StartedAt), EndedAt: timePtr(n.EndedAt),
			}
			if len(n.Upstreams) > 0 {
				start := len(ups)
				for _, u := range n.Upstreams {
					ups = append(ups, wire.FlowUpstream{Exec: u.Name, On: u.On})
				}
				x.Upstreams = ups[start:len(ups):len(ups)]
			}
			if n.State.Public == store.StateBlocked {
				x.Blocked = cmp.Or(n.State.BlockingDetail, string(n.State.BlockingReason))
			}
			w.Execs = append(w.Execs, x)
		}
	}
	switch r.State {
	case store.RunFailed, store.RunCancelled:
		var parts []string
		if r.ResultNode != "" && r.ResultState != store.StateCompleted {
			parts = append(parts, fmt.Sprintf("result exec %s ended %s", r.ResultNode, cmp.Or(string(r.ResultState), "without success")))
		}
		parts = append(parts, failureParts(w.Failures)...)
		w.Error = cmp.Or(strings.Join(parts, "; "), "run "+string(r.State))
	}
	return w
}

// failureParts names the members that did not succeed for a run's error:
// those that ended the same way with the same error in one part, in the
// order of their first, at most RunErrorFailuresMax names in all.
func failureParts(failures []wire.ExecFailure) []string {
	type group struct {
		state, err string
		names      []string
		n          int
	}
	var groups []*group
	index := map[[2]string]*group{}
	for _, x := range failures {
		k := [2]string{x.State, x.Error}
		g, ok := index[k]
		if !ok {
			g = &group{state: x.State, err: x.Error}
			index[k] = g
			groups = append(groups, g)
		}
		g.n++
		g.names = append(g.names, x.Exec)
	}
	var parts []string
	named, covered := 0, 0 // names written; members said (named or counted in their part)
	for _, g := range groups {
		if named == RunErrorFailuresMax {
			break
		}
		take := min(len(g.names), RunErrorFailuresMax-named)
		named += take
		covered += g.n
		who := strings.Join(g.names[:take], ", ")
		if rest := g.n - take; rest > 0 {
			who += fmt.Sprintf(" and %d more", rest)
		}
		msg := who + " " + g.state
		if g.err != "" {
			msg += ": " + g.err
		}
		parts = append(parts, msg)
	}
	if left := len(failures) - covered; left > 0 {
		parts = append(parts, fmt.Sprintf("and %d more (failures lists them)", left))
	}
	return parts
}

// runNotices fans the store's run-end notices ("<run id>:<state>" on
// store.RunsChannel) out to the requests waiting for those runs; Start and
// Stop are its subscription's.
type runNotices struct {
	*subscription
	log *slog.Logger

	mu      sync.Mutex
	waiters map[string]map[*runWatch]struct{}
}

func newRunNotices(subscribe scheduler.SubscribeFunc, log *slog.Logger) *runNotices {
	n := &runNotices{log: log, waiters: map[string]map[*runWatch]struct{}{}}
	// Each (re)subscription wakes every waiter: notices sent while
	// unsubscribed may be lost.
	n.subscription = newSubscription(log, "run notices", subscribe, n.wakeAll, n.deliver)
	return n
}

func (n *runNotices) closing() <-chan struct{} { return n.Closed() }

// runWatch is one request's watch of a run: ch is signalled when the run
// ends (or may have ended); run is the run as it ended, when a finish of
// this process brought its outcome.
type runWatch struct {
	ch  chan struct{}
	run atomic.Pointer[store.Run]
}

// watch returns a watch of run id, and the function that ends it.
func (n *runNotices) watch(id string) (*runWatch, func()) {
	w := &runWatch{ch: make(chan struct{}, 1)}
	n.mu.Lock()
	m := n.waiters[id]
	if m == nil {
		m = map[*runWatch]struct{}{}
		n.waiters[id] = m
	}
	m[w] = struct{}{}
	n.mu.Unlock()
	return w, func() {
		n.mu.Lock()
		delete(m, w)
		if len(m) == 0 && n.waiters[id] != nil && len(n.waiters[id]) == 0 {
			delete(n.waiters, id)
		}
		n.mu.Unlock()
	}
}

// deliver passes on a run-end notice of the store ("<run id>:<state>").
func (n *runNotices) deliver(msg string) {
	i := strings.LastIndexByte(msg, ':')
	if i < 0 {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	for w := range n.waiters[msg[:i]] {
		signal(w.ch)
	}
}

// ended passes on a run that a finish of this process ended, with its
// outcome: its watchers answer from it, without reading the run. The
// store's notice of the same end follows and finds them gone.
func (n *runNotices) ended(run *store.Run) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for w := range n.waiters[string(run.ID)] {
		w.run.Store(run)
		signal(w.ch)
	}
}

// wakeAll signals every waiter: after a (re)subscription, notices sent
// while unsubscribed may have been lost.
func (n *runNotices) wakeAll() {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, m := range n.waiters {
		for w := range m {
			signal(w.ch)
		}
	}
}

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}
