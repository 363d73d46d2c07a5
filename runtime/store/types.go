package store

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/flowfabric/ff/compiler/plan"
)

// Limits and defaults.
const (
	// MaxPayloadBytes bounds a payload and a result. The API enforces it too.
	MaxPayloadBytes = plan.MaxPayloadBytes
	// MaxErrorBytes bounds a failure message; longer ones are truncated.
	MaxErrorBytes = 4096
	// MaxNameBytes bounds a namespace, lane or kind.
	MaxNameBytes = plan.MaxLaneLen
	// MaxWorkerIDBytes bounds a worker id and a worker instance id.
	MaxWorkerIDBytes = 2 * MaxNameBytes
	// MaxKindBytes bounds an execution kind.
	MaxKindBytes = plan.MaxKindLen
	// MaxKinds bounds the kinds a claim or a hand-off may name.
	MaxKinds = 1024
	// MaxTags bounds the number of tags of an execution.
	MaxTags = 64
	// MaxTagBytes bounds a tag key or value.
	MaxTagBytes = 256
	// MaxIdempotencyKeyBytes bounds an idempotency key.
	MaxIdempotencyKeyBytes = 256
	// MaxClaim bounds the number of grants one Claim returns.
	MaxClaim = 256
	// MaxBatch bounds the items of one Renew or FinishMany call.
	MaxBatch = 1024

	// FlowPartitionsDefault is the default number of flow partitions. It is
	// modest on purpose: every partition costs the scheduler and the
	// scanners a round trip per pass.
	FlowPartitionsDefault = 16
	// BudgetPartitionsDefault is the default number of budget partitions.
	BudgetPartitionsDefault = 8
	// QuotaPartitionsDefault is the default number of quota partitions.
	QuotaPartitionsDefault = 8
	// PartitionsMax bounds each partition count.
	PartitionsMax = 16384

	// MaxReclaimsDefault is the reclaim allowance of an execution that sets
	// none (and of every flow member): how many lost leases put it back in
	// line without charging its retry policy.
	MaxReclaimsDefault = 3 // Lua: RECLAIMS_DEFAULT
	// MaxReclaimsMax bounds CreateRequest.MaxReclaims.
	MaxReclaimsMax = 1000
	// AttemptsKept is how many attempts' history an execution record
	// keeps: each attempt's start drops the history of the attempt
	// AttemptsKept before it.
	AttemptsKept = 100 // Lua: ATTEMPTS_KEPT
	// UpstreamsCarried bounds the upstream results one grant carries
	// (Grant.Upstreams), and UpstreamsCarriedCall those of all the grants
	// of one Claim or FinishHandoff call, in bytes. An upstream whose result
	// does not fit is listed in Grant.UpstreamsOmitted instead, for the
	// worker to read (Result). The member's input (Payload) is always
	// carried, outside the bounds; among the upstream results its feeding
	// upstream's is counted first.
	UpstreamsCarried     = 4 << 20  // Lua: UPSTREAMS_CARRIED
	UpstreamsCarriedCall = 16 << 20 // Lua: UPSTREAMS_CARRIED_CALL

	// IdempotencyTTLDefault is how long an idempotency key is remembered.
	IdempotencyTTLDefault = 24 * time.Hour
	// LeaseTTLDefault is the lease duration when a claim asks for none.
	LeaseTTLDefault = 30 * time.Second
	// LeaseTTLMin and LeaseTTLMax bound a lease duration.
	LeaseTTLMin = 100 * time.Millisecond
	LeaseTTLMax = time.Hour
)

// Lifecycle is the coarse phase of an execution.
type Lifecycle string

// Values of Lifecycle.
const (
	LifecycleRunnable Lifecycle = "runnable" // not running: waiting, delayed or blocked
	LifecycleActive   Lifecycle = "active"   // an attempt runs under a lease
	LifecycleTerminal Lifecycle = "terminal" // finished; see TerminalOutcome
)

// Ownership says whether a worker holds a lease.
type Ownership string

// Values of Ownership.
const (
	OwnershipUnowned Ownership = "unowned"
	OwnershipLeased  Ownership = "leased"
)

// Eligibility says whether a runnable execution may be claimed now.
type Eligibility string

