package store

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/flowfabric/ff/compiler/plan"
	"github.com/valkey-io/valkey-go"
)

// Flow staging limits.
const (
	// MaxFlowExecs bounds the executions of one flow run.
	MaxFlowExecs = plan.MaxExecs
	// StageChunkExecs is the number of executions written per FCALL when a
	// run is staged in chunks: runs of more executions are staged chunk by
	// chunk, invisible until one commit call, so that no call blocks the
	// server for long.
	StageChunkExecs = 500
	// StagingTTL is how long an uncommitted chunked staging may take before
	// retention deletes it.
	StagingTTL = 10 * time.Minute
)

// RunID identifies a flow run: "N.<uuid>" where N is the partition of the
// run and of every one of its executions.
type RunID string

// Partition returns the partition encoded in the id.
func (id RunID) Partition() (int, error) {
	p, _, err := splitID(string(id))
	return p, err
}

// RunState is the state of a flow run.
type RunState string

// Values of RunState.
const (
	RunRunning   RunState = "running"
	RunSucceeded RunState = "succeeded" // the result exec succeeded, or (no result exec) no failure went unhandled
	RunFailed    RunState = "failed"    // the result exec did not succeed, or a failure had no on failure/on done edge
	RunCancelled RunState = "cancelled" // CancelRun, or (no result exec) a member was cancelled on its own
)

// StageRequest asks for a run of a compiled flow.
type StageRequest struct {
	// Flow is read only: callers share one plan between runs, concurrently
	// (the API's templates and its cache of plans).
	Flow *plan.Flow
	// Shared says Flow will be staged again (a template, a cached plan):
	// the store keeps what it derives from it for the next runs. A plan
	// decoded for one run is not kept (it would push out shared ones and
	// stay alive for nothing).
	Shared         bool
	Namespace      string // "" = the flow's namespace
	Input          []byte // the run's input (JSON), at most MaxPayloadBytes
	IdempotencyKey string // a repeat returns the first run
	// IdempotencyTTL is how long the key is held; 0 = Config.IdempotencyTTL.
	IdempotencyTTL time.Duration
	// Staging, when set, is called with the new run's id once the request
	// is valid and before anything is written: a caller that will wait for
	// the run's end can watch for it before the run can end. (With an
	// idempotency key the run returned may be an earlier one.)
	Staging func(RunID)
}

// Run is a flow run.
type Run struct {
	ID             RunID     `json:"id"`
	Namespace      string    `json:"namespace"`
	Flow           string    `json:"flow"`
	State          RunState  `json:"state"`
	Total          int       `json:"total"`
	Done           int       `json:"done"`
	Succeeded      int       `json:"succeeded"`
	Failed         int       `json:"failed"`
	Skipped        int       `json:"skipped"`
	Cancelled      int       `json:"cancelled"`
	ResultNode     string    `json:"result_node,omitempty"` // exec name
	Result         []byte    `json:"result,omitempty"`      // the result exec's output, once the run succeeded
	CreatedAt      time.Time `json:"created_at"`
	EndedAt        time.Time `json:"ended_at,omitzero"`
	IdempotencyKey string    `json:"idempotency_key,omitempty"` // the key it was staged with
	Replays        int       `json:"replays,omitempty"`         // times ReplayRun restarted it
	ReplayedAt     time.Time `json:"replayed_at,omitzero"`      // the last of those
	// Nodes are the members in flow order: every one of them (GetRun,
	// StageFlow), or one page (GetRunPage).
	Nodes []RunNode `json:"nodes,omitempty"`
	// NextCursor is where the page after Nodes starts (GetRunPage's
	// cursor); "" when Nodes ends with the run's last member.
	NextCursor string `json:"next_cursor,omitempty"`
	// Failures are the members that failed, expired or were cancelled, in
	// flow order: all of them, whatever page Nodes holds. ResultState is
	// the public state of the result exec. Both are set when the members
	// were read (not by GetRunOutcome's read of a clean success).
	Failures    []RunFailure `json:"failures,omitempty"`
	ResultState PublicState  `json:"result_state,omitempty"`
	// Input is the run's input as staged (GetRun and GetRunPage only).
	Input []byte `json:"input,omitempty"`
}

// RunFailure is a member of a run that failed, expired or was cancelled:
// its name, execution, public state and failure (RunNode.Error).
type RunFailure struct {
	Name        string      `json:"name"`
	ExecutionID ExecutionID `json:"execution_id"`
	State       PublicState `json:"state"`
	Error       string      `json:"error,omitempty"`
}

// failedState reports whether a member in public state st is one of a
// run's failures (Run.Failures).
func failedState(st PublicState) bool {
	return st == StateFailed || st == StateExpired || st == StateCancelled
}

// RunNode is one execution of a run, as GetRun reports it.
type RunNode struct {
	Name        string      `json:"name"`
	ExecutionID ExecutionID `json:"execution_id"`
	Kind        string      `json:"kind"`
	Lane        string      `json:"lane"`
	State       StateVector `json:"state"`
	Attempts    int         `json:"attempts"`
	Error       string      `json:"error,omitempty"`
	StartedAt   time.Time   `json:"started_at,omitzero"`
	EndedAt     time.Time   `json:"ended_at,omitzero"`
	Upstreams   []RunEdge   `json:"upstreams,omitempty"` // the members it waits for, by name
	// RequiredCapabilities are the capabilities a worker must have to run
	// it (its requires).
	RequiredCapabilities []string `json:"required_capabilities,omitempty"`
}

// RunEdge is an upstream of a run member: its name and the condition of
// the edge (plan.OnSuccess, OnFailure or OnDone).
type RunEdge struct {
	Name string `json:"name"`
	On   string `json:"on"`
}

// RunsChannel returns the pub/sub channel on which a run's end is
// published as "<run id>:<state>".
func (s *Store) RunsChannel() string { return s.cfg.KeyPrefix + "ff:runs" }

// StageFlow validates req and stages a run: the run record, every
// execution and every edge in one FCALL on one partition. Roots are
// eligible at once; the others wait (pending) until their joins are
// satisfied. With an idempotency key a repeat returns the first run (as
// GetRunPage reads its first page) and created=false. A new run is
// returned as staged, with every member (running, its roots waiting and
// the others pending), without reading it back: by the time the caller
// looks, a root may already be running (GetRun tells). The
// budgets and quotas the run uses are created (when absent) before it is
// staged: a run never runs without its limits.
func (s *Store) StageFlow(ctx context.Context, req StageRequest) (*Run, bool, error) {
	f := req.Flow
	if f == nil {
		return nil, false, invalid("flow", "is required")
	}
	ns := req.Namespace
	if ns == "" {
		ns = f.Namespace
	}
	if ns == "" {
		ns = plan.DefaultNamespace
	}
	if err := checkName("namespace", ns); err != nil {
		return nil, false, err
	}
	if err := checkPayload("input", req.Input); err != nil {
		return nil, false, err
	}
	if err := checkIdempotencyKey(req.IdempotencyKey); err != nil {
		return nil, false, err
	}
	pf, err := s.prepare(f, req.Shared)
	if err != nil {
		return nil, false, err
	}
	var p int
	if req.IdempotencyKey != "" {
		p = s.partitionFor(ns, "run\x00"+req.IdempotencyKey)
	} else {
		p = s.streakPartition()
	}
	ids := newUUIDs(1 + len(f.Execs))
	runUUID, uuids := ids[0], ids[1:]
	resultUUID := ""
	if f.Result != "" {
		resultUUID = uuids[pf.g.index[f.Result]]
	}
	idemTTL := cmp.Or(req.IdempotencyTTL, s.cfg.IdempotencyTTL)
	if idemTTL < time.Second {
		return nil, false, invalid("idempotency_ttl", "%s is under a second", idemTTL)
	}
	head := []string{runUUID, ns, f.Name, resultUUID, req.IdempotencyKey, ms(idemTTL), string(req.Input)}
	id := RunID(makeID(p, runUUID))
	refs := newStageRefs(f, ns, id, req.Input)
	if err := s.readQuotaKeys(ctx, refs); err != nil {
		return nil, false, err
	}
	// Every member's entries in one slice.
	n := 0
	for i := range pf.members {
		n += pf.members[i].argsMax()
	}
	all := make([]string, 0, n)
	members := make([][]string, len(f.Execs))
	for i := range pf.members {
		start := len(all)
		if all, err = pf.members[i].appendArgs(all, uuids, refs); err != nil {
			return nil, false, err
		}
		members[i] = all[start:len(all):len(all)]
	}
	if err := refs.checkResources(f); err != nil {
		return nil, false, err
	}
	if req.Staging != nil {
		req.Staging(id)
	}
	// The budgets and quotas the run uses exist before it is visible, so
	// it never runs without its limits (nor drops usage reported to a
	// budget not created yet). A repeat of an idempotency key creates
	// nothing for a run it will not stage: it repairs the first run's
	// below instead. Staging is then told the key was held, and stages
	// nothing if the key was released in the meantime (answer
	// "released"): the run is new after all, and gets its resources
	// before a second staging call.
	held := false
	if refs.usesResources() {
		if req.IdempotencyKey != "" {
			n, err := s.c.Do(ctx, s.c.B().Exists().Key(s.k.runIdem(p, ns, req.IdempotencyKey)).Build()).AsInt64()
			if err != nil {
				return nil, false, fmt.Errorf("store: read run idempotency key: %w", err)
			}
			held = n > 0
		}
		if !held {
			if err := s.registerResources(ctx, f, ns, id, refs); err != nil {
				return nil, false, err
			}
		}
	}
	chunked := len(members) > StageChunkExecs
	if chunked {
		if err := s.writeChunks(ctx, p, id, runUUID, ns, req.Input, members); err != nil {
			s.abandonStaging(ctx, p, runUUID)
			return nil, false, err
		}
	}
	order := runOrderOf(pf, uuids)
	if s.hook != nil {
		s.hook("stage", runUUID)
	}
	items, err := s.stageCall(ctx, p, id, head, f, members, order, chunked, held)
	if err == nil && str(items[0]) == "released" {
		if err := s.registerResources(ctx, f, ns, id, refs); err != nil {
			return nil, false, err
		}
		items, err = s.stageCall(ctx, p, id, head, f, members, order, chunked, false)
		if err == nil && str(items[0]) == "released" {
			return nil, false, fmt.Errorf("store: stage run %s: released again although not held", id)
		}
	}
	if ie := (*IdempotencyError)(nil); errors.As(err, &ie) {
		ie.Key, ie.RunID = req.IdempotencyKey, RunID(makeID(p, string(ie.RunID)))
	}
	if err != nil {
		return nil, false, err
	}
	if str(items[0]) == "duplicate" {
		first, err := s.GetRunPage(ctx, RunID(makeID(p, str(items[1]))), "", 0)
		if err != nil {
			return nil, false, fmt.Errorf("store: read first run of idempotency key: %w", err)
		}
		// Create what the first run's resources lack (only what is
		// absent): a run staged while its budgets were created after it
		// may have none.
		if refs.usesResources() {
			if err := s.registerResources(ctx, f, ns, first.ID, refs); err != nil {
				return nil, false, err
			}
		}
		return first, false, nil
	}
	run := stagedRun(f, pf, ns, id, p, uuids, fromMs(str(items[1])), req.Input)
	run.IdempotencyKey = req.IdempotencyKey
	return run, true, nil
}

