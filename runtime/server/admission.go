package server

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/flowfabric/ff/compiler/plan"
	"github.com/flowfabric/ff/runtime/api"
	"github.com/flowfabric/ff/runtime/scheduler"
	"github.com/flowfabric/ff/runtime/store"
	"github.com/flowfabric/ff/runtime/wire"
)

// Worker registry tuning.
const (
	// claimHeartbeatEvery is how often a claiming instance is re-registered
	// by its claims (workers that never call /v1/workers/heartbeat are
	// listed and routed to as well).
	claimHeartbeatEvery = 5 * time.Second
	// unblockOnConnectLimit bounds the executions one connect promotes per
	// partition (the unblock scanner does the rest).
	unblockOnConnectLimit = 1000
	// workerLeasesScan bounds the running executions GET /v1/workers reads
	// to attribute leases to workers.
	workerLeasesScan = 500
)

// admissionService implements api.AdmissionService over the store.
type admissionService struct {
	log   *slog.Logger
	st    *store.Store
	sched *scheduler.Scheduler

	mu     sync.Mutex
	seen   map[string]time.Time // instance key → last registration by a claim
	pruned time.Time            // last time seen was pruned
}

func newAdmissionService(log *slog.Logger, st *store.Store, sched *scheduler.Scheduler) *admissionService {
	return &admissionService{log: log, st: st, sched: sched, seen: map[string]time.Time{}}
}

// mapAdmissionError maps a store error of a budget or quota route.
func mapAdmissionError(err error, what, id string) *api.Error {
	if errors.Is(err, store.ErrNotFound) {
		return api.Errorf(http.StatusNotFound, wire.CodeNotFound, "no such %s %q", what, id)
	}
	return mapError(err)
}

func (a *admissionService) PutBudget(ctx context.Context, id string, req wire.PutBudget) (*wire.Budget, bool, error) {
	spec := store.BudgetSpec{ID: id, ResetInterval: time.Duration(req.ResetMs) * time.Millisecond,
		OnHardLimit: req.OnHardLimit, Scope: plan.ScopeShared}
	for _, d := range req.Dimensions {
		spec.Dimensions = append(spec.Dimensions, store.BudgetDimension{Name: d.Name, Hard: d.Hard, Soft: d.Soft})
	}
	created, err := a.st.UpsertBudget(ctx, spec)
	if err != nil {
		return nil, false, mapAdmissionError(err, "budget", id)
	}
	b, err := a.GetBudget(ctx, id)
	if err != nil {
		return nil, false, err
	}
	return b, created, nil
}

func (a *admissionService) GetBudget(ctx context.Context, id string) (*wire.Budget, error) {
	b, err := a.st.GetBudget(ctx, id)
	if err != nil {
		return nil, mapAdmissionError(err, "budget", id)
	}
	return toBudget(b), nil
}

func (a *admissionService) ResetBudget(ctx context.Context, id string) (*wire.Budget, error) {
	b, err := a.st.ResetBudget(ctx, id)
	if err != nil {
		return nil, mapAdmissionError(err, "budget", id)
	}
	a.log.InfoContext(ctx, "budget reset", slog.String("budget", id))
	return toBudget(b), nil
}

func toBudget(b *store.Budget) *wire.Budget {
	out := &wire.Budget{
		ID: b.ID, Scope: b.Scope, OnHardLimit: b.OnHardLimit, ResetMs: b.ResetInterval.Milliseconds(),
		HardLimited: b.HardLimited, HardLimitedDimension: b.HardLimitedDimension,
		SoftBreaches: b.SoftBreaches, LastSoftBreachAt: timePtr(b.LastSoftBreachAt), LastSoftBreachDimension: b.LastSoftBreachDimension,
		HardBreaches: b.HardBreaches, LastHardBreachAt: timePtr(b.LastHardBreachAt), LastHardBreachDimension: b.LastHardBreachDimension,
		Resets: b.Resets, LastResetAt: timePtr(b.LastResetAt), NextResetAt: timePtr(b.NextResetAt),
		CreatedAt: timePtr(b.CreatedAt), UpdatedAt: timePtr(b.UpdatedAt),
		Dimensions: make([]wire.BudgetUsage, len(b.Dimensions)),
	}
	for i, d := range b.Dimensions {
		out.Dimensions[i] = wire.BudgetUsage{Dimension: d.Dimension, Used: d.Used, Hard: d.Hard, Soft: d.Soft}
	}
	return out
}

func toUsage(r store.UsageResult) wire.UsageResult {
	return wire.UsageResult{BudgetID: r.BudgetID, Status: string(r.Status), Used: r.Used, Hard: r.Hard, Soft: r.Soft, OverHard: r.OverHard}
}