// Values of Eligibility.
const (
	EligibleNow           Eligibility = "eligible_now"
	EligibleNotUntilTime  Eligibility = "not_eligible_until_time"
	BlockedByDependencies Eligibility = "blocked_by_dependencies" // flows
	BlockedByBudget       Eligibility = "blocked_by_budget"       // admission
	BlockedByQuota        Eligibility = "blocked_by_quota"        // admission
	BlockedByRoute        Eligibility = "blocked_by_route"        // no capable worker
	EligibilityNA         Eligibility = "not_applicable"          // active or terminal
)

// BlockingReason says what a runnable execution waits for.
type BlockingReason string

// Values of BlockingReason.
const (
	BlockingNone            BlockingReason = "none"
	WaitingForWorker        BlockingReason = "waiting_for_worker"
	WaitingForDelay         BlockingReason = "waiting_for_delay"
	WaitingForRetryBackoff  BlockingReason = "waiting_for_retry_backoff"
	WaitingForDependencies  BlockingReason = "waiting_for_dependencies"
	WaitingForBudget        BlockingReason = "waiting_for_budget"
	WaitingForQuota         BlockingReason = "waiting_for_quota"
	WaitingForCapableWorker BlockingReason = "waiting_for_capable_worker"
)

// Outcome is the terminal outcome of an execution.
type Outcome string

// Values of Outcome.
const (
	OutcomeNone      Outcome = "none"
	OutcomeSuccess   Outcome = "success"
	OutcomeFailed    Outcome = "failed"
	OutcomeCancelled Outcome = "cancelled"
	OutcomeExpired   Outcome = "expired" // execution deadline passed
	OutcomeSkipped   Outcome = "skipped" // flows: its join can no longer be met
)

// AttemptState says which attempt comes next or runs now.
type AttemptState string

// Values of AttemptState.
const (
	AttemptNone           AttemptState = "none"                    // terminal before any attempt
	AttemptPendingFirst   AttemptState = "pending_first_attempt"   // next claim starts an initial attempt
	AttemptPendingRetry   AttemptState = "pending_retry_attempt"   // next claim starts a retry
	AttemptPendingReclaim AttemptState = "pending_reclaim_attempt" // next claim reclaims after a lost lease
	AttemptPendingReplay  AttemptState = "pending_replay_attempt"  // flows: next claim replays
	AttemptRunning        AttemptState = "running_attempt"
	AttemptTerminal       AttemptState = "attempt_terminal" // terminal after at least one attempt
)

// PublicState is the one state shown to users, derived from the others by
// DerivePublicState (and by the same rule in Lua).
type PublicState string

// Values of PublicState.
const (
	StateWaiting   PublicState = "waiting"   // eligible, waiting for a worker
	StateDelayed   PublicState = "delayed"   // delay-until or retry backoff
	StatePending   PublicState = "pending"   // flows: waiting for upstream executions
	StateBlocked   PublicState = "blocked"   // admission: budget, quota or capable worker
	StateActive    PublicState = "active"    // running under a lease
	StateCompleted PublicState = "completed" // terminal success
	StateFailed    PublicState = "failed"
	StateCancelled PublicState = "cancelled"
	StateExpired   PublicState = "expired"
	StateSkipped   PublicState = "skipped"
)

// PublicStates lists every PublicState.
var PublicStates = []PublicState{StateWaiting, StateDelayed, StatePending, StateBlocked, StateActive,
	StateCompleted, StateFailed, StateCancelled, StateExpired, StateSkipped}

// Terminal reports whether s is a terminal public state.
func (s PublicState) Terminal() bool {
	switch s {
	case StateCompleted, StateFailed, StateCancelled, StateExpired, StateSkipped:
		return true
	}
	return false
}

// ParsePublicState checks that s is a PublicState.
func ParsePublicState(s string) (PublicState, error) {
	for _, p := range PublicStates {
		if string(p) == s {
			return p, nil
		}
	}
	return "", &ValidationError{Field: "state", Msg: fmt.Sprintf("unknown state %q", s)}
}

// StateVector is the full state of an execution. Every transition writes
// all of it.
type StateVector struct {
	Lifecycle      Lifecycle      `json:"lifecycle_phase"`
	Ownership      Ownership      `json:"ownership_state"`
	Eligibility    Eligibility    `json:"eligibility_state"`
	BlockingReason BlockingReason `json:"blocking_reason"`
	BlockingDetail string         `json:"blocking_detail,omitempty"`
	Outcome        Outcome        `json:"terminal_outcome"`
	AttemptState   AttemptState   `json:"attempt_state"`
	Public         PublicState    `json:"public_state"`
}