// The states ff_stage_flow and ff_commit_flow write for roots and for the
// other members of a new run.
var (
	stagedRootState   = decodeState("runnable unowned eligible_now waiting_for_worker none pending_first_attempt waiting", "")
	stagedMemberState = decodeState("runnable unowned blocked_by_dependencies waiting_for_dependencies none pending_first_attempt pending", "")
)

// stagedRun is the run just staged, as GetRun would read it at once.
func stagedRun(f *plan.Flow, pf *preparedFlow, ns string, id RunID, p int, uuids []string, created time.Time, input []byte) *Run {
	run := &Run{ID: id, Namespace: ns, Flow: f.Name, State: RunRunning, Total: len(f.Execs),
		ResultNode: f.Result, CreatedAt: created, Nodes: make([]RunNode, 0, len(f.Execs))}
	if len(input) > 0 && string(input) != "null" {
		run.Input = input
	}
	// The run's own copy of the members' upstreams (the plan's are shared
	// by every run staged from it): one allocation.
	var slab []RunEdge
	if pf.upEdges > 0 {
		slab = make([]RunEdge, 0, pf.upEdges)
	}
	for _, i := range pf.inOrder {
		m := &pf.members[i]
		st := stagedRootState
		if len(m.ups) > 0 {
			st = stagedMemberState
		}
		var ups []RunEdge
		if len(m.upEdges) > 0 {
			start := len(slab)
			slab = append(slab, m.upEdges...)
			ups = slab[start:len(slab):len(slab)]
		}
		if m.name == f.Result {
			run.ResultState = st.Public
		}
		run.Nodes = append(run.Nodes, RunNode{Name: m.name, ExecutionID: makeID(p, uuids[i]), Kind: m.tail[1], Lane: m.lane, State: st,
			Upstreams: ups})
	}
	return run
}

// stageRefs resolves a flow's budget and quota names at staging.
type stageRefs struct {
	ns      string
	run     RunID
	input   []byte
	budgets map[string]plan.Budget
	quotas  map[string]plan.Quota
	used    map[string]bool // budget names referenced
	usedQ   map[string]bool // quota names referenced
	// stored holds the key path of the quotas already defined in the
	// namespace, by name: the definition admission enforces wins over the
	// plan's (an unkeyed quota must not get per-key subjects).
	stored map[string]string
}

// readQuotaKeys reads the key paths of the flow's quotas that are already
// defined (one pipelined read; none when the flow declares no quota).
func (s *Store) readQuotaKeys(ctx context.Context, r *stageRefs) error {
	if len(r.quotas) == 0 {
		return nil
	}
	names := make([]string, 0, len(r.quotas))
	ids := make([]string, 0, len(r.quotas))
	for name := range r.quotas {
		id := QuotaID(r.ns, name)
		if _, _, _, err := splitResourceID("flow.quota_defs", id, false); err != nil {
			continue // quota() reports it
		}
		names, ids = append(names, name), append(ids, id)
	}
	keys, err := s.quotaKeyFields(ctx, ids)
	if err != nil {
		return err
	}
	r.stored = map[string]string{}
	for i, name := range names {
		if k := keys[ids[i]]; k != nil {
			r.stored[name] = *k
		}
	}
	return nil
}

// newStageRefs returns the resolver of flow f's names for run.
func newStageRefs(f *plan.Flow, ns string, run RunID, input []byte) *stageRefs {
	r := &stageRefs{ns: ns, run: run, input: input, budgets: map[string]plan.Budget{}, quotas: map[string]plan.Quota{},
		used: map[string]bool{}, usedQ: map[string]bool{}}
	for _, b := range f.BudgetDefs {
		r.budgets[b.Name] = b
	}
	for _, q := range f.QuotaDefs {
		r.quotas[q.Name] = q
	}
	return r
}

// budget returns the budget id of a name referenced by a member: run-scoped
// budgets get one id per run.
func (r *stageRefs) budget(field, name string) (string, error) {
	b, ok := r.budgets[name]
	if !ok {
		return "", invalid(field, "budget %q is not declared in the flow's budget_defs", name)
	}
	r.used[name] = true
	if b.Scope == plan.ScopeRun {
		return RunBudgetID(r.ns, name, r.run), nil
	}
	return BudgetID(r.ns, name), nil
}

// quota returns the reference of a quota a member is admitted by. A keyed
// quota's key value is read from the member's own input (spec/language.md):
// for a member that takes the run's input, from the run's input now; for
// one that takes an upstream's result, unknown at staging, the reference is
// deferred ("<quota id>?<key path>") and the key value is read when the
// member is first claimed (settleQuotaKeys). A member without input has no
// key value: refused. A quota already defined is keyed as its definition
// says, whatever the plan says.
func (r *stageRefs) quota(field, name string, inputFrom int) (string, error) {
	q, ok := r.quotas[name]
	if !ok {
		return "", invalid(field, "quota %q is not declared in the flow's quota_defs", name)
	}
	r.usedQ[name] = true
	key := q.Key
	if k, ok := r.stored[name]; ok {
		key = k
	}
	if key == "" || inputFrom == inputFlow {
		return resolveQuota(field, r.ns, name, r.input, func(string) (string, bool) { return key, true })
	}
	id, _, _, err := quotaRefID(field, r.ns, name)
	if err != nil {
		return "", err
	}
	if inputFrom == inputNone {
		return "", invalid(field, "quota %s is keyed by %q, but the exec takes no input to read the key from", id, key)
	}
	return deferQuota(id, key), nil
}

// deferredNeed is an admission candidate of ff_claim with a deferred quota
// key: its quotas field as stored and its input.
type deferredNeed struct {
	c      Candidate
	uuid   string
	stored string
	input  []byte
}

// settleQuotaKeys reads the deferred quota keys of flow members of
// partition p from their inputs, stores the subjects (ff_resolve_quotas)
// and returns the members as candidates with their subjects. A member
// whose key cannot be read (its input lacks the field, or the value is not
// a valid key) fails with reason quota_key_invalid: its input will not
// change. Members changed since the claim read them (their quotas, or
// their reset count: a replay reset them, and their input is about to
// change) are left out (the next claim sees them as they are).
func (s *Store) settleQuotaKeys(ctx context.Context, p int, needs []deferredNeed) ([]Candidate, error) {
	args := make([]string, 0, 5*len(needs))
	resolved := make([][]string, len(needs))
	for i, n := range needs {
		var failure string
		for _, ref := range n.c.Quotas {
			sub := ref
			if id, path, ok := deferredQuota(ref); ok {
				k, err := extractKey("quotas", n.input, path)
				if err != nil {
					msg := err.Error()
					if ve := (*ValidationError)(nil); errors.As(err, &ve) {
						msg = ve.Msg
					}
					failure = "quota_key_invalid: quota " + id + ": " + msg
					break
				}
				sub = id + "=" + k
			}
			if !slices.Contains(resolved[i], sub) {
				resolved[i] = append(resolved[i], sub)
			}
		}
		joined := strings.Join(resolved[i], ",")
		if failure != "" {
			resolved[i], joined = nil, ""
		}
		args = append(args, n.uuid, strconv.Itoa(n.c.Resets), n.stored, joined, failure)
	}
	items, err := s.single(ctx, call{fn: "ff_resolve_quotas", partition: p, args: args}, "", "resolve quota keys")
	if err != nil {
		return nil, err
	}
	var out []Candidate
	for i, n := range needs {
		if i >= len(items) {
			return nil, fmt.Errorf("store: ff_resolve_quotas: %d results for %d members", len(items), len(needs))
		}
		if done, _ := items[i].AsInt64(); done == 1 && resolved[i] != nil {
			c := n.c
			c.Quotas = resolved[i]
			out = append(out, c)
		}
	}
	return out, nil
}

