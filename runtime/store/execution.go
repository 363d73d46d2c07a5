package store

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/flowfabric/ff/compiler/plan"
	"github.com/valkey-io/valkey-go"
)

// partitionFor is the partition of a new standalone execution or run with
// an idempotency key: derived from the key, so that a repeat lands on the
// same partition and finds the first one. Without a key both are placed
// in streaks instead (see PlacementStreak), so idemKey is never empty.
func (s *Store) partitionFor(ns, idemKey string) int {
	h := fnv.New32a()
	h.Write([]byte(ns))
	h.Write([]byte{0})
	h.Write([]byte(idemKey))
	return int(h.Sum32() % uint32(s.cfg.FlowPartitions))
}

// CreateExecution validates req and creates a standalone execution. With an
// idempotency key, a repeat returns the first execution and created=false.
// Nothing is written when validation fails.
func (s *Store) CreateExecution(ctx context.Context, req CreateRequest) (*Execution, bool, error) {
	res, err := s.CreateMany(ctx, []CreateRequest{req})
	if err != nil {
		return nil, false, err
	}
	return res[0].Execution, res[0].Created, res[0].Err
}

// CreateResult is the outcome of one item of CreateMany.
type CreateResult struct {
	Execution *Execution // the new execution, or the first one of its idempotency key
	Created   bool       // false for a repeat of an idempotency key
	Err       error      // a *ValidationError; nothing was written for this item
}

// CreateMany creates many standalone executions: one FCALL per partition,
// pipelined. Items without an idempotency key all go to the current
// streak's partition (see PlacementStreak; a call counts as one step of
// the streak); items with one go to the partition of their key. Each item is
// validated on its own: an invalid item gets its error in results and
// writes nothing, the others are created. err is for transport failures
// only (then some items may have been created).
func (s *Store) CreateMany(ctx context.Context, reqs []CreateRequest) ([]CreateResult, error) {
	if len(reqs) > MaxBatch {
		return nil, invalid("executions", "%d executions, at most %d per call", len(reqs), MaxBatch)
	}
	out := make([]CreateResult, len(reqs))
	pending := make([]*Execution, len(reqs))
	b := &batch{}
	head := []string{ms(s.cfg.IdempotencyTTL)}
	random := s.streakPartition()
	keyFields, err := s.createQuotaKeys(ctx, reqs)
	if err != nil {
		return nil, err
	}
	for i := range reqs {
		req := reqs[i]
		item, e, err := s.createArgs(&req, random, keyFields)
		if err != nil {
			out[i].Err = err
			continue
		}
		pending[i] = e
		b.add(e.Partition, "ff_create_many", head, i, item...)
	}
	if len(b.calls) == 1 && len(b.index[0]) == 1 {
		// One execution: the cheaper single-create function, with every key
		// given.
		e := pending[b.index[0][0]]
		_, uuid, _ := splitID(string(e.ID))
		idemKey := s.k.anchor(e.Partition)
		if e.IdempotencyKey != "" {
			idemKey = s.k.idem(e.Partition, e.Namespace, e.IdempotencyKey)
		}
		b.calls[0].fn = "ff_create"
		b.calls[0].keys = []string{
			s.k.anchor(e.Partition), s.k.core(e.Partition, uuid),
			s.k.lane(e.Partition, e.Namespace, e.Lane, indexEligible), s.k.lane(e.Partition, e.Namespace, e.Lane, indexDelayed),
			s.k.deadlines(e.Partition), idemKey,
		}
		b.calls[0].args = append(b.calls[0].args, s.WakeChannel(), Wake{Partition: e.Partition, Namespace: e.Namespace, Lane: e.Lane}.String())
	}
	err = s.run(ctx, b, func(pos int, res []valkey.ValkeyMessage, ref *refusal) {
		e := pending[pos]
		if ref != nil {
			out[pos].Err = refusalError(ref, e.ID, "create")
			return
		}
		if str(res[0]) == "duplicate" {
			out[pos].Execution = &Execution{ID: makeID(e.Partition, str(res[1]))} // read below
			return
		}
		now := fromMs(str(res[1]))
		e.State.Public = PublicState(str(res[2]))
		if e.State.Public == StateDelayed {
			e.State.Eligibility, e.State.BlockingReason = EligibleNotUntilTime, WaitingForDelay
		}
		e.CreatedAt, e.UpdatedAt = now, now
		e.EligibleAt, e.DeadlineAt = fromMs(str(res[3])), fromMs(str(res[4]))
		out[pos].Execution, out[pos].Created = e, true
	})
	if err != nil {
		return nil, err
	}
	for i := range out {
		if out[i].Err == nil && !out[i].Created {
			first, err := s.GetExecution(ctx, out[i].Execution.ID)
			if err != nil {
				return nil, fmt.Errorf("store: read first execution of idempotency key %q: %w", reqs[i].IdempotencyKey, err)
			}
			out[i].Execution = first
		}
	}
	return out, nil
}

