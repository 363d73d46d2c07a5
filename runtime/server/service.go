package server

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/valkey-io/valkey-go"

	"github.com/flowfabric/ff/compiler/plan"
	"github.com/flowfabric/ff/runtime/api"
	"github.com/flowfabric/ff/runtime/internal/outage"
	"github.com/flowfabric/ff/runtime/scheduler"
	"github.com/flowfabric/ff/runtime/store"
	"github.com/flowfabric/ff/runtime/wire"
)

// service implements api.Service over the store and the scheduler: it maps
// wire bodies to store requests and store errors to stable API codes.
type service struct {
	hints *waitHints
	log   *slog.Logger
	vk    valkey.Client
	st    *store.Store
	sched *scheduler.Scheduler
	// onClaim sees every valid claim first (the worker registry:
	// admission.go).
	onClaim func(context.Context, wire.ClaimRequest)
	// watch keeps the lease watches waiting (WatchLeases).
	watch *leaseWatch
	// items is the outage of batch items answered 503 unavailable
	// (logBatch).
	items outage.Log
}

func (s *service) Ready(ctx context.Context) error {
	if err := s.vk.Do(ctx, s.vk.B().Ping().Build()).Error(); err != nil {
		return err
	}
	return s.st.Ready(ctx)
}

func (s *service) Create(ctx context.Context, reqs []wire.CreateExecution) ([]api.Created, error) {
	sr := make([]store.CreateRequest, len(reqs))
	for i, r := range reqs {
		sr[i] = createRequest(r)
	}
	res, err := s.st.CreateMany(ctx, sr)
	if err != nil {
		return nil, mapError(err)
	}
	out := make([]api.Created, len(reqs))
	failed := batchLog{op: "create"}
	for i, r := range res {
		if r.Err != nil {
			out[i].Error = itemError(&failed, r.Err)
			continue
		}
		w := toExecution(r.Execution)
		out[i] = api.Created{Execution: &w, Created: r.Created}
	}
	s.logBatch(ctx, &failed, len(res))
	return out, nil
}

func createRequest(r wire.CreateExecution) store.CreateRequest {
	cr := store.CreateRequest{
		Namespace:            r.Namespace,
		Lane:                 r.Lane,
		Kind:                 r.Kind,
		Tags:                 r.Tags,
		Payload:              []byte(r.Input),
		RequiredCapabilities: r.Requires,
		AttemptTimeout:       time.Duration(r.TimeoutMs) * time.Millisecond,
		Deadline:             time.Duration(r.DeadlineMs) * time.Millisecond,
		Delay:                time.Duration(r.DelayMs) * time.Millisecond,
		IdempotencyKey:       r.IdempotencyKey,
	}
	if r.Priority != nil {
		cr.Priority = *r.Priority
	}
	if r.Retry != nil {
		cr.Retry = store.RetryPolicyFromPlan(*r.Retry)
	}
	return cr
}

func parseID(id string) (store.ExecutionID, error) {
	eid, err := store.ParseExecutionID(id)
	if err != nil {
		return "", api.Errorf(http.StatusNotFound, wire.CodeNotFound, "no such execution %q", id)
	}
	return eid, nil
}

func (s *service) Get(ctx context.Context, id string) (*wire.Execution, error) {
	eid, err := parseID(id)
	if err != nil {
		return nil, err
	}
	ex, err := s.st.GetExecution(ctx, eid)
	if err != nil {
		return nil, mapIDError(err, "execution", id)
	}
	if err := s.receivedInput(ctx, ex); err != nil {
		return nil, err
	}
	w := toExecution(ex)
	if ex.State.Public == store.StateWaiting && w.BlockingDetail == "" {
		w.BlockingDetail = s.hints.hint(ctx, ex.Namespace, ex.Lane, ex.Kind, ex.RequiredCapabilities)
	}
	return &w, nil
}