// checkResources validates the definitions of the budgets and quotas the
// members reference, as registerResources will write them: a bad
// definition refuses the staging before anything is written.
func (r *stageRefs) checkResources(f *plan.Flow) error {
	for i, b := range f.BudgetDefs {
		if !r.used[b.Name] {
			continue
		}
		spec := BudgetSpecFromPlan(r.ns, b, r.run)
		if _, err := budgetArgs(&spec, true); err != nil {
			return prefixField("flow.budget_defs["+strconv.Itoa(i)+"].", err)
		}
	}
	for i, q := range f.QuotaDefs {
		if !r.usedQ[q.Name] {
			continue
		}
		spec := QuotaSpecFromPlan(r.ns, q)
		if _, err := quotaArgs(&spec, true); err != nil {
			return prefixField("flow.quota_defs["+strconv.Itoa(i)+"].", err)
		}
	}
	return nil
}

// prefixField puts prefix before the field of a *ValidationError.
func prefixField(prefix string, err error) error {
	if ve := (*ValidationError)(nil); errors.As(err, &ve) {
		return &ValidationError{Field: prefix + ve.Field, Msg: ve.Msg, Err: ve.Err}
	}
	return err
}

// usesResources reports whether the run's members reference a budget or
// a quota.
func (r *stageRefs) usesResources() bool { return len(r.used) > 0 || len(r.usedQ) > 0 }

// registerResources makes the budgets and quotas a run uses exist, before
// the run is staged (and again, to repair, on a repeat of its idempotency
// key): run-scoped budgets are created for the run; shared budgets and
// quotas are created from the plan's definitions. Each only when absent:
// an existing run-scoped budget keeps its usage, and an existing shared
// one or quota is left as it is (ffrun --flows and the API own their
// definitions).
func (s *Store) registerResources(ctx context.Context, f *plan.Flow, ns string, run RunID, refs *stageRefs) error {
	if s.hook != nil {
		s.hook("resources", string(run))
	}
	for _, b := range f.BudgetDefs {
		if !refs.used[b.Name] {
			continue
		}
		spec := BudgetSpecFromPlan(ns, b, run)
		st, err := s.upsertBudget(ctx, spec, true)
		if err != nil {
			return fmt.Errorf("store: register budget %s of run %s: %w", b.Name, run, err)
		}
		if st == "differs" {
			s.warnDiffers(ctx, "budget", spec.ID, f.Name, "PUT /v1/budgets")
		}
	}
	for _, q := range f.QuotaDefs {
		if !refs.usedQ[q.Name] {
			continue
		}
		spec := QuotaSpecFromPlan(ns, q)
		st, err := s.upsertQuota(ctx, spec, true)
		if err != nil {
			return fmt.Errorf("store: register quota %s of run %s: %w", q.Name, run, err)
		}
		if st == "differs" {
			s.warnDiffers(ctx, "quota", spec.ID, f.Name, "PUT /v1/quotas")
		}
	}
	return nil
}

// differsWarnEvery is how often staging warns, per budget or quota, that
// a plan defines it otherwise than the server.
const differsWarnEvery = 10 * time.Minute

// warnDiffers logs, at most once per differsWarnEvery and resource, that a
// run was staged under the stored definition of a shared budget or quota
// although its plan defines it otherwise: staging creates resources, it
// does not change them.
func (s *Store) warnDiffers(ctx context.Context, kind, id, flow, route string) {
	now := time.Now()
	if last, ok := s.warned.Load(kind + " " + id); ok && now.Sub(last.(time.Time)) < differsWarnEvery {
		return
	}
	s.warned.Store(kind+" "+id, now)
	s.log.WarnContext(ctx, "the plan defines this "+kind+" otherwise than the server; runs use the server's definition (ffrun --flows with the new file, or "+route+", changes it)",
		slog.String(kind, id), slog.String("flow", flow))
}

// writeChunks writes the members of a large run in chunks, invisible
// until the run is committed (stageCall).
func (s *Store) writeChunks(ctx context.Context, p int, id RunID, runUUID, ns string, input []byte, members [][]string) error {
	for start := 0; start < len(members); start += StageChunkExecs {
		args := []string{runUUID, ns, string(input), ms(StagingTTL)}
		for _, m := range members[start:min(start+StageChunkExecs, len(members))] {
			args = append(append(args, strconv.Itoa(len(m))), m...)
		}
		if _, err := s.single(ctx, call{fn: "ff_stage_chunk", partition: p, args: args}, ExecutionID(id), "stage"); err != nil {
			return err
		}
		if s.hook != nil {
			s.hook("chunk", runUUID)
		}
	}
	return nil
}

// abandonStaging hands the chunks of a staging that will not be committed
// (writeChunks failed: a transport error, or the caller gave up between
// two chunks) to retention at once, rather than after StagingTTL: it
// makes the staging due now (ZADD XX, nothing when no chunk was written),
// and retention deletes its members about its limit per call. Best
// effort, and bounded (one command): when it fails, or a chunk still in
// flight lands after it (registering the staging anew), the members wait
// out StagingTTL as before. It runs even when ctx is done, for a short
// while.
func (s *Store) abandonStaging(ctx context.Context, p int, runUUID string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), abandonStagingTimeout)
	defer cancel()
	cmd := s.c.B().Zadd().Key(s.k.base(p)+":staging").Xx().ScoreMember().ScoreMember(0, runUUID).Build()
	if err := s.c.Do(ctx, cmd).Error(); err != nil {
		s.log.WarnContext(ctx, "store: hand an abandoned staging to retention (its chunks wait out the staging lifetime)",
			slog.String("run", string(makeID(p, runUUID))), slog.Any("error", err))
	}
}

// abandonStagingTimeout bounds abandonStaging.
const abandonStagingTimeout = 2 * time.Second

// runOrderOf is the order key of a run of pf whose members have uuids
// (by exec index): "<name>=<uuid>,…" in flow order.
func runOrderOf(pf *preparedFlow, uuids []string) string {
	var b strings.Builder
	n := 0
	for _, i := range pf.inOrder {
		n += len(pf.members[i].name) + len(uuids[i]) + 2
	}
	b.Grow(n)
	for k, i := range pf.inOrder {
		if k > 0 {
			b.WriteByte(',')
		}
		b.WriteString(pf.members[i].name)
		b.WriteByte('=')
		b.WriteString(uuids[i])
	}
	return b.String()
}

// stageCall makes the run visible in one call: ff_stage_flow with every
// member, or ff_commit_flow for the members writeChunks wrote; both write
// the run's order key (runOrderOf). held says the idempotency key was
// found held (see StageFlow).
func (s *Store) stageCall(ctx context.Context, p int, id RunID, head []string, f *plan.Flow, members [][]string, order string,
	chunked, held bool) ([]valkey.ValkeyMessage, error) {
	heldArg := ""
	if held {
		heldArg = "1"
	}
	if !chunked {
		n := len(head) + 2
		for _, m := range members {
			n += 1 + len(m)
		}
		args := append(append(make([]string, 0, n), head...), heldArg, order)
		for _, m := range members {
			args = append(append(args, strconv.Itoa(len(m))), m...)
		}
		return s.single(ctx, call{fn: "ff_stage_flow", partition: p, args: args}, ExecutionID(id), "stage")
	}
	args := append(slices.Clone(head), heldArg, strconv.Itoa(len(members)))
	for i, x := range f.Execs {
		// members[i] starts with name, uuid, lane, priority, join_need,
		// deps_total; the deadline runs from the commit.
		m := members[i]
		args = append(args, m[0], m[1], m[2], m[3], m[5], strconv.FormatInt(x.DeadlineMs, 10))
	}
	args = append(args, order)
	items, err := s.single(ctx, call{fn: "ff_commit_flow", partition: p, args: args}, ExecutionID(id), "stage")
	if errors.Is(err, ErrNotFound) {
		// The chunks were written above: finding none means retention
		// dropped them all (the staging took longer than its lifetime).
		return nil, stagingExpired(ExecutionID(id))
	}
	return items, err
}

// graph is the validated shape of a flow.
type graph struct {
	index map[string]int      // exec name -> position
	ups   map[string][]string // exec -> upstreams, sorted
	out   map[string][]plan.Edge
}

