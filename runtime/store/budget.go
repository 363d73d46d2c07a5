package store

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/flowfabric/ff/compiler/plan"
	"github.com/valkey-io/valkey-go"
)

// Budget limits and defaults.
const (
	// UsageDedupTTL is how long the dedup key of a usage report
	// (ReportUsage, ReportExecutionUsage) is remembered: a repeat within it
	// counts once. An attempt's reports (ReportAttemptUsage) are
	// remembered for UsageFenceTTL instead.
	UsageDedupTTL = 24 * time.Hour
	// MaxBudgetDimensions bounds the dimensions of one budget.
	MaxBudgetDimensions = plan.MaxDimensions
	// MaxResourceIDBytes bounds a budget id or quota id.
	MaxResourceIDBytes = 256
	// UsageFenceTTL is how long the fence of a worker's usage report
	// (ReportAttemptUsage) remembers a report it accepted (a retry of it
	// with the same dedup key passes again even after the lease ended), and
	// how long each budget it charges remembers its dedup key (a repeat
	// counts once). It outlasts the retries of the worker SDK (seconds);
	// a day, as for ReportUsage, kept a key per report and budget for a
	// day: at 100 reports a second, millions of keys.
	UsageFenceTTL = 15 * time.Minute
	// RunBudgetTTL is how long a run-scoped budget is kept after its last
	// upsert or report (resets, scheduled or not, do not renew it).
	RunBudgetTTL = 7 * 24 * time.Hour
)

// BudgetDimension is one metered dimension of a budget. A zero limit means
// none.
type BudgetDimension struct {
	Name string `json:"name"`
	Hard int64  `json:"hard,omitempty"`
	Soft int64  `json:"soft,omitempty"`
}

// BudgetSpec defines a budget for UpsertBudget.
type BudgetSpec struct {
	// ID is "<ns>/<name>" (BudgetID), or "<ns>/<name>@<run id>" for the
	// usage of one flow run of a run-scoped budget (RunBudgetID).
	ID            string
	Dimensions    []BudgetDimension
	ResetInterval time.Duration // 0 = never reset on schedule
	OnHardLimit   string        // plan.OnHardLimitBlock (default) or plan.OnHardLimitFail
	Scope         string        // plan.ScopeShared (default) or plan.ScopeRun
}

// BudgetID returns the id of a shared budget.
func BudgetID(namespace, name string) string { return namespace + "/" + name }

// RunBudgetID returns the id of run-scoped budget name for one run.
func RunBudgetID(namespace, name string, run RunID) string {
	return namespace + "/" + name + "@" + string(run)
}

// breachedOn returns the breaches of list that can count against members of
// flow partition p: every shared budget's, and a run-scoped budget's only
// when its run is on p (its members all are). A claim sends no others: a
// deployment with many runs at their limits would send them all with
// every claim of every partition.
func breachedOn(p int, list []BudgetBreach) []BudgetBreach {
	out := make([]BudgetBreach, 0, len(list))
	for _, b := range list {
		if rp, ok := runBudgetPartition(b.BudgetID); !ok || rp == p {
			out = append(out, b)
		}
	}
	return out
}

// runBudgetPartition returns the flow partition of the run of run-scoped
// budget id (RunBudgetID: "<ns>/<name>@<partition>.<uuid>"), and false for
// a shared budget (or an id it cannot read).
func runBudgetPartition(id string) (int, bool) {
	run, ok := budgetRun(id)
	if !ok {
		return 0, false
	}
	p, _, _ := splitID(string(run))
	return p, true
}

// BudgetSpecFromPlan converts a declared budget of namespace ns; run is the
// run a run-scoped budget is for (ignored for shared ones). Run-scoped
// budgets exist per run only (StageFlow creates them): registering
// declarations at start concerns shared budgets.
func BudgetSpecFromPlan(ns string, b plan.Budget, run RunID) BudgetSpec {
	spec := BudgetSpec{ID: BudgetID(ns, b.Name), ResetInterval: time.Duration(b.ResetMs) * time.Millisecond,
		OnHardLimit: b.OnHardLimit, Scope: b.Scope}
	if b.Scope == plan.ScopeRun {
		spec.ID = RunBudgetID(ns, b.Name, run)
	}
	for _, d := range b.Dimensions {
		spec.Dimensions = append(spec.Dimensions, BudgetDimension{Name: d.Name, Hard: d.Hard, Soft: d.Soft})
	}
	return spec
}