// receivedInput gives ex, a flow member fed by an upstream (it keeps no
// input of its own), what it receives as its input: the upstream's
// output, once there is one (store.ReceivedInput).
func (s *service) receivedInput(ctx context.Context, ex *store.Execution) error {
	if len(ex.Payload) != 0 {
		return nil
	}
	in, err := s.st.ReceivedInput(ctx, ex)
	if err != nil {
		return mapError(err)
	}
	ex.Payload = in
	return nil
}

func (s *service) Result(ctx context.Context, id string) (*wire.ExecutionResult, error) {
	eid, err := parseID(id)
	if err != nil {
		return nil, err
	}
	r, err := s.st.Result(ctx, eid)
	if err != nil {
		return nil, mapIDError(err, "execution", id)
	}
	return &wire.ExecutionResult{ID: id, State: string(r.State), Result: rawJSON(r.Result), Error: r.Error}, nil
}

func (s *service) Namespaces(ctx context.Context, q api.NamespaceQuery) (*wire.NamespaceList, error) {
	nss, err := s.st.NamespaceSummaries(ctx, store.NamespaceOptions{Namespace: q.Namespace, Lanes: q.Lanes})
	if err != nil {
		return nil, mapError(err)
	}
	out := &wire.NamespaceList{Namespaces: make([]wire.Namespace, len(nss))}
	for i, ns := range nss {
		w := wire.Namespace{Name: ns.Name, Runs: ns.Runs, Workers: ns.Workers}
		for _, l := range ns.Lanes {
			w.Lanes = append(w.Lanes, wire.LaneCounts{Lane: l.Lane, Eligible: l.Eligible, Delayed: l.Delayed, Pending: l.Pending,
				Blocked: l.BlockedRoute, BlockedBudget: l.BlockedBudget, BlockedQuota: l.BlockedQuota, Terminal: l.Terminal})
		}
		out.Namespaces[i] = w
	}
	return out, nil
}

func (s *service) List(ctx context.Context, q api.ListQuery) (*wire.ExecutionList, error) {
	req := store.ListRequest{Namespace: cmp.Or(q.Namespace, plan.DefaultNamespace), Lane: q.Lane, Limit: q.Limit, Cursor: q.Cursor}
	if q.State != "" {
		st, err := store.ParsePublicState(q.State)
		if err != nil {
			return nil, mapError(err)
		}
		req.State = st
	}
	page, err := s.st.ListExecutions(ctx, req)
	if err != nil {
		return nil, mapError(err)
	}
	out := &wire.ExecutionList{Executions: make([]wire.Execution, 0, len(page.Executions)), NextCursor: page.Cursor}
	for _, ex := range page.Executions {
		out.Executions = append(out.Executions, toExecution(ex))
	}
	return out, nil
}

func (s *service) Cancel(ctx context.Context, id, reason string) (*wire.Execution, error) {
	return s.mutate(ctx, id, func(eid store.ExecutionID) (*store.Execution, error) { return s.st.Cancel(ctx, eid, reason) })
}

func (s *service) SetPriority(ctx context.Context, id string, priority int) (*wire.Execution, error) {
	return s.mutate(ctx, id, func(eid store.ExecutionID) (*store.Execution, error) {
		return s.st.ChangePriority(ctx, eid, priority)
	})
}

func (s *service) RevokeLease(ctx context.Context, id, reason string, lease *wire.Lease) (*wire.Execution, error) {
	return s.mutate(ctx, id, func(eid store.ExecutionID) (*store.Execution, error) {
		if lease != nil {
			return s.st.RevokeLeaseOf(ctx, storeLease(*lease), reason)
		}
		return s.st.RevokeLease(ctx, eid, reason)
	})
}