// newGraph checks the parts of a plan the runtime relies on: the compiler
// checks much more, but a plan may come over HTTP.
func newGraph(f *plan.Flow) (*graph, error) {
	if len(f.Execs) == 0 || len(f.Execs) > MaxFlowExecs {
		return nil, invalid("flow.execs", "%d execs, want 1..%d", len(f.Execs), MaxFlowExecs)
	}
	g := &graph{index: map[string]int{}, ups: map[string][]string{}, out: map[string][]plan.Edge{}}
	for i, x := range f.Execs {
		field := func() string { return "flow.execs[" + strconv.Itoa(i) + "]" } // only on error
		if x.Name == "" || strings.ContainsAny(x.Name, ",=: \t\n") {
			return nil, invalid(field()+".name", "%q is not a valid exec name", x.Name)
		}
		if _, dup := g.index[x.Name]; dup {
			return nil, invalid(field()+".name", "exec %q is declared twice", x.Name)
		}
		g.index[x.Name] = i
	}
	seen := map[[2]string]bool{}
	for i, e := range f.Edges {
		field := func() string { return "flow.edges[" + strconv.Itoa(i) + "]" } // only on error
		_, okFrom := g.index[e.From]
		_, okTo := g.index[e.To]
		switch {
		case !okFrom || !okTo:
			return nil, invalid(field(), "edge %s -> %s names an unknown exec", e.From, e.To)
		case e.From == e.To:
			return nil, invalid(field(), "edge %s -> %s links an exec to itself", e.From, e.To)
		case seen[[2]string{e.From, e.To}]:
			return nil, invalid(field(), "edge %s -> %s appears twice", e.From, e.To)
		}
		switch e.On {
		case plan.OnSuccess, plan.OnFailure, plan.OnDone:
		default:
			return nil, invalid(field()+".on", "%q: want success, failure or done", e.On)
		}
		seen[[2]string{e.From, e.To}] = true
		g.ups[e.To] = append(g.ups[e.To], e.From)
		g.out[e.From] = append(g.out[e.From], e)
	}
	for _, u := range g.ups {
		slices.Sort(u)
	}
	// Kahn: every exec must be reachable in topological order (no cycle),
	// or members would wait forever.
	indeg := map[string]int{}
	for name, u := range g.ups {
		indeg[name] = len(u)
	}
	var queue []string
	for _, x := range f.Execs {
		if indeg[x.Name] == 0 {
			queue = append(queue, x.Name)
		}
	}
	visited := 0
	for len(queue) > 0 {
		n := queue[0]
		queue = queue[1:]
		visited++
		for _, e := range g.out[n] {
			if indeg[e.To]--; indeg[e.To] == 0 {
				queue = append(queue, e.To)
			}
		}
	}
	if visited != len(f.Execs) {
		return nil, invalid("flow.edges", "the edges form a cycle")
	}
	if f.Result != "" {
		if _, ok := g.index[f.Result]; !ok {
			return nil, invalid("flow.result", "names unknown exec %q", f.Result)
		}
	}
	return g, nil
}

// memberPlan is what staging writes for one exec, as far as it does not
// depend on the run: checked and derived once per plan (prepareFlow).
type memberPlan struct {
	index                                                    int    // in f.Execs
	name, lane, priority, need, depsTotal, handled, deadline string // handled: "1" or ""
	// inputFrom is inputFlow, inputNone or the index of the feeding upstream.
	inputFrom int
	ups       []upPlan   // upstreams, by name
	upEdges   []RunEdge  // the same with their conditions (copied into each staged run's RunNode.Upstreams)
	out       []edgePlan // edges out
	budgets   []string   // names: ids depend on the namespace and the run
	quotas    []string   // names: subjects may depend on the run's input (or be deferred)
	tail      []string   // field/value pairs stored verbatim (kind, caps, handoff, retry policy, timeout)
}

// Values of memberPlan.inputFrom that are not an exec index.
const (
	inputFlow = -1 // the run's input
	inputNone = -2 // no input
)

// upPlan is an upstream of a member: its index and name.
type upPlan struct {
	index int
	name  string
}

// edgePlan is an edge out of a member: the downstream's index and the
// condition.
type edgePlan struct {
	to int
	on string
}

// prepareMember checks exec x (the i-th of f) and derives its memberPlan.
func prepareMember(f *plan.Flow, x plan.Exec, i int, g *graph) (memberPlan, error) {
	field := fmt.Sprintf("flow.execs[%d]", i)
	lane := cmp.Or(x.Lane, f.Lane, plan.DefaultLane)
	if err := checkName(field+".lane", lane); err != nil {
		return memberPlan{}, err
	}
	kind := x.Kind
	if kind == "" {
		kind = f.Name + "." + x.Name
	}
	if err := checkToken(field+".kind", kind, MaxKindBytes); err != nil {
		return memberPlan{}, err
	}
	if err := checkPriority(x.Priority); err != nil {
		return memberPlan{}, invalid(field+".priority", "%s", err.(*ValidationError).Msg)
	}
	caps, err := normCapabilities(field+".requires", x.Requires)
	if err != nil {
		return memberPlan{}, err
	}
	retry := RetryPolicyFromPlan(x.Retry)
	if err := checkRetry(retry); err != nil {
		return memberPlan{}, err
	}
	retry.Attempts = max(retry.Attempts, 1)
	if retry.Backoff == "" {
		retry.Backoff = BackoffFixed
	}
	if x.TimeoutMs < 0 || x.DeadlineMs < 0 {
		return memberPlan{}, invalid(field, "timeouts must not be negative")
	}
	ups := g.ups[x.Name]
	need, jerr := joinNeed(x, len(ups))
	if jerr != nil {
		return memberPlan{}, invalid(field+".join."+jerr.field, "%s", jerr.msg)
	}
	m := memberPlan{index: i, name: x.Name, lane: lane, priority: strconv.Itoa(x.Priority), need: strconv.Itoa(need),
		depsTotal: strconv.Itoa(len(ups)), deadline: strconv.FormatInt(x.DeadlineMs, 10), inputFrom: inputNone}
	switch {
	case x.InputFrom == plan.InputFlow || x.InputFrom == "" && len(ups) == 0:
		m.inputFrom = inputFlow
	case x.InputFrom == plan.InputExec || x.InputFrom == "" && len(ups) == 1:
		src := x.InputExec
		if src == "" && len(ups) == 1 {
			src = ups[0]
		}
		if !slices.Contains(ups, src) {
			return memberPlan{}, invalid(field+".input_exec", "%q is not an upstream of %q", src, x.Name)
		}
		m.inputFrom = g.index[src]
	case x.InputFrom == plan.InputNone || x.InputFrom == "":
	default:
		return memberPlan{}, invalid(field+".input_from", "%q: want flow, exec or none", x.InputFrom)
	}
	for _, u := range ups {
		m.ups = append(m.ups, upPlan{index: g.index[u], name: u})
	}
	handoff := ""
	for _, e := range g.out[x.Name] {
		m.out = append(m.out, edgePlan{to: g.index[e.To], on: e.On})
		if e.On != plan.OnSuccess {
			m.handled = "1"
		}
		// The success of x alone fires a downstream whose join needs one
		// edge: a hand-off may grant it (ff_claim's downstream flag).
		if e.On != plan.OnFailure {
			to := f.Execs[g.index[e.To]]
			if n, jerr := joinNeed(to, len(g.ups[e.To])); jerr == nil && n == 1 {
				handoff = "1"
			}
		}
	}
	m.budgets = append(slices.Clone(f.Budgets), x.Budgets...)
	m.quotas = slices.Clone(x.Quotas)
	jitter := "0"
	if retry.Jitter {
		jitter = "1"
	}
	m.tail = []string{"kind", kind}
	if x.Name == f.Result {
		// Its end records the run's result outcome.
		m.tail = append(m.tail, "is_result", "1")
	}
	// The join counters: none for a root, and the need only when it is
	// not every upstream (a missing join_need reads as deps_total).
	joinNeed := ""
	if m.need != m.depsTotal {
		joinNeed = m.need
	}
	for _, kv := range [][2]string{
		{"deps_total", nonDefault(m.depsTotal, "0")}, {"join_need", joinNeed},
		{"caps", caps}, {"handoff", handoff},
		{"retry_attempts", nonDefault(strconv.Itoa(retry.Attempts), "1")},
		{"retry_backoff", nonDefault(retry.Backoff, BackoffFixed)},
		{"retry_delay_ms", nonDefault(ms(retry.Delay), "0")},
		{"retry_max_delay_ms", nonDefault(ms(retry.MaxDelay), "0")},
		{"retry_jitter", nonDefault(jitter, "0")},
		{"attempt_timeout_ms", nonDefault(strconv.FormatInt(x.TimeoutMs, 10), "0")},
	} {
		if kv[1] != "" {
			m.tail = append(m.tail, kv[0], kv[1])
		}
	}
	return m, nil
}

// args returns the ff_stage_flow entries of the member (after the count)
// for a run whose members have uuids (by exec index).
func (m *memberPlan) args(uuids []string, refs *stageRefs) ([]string, error) {
	return m.appendArgs(make([]string, 0, m.argsMax()), uuids, refs)
}

// argsMax bounds the number of entries args returns.
func (m *memberPlan) argsMax() int { return 8 + len(m.tail) + 12 }

// appendArgs appends args' entries to dst: the members of a run share one
// slice (StageFlow).
func (m *memberPlan) appendArgs(dst []string, uuids []string, refs *stageRefs) ([]string, error) {
	var budgets, quotas string
	if len(m.budgets) > 0 || len(m.quotas) > 0 {
		field := fmt.Sprintf("flow.execs[%d]", m.index)
		var err error
		if budgets, err = memberRefs(field+".budgets", m.budgets, refs.budget); err != nil {
			return nil, err
		}
		quota := func(field, name string) (string, error) { return refs.quota(field, name, m.inputFrom) }
		if quotas, err = memberRefs(field+".quotas", m.quotas, quota); err != nil {
			return nil, err
		}
	}
	takesInput := "0"
	if m.inputFrom == inputFlow {
		takesInput = "1"
	}
	// The upstreams ("name=uuid,…") and the edges out ("uuid:on,…"),
	// written into one string of their exact size.
	upsLen, outLen := 0, 0
	for j, u := range m.ups {
		upsLen += min(j, 1) + len(u.name) + 1 + len(uuids[u.index])
	}
	for j, e := range m.out {
		outLen += min(j, 1) + len(uuids[e.to]) + 1 + len(e.on)
	}
	var b strings.Builder
	b.Grow(upsLen + outLen)
	for j, u := range m.ups {
		if j > 0 {
			b.WriteByte(',')
		}
		b.WriteString(u.name)
		b.WriteByte('=')
		b.WriteString(uuids[u.index])
	}
	for j, e := range m.out {
		if j > 0 {
			b.WriteByte(',')
		}
		b.WriteString(uuids[e.to])
		b.WriteByte(':')
		b.WriteString(e.on)
	}
	both := b.String()
	ups, out := both[:upsLen], both[upsLen:]
	// Optional fields go among the verbatim pairs, only when set: the
	// server writes no empty field.
	item := append(dst, m.name, uuids[m.index], m.lane, m.priority, m.need, m.depsTotal, takesInput, m.deadline)
	item = append(item, m.tail...)
	for _, kv := range [...][2]string{
		{"ups", ups}, {"out", out}, {"handled", m.handled}, {"budgets", budgets}, {"quotas", quotas},
	} {
		if kv[1] != "" {
			item = append(item, kv[0], kv[1])
		}
	}
	if m.inputFrom >= 0 {
		item = append(item, "input_from", uuids[m.inputFrom])
	}
	return item, nil
}