// BudgetUsage is the usage and limits of one dimension.
type BudgetUsage struct {
	Dimension string `json:"dimension"`
	Used      int64  `json:"used"`
	Hard      int64  `json:"hard,omitempty"`
	Soft      int64  `json:"soft,omitempty"`
}

// Budget is a budget's definition and state (GetBudget).
type Budget struct {
	ID            string        `json:"id"`
	Scope         string        `json:"scope"`
	OnHardLimit   string        `json:"on_hard_limit"`
	ResetInterval time.Duration `json:"reset_interval,omitempty"`
	Dimensions    []BudgetUsage `json:"dimensions"` // in definition order

	// HardLimited says that a dimension is at its hard limit now: grants of
	// executions counting against the budget are blocked (or failed).
	HardLimited          bool   `json:"hard_limited"`
	HardLimitedDimension string `json:"hard_limited_dimension,omitempty"`

	SoftBreaches            int64     `json:"soft_breaches"`
	LastSoftBreachAt        time.Time `json:"last_soft_breach_at,omitzero"`
	LastSoftBreachDimension string    `json:"last_soft_breach_dimension,omitempty"`
	HardBreaches            int64     `json:"hard_breaches"`
	LastHardBreachAt        time.Time `json:"last_hard_breach_at,omitzero"`
	LastHardBreachDimension string    `json:"last_hard_breach_dimension,omitempty"`

	Resets      int64     `json:"resets"`
	LastResetAt time.Time `json:"last_reset_at,omitzero"`
	NextResetAt time.Time `json:"next_reset_at,omitzero"`
	CreatedAt   time.Time `json:"created_at"`
	UpdatedAt   time.Time `json:"updated_at"` // the last upsert that changed the definition
}

// BudgetBreach is a budget at a hard limit, as the scheduler passes it to
// ClaimRequest.BreachedBudgets.
type BudgetBreach struct {
	BudgetID    string `json:"budget_id"`
	Dimension   string `json:"dimension"`
	Used        int64  `json:"used"`
	Hard        int64  `json:"hard"`
	OnHardLimit string `json:"on_hard_limit"`
}

// Detail is the human-readable blocking detail of executions it blocks.
func (b BudgetBreach) Detail() string {
	return fmt.Sprintf("budget %s: %s at hard limit (%d of %d)", b.BudgetID, b.Dimension, b.Used, b.Hard)
}

// UsageStatus says what a usage report did.
type UsageStatus string

// Values of UsageStatus.
const (
	UsageApplied    UsageStatus = "applied"
	UsageDuplicate  UsageStatus = "duplicate"   // the dedup key was seen: nothing added
	UsageSoftBreach UsageStatus = "soft_breach" // this report crossed the soft limit
	UsageHardBreach UsageStatus = "hard_breach" // this report reached the hard limit
)

// UsageResult is the outcome of one usage report.
type UsageResult struct {
	BudgetID string      `json:"budget_id"`
	Status   UsageStatus `json:"status"`
	Used     int64       `json:"used"` // the dimension's usage afterwards
	Hard     int64       `json:"hard,omitempty"`
	Soft     int64       `json:"soft,omitempty"`
	// OverHard says that the dimension is at or over its hard limit.
	OverHard bool `json:"over_hard"`
}

// fnvPart is fnv32a(s) % n.
func fnvPart(s string, n int) int {
	h := fnv.New32a()
	h.Write([]byte(s))
	return int(h.Sum32() % uint32(n))
}

func (s *Store) budgetPart(id string) int { return fnvPart(id, s.cfg.BudgetPartitions) }