// mutate runs f on the execution id names and returns the execution f
// left, with its input as Get gives it (receivedInput). The change is
// written when the input is read, in a call of its own: a failed read
// does not fail the answer (an error would invite a retry of a change
// already applied), which then leaves the input out and says so
// (InputUnread).
func (s *service) mutate(ctx context.Context, id string, f func(store.ExecutionID) (*store.Execution, error)) (*wire.Execution, error) {
	eid, err := parseID(id)
	if err != nil {
		return nil, err
	}
	ex, err := f(eid)
	if err != nil {
		return nil, mapIDError(err, "execution", id)
	}
	unread := false
	if err := s.receivedInput(ctx, ex); err != nil {
		s.log.WarnContext(ctx, "the input of a flow member could not be read for the answer of its change (written)",
			slog.String("execution", id), slog.Any("error", err))
		unread = true
	}
	w := toExecution(ex)
	w.InputUnread = unread
	return &w, nil
}

func (s *service) Claim(ctx context.Context, req wire.ClaimRequest) ([]wire.Task, error) {
	s.onClaim(ctx, req)
	who := store.WorkerIdentity{
		WorkerID:     req.WorkerID,
		InstanceID:   req.InstanceID,
		Namespace:    req.Namespace,
		Capabilities: req.Capabilities,
	}
	if req.Resume {
		// The answer to the instance's last claim was lost: what it was
		// granted comes first (no new work in this answer when some did).
		var lost []store.Grant
		want := max(req.Max, 1)
		for p := range s.st.FlowPartitions() {
			g, err := s.st.ClaimLost(ctx, p, who, want-len(lost))
			if err != nil {
				return nil, mapError(err)
			}
			if lost = append(lost, g...); len(lost) >= want {
				break
			}
		}
		// Not revoked when the worker hung up meanwhile (as new grants
		// are): it may be running some of them, and its next resume asks
		// again for those it does not.
		if ctx.Err() != nil {
			return nil, mapError(ctx.Err())
		}
		if len(lost) > 0 {
			return toTasks(lost), nil
		}
	}
	grants, err := s.sched.Claim(ctx, scheduler.Request{
		Worker:   who,
		Lanes:    req.Lanes,
		Max:      req.Max,
		LeaseTTL: time.Duration(req.LeaseMs) * time.Millisecond,
		Wait:     time.Duration(req.WaitMs) * time.Millisecond,
		Kinds:    req.Kinds,
	})
	if err != nil {
		return nil, mapError(err)
	}
	if s.undelivered(ctx, grants) {
		return nil, mapError(ctx.Err())
	}
	return toTasks(grants), nil
}

// undelivered reports whether the request of ctx ended (the worker hung
// up or gave up) while grants were made for it: its answer cannot reach
// the worker, so the grants are revoked at once (not charged, eligible
// again) instead of waiting for their leases to expire.
func (s *service) undelivered(ctx context.Context, grants []store.Grant) bool {
	if ctx.Err() == nil || len(grants) == 0 {
		return false
	}
	leases := make([]store.Lease, len(grants))
	for i, g := range grants {
		leases[i] = g.Lease
	}
	n, err := s.st.RevokeGrants(context.WithoutCancel(ctx), leases, "revoked: the worker's request ended before the grant reached it")
	if err != nil {
		s.log.WarnContext(ctx, "revoke undelivered grants (their leases will expire)", slog.Int("grants", len(grants)), slog.Any("error", err))
	} else {
		s.log.InfoContext(ctx, "revoked undelivered grants", slog.Int("grants", len(grants)), slog.Int("revoked", n))
	}
	return true
}

func (s *service) Renew(ctx context.Context, leases []wire.Lease, ttl time.Duration) ([]wire.LeaseResult, error) {
	sl := make([]store.Lease, len(leases))
	for i, l := range leases {
		sl[i] = storeLease(l)
	}
	res, err := s.st.Renew(ctx, sl, ttl)
	if err != nil {
		return nil, mapError(err)
	}
	out := make([]wire.LeaseResult, len(leases))
	failed := batchLog{op: "renew"}
	for i, r := range res {
		out[i] = wire.LeaseResult{ExecutionID: leases[i].ExecutionID, OK: r.Err == nil}
		if r.Err != nil {
			out[i].Error = leaseItemError(&failed, leases[i].ExecutionID, i, r.Err)
			continue
		}
		exp := r.ExpiresAt
		out[i].LeaseExpiresAt = &exp
	}
	s.logBatch(ctx, &failed, len(res))
	return out, nil
}