// createQuotaKeys reads the key field of every quota the requests name
// (one pipelined read), so createArgs can tell keyed quotas, extract their
// key values from the payload and refuse a key value for an unkeyed one.
func (s *Store) createQuotaKeys(ctx context.Context, reqs []CreateRequest) (map[string]*string, error) {
	seen := map[string]bool{}
	var ids []string
	for _, req := range reqs {
		ns := cmp.Or(req.Namespace, plan.DefaultNamespace)
		for _, ref := range req.Quotas {
			id, _, _, err := quotaRefID("quotas", ns, ref)
			if err != nil || seen[id] {
				continue // createArgs reports it
			}
			seen[id] = true
			ids = append(ids, id)
		}
	}
	return s.quotaKeyFields(ctx, ids)
}

// resolveRefs resolves the budget and quota references of an execution of
// namespace ns and returns them comma-joined.
func resolveRefs(ns string, budgetRefs, quotaRefs []string, payload []byte, keyField func(string) (string, bool)) (budgets, quotas []string, err error) {
	for _, r := range budgetRefs {
		id, err := resolveBudget("budgets", ns, r)
		if err != nil {
			return nil, nil, err
		}
		if !slices.Contains(budgets, id) {
			budgets = append(budgets, id)
		}
	}
	for _, r := range quotaRefs {
		sub, err := resolveQuota("quotas", ns, r, payload, keyField)
		if err != nil {
			return nil, nil, err
		}
		if !slices.Contains(quotas, sub) {
			quotas = append(quotas, sub)
		}
	}
	if _, err := checkRefs("budgets", budgets); err != nil {
		return nil, nil, err
	}
	if _, err := checkRefs("quotas", quotas); err != nil {
		return nil, nil, err
	}
	return budgets, quotas, nil
}