// DerivePublicState is the one rule mapping the other dimensions to the
// public state. The Lua library applies the same rule (derive_public).
func DerivePublicState(l Lifecycle, e Eligibility, o Outcome) PublicState {
	switch l {
	case LifecycleActive:
		return StateActive
	case LifecycleTerminal:
		switch o {
		case OutcomeSuccess:
			return StateCompleted
		case OutcomeCancelled:
			return StateCancelled
		case OutcomeExpired:
			return StateExpired
		case OutcomeSkipped:
			return StateSkipped
		}
		return StateFailed
	}
	switch e {
	case EligibleNotUntilTime:
		return StateDelayed
	case BlockedByDependencies:
		return StatePending
	case BlockedByBudget, BlockedByQuota, BlockedByRoute:
		return StateBlocked
	}
	return StateWaiting
}

// Consistent reports whether the public state agrees with the other
// dimensions.
func (v StateVector) Consistent() bool {
	return v.Public == DerivePublicState(v.Lifecycle, v.Eligibility, v.Outcome)
}

// Backoff kinds of RetryPolicy.
const (
	BackoffFixed       = plan.BackoffFixed
	BackoffExponential = plan.BackoffExponential
)

// RetryPolicy says how often and when a failed execution is tried again.
// The zero value means one attempt, no retry.
type RetryPolicy struct {
	Attempts int           // every attempt counts, the first included; 0 means 1
	Backoff  string        // BackoffFixed (default) or BackoffExponential
	Delay    time.Duration // first delay; exponential doubles it per retry
	MaxDelay time.Duration // cap of one delay; 0 = no cap (the API and the compiler fill in plan.DefaultMaxDelayMs)
	Jitter   bool          // randomise each delay in [delay/2, delay]
}

// RetryPolicyFromPlan converts a compiled plan's retry policy.
func RetryPolicyFromPlan(r plan.Retry) RetryPolicy {
	maxDelay := r.MaxDelayMs
	if maxDelay == 0 {
		// Not given (a plan written by hand): the language's default cap,
		// as an execution created over the API gets.
		maxDelay = max(plan.DefaultMaxDelayMs, r.DelayMs)
	}
	return RetryPolicy{
		Attempts: r.Attempts,
		Backoff:  r.Backoff,
		Delay:    time.Duration(r.DelayMs) * time.Millisecond,
		MaxDelay: time.Duration(maxDelay) * time.Millisecond,
		Jitter:   r.Jitter,
	}
}

// CreateRequest describes a new standalone execution.
type CreateRequest struct {
	Namespace string            // default plan.DefaultNamespace
	Lane      string            // default plan.DefaultLane
	Kind      string            // handler key; required
	Priority  int               // plan.PriorityMin..plan.PriorityMax; higher runs first
	Tags      map[string]string // opaque to the engine
	Payload   []byte            // opaque input, at most MaxPayloadBytes

	RequiredCapabilities []string // the worker must advertise every one
	// Budgets it counts against: a budget id ("<ns>/<name>", or
	// "<ns>/<name>@<run id>" for a run-scoped one), or a bare name meaning
	// "<Namespace>/<name>". Stored as ids.
	Budgets []string
	// Quotas that admit it: a quota id or bare name as for Budgets. Each
	// must exist: its definition says whether it is keyed. For a keyed
	// quota the key value is extracted from Payload (a JSON object) at the
	// quota's key path, or "<quota>=<key value>" gives it explicitly; a key
	// value for an unkeyed quota is refused (it would escape the quota's
	// cap). Stored as subjects "<ns>/<name>[=<key value>]".
	Quotas []string

	// MaxReclaims caps how often a lost lease (the worker died; lease
	// expiry) puts the execution back in line without charging the retry
	// policy; past it the execution fails with reason reclaims_exhausted.
	// 0 = MaxReclaimsDefault.
	MaxReclaims int

	Retry          RetryPolicy
	AttemptTimeout time.Duration // per attempt, from claim; 0 = none
	Deadline       time.Duration // whole execution, from creation; 0 = none
	Delay          time.Duration // not eligible before now+Delay
	DelayUntil     time.Time     // not eligible before this time; exclusive with Delay

	// IdempotencyKey makes creation idempotent within the namespace: a repeat
	// returns the first execution (for IdempotencyTTL).
	IdempotencyKey string
}

// Lease identifies one lease of an execution: the fence of every worker
// call.
type Lease struct {
	ExecutionID ExecutionID `json:"execution_id"`
	ID          string      `json:"lease_id"`
	Epoch       int64       `json:"lease_epoch"`
}