// checkResourceName checks a budget, quota or dimension name
// (ResourceNameProblem).
func checkResourceName(field, s string) error {
	if p := ResourceNameProblem(s); p != "" {
		return invalid(field, "%s", p)
	}
	return nil
}

// ResourceNameProblem says why s is not a valid budget, quota or dimension
// name, or "" when it is: 1..plan.MaxResourceNameLen bytes of letters,
// digits, '_', '-' and '.'. The API checks requests with it before
// anything is written.
func ResourceNameProblem(s string) string {
	if s == "" || len(s) > plan.MaxResourceNameLen {
		return fmt.Sprintf("%q: want 1..%d bytes", s, plan.MaxResourceNameLen)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-' || c == '.') {
			return fmt.Sprintf("%q: only letters, digits, '_', '-' and '.' are allowed", s)
		}
	}
	return ""
}

// splitResourceID splits "<ns>/<name>[@<run id>]" (the namespace may hold
// '/'; the name may not).
func splitResourceID(field, id string, allowRun bool) (ns, name, run string, err error) {
	if len(id) > MaxResourceIDBytes {
		return "", "", "", invalid(field, "%q is longer than %d bytes", id, MaxResourceIDBytes)
	}
	rest := id
	if allowRun {
		if head, r, ok := strings.Cut(id, "@"); ok {
			if _, err := ParseExecutionID(r); err != nil {
				return "", "", "", invalid(field, "%q: the part after '@' must be a run id", id)
			}
			rest, run = head, r
		}
	}
	i := strings.LastIndexByte(rest, '/')
	if i < 0 {
		return "", "", "", invalid(field, "%q: want <namespace>/<name>", id)
	}
	ns, name = rest[:i], rest[i+1:]
	if err := checkName(field, ns); err != nil {
		return "", "", "", err
	}
	if err := checkResourceName(field, name); err != nil {
		return "", "", "", err
	}
	return ns, name, run, nil
}

// resolveBudget turns a reference of an execution of namespace ns (a bare
// name or an id) into a budget id.
func resolveBudget(field, ns, ref string) (string, error) {
	if !strings.Contains(ref, "/") {
		if err := checkResourceName(field, ref); err != nil {
			return "", err
		}
		return BudgetID(ns, ref), nil
	}
	if _, _, _, err := splitResourceID(field, ref, true); err != nil {
		return "", err
	}
	return ref, nil
}

// UpsertBudget creates a budget, or updates its definition keeping its
// usage. A run-scoped budget (Scope plan.ScopeRun) expires RunBudgetTTL after
// its last upsert or report. The hard-limit state is recomputed, so raising a limit unblocks
// (through the unblock scanner); changing the reset interval schedules the
// next reset one interval from now.
func (s *Store) UpsertBudget(ctx context.Context, spec BudgetSpec) (created bool, err error) {
	st, err := s.upsertBudget(ctx, spec, false)
	return st == "created", err
}

func (s *Store) upsertBudget(ctx context.Context, spec BudgetSpec, onlyCreate bool) (string, error) {
	args, err := budgetArgs(&spec, onlyCreate)
	if err != nil {
		return "", err
	}
	m := s.budgetPart(spec.ID)
	items, err := s.single(ctx, call{fn: "ff_budget_upsert", keys: []string{s.k.budget(m, spec.ID)}, args: args}, "", "upsert budget")
	if err != nil {
		return "", err
	}
	return str(items[0]), nil
}

