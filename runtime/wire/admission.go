package wire

import "time"

// Budgets, quotas, usage reports and the worker registry (spec/api.md,
// "Budgets", "Quotas", "Workers").

// BudgetDimension is one metered dimension of a budget; a zero limit means
// none.
type BudgetDimension struct {
	Name string `json:"name"`
	Hard int64  `json:"hard,omitempty"`
	Soft int64  `json:"soft,omitempty"`
}

// PutBudget is the body of PUT or POST /v1/budgets: create a shared budget
// or replace its definition (its usage is kept). Name it by id
// ("<namespace>/<name>") or by namespace (default "default") and name.
type PutBudget struct {
	ID          string            `json:"id,omitempty"`
	Namespace   string            `json:"namespace,omitempty"`
	Name        string            `json:"name,omitempty"`
	Dimensions  []BudgetDimension `json:"dimensions"`
	ResetMs     int64             `json:"reset_ms,omitempty"`      // 0 = never reset on schedule
	OnHardLimit string            `json:"on_hard_limit,omitempty"` // "block" (default) or "fail"
}

// BudgetUsage is the usage and limits of one dimension.
type BudgetUsage struct {
	Dimension string `json:"dimension"`
	Used      int64  `json:"used"`
	Hard      int64  `json:"hard,omitempty"`
	Soft      int64  `json:"soft,omitempty"`
}

// Budget is a budget's definition and state.
type Budget struct {
	ID          string        `json:"id"`
	Scope       string        `json:"scope"`
	OnHardLimit string        `json:"on_hard_limit"`
	ResetMs     int64         `json:"reset_ms,omitempty"`
	Dimensions  []BudgetUsage `json:"dimensions"`
	// HardLimited: a dimension is at its hard limit now, so executions
	// counting against the budget wait (waiting_for_budget) or fail.
	HardLimited             bool       `json:"hard_limited"`
	HardLimitedDimension    string     `json:"hard_limited_dimension,omitempty"`
	SoftBreaches            int64      `json:"soft_breaches"`
	LastSoftBreachAt        *time.Time `json:"last_soft_breach_at,omitempty"`
	LastSoftBreachDimension string     `json:"last_soft_breach_dimension,omitempty"`
	HardBreaches            int64      `json:"hard_breaches"`
	LastHardBreachAt        *time.Time `json:"last_hard_breach_at,omitempty"`
	LastHardBreachDimension string     `json:"last_hard_breach_dimension,omitempty"`
	Resets                  int64      `json:"resets"`
	LastResetAt             *time.Time `json:"last_reset_at,omitempty"`
	NextResetAt             *time.Time `json:"next_reset_at,omitempty"`
	CreatedAt               *time.Time `json:"created_at,omitempty"`
	UpdatedAt               *time.Time `json:"updated_at,omitempty"`
}

// BudgetList answers GET /v1/budgets: one page of budgets, shared and
// run-scoped, ordered by id.
type BudgetList struct {
	Budgets []Budget `json:"budgets"`
	// NextCursor is the cursor of the next page; empty on the last page.
	// A page may hold fewer budgets than the limit, even none, and still
	// have one.
	NextCursor string `json:"next_cursor,omitempty"`
}

// PutBudgetResponse answers PUT/POST /v1/budgets: 201 when created, 200
// when an existing definition was replaced.
type PutBudgetResponse struct {
	Budget  Budget `json:"budget"`
	Created bool   `json:"created"`
}

// BudgetUsageReport is the body of POST /v1/budgets/{id}/usage (an
// operator's report straight to one budget).
type BudgetUsageReport struct {
	Dimension string `json:"dimension"`
	Delta     int64  `json:"delta"`
	DedupKey  string `json:"dedup_key,omitempty"` // a repeat within 24 h counts once
}

// ExecutionUsageReport is the body of POST /v1/executions/{id}/usage: a
// worker reports usage of its running attempt, fenced by its lease (a
// stale lease is 409 stale_lease). The delta counts against every budget
// of the execution that meters the dimension.
type ExecutionUsageReport struct {
	LeaseID   string `json:"lease_id"`
	Epoch     int64  `json:"epoch"`
	Dimension string `json:"dimension"`
	Delta     int64  `json:"delta"`
	DedupKey  string `json:"dedup_key"` // required: a retried request counts once
}

// UsageResult is what one report did to one budget. Status is "applied",
// "duplicate" (the dedup key was seen: nothing added), "soft_breach" or
// "hard_breach" (this report crossed that limit).
type UsageResult struct {
	BudgetID string `json:"budget_id"`
	Status   string `json:"status"`
	Used     int64  `json:"used"`
	Hard     int64  `json:"hard,omitempty"`
	Soft     int64  `json:"soft,omitempty"`
	OverHard bool   `json:"over_hard"`
}

// UsageResponse answers a usage report.
type UsageResponse struct {
	Results []UsageResult `json:"results"`
}