func (s *service) Complete(ctx context.Context, req wire.CompleteRequest) ([]wire.LeaseResult, []wire.Task, error) {
	fs := make([]store.Finish, len(req.Completions))
	for i, it := range req.Completions {
		fs[i] = store.Finish{Lease: storeLease(it.Lease), Result: []byte(it.Output)}
	}
	var h *store.Handoff
	if x := req.Handoff; x != nil {
		h = &store.Handoff{
			Worker: store.WorkerIdentity{
				WorkerID:     req.WorkerID,
				InstanceID:   x.InstanceID,
				Namespace:    x.Namespace,
				Capabilities: x.Capabilities,
			},
			Lanes:    x.Lanes,
			Max:      x.Max,
			LeaseTTL: time.Duration(x.LeaseMs) * time.Millisecond,
			Kinds:    x.Kinds,
		}
	}
	res, grants, err := s.finishHandoff(ctx, fs, h)
	if err != nil {
		return nil, nil, err
	}
	if s.undelivered(ctx, grants) {
		// The completions are recorded; only the hand-off is undone.
		return nil, nil, mapError(ctx.Err())
	}
	return res, toTasks(grants), nil
}

func (s *service) Fail(ctx context.Context, items []wire.Failure) ([]wire.LeaseResult, error) {
	fs := make([]store.Finish, len(items))
	for i, it := range items {
		fs[i] = store.Finish{Lease: storeLease(it.Lease), Failed: true, Error: it.Message, Retryable: it.Retryable}
	}
	res, _, err := s.finishHandoff(ctx, fs, nil)
	return res, err
}

// finishHandoff records the end of attempts and returns the hand-off
// grants h asked for (none when h is nil).
func (s *service) finishHandoff(ctx context.Context, fs []store.Finish, h *store.Handoff) ([]wire.LeaseResult, []store.Grant, error) {
	// A finished attempt must be recorded even if the worker hangs up now.
	ctx = context.WithoutCancel(ctx)
	res, grants, err := s.st.FinishHandoff(ctx, fs, h)
	if err != nil {
		return nil, nil, mapError(err)
	}
	out := make([]wire.LeaseResult, len(fs))
	failed := batchLog{op: "finish"}
	for i, r := range res {
		out[i] = wire.LeaseResult{ExecutionID: string(fs[i].Lease.ExecutionID), OK: r.Err == nil, State: string(r.State)}
		if r.Err != nil {
			out[i].Error = leaseItemError(&failed, string(fs[i].Lease.ExecutionID), i, r.Err)
		}
	}
	s.logBatch(ctx, &failed, len(res))
	return out, grants, nil
}

// batchLog gathers the unexpected (5xx) item errors of one batch call,
// which no error handler sees, for logBatch to log in one line: a batch
// of 500 reports failing in an outage is one line, not 500.
type batchLog struct {
	op          string // create, renew, finish, watch
	n           int    // items that failed with a 5xx
	first       error  // the cause of the first of them
	unavailable bool   // every one of them is a 503 unavailable
}

// itemError maps the error of one item of a batch; an unexpected one is
// counted in b.
func itemError(b *batchLog, err error) *wire.ErrorBody {
	ae := mapError(err)
	if ae.Status >= 500 {
		if b.n == 0 {
			b.first, b.unavailable = err, true
		}
		b.n++
		b.unavailable = b.unavailable && ae.Status == http.StatusServiceUnavailable && ae.Code == wire.CodeUnavailable
	}
	return ae.Body()
}