// createArgs validates req and returns its ff_create item and the
// execution it describes (without server times).
func (s *Store) createArgs(req *CreateRequest, random int, keyFields map[string]*string) ([]string, *Execution, error) {
	if err := req.normalize(); err != nil {
		return nil, nil, err
	}
	caps, err := normCapabilities("required_capabilities", req.RequiredCapabilities)
	if err != nil {
		return nil, nil, err
	}
	budgetIDs, quotaSubjects, err := resolveRefs(req.Namespace, req.Budgets, req.Quotas, req.Payload, func(id string) (string, bool) {
		k := keyFields[id]
		if k == nil {
			return "", false
		}
		return *k, true
	})
	if err != nil {
		return nil, nil, err
	}
	budgets, quotas := strings.Join(budgetIDs, ","), strings.Join(quotaSubjects, ",")
	maxReclaims := req.MaxReclaims
	if maxReclaims == 0 {
		maxReclaims = MaxReclaimsDefault
	}
	var tags string
	if len(req.Tags) > 0 {
		b, err := json.Marshal(req.Tags)
		if err != nil {
			return nil, nil, fmt.Errorf("store: encode tags: %w", err)
		}
		tags = string(b)
	}
	retry := req.Retry
	retry.Attempts = max(retry.Attempts, 1)
	if retry.Backoff == "" {
		retry.Backoff = BackoffFixed
	}
	var delayUntil int64
	if !req.DelayUntil.IsZero() {
		delayUntil = max(req.DelayUntil.UnixMilli(), 0)
	}
	jitter := "0"
	if retry.Jitter {
		jitter = "1"
	}
	p := random
	if req.IdempotencyKey != "" {
		p = s.partitionFor(req.Namespace, req.IdempotencyKey)
	}
	uuid := newUUID()
	item := []string{
		"", // entry count, set below
		uuid, req.Namespace, req.Lane, strconv.Itoa(req.Priority),
		strconv.FormatInt(delayUntil, 10), ms(req.Delay), ms(req.Deadline), req.IdempotencyKey,
		"ns", req.Namespace,
		"lane", req.Lane,
		"kind", req.Kind,
	}
	// Defaults are not stored: the Lua library and decodeExecution read a
	// missing field as its default.
	for _, f := range [][2]string{
		{"payload", string(req.Payload)}, {"tags", tags}, {"caps", caps}, {"budgets", budgets}, {"quotas", quotas},
		{"idem_key", req.IdempotencyKey},
		{"retry_attempts", nonDefault(strconv.Itoa(retry.Attempts), "1")},
		{"retry_backoff", nonDefault(retry.Backoff, BackoffFixed)},
		{"retry_delay_ms", nonDefault(ms(retry.Delay), "0")},
		{"retry_max_delay_ms", nonDefault(ms(retry.MaxDelay), "0")},
		{"retry_jitter", nonDefault(jitter, "0")},
		{"attempt_timeout_ms", nonDefault(ms(req.AttemptTimeout), "0")},
		{"max_reclaims", nonDefault(strconv.Itoa(maxReclaims), strconv.Itoa(MaxReclaimsDefault))},
	} {
		if f[1] != "" {
			item = append(item, f[0], f[1])
		}
	}
	item[0] = strconv.Itoa(len(item) - 1)
	e := &Execution{
		ID: makeID(p, uuid), Partition: p, Namespace: req.Namespace, Lane: req.Lane, Kind: req.Kind,
		Priority: req.Priority, Tags: req.Tags, Payload: req.Payload,
		RequiredCapabilities: splitList(caps), Budgets: budgetIDs, Quotas: quotaSubjects,
		Retry: retry, AttemptTimeout: req.AttemptTimeout, MaxReclaims: maxReclaims, IdempotencyKey: req.IdempotencyKey,
		State: StateVector{Lifecycle: LifecycleRunnable, Ownership: OwnershipUnowned, Eligibility: EligibleNow,
			BlockingReason: WaitingForWorker, Outcome: OutcomeNone, AttemptState: AttemptPendingFirst},
	}
	return item, e, nil
}

func nonDefault(v, def string) string {
	if v == def {
		return ""
	}
	return v
}

// GetExecution returns the execution with its payload, result and attempt
// history.
func (s *Store) GetExecution(ctx context.Context, id ExecutionID) (*Execution, error) {
	p, uuid, err := s.locate(id)
	if err != nil {
		return nil, err
	}
	fields, err := s.c.Do(ctx, s.c.B().Hgetall().Key(s.k.core(p, uuid)).Build()).AsStrMap()
	if err != nil {
		return nil, fmt.Errorf("store: read execution %s: %w", id, err)
	}
	if len(fields) == 0 {
		return nil, fmt.Errorf("%w: execution %s", ErrNotFound, id)
	}
	e := decodeExecution(p, uuid, fields)
	e.Attempts = decodeAttempts(fields)
	if len(e.Payload) == 0 {
		e.InputFrom = fields["input_from"]
	}
	return e, nil
}

// ReceivedInput returns the input a flow member fed by an upstream
// receives: that upstream's output once it exists (nil before; the
// member's record holds no payload of its own). For any other execution
// it is nil: its Payload is its input. One read, on the run's partition;
// the execution route shows it, other reads of an execution need not.
func (s *Store) ReceivedInput(ctx context.Context, e *Execution) ([]byte, error) {
	if e.InputFrom == "" {
		return nil, nil
	}
	out, err := s.c.Do(ctx, s.c.B().Hget().Key(s.k.core(e.Partition, e.InputFrom)).Field("result").Build()).ToString()
	switch {
	case err == nil:
		return []byte(out), nil
	case valkey.IsValkeyNil(err):
		return nil, nil
	}
	return nil, fmt.Errorf("store: read the input of execution %s: %w", e.ID, err)
}