// PutQuota is the body of PUT or POST /v1/quotas: create a quota or
// replace its definition (windows and held slots are kept).
type PutQuota struct {
	ID          string `json:"id,omitempty"`
	Namespace   string `json:"namespace,omitempty"`
	Name        string `json:"name,omitempty"`
	Rate        int64  `json:"rate,omitempty"`        // admissions per window; 0 = none
	WindowMs    int64  `json:"window_ms,omitempty"`   // default 1000
	Concurrency int64  `json:"concurrency,omitempty"` // attempts running at once; 0 = none
	JitterMs    int64  `json:"jitter_ms,omitempty"`
	Key         string `json:"key,omitempty"` // dotted input field path: limits per value
}

// QuotaSubject is the state of an unkeyed quota, or of one key value of a
// keyed one.
type QuotaSubject struct {
	Key         string `json:"key,omitempty"`
	WindowCount int64  `json:"window_count"`
	ActiveCount int64  `json:"active_count"`
	// PausedUntil is the end of a pause in force (POST
	// /v1/quotas/{id}/pause), PauseReason its reason.
	PausedUntil *time.Time `json:"paused_until,omitempty"`
	PauseReason string     `json:"pause_reason,omitempty"`
}

// QuotaPause is the body of POST /v1/quotas/{id}/pause: no admission under
// the subject (the quota, or one key value of a keyed quota) until the
// pause ends; attempts admitted before keep running. Give Until or ForMs.
type QuotaPause struct {
	Key    string `json:"key,omitempty"`    // the key value, for a keyed quota
	Until  string `json:"until,omitempty"`  // the pause's end: an RFC 3339 time with its zone
	ForMs  int64  `json:"for_ms,omitempty"` // or its length from now
	Reason string `json:"reason,omitempty"` // shown in the blocked executions' detail
}

// QuotaResume is the body of POST /v1/quotas/{id}/resume: the pause of the
// subject ends now.
type QuotaResume struct {
	Key string `json:"key,omitempty"`
}

// Quota is a quota's definition and state.
type Quota struct {
	ID          string         `json:"id"`
	Rate        int64          `json:"rate,omitempty"`
	WindowMs    int64          `json:"window_ms,omitempty"`
	Concurrency int64          `json:"concurrency,omitempty"`
	JitterMs    int64          `json:"jitter_ms,omitempty"`
	Key         string         `json:"key,omitempty"`
	Subjects    []QuotaSubject `json:"subjects"`
	// SubjectsMore counts the key values left out: a listing (GET
	// /v1/quotas) gives the first 20 by key, GET /v1/quotas/{id} the first
	// 1,000 (?key= gives any one).
	SubjectsMore int        `json:"subjects_more,omitempty"`
	CreatedAt    *time.Time `json:"created_at,omitempty"`
	UpdatedAt    *time.Time `json:"updated_at,omitempty"`
}

// QuotaList answers GET /v1/quotas: one page of quotas, ordered by id.
type QuotaList struct {
	Quotas     []Quota `json:"quotas"`
	NextCursor string  `json:"next_cursor,omitempty"` // empty on the last page; see BudgetList
}

// PutQuotaResponse answers PUT/POST /v1/quotas.
type PutQuotaResponse struct {
	Quota   Quota `json:"quota"`
	Created bool  `json:"created"`
}

// WorkerHeartbeat is the body of POST /v1/workers/heartbeat: a worker
// connects (declaring its capabilities, validated: 400 on a bad one) and
// then repeats it to stay listed.
type WorkerHeartbeat struct {
	WorkerID     string   `json:"worker_id"`
	InstanceID   string   `json:"instance_id,omitempty"` // default worker_id
	Namespace    string   `json:"namespace,omitempty"`
	Lanes        []string `json:"lanes,omitempty"`
	Capabilities []string `json:"capabilities,omitempty"`
	// Kinds are the kinds it has handlers for (at most 1024): an execution
	// waiting in its lanes for a kind no connected worker handles says so.
	// None: not said (any kind).
	Kinds []string `json:"kinds,omitempty"`
	TTLMs int64    `json:"ttl_ms,omitempty"` // listed this long after the heartbeat; default 30000
}

// WorkerHeartbeatResponse answers a heartbeat. Registered is true when the
// instance was not listed (a connect); Unblocked counts the executions
// that were waiting for a capable worker and that the namespace's workers
// can now run.
type WorkerHeartbeatResponse struct {
	Registered bool `json:"registered"`
	Unblocked  int  `json:"unblocked"`
}

// Worker is a connected worker instance.
type Worker struct {
	Namespace    string     `json:"namespace"`
	WorkerID     string     `json:"worker_id"`
	InstanceID   string     `json:"instance_id"`
	Lanes        []string   `json:"lanes"`
	Capabilities []string   `json:"capabilities"`
	Kinds        []string   `json:"kinds,omitempty"` // the kinds it has handlers for, when it said
	ActiveLeases []string   `json:"active_leases"`   // execution ids it holds a lease on
	ConnectedAt  *time.Time `json:"connected_at,omitempty"`
	SeenAt       *time.Time `json:"seen_at,omitempty"`
	ExpiresAt    *time.Time `json:"expires_at,omitempty"`
}

// WorkerList answers GET /v1/workers.
type WorkerList struct {
	Workers []Worker `json:"workers"`
	// LeasesTruncated: the namespace has more running executions than the
	// route looks at, so active_leases may be incomplete.
	LeasesTruncated bool `json:"leases_truncated,omitempty"`
}