// logBatch logs the unexpected item errors of a batch of size items, in
// one line with their count and the first one's cause: at error level
// when one of them is a server failure (500), else as the API logs its
// 503 unavailable answers (Valkey away, not ready, refusing writes): at
// warn level for the first of an outage, at debug level for the next
// ones, until a batch has none.
func (s *service) logBatch(ctx context.Context, b *batchLog, items int) {
	if b.n == 0 {
		s.items.Ended()
		return
	}
	level, msg := slog.LevelError, b.op+": batch items failed"
	if b.unavailable {
		var first bool
		if level, first = s.items.Failed(); first {
			msg += " (the next batches' at debug level, until a batch has none)"
		}
	}
	s.log.Log(ctx, level, msg, slog.Int("items", b.n), slog.Int("batch", items), slog.Any("error", b.first))
}

// leaseItemError is itemError for item i of a renew or finish, about
// execution id: an unknown or malformed id is named (404, as on every
// route about one execution), and an output over the limit is the item's
// field of the request (completions[i].output).
func leaseItemError(b *batchLog, id string, i int, err error) *wire.ErrorBody {
	var ve *store.ValidationError
	switch {
	case errors.As(err, &ve) && ve.Field == "id", errors.Is(err, store.ErrNotFound):
		return api.Errorf(http.StatusNotFound, wire.CodeNotFound, "no such execution %q", id).Body()
	case errors.As(err, &ve) && ve.Field == "result":
		b := mapError(err).Body()
		b.Details["field"] = "completions[" + strconv.Itoa(i) + "].output"
		return b
	}
	return itemError(b, err)
}

func storeLease(l wire.Lease) store.Lease {
	return store.Lease{ExecutionID: store.ExecutionID(l.ExecutionID), ID: l.LeaseID, Epoch: l.Epoch}
}

// mapIDError is mapError for a route about one execution or run: an
// unknown one is named ("no such run \"…\"", as a malformed id is).
func mapIDError(err error, what, id string) *api.Error {
	if errors.Is(err, store.ErrNotFound) {
		return api.Errorf(http.StatusNotFound, wire.CodeNotFound, "no such %s %q", what, id)
	}
	return mapError(err)
}