// budgetArgs validates spec, fills in its defaults and returns the
// arguments of ff_budget_upsert.
func budgetArgs(spec *BudgetSpec, onlyCreate bool) ([]string, error) {
	if _, _, _, err := splitResourceID("id", spec.ID, true); err != nil {
		return nil, err
	}
	spec.OnHardLimit = cmp.Or(spec.OnHardLimit, plan.OnHardLimitBlock)
	spec.Scope = cmp.Or(spec.Scope, plan.ScopeShared)
	if spec.OnHardLimit != plan.OnHardLimitBlock && spec.OnHardLimit != plan.OnHardLimitFail {
		return nil, invalid("on_hard_limit", "%q: want %q or %q", spec.OnHardLimit, plan.OnHardLimitBlock, plan.OnHardLimitFail)
	}
	if spec.Scope != plan.ScopeShared && spec.Scope != plan.ScopeRun {
		return nil, invalid("scope", "%q: want %q or %q", spec.Scope, plan.ScopeShared, plan.ScopeRun)
	}
	if len(spec.Dimensions) == 0 || len(spec.Dimensions) > MaxBudgetDimensions {
		return nil, invalid("dimensions", "%d dimensions, want 1..%d", len(spec.Dimensions), MaxBudgetDimensions)
	}
	if err := checkDuration("reset_interval", spec.ResetInterval); err != nil {
		return nil, err
	}
	only := "0"
	if onlyCreate {
		only = "1"
	}
	ttl := time.Duration(0)
	if spec.Scope == plan.ScopeRun {
		ttl = RunBudgetTTL
	}
	args := []string{spec.Scope, spec.OnHardLimit, ms(spec.ResetInterval), only, ms(ttl)}
	seen := map[string]bool{}
	for _, d := range spec.Dimensions {
		if err := checkResourceName("dimensions", d.Name); err != nil {
			return nil, err
		}
		if seen[d.Name] {
			return nil, invalid("dimensions", "dimension %q appears twice", d.Name)
		}
		seen[d.Name] = true
		if d.Hard < 0 || d.Soft < 0 {
			return nil, invalid("dimensions", "dimension %q: limits must not be negative", d.Name)
		}
		args = append(args, d.Name, strconv.FormatInt(d.Hard, 10), strconv.FormatInt(d.Soft, 10))
	}
	return args, nil
}

// GetBudget returns a budget with its usage, limits, breaches and resets.
func (s *Store) GetBudget(ctx context.Context, id string) (*Budget, error) {
	if _, _, _, err := splitResourceID("id", id, true); err != nil {
		return nil, err
	}
	resps := s.c.DoMulti(ctx, s.budgetReads(id)...)
	b, err := budgetFrom(id, resps[0], resps[1])
	if err != nil {
		return nil, err
	}
	if b == nil {
		return nil, fmt.Errorf("%w: budget %s", ErrNotFound, id)
	}
	return b, nil
}

// budgetReads are the reads of budget id that budgetFrom takes: its
// definition and its usage.
func (s *Store) budgetReads(id string) valkey.Commands {
	key := s.k.budget(s.budgetPart(id), id)
	return valkey.Commands{s.c.B().Hgetall().Key(key).Build(), s.c.B().Hgetall().Key(key + ":usage").Build()}
}

// budgetFrom builds budget id from the replies of budgetReads; nil when
// it does not exist.
func budgetFrom(id string, defReply, usageReply valkey.ValkeyResult) (*Budget, error) {
	def, err := defReply.AsStrMap()
	if err != nil {
		return nil, fmt.Errorf("store: read budget %s: %w", id, err)
	}
	if len(def) == 0 {
		return nil, nil
	}
	usage, err := usageReply.AsStrMap()
	if err != nil {
		return nil, fmt.Errorf("store: read budget usage %s: %w", id, err)
	}
	b := &Budget{
		ID: id, Scope: def["scope"], OnHardLimit: def["on_hard_limit"],
		ResetInterval: time.Duration(atoi64(def["reset_ms"])) * time.Millisecond,
		SoftBreaches:  atoi64(def["soft_breaches"]), LastSoftBreachAt: fromMs(def["last_soft_breach_at"]),
		LastSoftBreachDimension: def["last_soft_breach_dim"],
		HardBreaches:            atoi64(def["hard_breaches"]), LastHardBreachAt: fromMs(def["last_hard_breach_at"]),
		LastHardBreachDimension: def["last_hard_breach_dim"],
		Resets:                  atoi64(def["resets"]), LastResetAt: fromMs(def["last_reset_at"]),
		NextResetAt: fromMs(def["next_reset_at"]), CreatedAt: fromMs(def["created_at"]), UpdatedAt: fromMs(def["updated_at"]),
	}
	for _, d := range splitList(def["dims"]) {
		u := BudgetUsage{Dimension: d, Used: atoi64(usage[d]), Hard: atoi64(def["h:"+d]), Soft: atoi64(def["s:"+d])}
		if u.Hard > 0 && u.Used >= u.Hard && !b.HardLimited {
			b.HardLimited, b.HardLimitedDimension = true, d
		}
		b.Dimensions = append(b.Dimensions, u)
	}
	return b, nil
}