// decodeExecution builds an Execution from its record fields.
func decodeExecution(p int, uuid string, f map[string]string) *Execution {
	e := &Execution{
		ID: makeID(p, uuid), Partition: p,
		Namespace: f["ns"], Lane: f["lane"], Kind: f["kind"], Priority: atoi(f["priority"]),
		RequiredCapabilities: splitList(f["caps"]), Budgets: splitList(f["budgets"]), Quotas: splitList(f["quotas"]),
		Retry: RetryPolicy{
			Attempts: atoi(f["retry_attempts"]), Backoff: f["retry_backoff"],
			Delay:    time.Duration(atoi64(f["retry_delay_ms"])) * time.Millisecond,
			MaxDelay: time.Duration(atoi64(f["retry_max_delay_ms"])) * time.Millisecond,
			Jitter:   f["retry_jitter"] == "1",
		},
		AttemptTimeout: time.Duration(atoi64(f["attempt_timeout_ms"])) * time.Millisecond,
		MaxReclaims:    MaxReclaimsDefault,
		Reclaims:       atoi(f["reclaims"]),
		State:          decodeState(f["state"], f["blocking_detail"]),
		AttemptCount:   atoi(f["attempt_count"]),
		FailureReason:  f["failure_reason"],
		FlowID:         f["flow_id"],
		FlowNode:       f["flow_node"],
		IdempotencyKey: f["idem_key"],
		CreatedAt:      fromMs(f["created_at"]),
		UpdatedAt:      fromMs(cmp.Or(f["updated_at"], f["created_at"])), // a flow member staged and not changed since has none
		EligibleAt:     fromMs(f["eligible_at"]),
		DeadlineAt:     fromMs(f["deadline_at"]),
		StartedAt:      fromMs(f["started_at"]),
		EndedAt:        fromMs(f["ended_at"]),
	}
	if v, ok := f["max_reclaims"]; ok {
		e.MaxReclaims = atoi(v)
	}
	e.Retry.Attempts = max(e.Retry.Attempts, 1)
	if e.Retry.Backoff == "" {
		e.Retry.Backoff = BackoffFixed
	}
	if e.FailureReason == "" && e.State.Lifecycle != LifecycleTerminal {
		e.FailureReason = f["last_error"]
	}
	if v, ok := f["payload"]; ok {
		e.Payload = []byte(v)
	}
	if v, ok := f["result"]; ok {
		e.Result = []byte(v)
	}
	if t := f["tags"]; t != "" {
		json.Unmarshal([]byte(t), &e.Tags)
	}
	if e.State.Lifecycle == LifecycleActive {
		e.Lease = &LeaseInfo{
			Lease:     Lease{ExecutionID: e.ID, ID: f["lease_id"], Epoch: atoi64(f["lease_epoch"])},
			ExpiresAt: fromMs(f["lease_expires_at"]),
		}
		if rec, ok := f["att:"+f["attempt_count"]]; ok {
			e.Lease.WorkerID, e.Lease.InstanceID, e.Lease.AcquiredAt, _ = attemptHolder(rec)
		}
	}
	return e
}

// attemptHolder reads the worker, its instance and the start of an attempt
// from its record (field "att:<n>").
func attemptHolder(rec string) (worker, instance string, at time.Time, ok bool) {
	v := strings.SplitN(rec, "\t", 6)
	if len(v) != 6 {
		return "", "", time.Time{}, false
	}
	return v[1], v[2], fromMs(v[5]), true
}