// mapError turns a store or scheduler error into an API error.
func mapError(err error) *api.Error {
	var ae *api.Error
	var ve *store.ValidationError
	var le *store.LeaseError
	var se *store.StateError
	var ie *store.IdempotencyError
	switch {
	case errors.As(err, &ae):
		return ae
	case errors.As(err, &ve):
		if errors.Is(err, store.ErrTooLarge) { // the only limit it stands for
			return &api.Error{Status: http.StatusRequestEntityTooLarge, Code: wire.CodePayloadTooLarge, Message: ve.Error(),
				Details: map[string]any{"field": ve.Field, "limit_bytes": store.MaxPayloadBytes}}
		}
		return &api.Error{Status: http.StatusBadRequest, Code: wire.CodeValidation, Message: ve.Error(), Details: map[string]any{"field": ve.Field}}
	case errors.As(err, &le):
		code := wire.CodeStaleLease
		if le.State == store.StateCancelled {
			code = wire.CodeCancelled
		}
		return &api.Error{Status: http.StatusConflict, Code: code, Message: le.Error(),
			Details: map[string]any{"reason": le.Reason, "state": string(le.State)}}
	case errors.As(err, &ie):
		return &api.Error{Status: http.StatusConflict, Code: wire.CodeConflict, Message: ie.Error(),
			Details: map[string]any{"field": "idempotency_key", "run_id": string(ie.RunID), "flow": ie.Flow}}
	case errors.As(err, &se):
		d := map[string]any{"state": string(se.State), "op": se.Op}
		if se.Reason != "" {
			d["reason"] = se.Reason
		}
		return &api.Error{Status: http.StatusConflict, Code: wire.CodeConflict, Message: se.Error(), Details: d}
	case errors.Is(err, store.ErrStagingExpired): // the server stalled mid-staging; nothing is left
		return &api.Error{Status: http.StatusServiceUnavailable, Code: wire.CodeUnavailable, Message: err.Error(), Err: err}
	case errors.Is(err, store.ErrNotFound):
		return api.Errorf(http.StatusNotFound, wire.CodeNotFound, "no such execution")
	case errors.Is(err, store.ErrNotFinished):
		return api.Errorf(http.StatusConflict, wire.CodeNotTerminal, "the execution has not finished yet")
	case errors.Is(err, store.ErrStaleLease):
		return api.Errorf(http.StatusConflict, wire.CodeStaleLease, "%v", err)
	case errors.Is(err, store.ErrWrongState):
		return api.Errorf(http.StatusConflict, wire.CodeConflict, "%v", err)
	case errors.Is(err, store.ErrInvalid):
		return api.Errorf(http.StatusBadRequest, wire.CodeValidation, "%v", err)
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return &api.Error{Status: http.StatusServiceUnavailable, Code: wire.CodeUnavailable, Message: "request cancelled or timed out", Err: err}
	case connError(err):
		return &api.Error{Status: http.StatusServiceUnavailable, Code: wire.CodeUnavailable,
			Message: "the connection to Valkey failed (restarted or unreachable): retry", Err: err}
	case notReady(err):
		return &api.Error{Status: http.StatusServiceUnavailable, Code: wire.CodeUnavailable,
			Message: "Valkey is not ready (loading its data, or a cluster failing over): retry", Err: err}
	case refusesWrites(err):
		return &api.Error{Status: http.StatusServiceUnavailable, Code: wire.CodeUnavailable,
			Message: "Valkey refuses writes (a replica after a failover, out of memory, a failed snapshot, or too few replicas): retry", Err: err}
	}
	return api.Internal(err)
}

// notReady reports whether Valkey answered that it cannot serve yet: it is
// loading its dataset, or its cluster is down or moving slots for a moment
// (a failover), or a replica's primary is down. Transient, so answered 503
// unavailable rather than 500.
func notReady(err error) bool {
	verr, ok := errors.AsType[*valkey.ValkeyError](err)
	return ok && (verr.IsLoading() || verr.IsClusterDown() || verr.IsTryAgain() || strings.HasPrefix(verr.Error(), "MASTERDOWN"))
}

// refusesWrites reports whether Valkey answered but refused a write: it is
// a replica (READONLY: a primary a failover demoted, or an address that
// now points at a replica), it reached maxmemory without eviction (OOM),
// its last snapshot failed with stop-writes-on-bgsave-error (MISCONF), or
// fewer replicas than min-replicas-to-write answer (NOREPLICAS). Nothing
// was written, and each heals without ffrun (a failover ends, memory is
// freed, a snapshot succeeds), so it is answered 503 unavailable, as
// /readyz reports it, rather than 500. Only for requests: a server that
// refuses writes at start is not waited for (retryable).
func refusesWrites(err error) bool {
	verr, ok := errors.AsType[*valkey.ValkeyError](err)
	if !ok {
		return false
	}
	for _, prefix := range []string{"READONLY", "OOM", "MISCONF", "NOREPLICAS"} {
		if strings.HasPrefix(verr.Error(), prefix+" ") {
			return true
		}
	}
	return false
}

// connError reports whether err is the loss of a connection to Valkey
// (the server restarted, or cannot be reached): transient, so answered 503
// unavailable rather than 500. After a restart each idle connection of the
// client fails the first command given to it, then redials.
func connError(err error) bool {
	var ne net.Error
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, valkey.ErrClosing) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) || errors.As(err, &ne)
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// rawJSON returns b as a JSON value, or nil when empty.
func rawJSON(b []byte) json.RawMessage {
	if len(b) == 0 {
		return nil
	}
	return json.RawMessage(b)
}