// memberRefs resolves the budget or quota names of a member with resolve
// and returns the distinct references, checked and comma-joined.
func memberRefs(field string, names []string, resolve func(field, name string) (string, error)) (string, error) {
	var out []string
	for _, name := range names {
		ref, err := resolve(field, name)
		if err != nil {
			return "", err
		}
		if !slices.Contains(out, ref) {
			out = append(out, ref)
		}
	}
	return checkRefs(field, out)
}

// joinError is a bad join of an exec: the field under "join" and why.
type joinError struct{ field, msg string }

// joinNeed returns how many of its n incoming edges must hold for exec x
// to run.
func joinNeed(x plan.Exec, n int) (int, *joinError) {
	switch x.Join.Kind {
	case plan.JoinAll, "":
		return n, nil
	case plan.JoinAny:
		return min(1, n), nil
	case plan.JoinCount:
		if x.Join.N < 1 || x.Join.N > n {
			return 0, &joinError{"n", fmt.Sprintf("%d is outside 1..%d (its upstreams)", x.Join.N, n)}
		}
		return x.Join.N, nil
	}
	return 0, &joinError{"kind", fmt.Sprintf("%q: want all, any or count", x.Join.Kind)}
}

// runOf is a run as its record f says, without members.
func runOf(id RunID, f map[string]string) *Run {
	r := &Run{
		ID: id, Namespace: f["ns"], Flow: f["flow"], State: RunState(f["state"]),
		Total: atoi(f["total"]), Failed: atoi(f["failed"]), Skipped: atoi(f["skipped"]), Cancelled: atoi(f["cancelled"]),
		CreatedAt: fromMs(f["created_at"]), EndedAt: fromMs(f["ended_at"]),
		Replays: atoi(f["replays"]), ReplayedAt: fromMs(f["replayed_at"]), IdempotencyKey: f["idem_key"],
	}
	if left, ok := f["left"]; ok {
		// A member's end only counts down left; successes are what is
		// not counted otherwise (spec/runtime.md, the run record).
		r.Done = r.Total - atoi(left)
		r.Succeeded = r.Done - r.Failed - r.Skipped - r.Cancelled
	} else {
		// A run staged before left existed, not converted yet.
		r.Done, r.Succeeded = atoi(f["done"]), atoi(f["succeeded"])
	}
	return r
}

// runOutcome reads run uuid of partition p with ff_run_outcome: the run
// without members, the uuid of its result exec, and whether it succeeded
// with no failed or cancelled member (then with its result).
func (s *Store) runOutcome(ctx context.Context, p int, uuid string, id RunID) (*Run, string, bool, error) {
	items, err := s.single(ctx, call{fn: "ff_run_outcome", partition: p, args: []string{uuid}}, ExecutionID(id), "read run")
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			return nil, "", false, fmt.Errorf("%w: run %s", ErrNotFound, id)
		}
		return nil, "", false, err
	}
	run, resultUUID, clean, err := decodeOutcome(id, items)
	if err != nil {
		return nil, "", false, fmt.Errorf("store: ff_run_outcome: %w", err)
	}
	return run, resultUUID, clean, nil
}

// decodeOutcome decodes an outcome of ff_run_outcome or ff_finish: {run
// fields, result exec name, result}. It returns the run as its fields
// say, the uuid of its result exec ("" for none), and whether it
// succeeded cleanly; only then are its result exec's name and result set
// (the functions send the fields of other runs too, without them).
func decodeOutcome(id RunID, items []valkey.ValkeyMessage) (*Run, string, bool, error) {
	if len(items) != 3 {
		return nil, "", false, fmt.Errorf("malformed run outcome of %d items", len(items))
	}
	kv, err := items[0].ToArray()
	if err != nil {
		return nil, "", false, fmt.Errorf("run outcome: %w", err)
	}
	f := make(map[string]string, len(kv)/2)
	for i := 0; i+1 < len(kv); i += 2 {
		f[str(kv[i])] = str(kv[i+1])
	}
	run := runOf(id, f)
	if run.State != RunSucceeded || run.Failed != 0 || run.Cancelled != 0 {
		return run, f["result_node"], false, nil
	}
	run.ResultNode = str(items[1])
	if res, err := items[2].ToString(); err == nil {
		run.Result = []byte(res)
	}
	return run, f["result_node"], true, nil
}

// cleanOutcome decodes an outcome of ff_run_outcome or ff_finish
// (decodeOutcome): the run when it succeeded cleanly, else nil.
func cleanOutcome(id RunID, items []valkey.ValkeyMessage) (*Run, error) {
	run, _, clean, err := decodeOutcome(id, items)
	if err != nil || !clean {
		return nil, err
	}
	return run, nil
}

// RunState returns just the state of run id (one HGET, no member reads):
// the cheap "has it ended" check of a result wait. ErrNotFound when the run
// does not exist.
func (s *Store) RunState(ctx context.Context, id RunID) (RunState, error) {
	p, uuid, err := s.locate(ExecutionID(id))
	if err != nil {
		return "", err
	}
	v, err := s.c.Do(ctx, s.c.B().Hget().Key(s.k.run(p, uuid)).Field("state").Build()).ToString()
	if valkey.IsValkeyNil(err) {
		return "", fmt.Errorf("%w: run %s", ErrNotFound, id)
	}
	if err != nil {
		return "", fmt.Errorf("store: read run %s state: %w", id, err)
	}
	return RunState(v), nil
}

// RunStates returns the states of runs in one pipelined round trip: ""
// for a run that does not exist (retention deleted it) or whose id names
// no partition.
func (s *Store) RunStates(ctx context.Context, ids []RunID) ([]RunState, error) {
	out := make([]RunState, len(ids))
	cmds := make(valkey.Commands, 0, len(ids))
	var at []int
	for i, id := range ids {
		p, uuid, err := s.locate(ExecutionID(id))
		if err != nil {
			continue
		}
		cmds = append(cmds, s.c.B().Hget().Key(s.k.run(p, uuid)).Field("state").Build())
		at = append(at, i)
	}
	if len(cmds) == 0 {
		return out, nil
	}
	for j, r := range s.c.DoMulti(ctx, cmds...) {
		v, err := r.ToString()
		if valkey.IsValkeyNil(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("store: read the state of run %s: %w", ids[at[j]], err)
		}
		out[at[j]] = RunState(v)
	}
	return out, nil
}

// RunPageMax bounds the members of one page of GetRunPage, and is its
// default: a run of 10,000 members read whole was an answer of several MB
// built from twelve fields of every member.
const RunPageMax = 1000

// GetRun returns a run with every member, in flow order.
func (s *Store) GetRun(ctx context.Context, id RunID) (*Run, error) {
	return s.getRun(ctx, id, nil, 0)
}

// GetRunPage returns a run with one page of its members: at most limit
// (1..RunPageMax; 0 = RunPageMax) in flow order from cursor ("" = the
// first member), and in NextCursor where the next page starts ("" once
// the page ends with the last member). Everything else (counts, state,
// Failures, the result, the input) is the whole run's on every page.
//
// A run's shape does not change once staged, so a cursor stays good for as
// long as the run exists (and means the same position in any run of the
// same plan). One that does not name a member of the run where it says —
// made up, cut short, past the last member (GetRunPage never gives one) —
// is a *ValidationError of field execs_cursor. Pages are a live view of
// the members' states: a member may change between two pages.
//
// A run keeps its flow order (its order key) and its failures (its
// failed set): a page of it reads only the page's members, the failures
// off the page, the result exec and the edges of the page's upstreams off
// the page. A page of a run staged before the order key (or of one whose
// failed set does not account for its failures: see readIndexed) reads
// the state and upstreams of every member (what the flow order and the
// failures need), and the other fields only of the page's members (with
// the edges of their upstreams, and the failure reason of the failures
// off the page); such a run that fits one page is read as GetRun reads
// it.
func (s *Store) GetRunPage(ctx context.Context, id RunID, cursor string, limit int) (*Run, error) {
	if limit == 0 {
		limit = RunPageMax
	}
	if limit < 1 || limit > RunPageMax {
		return nil, invalid("execs_limit", "%d is outside 1..%d", limit, RunPageMax)
	}
	var from *runCursor
	if cursor != "" {
		c, err := parseRunCursor(cursor)
		if err != nil {
			return nil, err
		}
		from = &c
	}
	return s.getRun(ctx, id, from, limit)
}