// ReportUsage adds delta (≥ 0) to one dimension of a budget. With a dedup
// key, a repeat of the report within UsageDedupTTL counts once (status
// UsageDuplicate). Usage is always recorded, even past the hard limit (it
// was spent); reaching the hard limit blocks further grants of executions
// counting against the budget (or fails them: on_hard_limit fail). Usage
// is exact up to math.MaxInt64 and stays there (it saturates).
func (s *Store) ReportUsage(ctx context.Context, budgetID, dimension string, delta int64, dedupKey string) (UsageResult, error) {
	return s.reportUsage(ctx, budgetID, dimension, delta, dedupKey, UsageDedupTTL)
}

// reportUsage is ReportUsage with the dedup key remembered for ttl.
func (s *Store) reportUsage(ctx context.Context, budgetID, dimension string, delta int64, dedupKey string, ttl time.Duration) (UsageResult, error) {
	if _, _, _, err := splitResourceID("budget_id", budgetID, true); err != nil {
		return UsageResult{}, err
	}
	if err := checkUsageReport(dimension, delta, dedupKey); err != nil {
		return UsageResult{}, err
	}
	m := s.budgetPart(budgetID)
	key := s.k.budget(m, budgetID)
	dedup := key
	if dedupKey != "" {
		dedup = s.k.usageDedup(m, budgetID, dedupKey)
	}
	msg, err := s.fcall(ctx, call{fn: "ff_budget_report", keys: []string{key, dedup},
		args: []string{dimension, strconv.FormatInt(delta, 10), ms(ttl)}})
	if err != nil {
		return UsageResult{}, err
	}
	items, ref, err := envelope(msg)
	if err != nil {
		return UsageResult{}, fmt.Errorf("store: ff_budget_report: %w", err)
	}
	if ref != nil {
		if ref.code == "not_found" {
			return UsageResult{}, fmt.Errorf("%w: budget %s", ErrNotFound, budgetID)
		}
		return UsageResult{}, refusalError(ref, "", "report usage to")
	}
	r := UsageResult{BudgetID: budgetID, Status: UsageStatus(str(items[0])), Used: atoi64(str(items[1])),
		Hard: atoi64(str(items[2])), Soft: atoi64(str(items[3]))}
	r.OverHard = r.Hard > 0 && r.Used >= r.Hard
	return r, nil
}

// checkUsageReport validates the dimension, delta and dedup key of a usage
// report.
func checkUsageReport(dimension string, delta int64, dedupKey string) error {
	if err := checkResourceName("dimension", dimension); err != nil {
		return err
	}
	if delta < 0 {
		return invalid("delta", "%d: must not be negative", delta)
	}
	if err := checkIdempotencyKey(dedupKey); err != nil {
		return invalid("dedup_key", "%s", err.(*ValidationError).Msg)
	}
	return nil
}

// ReportExecutionUsage reports usage of an execution, in any state, to
// every budget it counts against that has the dimension; it is not
// fenced (ReportAttemptUsage is the worker's fenced report). The dedup key
// is applied per budget. A budget of the execution that no longer exists
// is skipped.
func (s *Store) ReportExecutionUsage(ctx context.Context, id ExecutionID, dimension string, delta int64, dedupKey string) ([]UsageResult, error) {
	p, uuid, err := s.locate(id)
	if err != nil {
		return nil, err
	}
	v, err := s.c.Do(ctx, s.c.B().Hmget().Key(s.k.core(p, uuid)).Field("state", "budgets").Build()).ToArray()
	if err != nil {
		return nil, fmt.Errorf("store: read budgets of %s: %w", id, err)
	}
	if v[0].IsNil() {
		return nil, fmt.Errorf("%w: execution %s", ErrNotFound, id)
	}
	return s.chargeBudgets(ctx, splitList(str(v[1])), dimension, delta, dedupKey, UsageDedupTTL)
}