// LeaseInfo is the current lease of an active execution.
type LeaseInfo struct {
	Lease
	WorkerID   string    `json:"worker_id"`
	InstanceID string    `json:"worker_instance_id"`
	AcquiredAt time.Time `json:"acquired_at"`
	ExpiresAt  time.Time `json:"expires_at"`
}

// AttemptType says why an attempt was started.
type AttemptType string

// Values of AttemptType.
const (
	AttemptInitial AttemptType = "initial"
	AttemptRetry   AttemptType = "retry"   // after a failed attempt
	AttemptReclaim AttemptType = "reclaim" // after a lost (expired or revoked) lease
	AttemptReplay  AttemptType = "replay"  // flows: after a replay request
)

// AttemptOutcome is how an attempt ended.
type AttemptOutcome string

// Values of AttemptOutcome.
const (
	AttemptRunningNow   AttemptOutcome = "running"
	AttemptSucceeded    AttemptOutcome = "success"
	AttemptFailed       AttemptOutcome = "failed"
	AttemptTimedOut     AttemptOutcome = "timed_out"
	AttemptLeaseExpired AttemptOutcome = "lease_expired"
	AttemptRevoked      AttemptOutcome = "revoked"
	AttemptCancelled    AttemptOutcome = "cancelled"
	AttemptExpired      AttemptOutcome = "expired" // execution deadline passed while running
)

// Attempt is one entry of an execution's attempt history.
type Attempt struct {
	Index      int            `json:"index"` // 1-based
	Type       AttemptType    `json:"type"`
	WorkerID   string         `json:"worker_id"`
	InstanceID string         `json:"worker_instance_id"`
	LeaseID    string         `json:"lease_id"`
	LeaseEpoch int64          `json:"lease_epoch"`
	StartedAt  time.Time      `json:"started_at"`
	EndedAt    time.Time      `json:"ended_at,omitzero"`
	Outcome    AttemptOutcome `json:"outcome"`
	Error      string         `json:"error,omitempty"`
}

// Execution is the stored record of an execution.
type Execution struct {
	ID        ExecutionID       `json:"id"`
	Partition int               `json:"partition"`
	Namespace string            `json:"namespace"`
	Lane      string            `json:"lane"`
	Kind      string            `json:"kind"`
	Priority  int               `json:"priority"`
	Tags      map[string]string `json:"tags,omitempty"`
	Payload   []byte            `json:"payload,omitempty"`
	Result    []byte            `json:"result,omitempty"`
	// InputFrom is the uuid of the upstream whose output is the input of
	// a flow member with no payload of its own (GetExecution;
	// ReceivedInput reads that output).
	InputFrom string `json:"input_from,omitempty"`

	RequiredCapabilities []string `json:"required_capabilities,omitempty"`
	Budgets              []string `json:"budgets,omitempty"`
	Quotas               []string `json:"quotas,omitempty"`

	Retry          RetryPolicy   `json:"retry"`
	AttemptTimeout time.Duration `json:"attempt_timeout,omitempty"`
	MaxReclaims    int           `json:"max_reclaims"` // reclaim allowance (lost leases)
	Reclaims       int           `json:"reclaims"`     // lost leases so far

	State         StateVector `json:"state"`
	AttemptCount  int         `json:"attempt_count"`            // attempts started
	FailureReason string      `json:"failure_reason,omitempty"` // last attempt error or terminal reason
	Lease         *LeaseInfo  `json:"lease,omitempty"`          // while active

	FlowID   string `json:"flow_id,omitempty"`   // flows: the run it belongs to
	FlowNode string `json:"flow_node,omitempty"` // flows: its exec name in the plan

	IdempotencyKey string    `json:"idempotency_key,omitempty"`
	CreatedAt      time.Time `json:"created_at"`
	UpdatedAt      time.Time `json:"updated_at"`
	EligibleAt     time.Time `json:"eligible_at,omitzero"` // delay-until or retry due time while delayed
	DeadlineAt     time.Time `json:"deadline_at,omitzero"`
	StartedAt      time.Time `json:"started_at,omitzero"` // first claim
	EndedAt        time.Time `json:"ended_at,omitzero"`   // terminal

	Attempts []Attempt `json:"attempts,omitempty"` // filled by GetExecution
}

// Run returns the id of the flow run e is a member of, "" for an
// execution outside a flow.
func (e *Execution) Run() RunID {
	if e.FlowID == "" {
		return ""
	}
	return RunID(makeID(e.Partition, e.FlowID))
}