// LeaseHolders returns the worker instance holding the lease of each of ids
// that runs now (those that do not, or are gone, are left out), in two
// pipelined rounds of reads whatever the number of ids.
func (s *Store) LeaseHolders(ctx context.Context, ids []ExecutionID) (map[ExecutionID]string, error) {
	type at struct {
		id  ExecutionID
		key string
	}
	var found []at
	cmds := make(valkey.Commands, 0, len(ids))
	for _, id := range ids {
		p, uuid, err := s.locate(id)
		if err != nil {
			return nil, err
		}
		key := s.k.core(p, uuid)
		found = append(found, at{id, key})
		cmds = append(cmds, s.c.B().Hmget().Key(key).Field("state", "attempt_count").Build())
	}
	var running []at
	var attempts valkey.Commands
	for i, r := range s.c.DoMulti(ctx, cmds...) {
		v, err := r.ToArray()
		if err != nil {
			return nil, fmt.Errorf("store: read execution %s: %w", found[i].id, err)
		}
		st, _ := v[0].ToString()
		n, _ := v[1].ToString()
		if st == "" || decodeState(st, "").Lifecycle != LifecycleActive {
			continue
		}
		running = append(running, found[i])
		attempts = append(attempts, s.c.B().Hget().Key(found[i].key).Field("att:"+n).Build())
	}
	out := make(map[ExecutionID]string, len(running))
	for i, r := range s.c.DoMulti(ctx, attempts...) {
		rec, err := r.ToString()
		if valkey.IsValkeyNil(err) {
			continue // ended and purged meanwhile
		}
		if err != nil {
			return nil, fmt.Errorf("store: read execution %s: %w", running[i].id, err)
		}
		if _, instance, _, ok := attemptHolder(rec); ok {
			out[running[i].id] = instance
		}
	}
	return out, nil
}

// decodeState splits the record's state field: the seven dimensions
// separated by spaces (spec/runtime.md, "State vector").
func decodeState(s, detail string) StateVector {
	v := strings.Fields(s)
	for len(v) < 7 {
		v = append(v, "")
	}
	return StateVector{
		Lifecycle: Lifecycle(v[0]), Ownership: Ownership(v[1]), Eligibility: Eligibility(v[2]),
		BlockingReason: BlockingReason(v[3]), BlockingDetail: detail, Outcome: Outcome(v[4]),
		AttemptState: AttemptState(v[5]), Public: PublicState(v[6]),
	}
}

// decodeAttempts builds the attempt history from the record's fields
// "att:<n>" ("<type>\t<worker>\t<instance>\t<lease>\t<epoch>\t<started>",
// written at claim) and "att:<n>:end" ("<ended>\t<outcome>\t<error>"):
// the last AttemptsKept attempts (a record an earlier release wrote may
// hold more).
func decodeAttempts(f map[string]string) []Attempt {
	var out []Attempt
	for k, rec := range f {
		idx, ok := strings.CutPrefix(k, "att:")
		if !ok || strings.Contains(idx, ":") {
			continue
		}
		v := strings.SplitN(rec, "\t", 6)
		if len(v) < 6 {
			continue
		}
		a := Attempt{
			Index: atoi(idx), Type: AttemptType(v[0]), WorkerID: v[1], InstanceID: v[2],
			LeaseID: v[3], LeaseEpoch: atoi64(v[4]), StartedAt: fromMs(v[5]), Outcome: AttemptRunningNow,
		}
		if end, ok := f[k+":end"]; ok {
			e := strings.SplitN(end, "\t", 3)
			if len(e) == 3 {
				a.EndedAt, a.Outcome, a.Error = fromMs(e[0]), AttemptOutcome(e[1]), e[2]
			}
		}
		out = append(out, a)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Index < out[j].Index })
	if len(out) > AttemptsKept {
		out = out[len(out)-AttemptsKept:]
	}
	return out
}