// GetRunOutcome returns what a run's result needs: the run without its
// input or members (Nodes nil). A run that succeeded with no failed,
// expired or cancelled member is one read-only call (ResultNode and
// Result set; not ResultState). A run still running is returned as its
// record says (the result route answers that it has not ended). Any
// other run also has its Failures, ResultNode and ResultState (and Result
// when it succeeded), as GetRun reads them: from its order key and failed
// set, reading only the failures and the result exec (readIndexed); for a
// run without them (staged before the order key), from the state and
// upstreams of each member and the failure reason of the failures only.
func (s *Store) GetRunOutcome(ctx context.Context, id RunID) (*Run, error) {
	p, uuid, err := s.locate(ExecutionID(id))
	if err != nil {
		return nil, err
	}
	run, resultUUID, clean, err := s.runOutcome(ctx, p, uuid, id)
	if err != nil || clean || run.State == RunRunning {
		return run, err
	}
	// Its order key and failed set name the failures, which are all that
	// is read of its members (a run staged before the order key: by its
	// node map).
	runKey := s.k.run(p, uuid)
	resps := s.c.DoMulti(ctx,
		s.c.B().Get().Key(runKey+":order").Build(),
		s.c.B().Smembers().Key(runKey+":failed").Build())
	indexed, err := s.readIndexed(ctx, run, p, resultUUID, resps[0], resps[1], nil, 0)
	if err != nil {
		return nil, err
	}
	if indexed {
		return run, nil
	}
	nodes, names, err := s.readNodes(ctx, p, uuid, id)
	if err != nil {
		return nil, err
	}
	return s.readMemberPage(ctx, run, p, resultUUID, nodes, names, nil, 0)
}

// FirstPage returns r, held with every member (GetRun, StageFlow), as
// GetRunPage(cursor "", limit) reads it: its first limit members (0 =
// RunPageMax) and in NextCursor where the rest starts. r is not changed.
func (r *Run) FirstPage(limit int) *Run {
	if limit <= 0 || limit > RunPageMax {
		limit = RunPageMax
	}
	if len(r.Nodes) <= limit || r.NextCursor != "" {
		return r
	}
	page := *r
	page.Nodes = r.Nodes[:limit:limit]
	page.NextCursor = runCursor{pos: limit, name: r.Nodes[limit].Name}.String()
	return &page
}

// runCursor is a place in a run's flow order: the position of a page's
// first member, and that member's name, which the cursor carries so that
// a made-up or damaged cursor is refused rather than read as some
// position. It is written "<position>.<name>" (names are identifiers).
type runCursor struct {
	pos  int
	name string
}

func (c runCursor) String() string { return strconv.Itoa(c.pos) + "." + c.name }

func parseRunCursor(s string) (runCursor, error) {
	pos, name, ok := strings.Cut(s, ".")
	n, err := strconv.Atoi(pos)
	if !ok || err != nil || n < 0 || strconv.Itoa(n) != pos || plan.ValidateName(name) != nil {
		return runCursor{}, errRunCursor("malformed cursor")
	}
	return runCursor{pos: n, name: name}, nil
}

// errRunCursor refuses a cursor that is not one GetRunPage gave for the
// run.
func errRunCursor(why string) error {
	return invalid("execs_cursor", "%s: pass execs_next_cursor back as it was given", why)
}

// runMemberFields are the fields of a member its RunNode is built from
// (runNode, in this order).
var runMemberFields = []string{"state", "blocking_detail", "kind", "attempt_count", "failure_reason", "last_error",
	"started_at", "ended_at", "lane", "ups", "out", "caps"}

// runNode is member name (execution uuid of partition p) as its
// runMemberFields v say, without its upstreams.
func runNode(p int, name, uuid string, v []valkey.ValkeyMessage) RunNode {
	n := RunNode{Name: name, ExecutionID: makeID(p, uuid), Kind: str(v[2]),
		State: decodeState(str(v[0]), str(v[1])), Attempts: atoi(str(v[3])), Error: str(v[4]),
		StartedAt: fromMs(str(v[6])), EndedAt: fromMs(str(v[7])), Lane: str(v[8]),
		RequiredCapabilities: splitList(str(v[11]))}
	// As GetExecution: the last attempt's error is shown while more
	// attempts may come; a terminal member shows its failure reason only
	// (none after a success).
	if n.Error == "" && n.State.Lifecycle != LifecycleTerminal {
		n.Error = str(v[5])
	}
	return n
}

// upstreamIndexes returns the positions in names (sorted) of the
// upstreams a member's ups field lists ("<name>=<uuid>,…").
func upstreamIndexes(ups string, names []string) []int {
	var out []int
	for up := range strings.SplitSeq(ups, ",") {
		if name, _, ok := strings.Cut(up, "="); ok {
			if j, found := slices.BinarySearch(names, name); found {
				out = append(out, j)
			}
		}
	}
	return out
}

// publicOf is the public state of a state field (decodeState's Public,
// without building the vector).
func publicOf(state string) PublicState {
	i := 0
	for f := range strings.FieldsSeq(state) {
		if i == 6 {
			return PublicState(f)
		}
		i++
	}
	return ""
}

// getRun reads run id with the page of limit members from (nil: from the
// first), every member when limit is 0. A run is read by its order key
// and failed set (readIndexed); a run staged before the order key, or one
// whose failed set does not account for its failures, by its node map
// (one more round trip).
func (s *Store) getRun(ctx context.Context, id RunID, from *runCursor, limit int) (*Run, error) {
	p, uuid, err := s.locate(ExecutionID(id))
	if err != nil {
		return nil, err
	}
	runKey := s.k.run(p, uuid)
	resps := s.c.DoMulti(ctx,
		s.c.B().Hgetall().Key(runKey).Build(),
		s.c.B().Get().Key(runKey+":order").Build(),
		s.c.B().Smembers().Key(runKey+":failed").Build())
	f, err := resps[0].AsStrMap()
	if err != nil {
		return nil, fmt.Errorf("store: read run %s: %w", id, err)
	}
	if len(f) == 0 {
		return nil, fmt.Errorf("%w: run %s", ErrNotFound, id)
	}
	run := runOf(id, f)
	if in := f["input"]; in != "" && in != "null" {
		run.Input = []byte(in)
	}
	indexed, err := s.readIndexed(ctx, run, p, f["result_node"], resps[1], resps[2], from, cmp.Or(limit, -1))
	if err != nil || indexed {
		if err != nil {
			return nil, err
		}
		return run, nil
	}
	nodes, names, err := s.readNodes(ctx, p, uuid, id)
	if err != nil {
		return nil, err
	}
	if from == nil && (limit == 0 || limit >= len(names)) {
		return s.readMembers(ctx, run, p, f["result_node"], nodes, names)
	}
	return s.readMemberPage(ctx, run, p, f["result_node"], nodes, names, from, limit)
}

// readNodes reads the node map of run uuid (id) of partition p: exec name
// -> execution uuid, and the names sorted.
func (s *Store) readNodes(ctx context.Context, p int, uuid string, id RunID) (map[string]string, []string, error) {
	nodes, err := s.c.Do(ctx, s.c.B().Hgetall().Key(s.k.run(p, uuid)+":nodes").Build()).AsStrMap()
	if err != nil {
		return nil, nil, fmt.Errorf("store: read run %s: %w", id, err)
	}
	names := make([]string, 0, len(nodes))
	for name := range nodes {
		names = append(names, name)
	}
	slices.Sort(names)
	return nodes, names, nil
}

// runMember is a member of a run as its order key names it: its position
// in flow order, its name and its uuid.
type runMember struct {
	pos        int
	name, uuid string
}