func toExecution(ex *store.Execution) wire.Execution {
	w := wire.Execution{
		ID:               string(ex.ID),
		Namespace:        ex.Namespace,
		Lane:             ex.Lane,
		Kind:             ex.Kind,
		Priority:         ex.Priority,
		Tags:             ex.Tags,
		Requires:         ex.RequiredCapabilities,
		RunID:            string(ex.Run()),
		FlowNode:         ex.FlowNode,
		State:            string(ex.State.Public),
		LifecyclePhase:   string(ex.State.Lifecycle),
		OwnershipState:   string(ex.State.Ownership),
		EligibilityState: string(ex.State.Eligibility),
		BlockingReason:   string(ex.State.BlockingReason),
		BlockingDetail:   ex.State.BlockingDetail,
		TerminalOutcome:  string(ex.State.Outcome),
		AttemptState:     string(ex.State.AttemptState),
		Attempt:          ex.AttemptCount,
		MaxAttempts:      max(ex.Retry.Attempts, 1),
		LastError:        ex.FailureReason,
		Input:            rawJSON(ex.Payload),
		Result:           rawJSON(ex.Result),
		CreatedAt:        timePtr(ex.CreatedAt),
		StartedAt:        timePtr(ex.StartedAt),
		CompletedAt:      timePtr(ex.EndedAt),
		DelayUntil:       timePtr(ex.EligibleAt),
		DeadlineAt:       timePtr(ex.DeadlineAt),
	}
	if ex.Lease != nil {
		w.LeaseExpiresAt = timePtr(ex.Lease.ExpiresAt)
	}
	if len(ex.Attempts) > 0 {
		w.AttemptsDropped = ex.Attempts[0].Index - 1
	}
	for _, a := range ex.Attempts {
		w.Attempts = append(w.Attempts, wire.Attempt{
			Index: a.Index, Type: string(a.Type), WorkerID: a.WorkerID, InstanceID: a.InstanceID,
			StartedAt: timePtr(a.StartedAt), EndedAt: timePtr(a.EndedAt), Outcome: string(a.Outcome), Error: a.Error,
		})
	}
	return w
}

// toTasks converts grants to tasks; nil when there are none.
func toTasks(grants []store.Grant) []wire.Task {
	if len(grants) == 0 {
		return nil
	}
	tasks := make([]wire.Task, len(grants))
	for i, g := range grants {
		tasks[i] = toTask(g)
	}
	return tasks
}

func toTask(g store.Grant) wire.Task {
	t := wire.Task{
		ExecutionID:    string(g.ExecutionID),
		Kind:           g.Kind,
		Namespace:      g.Namespace,
		Lane:           g.Lane,
		Attempt:        g.Attempt,
		MaxAttempts:    g.MaxAttempts,
		LeaseID:        g.ID,
		Epoch:          g.Epoch,
		LeaseExpiresAt: g.LeaseExpiresAt,
		DeadlineAt:     timePtr(g.AttemptDeadline),
		Tags:           g.Tags,
		Input:          rawJSON(g.Payload),
		Downstream:     g.Downstream,
	}
	if len(g.Upstreams) > 0 {
		t.Upstreams = make(map[string]json.RawMessage, len(g.Upstreams))
		for k, v := range g.Upstreams {
			t.Upstreams[k] = rawJSON(v)
		}
	}
	if len(g.UpstreamErrors) > 0 {
		t.UpstreamErrors = make(map[string]wire.UpstreamError, len(g.UpstreamErrors))
		for k, v := range g.UpstreamErrors {
			t.UpstreamErrors[k] = wire.UpstreamError{State: string(v.State), Error: v.Error}
		}
	}
	if len(g.UpstreamsOmitted) > 0 {
		t.UpstreamsOmitted = make(map[string]string, len(g.UpstreamsOmitted))
		for k, v := range g.UpstreamsOmitted {
			t.UpstreamsOmitted[k] = string(v)
		}
	}
	return t
}