func splitList(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

// Cancel cancels a non-terminal execution. A running attempt loses its lease
// (its worker's next call gets ErrStaleLease). Cancelling a cancelled
// execution changes nothing; cancelling another terminal one is a
// *StateError.
func (s *Store) Cancel(ctx context.Context, id ExecutionID, reason string) (*Execution, error) {
	p, uuid, err := s.locate(id)
	if err != nil {
		return nil, err
	}
	if _, err := s.single(ctx, call{fn: "ff_cancel", partition: p, args: []string{uuid, clip(reason, MaxErrorBytes)}}, id, "cancel"); err != nil {
		return nil, err
	}
	return s.GetExecution(ctx, id)
}

// ChangePriority changes the priority of a runnable execution (waiting,
// delayed, pending or blocked); an eligible one is re-ordered at once.
func (s *Store) ChangePriority(ctx context.Context, id ExecutionID, priority int) (*Execution, error) {
	if err := checkPriority(priority); err != nil {
		return nil, err
	}
	p, uuid, err := s.locate(id)
	if err != nil {
		return nil, err
	}
	if _, err := s.single(ctx, call{fn: "ff_change_priority", partition: p, args: []string{uuid, strconv.Itoa(priority)}}, id, "change the priority of"); err != nil {
		return nil, err
	}
	return s.GetExecution(ctx, id)
}

// RevokeLease takes the lease away from a running execution: the attempt
// ends as revoked (not charged to the retry policy) and the execution is
// eligible again at once. Its worker's next call gets ErrStaleLease.
func (s *Store) RevokeLease(ctx context.Context, id ExecutionID, reason string) (*Execution, error) {
	return s.revokeLease(ctx, id, reason)
}

// RevokeLeaseOf is RevokeLease fenced by lease l: only that lease is
// revoked (a worker giving back its own attempt); another lease, or none,
// is a *LeaseError and nothing changes. A lease past its expiry, the
// attempt's timeout or the execution's deadline is a *LeaseError too, and
// that limit is applied instead, as its scanner would have.
func (s *Store) RevokeLeaseOf(ctx context.Context, l Lease, reason string) (*Execution, error) {
	return s.revokeLease(ctx, l.ExecutionID, reason, l.ID, strconv.FormatInt(l.Epoch, 10))
}

func (s *Store) revokeLease(ctx context.Context, id ExecutionID, reason string, fence ...string) (*Execution, error) {
	p, uuid, err := s.locate(id)
	if err != nil {
		return nil, err
	}
	args := append([]string{uuid, clip(reason, MaxErrorBytes)}, fence...)
	if _, err := s.single(ctx, call{fn: "ff_revoke_lease", partition: p, args: args}, id, "revoke the lease of"); err != nil {
		return nil, err
	}
	return s.GetExecution(ctx, id)
}

// RevokeGrants takes back leases that never reached their worker (its
// request ended before the answer could be written): each attempt ends
// as revoked, not charged to the retry policy, and the execution is
// eligible again at once, instead of waiting for the lease to expire. A
// lease that is no longer current is left alone. It returns how many were
// revoked.
func (s *Store) RevokeGrants(ctx context.Context, leases []Lease, reason string) (int, error) {
	calls := make([]call, 0, len(leases))
	for _, l := range leases {
		p, uuid, err := s.locate(l.ExecutionID)
		if err != nil {
			return 0, err
		}
		calls = append(calls, call{fn: "ff_revoke_lease", partition: p,
			args: []string{uuid, clip(reason, MaxErrorBytes), l.ID, strconv.FormatInt(l.Epoch, 10)}})
	}
	if len(calls) == 0 {
		return 0, nil
	}
	msgs, err := s.fcallMany(ctx, calls)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, msg := range msgs {
		_, ref, err := envelope(msg)
		if err != nil {
			return n, fmt.Errorf("store: ff_revoke_lease: %w", err)
		}
		if ref == nil {
			n++
		}
	}
	return n, nil
}

// Result returns the outcome of a terminal execution, and an error
// matching ErrNotFinished otherwise.
func (s *Store) Result(ctx context.Context, id ExecutionID) (*ResultInfo, error) {
	p, uuid, err := s.locate(id)
	if err != nil {
		return nil, err
	}
	v, err := s.c.Do(ctx, s.c.B().Hmget().Key(s.k.core(p, uuid)).
		Field("state", "result", "failure_reason").Build()).ToArray()
	if err != nil {
		return nil, fmt.Errorf("store: read result of %s: %w", id, err)
	}
	if v[0].IsNil() {
		return nil, fmt.Errorf("%w: execution %s", ErrNotFound, id)
	}
	st := decodeState(str(v[0]), "")
	if st.Lifecycle != LifecycleTerminal {
		return nil, fmt.Errorf("%w: %s is %s", ErrNotFinished, id, st.Public)
	}
	r := &ResultInfo{State: st.Public, Outcome: st.Outcome, Error: str(v[2])}
	if !v[1].IsNil() {
		r.Result = []byte(str(v[1]))
	}
	return r, nil
}

// clip truncates s to at most n bytes without splitting a UTF-8 sequence.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && n < len(s) && s[n]&0xc0 == 0x80 {
		n--
	}
	return s[:n]
}