// ReportAttemptUsage reports usage of the running attempt that holds lease
// to every budget of its execution that has the dimension (the worker's
// report, POST /v1/executions/{id}/usage). It is fenced as Renew is: when
// the lease is not the execution's current one, or it expired, or the
// attempt's timeout or the execution's deadline passed, nothing is counted
// and the error is a *LeaseError (a limit found passed is applied on the
// spot, as its scanner would have). Budgets live on other hash tags than
// the execution, so the fence (ff_usage_fence) and the charges
// (ff_budget_report, one per budget) are separate calls: a report that
// passed the fence is counted even when the lease ends before the charges
// land, and the fence records it under its dedup key for UsageFenceTTL, so
// that a retry after a failed charge passes again once the lease has
// ended (and counts once). The dedup key is applied per budget, as given.
func (s *Store) ReportAttemptUsage(ctx context.Context, lease Lease, dimension string, delta int64, dedupKey string) ([]UsageResult, error) {
	if err := checkUsageReport(dimension, delta, dedupKey); err != nil {
		return nil, err
	}
	p, uuid, err := s.locate(lease.ExecutionID)
	if err != nil {
		return nil, err
	}
	items, err := s.single(ctx, call{fn: "ff_usage_fence", keys: []string{s.k.anchor(p)},
		args: []string{uuid, lease.ID, strconv.FormatInt(lease.Epoch, 10), dedupKey, dimension,
			strconv.FormatInt(delta, 10), ms(UsageFenceTTL)}}, lease.ExecutionID, "report usage of")
	if err != nil {
		return nil, err
	}
	return s.chargeBudgets(ctx, splitList(str(items[0])), dimension, delta, dedupKey, UsageFenceTTL)
}

// chargeBudgets reports usage to each of budgets that has the dimension,
// skipping those that do not meter it and those that no longer exist;
// each budget remembers dedupKey for ttl.
func (s *Store) chargeBudgets(ctx context.Context, budgets []string, dimension string, delta int64, dedupKey string, ttl time.Duration) ([]UsageResult, error) {
	var out []UsageResult
	for _, b := range budgets {
		r, err := s.reportUsage(ctx, b, dimension, delta, dedupKey, ttl)
		if err != nil {
			var ve *ValidationError
			if errors.As(err, &ve) && ve.Field == "dimension" || errors.Is(err, ErrNotFound) {
				continue // the budget does not meter this dimension
			}
			return out, err
		}
		out = append(out, r)
	}
	return out, nil
}

// ResetBudget zeroes a budget's usage now (the API's reset) and schedules
// its next reset one interval from now; it is no longer at a hard limit.
func (s *Store) ResetBudget(ctx context.Context, id string) (*Budget, error) {
	if _, _, _, err := splitResourceID("id", id, true); err != nil {
		return nil, err
	}
	msg, err := s.fcall(ctx, call{fn: "ff_budget_reset", keys: []string{s.k.budget(s.budgetPart(id), id)}})
	if err != nil {
		return nil, err
	}
	_, ref, err := envelope(msg)
	if err != nil {
		return nil, fmt.Errorf("store: ff_budget_reset: %w", err)
	}
	if ref != nil {
		return nil, fmt.Errorf("%w: budget %s", ErrNotFound, id)
	}
	return s.GetBudget(ctx, id)
}