func (a *admissionService) ReportBudgetUsage(ctx context.Context, id string, req wire.BudgetUsageReport) (*wire.UsageResult, error) {
	r, err := a.st.ReportUsage(ctx, id, req.Dimension, req.Delta, req.DedupKey)
	if err != nil {
		return nil, mapAdmissionError(err, "budget", id)
	}
	a.logBreach(ctx, "", r)
	w := toUsage(r)
	return &w, nil
}

func (a *admissionService) ReportExecutionUsage(ctx context.Context, id string, req wire.ExecutionUsageReport) ([]wire.UsageResult, error) {
	eid, err := parseID(id)
	if err != nil {
		return nil, err
	}
	// Fenced by the store: only the holder of the current, unexpired lease
	// of an attempt within its timeout and deadline reports usage (any
	// refusal, a cancelled execution's included, is stale_lease here). The
	// dedup key is scoped to the lease, so two attempts never share one.
	key := req.LeaseID + ":" + req.DedupKey
	if len(key) > store.MaxIdempotencyKeyBytes || strings.HasPrefix(req.DedupKey, "sha256:") {
		// The lease id pushed a key the API takes past the store's limit:
		// the key stands for itself by its hash (the same key, the same
		// hash: a repeat is still one); so does one that looks like a
		// hash, which could otherwise meet another's.
		sum := sha256.Sum256([]byte(req.DedupKey))
		key = req.LeaseID + ":sha256:" + hex.EncodeToString(sum[:])
	}
	res, err := a.st.ReportAttemptUsage(ctx, store.Lease{ExecutionID: eid, ID: req.LeaseID, Epoch: req.Epoch},
		req.Dimension, req.Delta, key)
	var le *store.LeaseError
	switch {
	case errors.As(err, &le):
		return nil, &api.Error{Status: http.StatusConflict, Code: wire.CodeStaleLease,
			Message: fmt.Sprintf("execution %s is not running under lease %s epoch %d: %s", id, req.LeaseID, req.Epoch, le.Reason),
			Details: map[string]any{"reason": le.Reason, "state": string(le.State)}}
	case err != nil:
		return nil, mapIDError(err, "execution", id)
	}
	out := make([]wire.UsageResult, len(res))
	for i, r := range res {
		a.logBreach(ctx, id, r)
		out[i] = toUsage(r)
	}
	return out, nil
}

// logBreach logs a report that crossed a limit.
func (a *admissionService) logBreach(ctx context.Context, execution string, r store.UsageResult) {
	switch r.Status {
	case store.UsageSoftBreach, store.UsageHardBreach:
		a.log.InfoContext(ctx, "budget limit crossed", slog.String("budget", r.BudgetID), slog.String("status", string(r.Status)),
			slog.Int64("used", r.Used), slog.Int64("hard", r.Hard), slog.Int64("soft", r.Soft), slog.String("execution_id", execution))
	}
}

func (a *admissionService) PutQuota(ctx context.Context, id string, req wire.PutQuota) (*wire.Quota, bool, error) {
	created, err := a.st.UpsertQuota(ctx, store.QuotaSpec{ID: id, Rate: req.Rate,
		Window: time.Duration(req.WindowMs) * time.Millisecond, Concurrency: req.Concurrency,
		Jitter: time.Duration(req.JitterMs) * time.Millisecond, Key: req.Key})
	if err != nil {
		return nil, false, mapAdmissionError(err, "quota", id)
	}
	q, err := a.GetQuota(ctx, id, nil)
	if err != nil {
		return nil, false, err
	}
	return q, created, nil
}

func (a *admissionService) GetQuota(ctx context.Context, id string, key *string) (*wire.Quota, error) {
	var q *store.Quota
	var err error
	if key != nil {
		q, err = a.st.GetQuotaKey(ctx, id, *key)
	} else {
		q, err = a.st.GetQuota(ctx, id)
	}
	if err != nil {
		return nil, mapAdmissionError(err, "quota", id)
	}
	return toQuota(q), nil
}

// ListBudgets lists every budget, a page at a time.
func (a *admissionService) ListBudgets(ctx context.Context, q api.LimitListQuery) (*wire.BudgetList, error) {
	p, err := a.st.ListBudgets(ctx, store.ListBudgetsOptions{Namespace: q.Namespace, Scope: q.Scope, Cursor: q.Cursor, Limit: q.Limit})
	if err != nil {
		return nil, mapError(err)
	}
	out := &wire.BudgetList{Budgets: make([]wire.Budget, len(p.Budgets)), NextCursor: p.NextCursor}
	for i := range p.Budgets {
		out.Budgets[i] = *toBudget(&p.Budgets[i])
	}
	return out, nil
}