// listFields are the record fields ListExecutions reads (no payload or
// result).
var listFields = []string{
	"ns", "lane", "kind", "priority", "caps", "budgets", "quotas",
	"retry_attempts", "retry_backoff", "retry_delay_ms", "retry_max_delay_ms", "retry_jitter", "attempt_timeout_ms",
	"state", "blocking_detail", "attempt_count", "failure_reason", "last_error",
	"flow_id", "flow_node", "idem_key", "created_at", "updated_at", "eligible_at", "deadline_at", "started_at", "ended_at",
	"lease_id", "lease_epoch", "lease_expires_at", "tags", "reclaims", "max_reclaims",
}

// indexesFor returns the lane indexes that hold executions in state st
// ("" = all), in listing order.
func indexesFor(st PublicState) []string {
	switch st {
	case StateWaiting:
		return []string{indexEligible}
	case StateDelayed:
		return []string{indexDelayed}
	case StatePending:
		return []string{indexPending}
	case StateBlocked:
		return []string{indexBlocked, indexBlockedBudget, indexBlockedQuota}
	case StateActive:
		return []string{indexActive}
	case "":
		return []string{indexEligible, indexDelayed, indexPending, indexBlocked, indexBlockedBudget, indexBlockedQuota, indexActive, indexTerminal}
	}
	return []string{indexTerminal}
}

// listSource is one index of one lane of one partition.
type listSource struct {
	p     int
	lane  string
	index int // position in indexesFor
}

func (a listSource) less(b listSource) bool {
	if a.p != b.p {
		return a.p < b.p
	}
	if a.lane != b.lane {
		return a.lane < b.lane
	}
	return a.index < b.index
}

// listCursor is the position after the last listed execution.
type listCursor struct {
	src    listSource
	offset int64
}

func (c listCursor) encode() string {
	return fmt.Sprintf("%d:%d:%d:%s", c.src.p, c.src.index, c.offset, c.src.lane)
}

func decodeCursor(s string) (listCursor, error) {
	v := strings.SplitN(s, ":", 4)
	if len(v) != 4 {
		return listCursor{}, invalid("cursor", "malformed cursor")
	}
	p, e1 := strconv.Atoi(v[0])
	i, e2 := strconv.Atoi(v[1])
	o, e3 := strconv.ParseInt(v[2], 10, 64)
	if e1 != nil || e2 != nil || e3 != nil || p < 0 || i < 0 || o < 0 {
		return listCursor{}, invalid("cursor", "malformed cursor")
	}
	return listCursor{listSource{p, v[3], i}, o}, nil
}

// listScanMax bounds how many index entries one ListExecutions call reads
// (a state filter on the terminal index may discard many).
const listScanMax = 10 * ListLimitMax