// ResetDueBudgets applies up to limit scheduled resets that are due on
// budget partition m (the budget reset scanner).
func (s *Store) ResetDueBudgets(ctx context.Context, m, limit int) (ScanResult, error) {
	if m < 0 || m >= s.cfg.BudgetPartitions {
		return ScanResult{}, invalid("partition", "%d is outside 0..%d", m, s.cfg.BudgetPartitions-1)
	}
	if limit < 1 || limit > ScanLimitMax {
		return ScanResult{}, invalid("limit", "%d is outside 1..%d", limit, ScanLimitMax)
	}
	items, err := s.single(ctx, call{fn: "ff_budget_resets", keys: []string{s.k.resets(m)}, args: []string{strconv.Itoa(limit)}}, "", "reset budgets")
	if err != nil {
		return ScanResult{}, err
	}
	n, _ := items[0].AsInt64()
	more, _ := items[1].AsInt64()
	return ScanResult{Processed: int(n), More: more == 1}, nil
}

// BreachedBudgets returns every budget at a hard limit, sorted by id: one
// pipelined read of every budget partition. The unblock scanner reads it
// once per tick (UnblockAdmission); claims are made with ClaimBreaches.
// An error means the state is unknown: the caller must not grant, nor
// unblock, executions that count against budgets (fail closed).
func (s *Store) BreachedBudgets(ctx context.Context) ([]BudgetBreach, error) {
	out, _, err := s.readBreached(ctx, false)
	return out, err
}

// BreachSet is the budget state a claim is made with (ClaimBreaches).
type BreachSet struct {
	// Breaches are the budgets at a hard limit that may count against an
	// execution a claim can grant, sorted by id: every shared budget's,
	// and a run-scoped budget's while its run is running.
	Breaches []BudgetBreach
	// Version is the version of the breached hashes the set was read from
	// (see BreachVersion).
	Version string
}

// ClaimBreaches reads the budgets at a hard limit that a claim must know
// (one pipelined read of every budget partition, then of the state of the
// runs of the run-scoped ones): BreachedBudgets without the run-scoped
// budgets of runs that are not running. A run's budget counts only
// against the run's members (RunBudgetID), and a run that ended (or was
// deleted, or is not staged yet) has none that a claim can grant, so its
// breaches would only make every claim of its partition longer: a
// deployment whose runs end at their cost cap would otherwise send the
// breaches of every such run until retention deletes it. A run that
// comes (back) to run after the read, a replay or a staging, has its
// breaches in the next set; the scheduler reads one at least every
// second (scheduler admission). An error means the state is unknown: the
// caller must not claim (fail closed).
func (s *Store) ClaimBreaches(ctx context.Context) (BreachSet, error) {
	all, version, err := s.readBreached(ctx, true)
	if err != nil {
		return BreachSet{}, err
	}
	var runs []RunID
	at := map[RunID]int{}
	for _, b := range all {
		if run, ok := budgetRun(b.BudgetID); ok {
			if _, seen := at[run]; !seen {
				at[run] = len(runs)
				runs = append(runs, run)
			}
		}
	}
	if len(runs) == 0 {
		return BreachSet{Breaches: all, Version: version}, nil
	}
	states, err := s.RunStates(ctx, runs)
	if err != nil {
		return BreachSet{}, fmt.Errorf("store: read the runs of breached budgets: %w", err)
	}
	out := make([]BudgetBreach, 0, len(all))
	for _, b := range all {
		if run, ok := budgetRun(b.BudgetID); ok {
			switch states[at[run]] {
			case "", RunSucceeded, RunFailed, RunCancelled:
				continue // not running: nothing of it can be claimed
			}
		}
		out = append(out, b)
	}
	return BreachSet{Breaches: out, Version: version}, nil
}

// budgetRun returns the run of run-scoped budget id, and false for a
// shared budget or an id whose run it cannot read (such a breach is kept
// wherever it is sent).
func budgetRun(id string) (RunID, bool) {
	_, run, ok := strings.Cut(id, "@")
	if !ok {
		return "", false
	}
	if _, _, err := splitID(run); err != nil {
		return "", false
	}
	return RunID(run), true
}