// readIndexed reads run (of partition p, result exec resultUUID) by the
// replies orderReply (GET of its order key: "<name>=<uuid>,…" in flow
// order, written when the run is staged or, in chunks, committed) and
// failedReply (SMEMBERS of its failed set): the page of limit members
// from (nil: from the first; limit -1: every member, 0: none, as
// GetRunOutcome reads it), its failures and its result, reading only the
// page's members, the failures off the page, the result exec and the
// "out" of the page's upstreams off the page. It reports false, having
// changed nothing in run, when the run has no order key, or when the
// failed set does not account for the run's failures (its size is not
// the record's count of them, or a member it lists, or one of the page,
// disagrees with its state): a run some member of which a release before
// the set ended or replayed, or one whose replay is being applied. The
// caller then reads the run by its node map.
func (s *Store) readIndexed(ctx context.Context, run *Run, p int, resultUUID string, orderReply, failedReply valkey.ValkeyResult,
	from *runCursor, limit int) (bool, error) {
	order, err := orderReply.ToString()
	if valkey.IsValkeyNil(err) || err == nil && order == "" {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("store: read run %s: %w", run.ID, err)
	}
	failed, err := failedReply.AsStrSlice()
	if err != nil {
		return false, fmt.Errorf("store: read run %s: %w", run.ID, err)
	}
	isFailed := make(map[string]bool, len(failed))
	for _, u := range failed {
		isFailed[u] = true
	}
	if len(isFailed) != run.Failed+run.Cancelled {
		return false, nil
	}
	n := strings.Count(order, ",") + 1
	start, end := 0, n
	if from != nil {
		start = from.pos
	}
	if limit >= 0 {
		end = min(start+limit, n)
	}
	// One pass over the order: the page, the name of the member after it,
	// the failures (in flow order) and the result exec.
	var page, fails []runMember
	if end > start {
		page = make([]runMember, 0, end-start)
	}
	var result runMember
	foundResult := false
	atStart, next := "", ""
	pos := 0
	for entry := range strings.SplitSeq(order, ",") {
		name, u, ok := strings.Cut(entry, "=")
		if !ok {
			return false, nil
		}
		m := runMember{pos: pos, name: name, uuid: u}
		switch {
		case pos == start:
			atStart = name
		case pos == end && limit > 0:
			next = name
		}
		if pos >= start && pos < end {
			page = append(page, m)
		}
		if isFailed[u] {
			fails = append(fails, m)
		}
		if u == resultUUID {
			result, foundResult = m, true
		}
		pos++
	}
	if from != nil && (start >= n || atStart != from.name) {
		return true, errRunCursor("the cursor names no member of this run")
	}
	if len(fails) != len(isFailed) {
		return false, nil
	}

	// The second round: the page's members, the failures off the page and
	// the result exec (its state, and its output once the run succeeded).
	onPage := make(map[string]int, len(page)) // uuid -> position on the page
	for k, m := range page {
		onPage[m.uuid] = k
	}
	cmds := make(valkey.Commands, 0, len(page)+len(fails)+1)
	for _, m := range page {
		cmds = append(cmds, s.c.B().Hmget().Key(s.k.core(p, m.uuid)).Field(runMemberFields...).Build())
	}
	for _, m := range fails {
		if _, on := onPage[m.uuid]; !on {
			cmds = append(cmds, s.c.B().Hmget().Key(s.k.core(p, m.uuid)).Field("state", "failure_reason").Build())
		}
	}
	wantResult := foundResult && run.State == RunSucceeded
	_, resultOnPage := onPage[result.uuid]
	readResult := foundResult && (wantResult || !resultOnPage)
	if readResult {
		cmds = append(cmds, s.c.B().Hmget().Key(s.k.core(p, result.uuid)).Field("state", "result").Build())
	}
	var resps []valkey.ValkeyResult
	if len(cmds) > 0 {
		resps = s.c.DoMulti(ctx, cmds...)
	}
	readErr := func(err error) (bool, error) { return true, fmt.Errorf("store: read run %s: %w", run.ID, err) }
	var nodes []RunNode
	if len(page) > 0 {
		nodes = make([]RunNode, len(page))
	}
	ups := make([]string, len(page))
	outs := map[string]string{} // the "out" of the page's upstreams, by uuid
	for k, m := range page {
		v, err := resps[k].ToArray()
		if err == nil && len(v) < len(runMemberFields) {
			err = fmt.Errorf("member %s: %d fields", m.name, len(v))
		}
		if err != nil {
			return readErr(err)
		}
		nodes[k] = runNode(p, m.name, m.uuid, v)
		if failedState(nodes[k].State.Public) != isFailed[m.uuid] {
			return false, nil
		}
		ups[k] = str(v[9])
		outs[m.uuid] = str(v[10])
	}
	failures := make([]RunFailure, 0, len(fails))
	reasons := resps[len(page):]
	for _, m := range fails {
		fail := RunFailure{Name: m.name, ExecutionID: makeID(p, m.uuid)}
		if k, on := onPage[m.uuid]; on {
			fail.State, fail.Error = nodes[k].State.Public, nodes[k].Error
		} else {
			v, err := reasons[0].ToArray()
			if err == nil && len(v) < 2 {
				err = fmt.Errorf("member %s: %d fields", m.name, len(v))
			}
			if err != nil {
				return readErr(err)
			}
			reasons = reasons[1:]
			if fail.State = publicOf(str(v[0])); !failedState(fail.State) {
				return false, nil
			}
			fail.Error = str(v[1])
		}
		failures = append(failures, fail)
	}
	var resultState PublicState
	var resultOut []byte
	if foundResult {
		if k, on := onPage[result.uuid]; on {
			resultState = nodes[k].State.Public
		}
		if readResult {
			v, err := reasons[0].ToArray()
			if err == nil && len(v) < 2 {
				err = fmt.Errorf("result exec %s: %d fields", result.name, len(v))
			}
			if err != nil {
				return readErr(err)
			}
			if !resultOnPage {
				resultState = publicOf(str(v[0]))
			}
			if wantResult && resultState == StateCompleted && !v[1].IsNil() {
				res, err := v[1].ToString()
				if err != nil {
					return readErr(err)
				}
				resultOut = []byte(res)
			}
		}
	}

	// The third round: the "out" of the page's upstreams off the page, for
	// the conditions of their edges into the page.
	isUp := map[string]bool{}
	var outOf []string
	for k := range page {
		for e := range strings.SplitSeq(ups[k], ",") {
			if _, u, ok := strings.Cut(e, "="); ok && !isUp[u] {
				isUp[u] = true
				if _, on := onPage[u]; !on {
					outOf = append(outOf, u)
				}
			}
		}
	}
	if len(outOf) > 0 {
		cmds = make(valkey.Commands, len(outOf))
		for i, u := range outOf {
			cmds[i] = s.c.B().Hget().Key(s.k.core(p, u)).Field("out").Build()
		}
		for i, r := range s.c.DoMulti(ctx, cmds...) {
			out, err := r.ToString()
			if err != nil && !valkey.IsValkeyNil(err) {
				return readErr(err)
			}
			outs[outOf[i]] = out
		}
	}
	// The conditions of the edges into the page's members, by upstream
	// and position on the page, each upstream's "out" parsed once.
	type edge struct {
		up string
		k  int
	}
	conds := map[edge]string{}
	for u, out := range outs {
		if !isUp[u] {
			continue
		}
		for e := range strings.SplitSeq(out, ",") {
			if down, cond, ok := strings.Cut(e, ":"); ok {
				if k, on := onPage[down]; on {
					conds[edge{u, k}] = cond
				}
			}
		}
	}
	edges := 0
	for k := range page {
		edges += strings.Count(ups[k], "=")
	}
	slab := make([]RunEdge, 0, edges) // the page's upstreams: one allocation
	for k := range page {
		first := len(slab)
		for e := range strings.SplitSeq(ups[k], ",") {
			if name, u, ok := strings.Cut(e, "="); ok {
				slab = append(slab, RunEdge{Name: name, On: conds[edge{u, k}]})
			}
		}
		if len(slab) > first {
			nodes[k].Upstreams = slab[first:len(slab):len(slab)]
		}
	}

	run.Nodes = nodes
	if next != "" {
		run.NextCursor = runCursor{pos: end, name: next}.String()
	}
	if len(failures) > 0 {
		run.Failures = failures
	}
	if foundResult {
		run.ResultNode, run.ResultState = result.name, resultState
		run.Result = resultOut
	}
	return true, nil
}

// readMembers reads every member of run (of partition p, result exec
// resultUUID, members nodes by name, names sorted) in one round trip,
// with the result.
func (s *Store) readMembers(ctx context.Context, run *Run, p int, resultUUID string, nodes map[string]string, names []string) (*Run, error) {
	// The result exec's output is read with the members, and kept once its
	// state says it succeeded (the state read here is the one to trust
	// while a replay runs it again).
	withResult := resultUUID != ""
	resultDone := false
	cmds := make(valkey.Commands, len(names), len(names)+1)
	for i, name := range names {
		cmds[i] = s.c.B().Hmget().Key(s.k.core(p, nodes[name])).Field(runMemberFields...).Build()
	}
	// The result is read in the same round trip as the members.
	if withResult {
		cmds = append(cmds, s.c.B().Hget().Key(s.k.core(p, resultUUID)).Field("result").Build())
	}
	resps := s.c.DoMulti(ctx, cmds...)
	ups := make([][]int, len(names))
	// on[down uuid][up name] is the condition of an edge, from the
	// upstream's "out" ("<uuid>:<on>,...").
	on := map[string]map[string]string{}
	for i, r := range resps[:len(names)] {
		v, err := r.ToArray()
		if err != nil || len(v) < len(runMemberFields) {
			continue // reported below
		}
		for e := range strings.SplitSeq(str(v[10]), ",") {
			if down, cond, ok := strings.Cut(e, ":"); ok {
				if on[down] == nil {
					on[down] = map[string]string{}
				}
				on[down][names[i]] = cond
			}
		}
	}
	run.Nodes = make([]RunNode, 0, len(names))
	for i, r := range resps[:len(names)] {
		v, err := r.ToArray()
		if err == nil && len(v) < len(runMemberFields) {
			err = fmt.Errorf("member %s: %d fields", names[i], len(v))
		}
		if err != nil {
			return nil, fmt.Errorf("store: read run %s: %w", run.ID, err)
		}
		uuid := nodes[names[i]]
		n := runNode(p, names[i], uuid, v)
		if uuid == resultUUID {
			run.ResultNode, run.ResultState = n.Name, n.State.Public
			resultDone = n.State.Outcome == OutcomeSuccess
		}
		ups[i] = upstreamIndexes(str(v[9]), names)
		for _, j := range ups[i] {
			n.Upstreams = append(n.Upstreams, RunEdge{Name: names[j], On: on[uuid][names[j]]})
		}
		run.Nodes = append(run.Nodes, n)
	}
	// In flow order: upstreams first, then by name.
	ordered := make([]RunNode, len(run.Nodes))
	for k, i := range flowOrder(len(run.Nodes), ups) {
		ordered[k] = run.Nodes[i]
		if n := &ordered[k]; failedState(n.State.Public) {
			run.Failures = append(run.Failures, RunFailure{Name: n.Name, ExecutionID: n.ExecutionID, State: n.State.Public, Error: n.Error})
		}
	}
	run.Nodes = ordered
	if withResult && resultDone && run.State == RunSucceeded {
		if err := readResult(run, resps[len(names)]); err != nil {
			return nil, err
		}
	}
	return run, nil
}