// ListQuotas lists every quota, a page at a time.
func (a *admissionService) ListQuotas(ctx context.Context, q api.LimitListQuery) (*wire.QuotaList, error) {
	p, err := a.st.ListQuotas(ctx, store.ListQuotasOptions{Namespace: q.Namespace, Cursor: q.Cursor, Limit: q.Limit})
	if err != nil {
		return nil, mapError(err)
	}
	out := &wire.QuotaList{Quotas: make([]wire.Quota, len(p.Quotas)), NextCursor: p.NextCursor}
	for i := range p.Quotas {
		out.Quotas[i] = *toQuota(&p.Quotas[i])
	}
	return out, nil
}

func toQuota(q *store.Quota) *wire.Quota {
	out := &wire.Quota{ID: q.ID, Rate: q.Rate, WindowMs: q.Window.Milliseconds(), Concurrency: q.Concurrency,
		JitterMs: q.Jitter.Milliseconds(), Key: q.Key, CreatedAt: timePtr(q.CreatedAt), UpdatedAt: timePtr(q.UpdatedAt),
		Subjects: make([]wire.QuotaSubject, len(q.Subjects)), SubjectsMore: q.SubjectsMore}
	if q.Rate == 0 {
		out.WindowMs = 0 // a window means something with a rate only
	}
	for i, s := range q.Subjects {
		out.Subjects[i] = wire.QuotaSubject{Key: s.Key, WindowCount: s.InWindow, ActiveCount: s.Active,
			PausedUntil: timePtr(s.PausedUntil), PauseReason: s.PauseReason}
	}
	return out
}

func (a *admissionService) PauseQuota(ctx context.Context, id string, req wire.QuotaPause) (*wire.Quota, error) {
	p := store.QuotaPause{Key: req.Key, For: time.Duration(req.ForMs) * time.Millisecond, Reason: req.Reason}
	if req.Until != "" {
		end, err := api.PauseEnd(req.Until) // checked by the API
		if err != nil {
			return nil, api.Errorf(400, wire.CodeValidation, "until: %v", err)
		}
		p.End = end
	}
	if err := a.st.PauseQuota(ctx, id, p); err != nil {
		return nil, mapAdmissionError(err, "quota", id)
	}
	// The paused subject only: a keyed quota may have many.
	q, err := a.GetQuota(ctx, id, &req.Key)
	if err == nil && len(q.Subjects) == 1 && q.Subjects[0].PausedUntil != nil {
		a.log.InfoContext(ctx, "quota paused", slog.String("quota", id), slog.String("key", req.Key),
			slog.Time("until", *q.Subjects[0].PausedUntil), slog.String("reason", req.Reason))
	}
	return q, err
}

func (a *admissionService) ResumeQuota(ctx context.Context, id string, req wire.QuotaResume) (*wire.Quota, error) {
	resumed, err := a.st.ResumeQuota(ctx, id, req.Key)
	if err != nil {
		return nil, mapAdmissionError(err, "quota", id)
	}
	if resumed {
		a.log.InfoContext(ctx, "quota resumed", slog.String("quota", id), slog.String("key", req.Key))
	}
	return a.GetQuota(ctx, id, &req.Key)
}

func (a *admissionService) Heartbeat(ctx context.Context, req wire.WorkerHeartbeat) (*wire.WorkerHeartbeatResponse, error) {
	w := store.WorkerIdentity{WorkerID: req.WorkerID, InstanceID: req.InstanceID, Namespace: req.Namespace, Capabilities: req.Capabilities}
	registered, n, err := a.register(ctx, store.Registration{Worker: w, Lanes: req.Lanes, Kinds: req.Kinds, TTL: time.Duration(req.TTLMs) * time.Millisecond})
	if err != nil {
		return nil, err
	}
	return &wire.WorkerHeartbeatResponse{Registered: registered, Unblocked: n}, nil
}