// BreachVersion returns the version of the budgets at a hard limit (one
// pipelined GET per budget partition): it changes whenever a budget
// reaches or leaves its hard limit, or an upsert rewrites one at its limit
// (its on_hard_limit may change), but not when a report only rewrites the
// usage of one there. When it equals the Version of a BreachSet, no budget
// reached or left its hard limit since that set was read. An error means
// the state is unknown (fail closed).
func (s *Store) BreachVersion(ctx context.Context) (string, error) {
	cmds := make(valkey.Commands, s.cfg.BudgetPartitions)
	for m := range cmds {
		cmds[m] = s.c.B().Get().Key(s.breachedVersion(m)).Build()
	}
	return s.versionOf(s.c.DoMulti(ctx, cmds...), 1)
}

// breachedVersion is the key of the version of budget partition m's
// breached hash (lua/budget.lua, breached_moved).
func (s *Store) breachedVersion(m int) string { return s.k.breached(m) + ":version" }

// versionOf joins the versions of the budget partitions in resps, every
// step-th reply from the first.
func (s *Store) versionOf(resps []valkey.ValkeyResult, step int) (string, error) {
	var b strings.Builder
	for m := range s.cfg.BudgetPartitions {
		v, err := resps[m*step].ToString()
		if err != nil && !valkey.IsValkeyNil(err) {
			return "", fmt.Errorf("store: read the breached budgets version of partition %d: %w", m, err)
		}
		if m > 0 {
			b.WriteByte(',')
		}
		b.WriteString(v)
	}
	return b.String(), nil
}

// readBreached reads every budget partition's breached hash, sorted by
// id, and with version the partitions' versions, each read before its
// hash in the same pipeline (so the version is never newer than the
// entries read).
func (s *Store) readBreached(ctx context.Context, version bool) ([]BudgetBreach, string, error) {
	per := 1
	if version {
		per = 2
	}
	cmds := make(valkey.Commands, 0, per*s.cfg.BudgetPartitions)
	for m := range s.cfg.BudgetPartitions {
		if version {
			cmds = append(cmds, s.c.B().Get().Key(s.breachedVersion(m)).Build())
		}
		cmds = append(cmds, s.c.B().Hgetall().Key(s.k.breached(m)).Build())
	}
	resps := s.c.DoMulti(ctx, cmds...)
	var out []BudgetBreach
	for m := range s.cfg.BudgetPartitions {
		f, err := resps[m*per+per-1].AsStrMap()
		if err != nil {
			return nil, "", fmt.Errorf("store: read breached budgets of partition %d: %w", m, err)
		}
		for id, v := range f {
			parts := strings.SplitN(v, "\t", 4)
			for len(parts) < 4 {
				parts = append(parts, "")
			}
			out = append(out, BudgetBreach{BudgetID: id, OnHardLimit: parts[0], Dimension: parts[1],
				Used: atoi64(parts[2]), Hard: atoi64(parts[3])})
		}
	}
	slices.SortFunc(out, func(a, b BudgetBreach) int { return strings.Compare(a.BudgetID, b.BudgetID) })
	if !version {
		return out, "", nil
	}
	v, err := s.versionOf(resps, 2)
	if err != nil {
		return nil, "", err
	}
	return out, v, nil
}

// deleteRunBudgets deletes run-scoped budgets whose run retention deleted
// (ff_budget_delete, pipelined; see PurgeTerminal).
func (s *Store) deleteRunBudgets(ctx context.Context, ids []string) error {
	calls := make([]call, 0, len(ids))
	var of []string
	for _, id := range ids {
		if _, ok := budgetRun(id); !ok {
			continue
		}
		calls = append(calls, call{fn: "ff_budget_delete", keys: []string{s.k.budget(s.budgetPart(id), id)}})
		of = append(of, id)
	}
	if len(calls) == 0 {
		return nil
	}
	msgs, errs := s.fcallEach(ctx, calls)
	for i, err := range errs {
		if err == nil {
			var ref *refusal
			if _, ref, err = envelope(msgs[i]); err == nil && ref != nil {
				err = refusalError(ref, "", "delete budget")
			}
		}
		if err != nil {
			return fmt.Errorf("store: delete the budget %s of a deleted run: %w", of[i], err)
		}
	}
	return nil
}