// ListExecutions returns one page of executions of a namespace, optionally
// filtered by lane and public state. The order is by partition, then (with
// no lane filter) the partition's running executions, then lane and index
// (waiting, delayed, pending, blocked, active with a lane filter,
// terminal); within an
// index eligible executions come in claim order, delayed ones by due time,
// active ones by start, terminal ones newest first. Pages are a live view:
// executions that move between indexes while paging may be missed or
// repeated.
func (s *Store) ListExecutions(ctx context.Context, req ListRequest) (*ListPage, error) {
	if err := checkName("namespace", req.Namespace); err != nil {
		return nil, err
	}
	if req.Lane != "" {
		if err := checkName("lane", req.Lane); err != nil {
			return nil, err
		}
	}
	if req.State != "" {
		if _, err := ParsePublicState(string(req.State)); err != nil {
			return nil, err
		}
	}
	limit := req.Limit
	if limit == 0 {
		limit = ListLimitDefault
	}
	if limit < 1 || limit > ListLimitMax {
		return nil, invalid("limit", "%d is outside 1..%d", limit, ListLimitMax)
	}
	var cur listCursor
	if req.Cursor != "" {
		var err error
		if cur, err = decodeCursor(req.Cursor); err != nil {
			return nil, err
		}
	}
	indexes := indexesFor(req.State)

	// Every lane of the namespace on every partition, in a fixed order.
	var lanesByP [][]string
	if req.Lane != "" {
		for range s.cfg.FlowPartitions {
			lanesByP = append(lanesByP, []string{req.Lane})
		}
	} else {
		cmds := make(valkey.Commands, s.cfg.FlowPartitions)
		for p := range cmds {
			cmds[p] = s.c.B().Smembers().Key(s.k.anchor(p)).Build()
		}
		for p, r := range s.c.DoMulti(ctx, cmds...) {
			members, err := r.AsStrSlice()
			if err != nil {
				return nil, fmt.Errorf("store: list lanes of partition %d: %w", p, err)
			}
			var lanes []string
			for _, m := range members {
				if ns, lane, ok := strings.Cut(m, ":"); ok && ns == req.Namespace {
					lanes = append(lanes, lane)
				}
			}
			slices.Sort(lanes)
			lanesByP = append(lanesByP, lanes)
		}
	}
	// Running executions are in their partition's lease index only, which
	// holds every lane's: without a lane filter it is read once per
	// partition (lane "", before the lanes), not once per lane.
	active := slices.Index(indexes, indexActive)
	var sources []listSource
	add := func(src listSource) {
		if req.Cursor == "" || !src.less(cur.src) {
			sources = append(sources, src)
		}
	}
	for p, lanes := range lanesByP {
		if len(lanes) == 0 {
			continue
		}
		if active >= 0 && req.Lane == "" {
			add(listSource{p, "", active})
		}
		for _, lane := range lanes {
			for i := range indexes {
				if i != active || req.Lane != "" {
					add(listSource{p, lane, i})
				}
			}
		}
	}

	page := &ListPage{}
	scanned := 0
	for _, src := range sources {
		var offset int64
		if src == cur.src {
			offset = cur.offset
		}
		for {
			if len(page.Executions) >= limit || scanned >= listScanMax {
				page.Cursor = listCursor{src, offset}.encode()
				return page, nil
			}
			n := int64(limit - len(page.Executions))
			key := s.k.lane(src.p, req.Namespace, src.lane, indexes[src.index])
			if indexes[src.index] == indexActive {
				// Running executions are in the partition's lease index
				// only: read it, keep this lane's.
				key = s.k.leases(src.p)
			}
			var cmd valkey.Completed
			if indexes[src.index] == indexTerminal {
				cmd = s.c.B().Zrange().Key(key).Min(strconv.FormatInt(offset, 10)).Max(strconv.FormatInt(offset+n-1, 10)).Rev().Build()
			} else {
				cmd = s.c.B().Zrange().Key(key).Min(strconv.FormatInt(offset, 10)).Max(strconv.FormatInt(offset+n-1, 10)).Build()
			}
			members, err := s.c.Do(ctx, cmd).AsStrSlice()
			if err != nil {
				return nil, fmt.Errorf("store: list %s: %w", key, err)
			}
			if len(members) == 0 {
				break
			}
			offset += int64(len(members))
			scanned += len(members)
			execs, err := s.readListed(ctx, src.p, members)
			if err != nil {
				return nil, err
			}
			for _, e := range execs {
				if indexes[src.index] == indexActive && (e.Namespace != req.Namespace || src.lane != "" && e.Lane != src.lane) {
					continue
				}
				if req.State == "" || e.State.Public == req.State {
					page.Executions = append(page.Executions, e)
				}
			}
			if int64(len(members)) < n {
				break
			}
		}
	}
	return page, nil
}

// readListed reads the listed fields of executions of partition p.
func (s *Store) readListed(ctx context.Context, p int, uuids []string) ([]*Execution, error) {
	cmds := make(valkey.Commands, len(uuids))
	for i, u := range uuids {
		cmds[i] = s.c.B().Hmget().Key(s.k.core(p, u)).Field(listFields...).Build()
	}
	var out []*Execution
	for i, r := range s.c.DoMulti(ctx, cmds...) {
		v, err := r.ToArray()
		if err != nil {
			return nil, fmt.Errorf("store: read execution: %w", err)
		}
		f := make(map[string]string, len(listFields))
		for j, name := range listFields {
			if !v[j].IsNil() {
				f[name] = str(v[j])
			}
		}
		if f["state"] == "" {
			continue // purged meanwhile
		}
		out = append(out, decodeExecution(p, uuids[i], f))
	}
	return out, nil
}