// register heartbeats a worker instance; a newly listed one adds its
// capabilities to the scheduler's capability union of its namespace and,
// when that added some, promotes the namespace's executions waiting for a
// capable worker that the union now covers (never another namespace's).
// A connect that adds nothing (the common case: another instance of a
// worker already connected) reads nothing more: nothing parked for a
// capability became runnable.
func (a *admissionService) register(ctx context.Context, r store.Registration) (bool, int, error) {
	w := r.Worker
	registered, err := a.st.Heartbeat(ctx, r)
	if err != nil {
		return false, 0, mapError(err)
	}
	a.mu.Lock()
	a.seen[w.Namespace+"\x00"+w.InstanceID] = time.Now()
	a.mu.Unlock()
	if !registered {
		return false, 0, nil
	}
	union, added, err := a.sched.Connected(ctx, w.Namespace, w.Capabilities)
	if err != nil {
		a.log.WarnContext(ctx, "worker connected; capability union unavailable, the unblock scanner promotes its work",
			slog.String("namespace", w.Namespace), slog.Any("error", err))
		return true, 0, nil
	}
	n := 0
	if added {
		for p := range a.st.FlowPartitions() {
			r, err := a.st.UnblockRoute(ctx, p, w.Namespace, union, unblockOnConnectLimit, nil) // from the head of each lane
			if err != nil {
				a.log.WarnContext(ctx, "unblock on connect failed; the unblock scanner retries",
					slog.Int("partition", p), slog.Any("error", err))
				continue
			}
			n += r.Processed
		}
	}
	a.log.InfoContext(ctx, "worker connected", slog.String("namespace", w.Namespace), slog.String("worker_id", w.WorkerID),
		slog.String("instance_id", w.InstanceID), slog.Any("capabilities", w.Capabilities), slog.Any("lanes", r.Lanes),
		slog.Int("kinds", len(r.Kinds)), slog.Int("unblocked", n))
	return true, n, nil
}

// onClaim registers a claiming instance at most every claimHeartbeatEvery,
// so that workers speaking only the claim protocol are routed to too. A
// failure is logged: a claim never fails for the registry.
func (a *admissionService) onClaim(ctx context.Context, req wire.ClaimRequest) {
	k := req.Namespace + "\x00" + req.InstanceID
	now := time.Now()
	a.mu.Lock()
	last, ok := a.seen[k]
	// An entry older than claimHeartbeatEvery says nothing (the next claim
	// registers either way), so forgetting those, at most once per interval,
	// keeps the map to the instances seen lately at O(1) amortised per claim.
	if now.Sub(a.pruned) >= claimHeartbeatEvery {
		for key, t := range a.seen {
			if now.Sub(t) >= claimHeartbeatEvery {
				delete(a.seen, key)
			}
		}
		a.pruned = now
	}
	a.mu.Unlock()
	if ok && now.Sub(last) < claimHeartbeatEvery {
		return
	}
	w := store.WorkerIdentity{WorkerID: req.WorkerID, InstanceID: req.InstanceID, Namespace: req.Namespace, Capabilities: req.Capabilities}
	if _, _, err := a.register(ctx, store.Registration{Worker: w, Lanes: req.Lanes, Kinds: req.Kinds}); err != nil {
		a.log.WarnContext(ctx, "registering a claiming worker failed", slog.String("instance_id", req.InstanceID), slog.Any("error", err))
	}
}

func (a *admissionService) Workers(ctx context.Context, ns string) (*wire.WorkerList, error) {
	ws, err := a.st.Workers(ctx, ns)
	if err != nil {
		return nil, mapError(err)
	}
	leases, truncated, err := a.leasesByInstance(ctx, ns)
	if err != nil {
		return nil, err
	}
	out := &wire.WorkerList{Workers: make([]wire.Worker, len(ws)), LeasesTruncated: truncated}
	for i, w := range ws {
		out.Workers[i] = wire.Worker{Namespace: w.Namespace, WorkerID: w.WorkerID, InstanceID: w.InstanceID,
			Lanes: nonNil(w.Lanes), Capabilities: nonNil(w.Capabilities), Kinds: w.Kinds, ActiveLeases: nonNil(leases[w.InstanceID]),
			ConnectedAt: timePtr(w.ConnectedAt), SeenAt: timePtr(w.SeenAt), ExpiresAt: timePtr(w.ExpiresAt)}
	}
	return out, nil
}

// leasesByInstance attributes the namespace's running executions (up to
// workerLeasesScan of them) to the worker instances holding their leases:
// a page of the listing, then one pipelined read of their holders.
func (a *admissionService) leasesByInstance(ctx context.Context, ns string) (map[string][]string, bool, error) {
	var ids []store.ExecutionID
	truncated := false
	for cursor := ""; ; {
		page, err := a.st.ListExecutions(ctx, store.ListRequest{Namespace: ns, State: store.StateActive, Cursor: cursor,
			Limit: min(store.ListLimitMax, workerLeasesScan+1-len(ids))})
		if err != nil {
			return nil, false, mapError(err)
		}
		for _, ex := range page.Executions {
			ids = append(ids, ex.ID)
		}
		if len(ids) > workerLeasesScan {
			ids, truncated = ids[:workerLeasesScan], true
			break
		}
		if page.Cursor == "" {
			break
		}
		cursor = page.Cursor
	}
	holders, err := a.st.LeaseHolders(ctx, ids)
	if err != nil {
		return nil, false, mapError(err)
	}
	out := map[string][]string{}
	for _, id := range ids { // in listing order
		if inst, ok := holders[id]; ok {
			out[inst] = append(out[inst], string(id))
		}
	}
	return out, truncated, nil
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