// ResultInfo is the outcome of a finished execution.
type ResultInfo struct {
	State   PublicState `json:"state"`
	Outcome Outcome     `json:"outcome"`
	Result  []byte      `json:"result,omitempty"`
	Error   string      `json:"error,omitempty"`
}

// ListRequest selects executions of one namespace.
type ListRequest struct {
	Namespace string      // required
	Lane      string      // "" = every lane of the namespace
	State     PublicState // "" = every state
	Limit     int         // 1..ListLimitMax; 0 = ListLimitDefault
	Cursor    string      // from a previous page; "" = first page
}

// List limits.
const (
	ListLimitDefault = 50
	ListLimitMax     = 500
)

// ListPage is one page of executions.
type ListPage struct {
	Executions []*Execution // without payload, result and attempts
	Cursor     string       // "" when there is no next page
}

// WorkerIdentity is who claims.
type WorkerIdentity struct {
	WorkerID     string   // a logical worker (a deployment)
	InstanceID   string   // one process of it
	Namespace    string   // it only sees executions of this namespace
	Capabilities []string // it is granted executions whose requirements are a subset
}

// ClaimRequest asks for up to Max executions of one partition.
type ClaimRequest struct {
	Partition int
	Lanes     []string // at least one
	Worker    WorkerIdentity
	Max       int           // 1..MaxClaim
	LeaseTTL  time.Duration // 0 = LeaseTTLDefault
	// Kinds, when set, are the kinds the worker has handlers for: a
	// candidate of another kind is left for another worker (at most
	// MaxKinds).
	Kinds []string

	// RouteBlocking says that NamespaceCapabilities is the union of the
	// capabilities of the namespace's connected workers (CapabilityUnion).
	// Then a candidate that this worker cannot run is left for other
	// workers when the union covers it, and moved to the blocked index
	// (blocked_by_route, waiting_for_capable_worker) when it does not, so it
	// no longer hides the work behind it; UnblockRoute brings it back. When
	// false, such candidates are only passed over.
	RouteBlocking         bool
	NamespaceCapabilities []string

	// BreachedBudgets are the budgets at a hard limit (ClaimBreaches, as
	// the scheduler caches it). A candidate counting against one is blocked
	// (waiting_for_budget) or, with on_hard_limit fail, failed, instead of
	// granted.
	BreachedBudgets []BudgetBreach
	// Admitted are quota admissions recorded for candidates (AdmitQuota):
	// a candidate with quota references is granted only with an admission
	// for its next attempt, and admitted candidates are tried first.
	// ClaimAdmitted fills it; Claim without it passes such candidates over.
	Admitted []Admitted
}

// Admitted identifies a quota admission: the attempt of an execution it
// is for and the token of the admitting call (random per ClaimAdmitted
// call). Its slot holder is "<execution id>#<attempt>#<token>", the
// attempt written "<attempt>.<resets>" once a replay reset the execution,
// so that an admission for the attempt before a reset is not taken for
// one of the same attempt after it (ff_quota_admit's contended).
type Admitted struct {
	ExecutionID ExecutionID
	Attempt     int
	// Resets is the execution's reset count the admission is for
	// (Candidate.Resets; 0 for an execution no replay reset): a claim
	// grants under the admission only while it is still the execution's,
	// since a replay that resets a flow member leaves its attempt number
	// as it was.
	Resets int
	Token  string // letters and digits; may be empty
}

// holder is the slot holder of an admission.
func (a Admitted) holder() string {
	attempt := strconv.Itoa(a.Attempt)
	if a.Resets > 0 {
		attempt += "." + strconv.Itoa(a.Resets)
	}
	return string(a.ExecutionID) + "#" + attempt + "#" + a.Token
}