// readResult sets run's Result from the reply r of the result exec's
// HGET result (none when it has no output).
func readResult(run *Run, r valkey.ValkeyResult) error {
	res, err := r.ToString()
	if err != nil && !valkey.IsValkeyNil(err) {
		return fmt.Errorf("store: read run result %s: %w", run.ID, err)
	}
	if err == nil {
		run.Result = []byte(res)
	}
	return nil
}

// readMemberPage reads the page of run (as for readMembers) of limit
// members from (nil: from the first), in two round trips: the state and
// upstreams of every member, for the flow order and the failures (with
// the result), then the page's members, the edges of their upstreams off
// the page ("out") and the failure reason of the failures off the page.
// With limit 0 there is no page (GetRunOutcome): Nodes stay nil, and the
// second round reads only the failure reasons.
func (s *Store) readMemberPage(ctx context.Context, run *Run, p int, resultUUID string, nodes map[string]string, names []string,
	from *runCursor, limit int) (*Run, error) {
	n := len(names)
	withResult := resultUUID != ""
	cmds := make(valkey.Commands, n, n+1)
	for i, name := range names {
		cmds[i] = s.c.B().Hmget().Key(s.k.core(p, nodes[name])).Field("state", "ups").Build()
	}
	if withResult {
		cmds = append(cmds, s.c.B().Hget().Key(s.k.core(p, resultUUID)).Field("result").Build())
	}
	resps := s.c.DoMulti(ctx, cmds...)
	public := make([]PublicState, n)
	ups := make([][]int, n)
	result := -1
	for i, r := range resps[:n] {
		v, err := r.ToArray()
		if err == nil && len(v) < 2 {
			err = fmt.Errorf("member %s: %d fields", names[i], len(v))
		}
		if err != nil {
			return nil, fmt.Errorf("store: read run %s: %w", run.ID, err)
		}
		public[i] = publicOf(str(v[0]))
		ups[i] = upstreamIndexes(str(v[1]), names)
		if nodes[names[i]] == resultUUID {
			result = i
		}
	}
	order := flowOrder(n, ups)
	start := 0
	if from != nil {
		if from.pos >= n || names[order[from.pos]] != from.name {
			return nil, errRunCursor("the cursor names no member of this run")
		}
		start = from.pos
	}
	end := min(start+limit, n)
	page := order[start:end]
	if limit > 0 && end < n {
		run.NextCursor = runCursor{pos: end, name: names[order[end]]}.String()
	}
	if result >= 0 {
		run.ResultNode, run.ResultState = names[result], public[result]
		if withResult && public[result] == StateCompleted && run.State == RunSucceeded {
			if err := readResult(run, resps[n]); err != nil {
				return nil, err
			}
		}
	}

	// The second round: the page's members; the outgoing edges of their
	// upstreams off the page; the failure reasons of the failures off it.
	onPage := make([]bool, n)
	for _, i := range page {
		onPage[i] = true
	}
	need := make([]bool, n) // upstreams of a member of the page
	var outOf []int         // those off the page, whose "out" is read alone
	for _, i := range page {
		for _, u := range ups[i] {
			if !need[u] {
				need[u] = true
				if !onPage[u] {
					outOf = append(outOf, u)
				}
			}
		}
	}
	var reasonOf []int // failures off the page, in flow order
	for _, i := range order {
		if failedState(public[i]) && !onPage[i] {
			reasonOf = append(reasonOf, i)
		}
	}
	cmds = make(valkey.Commands, 0, len(page)+len(outOf)+len(reasonOf))
	for _, i := range page {
		cmds = append(cmds, s.c.B().Hmget().Key(s.k.core(p, nodes[names[i]])).Field(runMemberFields...).Build())
	}
	for _, u := range outOf {
		cmds = append(cmds, s.c.B().Hget().Key(s.k.core(p, nodes[names[u]])).Field("out").Build())
	}
	for _, i := range reasonOf {
		cmds = append(cmds, s.c.B().Hget().Key(s.k.core(p, nodes[names[i]])).Field("failure_reason").Build())
	}
	resps = nil
	if len(cmds) > 0 {
		resps = s.c.DoMulti(ctx, cmds...)
	}
	optional := func(r valkey.ValkeyResult) (string, error) {
		v, err := r.ToString()
		if err != nil && !valkey.IsValkeyNil(err) {
			return "", fmt.Errorf("store: read run %s: %w", run.ID, err)
		}
		return v, nil
	}
	if len(page) > 0 {
		run.Nodes = make([]RunNode, len(page))
	}
	outs := make(map[int]string, len(page)+len(outOf)) // the "out" of the members need says
	for k, i := range page {
		v, err := resps[k].ToArray()
		if err == nil && len(v) < len(runMemberFields) {
			err = fmt.Errorf("member %s: %d fields", names[i], len(v))
		}
		if err != nil {
			return nil, fmt.Errorf("store: read run %s: %w", run.ID, err)
		}
		run.Nodes[k] = runNode(p, names[i], nodes[names[i]], v)
		if need[i] {
			outs[i] = str(v[10])
		}
	}
	for k, u := range outOf {
		out, err := optional(resps[len(page)+k])
		if err != nil {
			return nil, err
		}
		outs[u] = out
	}
	// The conditions of the edges into the page's members, by upstream
	// and position on the page, from the upstreams' "out"
	// ("<uuid>:<on>,…"), each parsed once.
	type edge struct{ up, k int }
	at := make(map[string]int, len(page)) // uuid -> position on the page
	for k, i := range page {
		at[nodes[names[i]]] = k
	}
	conds := map[edge]string{}
	for u, out := range outs {
		for e := range strings.SplitSeq(out, ",") {
			if down, cond, ok := strings.Cut(e, ":"); ok {
				if k, found := at[down]; found {
					conds[edge{u, k}] = cond
				}
			}
		}
	}
	edges := 0
	for _, i := range page {
		edges += len(ups[i])
	}
	slab := make([]RunEdge, 0, edges) // the page's upstreams: one allocation
	for k, i := range page {
		if len(ups[i]) == 0 {
			continue
		}
		first := len(slab)
		for _, u := range ups[i] {
			slab = append(slab, RunEdge{Name: names[u], On: conds[edge{u, k}]})
		}
		run.Nodes[k].Upstreams = slab[first:len(slab):len(slab)]
	}
	// Every failure, in flow order: those on the page with the error the
	// page shows, the others with their failure reason.
	reasons := resps[len(page)+len(outOf):]
	for t, i := range order {
		if !failedState(public[i]) {
			continue
		}
		fail := RunFailure{Name: names[i], ExecutionID: makeID(p, nodes[names[i]]), State: public[i]}
		if t >= start && t < end {
			fail.Error = run.Nodes[t-start].Error
		} else {
			reason, err := optional(reasons[0])
			if err != nil {
				return nil, err
			}
			fail.Error, reasons = reason, reasons[1:]
		}
		run.Failures = append(run.Failures, fail)
	}
	return run, nil
}

// CancelRun cancels every non-terminal execution of a running run (running
// ones lose their lease); the run ends cancelled. Cancelling a run that
// already ended changes nothing. A run of more than CancelStepMembers
// members is cancelled by several calls (Valkey serves others between
// them): the first cancels every member that runs or could start, so none
// starts after it; the others, waiting for their dependencies, follow. A
// caller that stops between two calls (ctx done, a crash) leaves the rest
// to the next CancelRun of the run or to ResumeRuns. It returns the run
// as GetRunPage reads its first page.
func (s *Store) CancelRun(ctx context.Context, id RunID, reason string) (*Run, error) {
	if _, errs := s.CancelRuns(ctx, []RunID{id}, reason); errs[0] != nil {
		return nil, errs[0]
	}
	return s.GetRunPage(ctx, id, "", 0)
}

// CancelStepMembers is how many members of a run one cancel call cancels
// at most (Lua: CANCEL_STEP), besides those that run or could start: a
// cancel of a run of 10,000 members in one call kept Valkey from every
// other client for about a quarter of a second.
const CancelStepMembers = 500

// ResumeRuns takes the next steps of run cancels and replays whose caller
// stopped between two calls (see CancelRun and ReplayRun): on partition,
// the runs whose cancel or replay has not moved for age, up to about
// limit members in all.
func (s *Store) ResumeRuns(ctx context.Context, partition int, age time.Duration, limit int) (ScanResult, error) {
	if age < 0 {
		return ScanResult{}, invalid("age", "must not be negative")
	}
	return s.scan(ctx, "ff_resume_runs", partition, limit, ms(age))
}

// ReplayRun runs a failed or cancelled run again from its failed members:
// members that succeeded keep their results; the others go back to pending,
// or to eligible when the kept members already satisfy their joins (their
// next attempt is a replay; their retry budget starts again; deadlines are
// dropped). Replaying a running or succeeded run is a *StateError. A
// replay that resets more than ReplayStepMembers members is applied by
// several calls, downstream members first (Valkey serves others between
// them; see spec/runtime.md, Replay); a caller that stops between two
// leaves the rest to the next ReplayRun of the run or to ResumeRuns. A
// cancel of the run between two of those calls stops the replay: a
// *StateError says so (ReasonReplayDropped: nothing was replayed;
// ReasonReplayCancelled: the run is cancelled). It returns the run as
// GetRunPage reads its first page.
func (s *Store) ReplayRun(ctx context.Context, id RunID) (*Run, error) {
	if errs := s.ReplayRuns(ctx, []RunID{id}); errs[0] != nil {
		return nil, errs[0]
	}
	return s.GetRunPage(ctx, id, "", 0)
}

// ReplayStepMembers is how many of its decisions a replay applies in one
// call at most (Lua: REPLAY_STEP).
const ReplayStepMembers = 500