// Grant is one claimed execution: everything the worker needs to run it.
type Grant struct {
	Lease
	Namespace       string            `json:"namespace"`
	Lane            string            `json:"lane"`
	Kind            string            `json:"kind"`
	Priority        int               `json:"priority"`
	Attempt         int               `json:"attempt"` // 1-based
	AttemptType     AttemptType       `json:"attempt_type"`
	MaxAttempts     int               `json:"max_attempts"`
	LeaseExpiresAt  time.Time         `json:"lease_expires_at"`
	AttemptDeadline time.Time         `json:"attempt_deadline,omitzero"` // attempt timeout, zero if none
	Payload         []byte            `json:"payload,omitempty"`
	Tags            map[string]string `json:"tags,omitempty"`
	FlowID          string            `json:"flow_id,omitempty"`
	FlowNode        string            `json:"flow_node,omitempty"`
	// Upstreams holds the outputs of a flow member's upstream executions by
	// exec name (flows; nil for standalone executions).
	Upstreams map[string][]byte `json:"upstreams,omitempty"`
	// UpstreamErrors holds, by exec name, how and why upstream executions
	// of a flow member ended without an output: what an on failure or on
	// done edge let the member run after.
	UpstreamErrors map[string]UpstreamError `json:"upstream_errors,omitempty"`
	// UpstreamsOmitted holds, by exec name, the upstreams with a result
	// that Upstreams leaves out: it would have passed UpstreamsCarried or
	// UpstreamsCarriedCall. Their results are read with Result.
	UpstreamsOmitted map[string]ExecutionID `json:"upstreams_omitted,omitempty"`
	// Downstream is true for a flow member whose success alone makes a
	// downstream member eligible (staged with handoff=1): a Handoff can
	// grant that member when this one completes.
	Downstream bool `json:"downstream,omitempty"`
}

// UpstreamError is how an upstream of a flow member ended without an
// output.
type UpstreamError struct {
	State PublicState `json:"state"` // failed, expired, cancelled or skipped
	Error string      `json:"error"` // its failure, or why it expired, was cancelled or skipped
}

// Handoff asks FinishHandoff to grant the finishing worker, in the same
// calls, downstream flow members that the successful attempts make eligible:
// up to Max of them, in its namespace and lanes, that it has the
// capabilities for, that count against no budget or quota, and that are
// not behind the head of their lane (so that a claim of the partition
// would take them next anyway). The worker saves a claim round trip per
// step of a flow and the member never waits in the eligible index.
type Handoff struct {
	Worker   WorkerIdentity
	Lanes    []string
	Max      int           // 1..MaxClaim
	LeaseTTL time.Duration // 0 = LeaseTTLDefault
	Kinds    []string      // as in ClaimRequest
}

// RenewResult is the outcome of renewing one lease.
type RenewResult struct {
	ExpiresAt time.Time // new expiry when Err is nil
	Err       error     // a *LeaseError (errors.Is ErrStaleLease) when the lease is lost
}

// Finish reports the end of one attempt: a success when Failed is false.
type Finish struct {
	Lease     Lease
	Result    []byte // success: the output, at most MaxPayloadBytes
	Failed    bool
	Error     string // failure message
	Retryable bool   // failure: retry per the policy if attempts remain
}

// FinishResult is the outcome of one Finish.
type FinishResult struct {
	State   PublicState // the execution's state afterwards
	RetryAt time.Time   // when a retry becomes eligible (failure with retry)
	Err     error       // nil, a *LeaseError, a *ValidationError or ErrNotFound
	// RunEnded is set when this success ended its flow run with a clean
	// success: the run as GetRunOutcome would read it now (without
	// members), so that whoever waits for it needs no further read (see
	// Config.RunEnded).
	RunEnded *Run
}

// ScanResult is what one scanner step did on one partition.
type ScanResult struct {
	Processed int  // executions transitioned
	More      bool // the limit was reached: more may be due
}

// ExecutionID identifies an execution: "N.<uuid>" where N is its flow
// partition.
type ExecutionID string

// Partition returns the partition encoded in the id.
func (id ExecutionID) Partition() (int, error) {
	p, _, err := splitID(string(id))
	return p, err
}

// ParseExecutionID checks the form of s.
func ParseExecutionID(s string) (ExecutionID, error) {
	if _, _, err := splitID(s); err != nil {
		return "", err
	}
	return ExecutionID(s), nil
}

// splitID splits "N.<uuid>" into N and the uuid.
func splitID(s string) (int, string, error) {
	head, uuid, ok := strings.Cut(s, ".")
	if !ok || head == "" || len(head) > 5 || !isUUID(uuid) {
		return 0, "", &ValidationError{Field: "id", Msg: fmt.Sprintf("malformed id %q: want <partition>.<uuid>", s)}
	}
	p, err := strconv.Atoi(head)
	if err != nil || p < 0 || strconv.Itoa(p) != head {
		return 0, "", &ValidationError{Field: "id", Msg: fmt.Sprintf("malformed id %q: bad partition", s)}
	}
	return p, uuid, nil
}

func isUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
				return false
			}
		}
	}
	return true
}
