// Package wire holds the JSON bodies of the ffrun HTTP API, shared by the
// server (runtime/api), the Go client (runtime/client) and the worker SDK
// (runtime/worker). It has no behaviour beyond field definitions and a few
// constants, so importing it pulls in nothing heavy.
package wire

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/flowfabric/ff/compiler/plan"
)

// Error codes: the stable values of ErrorBody.Code. Clients switch on these,
// never on messages.
const (
	CodeInvalidJSON      = "invalid_json"      // 400: the body is not valid JSON of the expected shape
	CodeUnknownField     = "unknown_field"     // 400: the body has a field the route does not accept
	CodeValidation       = "validation_failed" // 400: a field has a bad value; details.field names it
	CodePayloadTooLarge  = "payload_too_large" // 413: the body exceeds the route's limit
	CodeUnauthorized     = "unauthorized"      // 401: missing or wrong bearer token
	CodeForbidden        = "forbidden"         // 403: a browser's cross-origin write, or, without a token, a request addressed to a host name other than localhost
	CodeNotFound         = "not_found"         // 404: no such execution
	CodeUnknownRoute     = "unknown_route"     // 404: no such route
	CodeMethodNotAllowed = "method_not_allowed"
	CodeStaleLease       = "stale_lease"     // 409: lease id/epoch do not match, or the lease expired or was revoked
	CodeCancelled        = "cancelled"       // 409: the execution was cancelled while leased
	CodeConflict         = "conflict"        // 409: the execution is not in a state that allows the call
	CodeNotTerminal      = "not_terminal"    // 409: the result was asked for before the execution ended
	CodeRateLimited      = "rate_limited"    // 429: too many failed authentications from the client's address
	CodeUnavailable      = "unavailable"     // 503: Valkey unreachable or the server is shutting down
	CodeNotImplemented   = "not_implemented" // 501: the route exists in the API but not in this server yet
	CodeInternal         = "internal"        // 500: anything else; the server logs the cause

	CodeUnsupportedMediaType = "unsupported_media_type" // 415: the body's Content-Type is not JSON's
)

// ErrorEnvelope is the body of every non-2xx response.
type ErrorEnvelope struct {
	Error ErrorBody `json:"error"`
}

// ErrorBody describes one error.
type ErrorBody struct {
	Code    string         `json:"code"`
	Message string         `json:"message"`
	Details map[string]any `json:"details,omitempty"`
}

// CreateExecution is the body of POST /v1/executions and one item of a
// batch create.
type CreateExecution struct {
	Namespace      string            `json:"namespace,omitempty"` // default plan.DefaultNamespace
	Lane           string            `json:"lane,omitempty"`      // default plan.DefaultLane
	Kind           string            `json:"kind"`                // handler key; required
	Input          json.RawMessage   `json:"input,omitempty"`     // any JSON value
	Priority       *int              `json:"priority,omitempty"`  // plan.PriorityMin..Max; default plan.PriorityDefault
	Tags           map[string]string `json:"tags,omitempty"`
	IdempotencyKey string            `json:"idempotency_key,omitempty"`
	Retry          *plan.Retry       `json:"retry,omitempty"`       // default: one attempt
	TimeoutMs      int64             `json:"timeout_ms,omitempty"`  // per attempt; 0 = none
	DeadlineMs     int64             `json:"deadline_ms,omitempty"` // whole execution, from creation; 0 = none
	DelayMs        int64             `json:"delay_ms,omitempty"`    // not eligible before now+delay
	Requires       []string          `json:"requires,omitempty"`    // worker capabilities needed
}

// CreateExecutionResponse is the body of a successful create: 201 when the
// execution was created, 200 when the idempotency key matched an earlier one.
type CreateExecutionResponse struct {
	Execution Execution `json:"execution"`
	Created   bool      `json:"created"`
}

// CreateBatchRequest is the body of POST /v1/executions/batch.
type CreateBatchRequest struct {
	Executions []CreateExecution `json:"executions"`
}

// CreateBatchResponse lists one result per requested execution, in order.
type CreateBatchResponse struct {
	Results []CreateBatchResult `json:"results"`
}

// CreateBatchResult is the outcome of one item of a batch create: the id
// and state of the execution (GET it for the rest), or an error.
type CreateBatchResult struct {
	ID      string     `json:"id,omitempty"`
	State   string     `json:"state,omitempty"`
	Created bool       `json:"created"` // false: the idempotency key matched an earlier execution
	Error   *ErrorBody `json:"error,omitempty"`
}

// Execution is the public view of one execution.
type Execution struct {
	ID        string            `json:"id"`
	Namespace string            `json:"namespace"`
	Lane      string            `json:"lane"`
	Kind      string            `json:"kind"`
	Priority  int               `json:"priority"`
	Tags      map[string]string `json:"tags,omitempty"`
	Requires  []string          `json:"requires,omitempty"`
	// RunID and FlowNode are, for a member of a flow run, the run and its
	// exec name in the run's plan (absent outside a flow).
	RunID    string `json:"run_id,omitempty"`
	FlowNode string `json:"flow_node,omitempty"`

	// State is the public state (waiting, delayed, active, completed,
	// failed, cancelled, expired, ...); the fields below it are the state
	// vector it is derived from (spec/runtime.md).
	State            string `json:"state"`
	LifecyclePhase   string `json:"lifecycle_phase,omitempty"`
	OwnershipState   string `json:"ownership_state,omitempty"`
	EligibilityState string `json:"eligibility_state,omitempty"`
	BlockingReason   string `json:"blocking_reason,omitempty"`
	BlockingDetail   string `json:"blocking_detail,omitempty"`
	TerminalOutcome  string `json:"terminal_outcome,omitempty"`
	AttemptState     string `json:"attempt_state,omitempty"`

	Attempt     int    `json:"attempt"`      // attempts started so far
	MaxAttempts int    `json:"max_attempts"` // from the retry policy
	LastError   string `json:"last_error,omitempty"`

	Input  json.RawMessage `json:"input,omitempty"`
	Result json.RawMessage `json:"result,omitempty"`
	// InputUnread is set in the answer of a change (priority, revoke,
	// cancel) to a flow member fed by an upstream when the input it
	// receives could not be read after the change was written: the
	// change holds, Input is left out (GET the execution for it).
	InputUnread bool `json:"input_unread,omitempty"`

	CreatedAt      *time.Time `json:"created_at,omitempty"`
	StartedAt      *time.Time `json:"started_at,omitempty"`
	CompletedAt    *time.Time `json:"completed_at,omitempty"`
	DelayUntil     *time.Time `json:"delay_until,omitempty"`
	DeadlineAt     *time.Time `json:"deadline_at,omitempty"`
	LeaseExpiresAt *time.Time `json:"lease_expires_at,omitempty"`

	// Attempts is the attempt history, oldest first, in the answers about
	// one execution (not in listings): the last 100 attempts.
	// AttemptsDropped counts the earlier ones, whose history the record
	// no longer keeps.
	Attempts        []Attempt `json:"attempts,omitempty"`
	AttemptsDropped int       `json:"attempts_dropped,omitempty"`
}

// Attempt is one attempt of an execution: who ran it, when, and how it
// ended.
type Attempt struct {
	Index      int        `json:"index"` // 1-based
	Type       string     `json:"type"`  // initial, retry, reclaim (after a lost lease) or replay
	WorkerID   string     `json:"worker_id"`
	InstanceID string     `json:"worker_instance_id"`
	StartedAt  *time.Time `json:"started_at,omitempty"`
	EndedAt    *time.Time `json:"ended_at,omitempty"`
	// Outcome is running (not ended yet), success, failed, timed_out,
	// lease_expired, revoked, cancelled or expired.
	Outcome string `json:"outcome"`
	Error   string `json:"error,omitempty"`
}

// ExecutionList is the body of GET /v1/executions.
type ExecutionList struct {
	Executions []Execution `json:"executions"`
	NextCursor string      `json:"next_cursor,omitempty"` // empty on the last page
}

// Cancel is the body of POST /v1/executions/{id}/cancel (optional).
type Cancel struct {
	Reason string `json:"reason,omitempty"`
}

// RevokeLease is the body of POST /v1/executions/{id}/revoke-lease
// (optional). With LeaseID and Epoch only that lease is revoked (a worker
// giving back its own attempt): another lease answers 409 stale_lease.
type RevokeLease struct {
	Reason  string `json:"reason,omitempty"`
	LeaseID string `json:"lease_id,omitempty"`
	Epoch   int64  `json:"epoch,omitempty"`
}

// SetPriority is the body of PUT /v1/executions/{id}/priority.
type SetPriority struct {
	Priority *int `json:"priority"`
}

// ExecutionResult is the body of GET /v1/executions/{id}/result.
type ExecutionResult struct {
	ID     string          `json:"id"`
	State  string          `json:"state"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  string          `json:"error,omitempty"`
}

// ClaimRequest is the body of POST /v1/worker/claim: a long-poll for up to
// Max tasks.
type ClaimRequest struct {
	WorkerID     string   `json:"worker_id"`
	InstanceID   string   `json:"instance_id,omitempty"` // one process of the worker; default worker_id
	Namespace    string   `json:"namespace,omitempty"`   // default plan.DefaultNamespace
	Lanes        []string `json:"lanes,omitempty"`       // default [plan.DefaultLane]
	Capabilities []string `json:"capabilities,omitempty"`
	// Kinds, when set, are the kinds the worker has handlers for: only
	// tasks of those kinds are granted, others are left for other workers.
	Kinds   []string `json:"kinds,omitempty"`
	Max     int      `json:"max,omitempty"`     // default 1, at most ClaimMaxLimit
	WaitMs  int64    `json:"wait_ms,omitempty"` // 0 = do not wait; at most ClaimWaitMaxMs
	LeaseMs int64    `json:"lease_ms,omitempty"`
	// Resume says the answer to this instance's last claim was lost (the
	// request failed in transport): the grants its last claims made that
	// it still holds under their leases are answered first, up to Max,
	// instead of waiting for their leases to run out. Some may be ones the
	// worker did receive: it drops the leases it holds already.
	Resume bool `json:"resume,omitempty"`
}

// Limits of ClaimRequest and the batched lease calls.
const (
	ClaimMaxLimit  = 256
	ClaimWaitMaxMs = 60_000
	LeaseMsMin     = 100
	LeaseMsMax     = 3_600_000
	LeaseMsDefault = 30_000
	BatchMax       = 1_000 // items per renew/complete/fail/create batch
)

// ClaimResponse is the body of a claim: zero or more tasks.
type ClaimResponse struct {
	Tasks []Task `json:"tasks"`
}

// Task is one granted attempt of an execution: what a worker runs.
type Task struct {
	ExecutionID    string                     `json:"execution_id"`
	Kind           string                     `json:"kind"`
	Namespace      string                     `json:"namespace"`
	Lane           string                     `json:"lane"`
	Attempt        int                        `json:"attempt"`
	MaxAttempts    int                        `json:"max_attempts,omitempty"`
	LeaseID        string                     `json:"lease_id"`
	Epoch          int64                      `json:"epoch"`
	LeaseExpiresAt time.Time                  `json:"lease_expires_at"`
	DeadlineAt     *time.Time                 `json:"deadline_at,omitempty"`
	Tags           map[string]string          `json:"tags,omitempty"`
	Input          json.RawMessage            `json:"input,omitempty"`
	Upstreams      map[string]json.RawMessage `json:"upstreams,omitempty"`
	// UpstreamErrors holds, by exec name, how and why upstreams of a flow
	// member ended without an output.
	UpstreamErrors map[string]UpstreamError `json:"upstream_errors,omitempty"`
	// UpstreamsOmitted holds, by exec name, the execution ids of upstreams
	// whose results Upstreams leaves out to bound the answer's size (the
	// server carries up to 4 MiB of upstream results per task and 16 MiB
	// per answer); GET /v1/executions/{id}/result reads them. The worker
	// SDK does so before it runs the handler.
	UpstreamsOmitted map[string]string `json:"upstreams_omitted,omitempty"`
	// Downstream is true for a flow member whose success alone makes a
	// downstream member eligible (an edge on success or done into a join
	// that needs one edge), which a Handoff in the complete request can
	// have granted at once.
	Downstream bool `json:"downstream,omitempty"`
}

// UpstreamError is how an upstream of a flow member ended without an
// output.
type UpstreamError struct {
	State string `json:"state"` // failed, expired, cancelled or skipped
	Error string `json:"error"` // its failure, or why it expired, was cancelled or skipped
}

// Lease is the fence every worker call carries: a call whose lease id or
// epoch is not the current one is rejected and changes nothing.
type Lease struct {
	ExecutionID string `json:"execution_id"`
	LeaseID     string `json:"lease_id"`
	Epoch       int64  `json:"epoch"`
}

// RenewRequest is the body of POST /v1/worker/renew.
type RenewRequest struct {
	WorkerID string  `json:"worker_id,omitempty"`
	LeaseMs  int64   `json:"lease_ms,omitempty"`
	Leases   []Lease `json:"leases"`
}

// WatchRequest is the body of POST /v1/worker/watch: a long-poll that
// answers as soon as some of Leases ended other than by this worker's own
// report (a cancel of the execution or its run, a revoke, the attempt's
// timeout, the lease's expiry, the execution's deadline), listing those in
// a LeaseResults as a renew would report them, or with no results when
// WaitMs passed first.
type WatchRequest struct {
	WorkerID string `json:"worker_id,omitempty"`
	// InstanceID names the worker instance watching: a new watch of the
	// same instance answers the one it replaces (no results) at once, so
	// that the worker need not cancel it (a cancelled HTTP/1.1 request
	// closes its connection).
	InstanceID string  `json:"instance_id,omitempty"`
	WaitMs     int64   `json:"wait_ms,omitempty"` // 0 = check once and answer; at most WatchWaitMaxMs
	Leases     []Lease `json:"leases"`            // 1..BatchMax, one per execution
}

// WatchWaitMaxMs bounds WatchRequest.WaitMs: a claim's bound, which the
// server's read timeout already allows for.
const WatchWaitMaxMs = ClaimWaitMaxMs

// Completion is one item of POST /v1/worker/complete.
type Completion struct {
	Lease
	Output json.RawMessage `json:"output,omitempty"`
}

// CompleteRequest is the body of POST /v1/worker/complete.
type CompleteRequest struct {
	WorkerID    string       `json:"worker_id,omitempty"` // required with Handoff
	Completions []Completion `json:"completions"`
	// Handoff, when set, asks for the downstream flow members that these
	// completions make eligible to be granted to this worker in the same
	// call (LeaseResults.Tasks).
	Handoff *Handoff `json:"handoff,omitempty"`
}

// Handoff says what the completing worker can run and how many tasks it
// takes, as in a claim: the server grants it at most Max of the downstream
// members the completions make eligible, in its namespace and lanes, that
// it has the capabilities for, that count against no budget or quota, and
// that no other eligible work of their lane would precede in a claim.
type Handoff struct {
	InstanceID   string   `json:"instance_id,omitempty"` // default worker_id
	Namespace    string   `json:"namespace,omitempty"`   // default plan.DefaultNamespace
	Lanes        []string `json:"lanes,omitempty"`       // default [plan.DefaultLane]
	Capabilities []string `json:"capabilities,omitempty"`
	Kinds        []string `json:"kinds,omitempty"`    // as in ClaimRequest
	Max          int      `json:"max"`                // 1..the number of completions
	LeaseMs      int64    `json:"lease_ms,omitempty"` // as in ClaimRequest
}

// Failure is one item of POST /v1/worker/fail.
type Failure struct {
	Lease
	Message   string `json:"message"`
	Retryable bool   `json:"retryable"`
}

// FailRequest is the body of POST /v1/worker/fail.
type FailRequest struct {
	WorkerID string    `json:"worker_id,omitempty"`
	Failures []Failure `json:"failures"`
}

// LeaseResults is the body of a batched renew, complete or fail: one result
// per item, in request order. The HTTP status is 200 even when some items
// were rejected.
type LeaseResults struct {
	Results []LeaseResult `json:"results"`
	// Tasks are the grants of a complete request's Handoff: leases this
	// worker now holds and must run (or let expire).
	Tasks []Task `json:"tasks,omitempty"`
}

// LeaseResult is the outcome of one item of a batched worker call.
type LeaseResult struct {
	ExecutionID    string     `json:"execution_id"`
	OK             bool       `json:"ok"`
	LeaseExpiresAt *time.Time `json:"lease_expires_at,omitempty"` // renew only
	State          string     `json:"state,omitempty"`            // public state after the call, when known
	Error          *ErrorBody `json:"error,omitempty"`
}

// SingleRenew, SingleComplete and SingleFail are the bodies of the
// per-execution worker routes POST /v1/executions/{id}/renew|complete|fail,
// which answer 409 on a stale lease instead of a per-item result.
type SingleRenew struct {
	LeaseID string `json:"lease_id"`
	Epoch   int64  `json:"epoch"`
	LeaseMs int64  `json:"lease_ms,omitempty"`
}

// SingleComplete completes one execution.
type SingleComplete struct {
	LeaseID string          `json:"lease_id"`
	Epoch   int64           `json:"epoch"`
	Output  json.RawMessage `json:"output,omitempty"`
}

// SingleFail fails one attempt.
type SingleFail struct {
	LeaseID   string `json:"lease_id"`
	Epoch     int64  `json:"epoch"`
	Message   string `json:"message"`
	Retryable bool   `json:"retryable"`
}

// StageFlow is the body of POST /v1/flows: a compiled flow (the JSON of
// one flow of `ffc plan`) and the run's input.
type StageFlow struct {
	Plan           *plan.Flow      `json:"plan"`
	Input          json.RawMessage `json:"input,omitempty"`
	Namespace      string          `json:"namespace,omitempty"`
	IdempotencyKey string          `json:"idempotency_key,omitempty"`
}

// StageTemplate is the body of POST /v1/templates/{name}/runs.
type StageTemplate struct {
	Input          json.RawMessage `json:"input,omitempty"`
	Namespace      string          `json:"namespace,omitempty"`
	IdempotencyKey string          `json:"idempotency_key,omitempty"`
}

// Run states of FlowRun.State.
const (
	RunRunning   = "running"
	RunSucceeded = "succeeded"
	RunFailed    = "failed"
	RunCancelled = "cancelled"
)

// FlowRun describes one run of a flow: the answer of every /v1/flows route.
// Result answers carry no Execs.
type FlowRun struct {
	ID        string `json:"id"`
	Namespace string `json:"namespace,omitempty"`
	Flow      string `json:"flow"`
	State     string `json:"state"` // RunRunning, RunSucceeded, RunFailed or RunCancelled
	// Created is set on staging answers: false when the idempotency key
	// matched an earlier run, which is returned.
	Created *bool `json:"created,omitempty"`
	// Counts of members by outcome; Done counts every terminal member.
	Total      int    `json:"total,omitempty"`
	Done       int    `json:"done,omitempty"`
	Succeeded  int    `json:"succeeded,omitempty"`
	Failed     int    `json:"failed,omitempty"`
	Skipped    int    `json:"skipped,omitempty"`
	Cancelled  int    `json:"cancelled,omitempty"`
	ResultExec string `json:"result_exec,omitempty"`
	// Result is the output of the result exec once the run succeeded.
	Result json.RawMessage `json:"result,omitempty"`
	// Error summarises why a run failed or was cancelled; Failures lists
	// the members that failed, expired or were cancelled.
	Error     string        `json:"error,omitempty"`
	Failures  []ExecFailure `json:"failures,omitempty"`
	CreatedAt *time.Time    `json:"created_at,omitempty"`
	EndedAt   *time.Time    `json:"ended_at,omitempty"`
	// Replays counts the replays of the run (POST /v1/flows/{id}/replay),
	// ReplayedAt is the last one's time.
	Replays    int        `json:"replays,omitempty"`
	ReplayedAt *time.Time `json:"replayed_at,omitempty"`
	// IdempotencyKey is the key the run was staged with; a run a schedule
	// started has Schedule and ScheduledAt (its fire's time) too, and
	// ScheduleManual when it was started by hand (POST
	// /v1/schedules/{name}/runs; ScheduledAt is then its start).
	IdempotencyKey string     `json:"idempotency_key,omitempty"`
	Schedule       string     `json:"schedule,omitempty"`
	ScheduledAt    *time.Time `json:"scheduled_at,omitempty"`
	ScheduleManual bool       `json:"schedule_manual,omitempty"`
	// Input is the run's input, in GET /v1/flows/{id} only.
	Input json.RawMessage `json:"input,omitempty"`
	// Execs are the run's members in flow order: one page of them, at
	// most 1,000 (GET /v1/flows/{id}?execs_limit=), from the first or from
	// the execs_cursor given. ExecsNextCursor, set when members are left,
	// is the execs_cursor of the next page.
	Execs           []FlowExec `json:"execs,omitempty"`
	ExecsNextCursor string     `json:"execs_next_cursor,omitempty"`
}

// FlowRunList is a page of GET /v1/flows: runs newest first, with their
// counts and times only (no execs, result exec, result, error or
// failures: GET /v1/flows/{id} has them).
type FlowRunList struct {
	Runs       []FlowRun `json:"runs"`
	NextCursor string    `json:"next_cursor,omitempty"` // empty on the last page
}

// ExecFailure is a member of a run that did not succeed on its own.
type ExecFailure struct {
	Exec        string `json:"exec"`
	ExecutionID string `json:"execution_id"`
	State       string `json:"state"` // failed, expired or cancelled
	Error       string `json:"error,omitempty"`
}

// FlowExec is one member of a run, by exec name.
type FlowExec struct {
	Name        string `json:"name"`
	ExecutionID string `json:"execution_id"`
	Kind        string `json:"kind"`
	State       string `json:"state"`   // public state of the execution
	Outcome     string `json:"outcome"` // terminal outcome: none, success, failed, cancelled, expired, skipped
	Attempts    int    `json:"attempts"`
	Error       string `json:"error,omitempty"`
	// Blocked is the blocking detail while blocked; while waiting, why no
	// worker claims it when the server can tell (no worker connected to
	// the namespace, none taking its lane).
	Blocked   string     `json:"blocked,omitempty"`
	StartedAt *time.Time `json:"started_at,omitempty"`
	EndedAt   *time.Time `json:"ended_at,omitempty"`
	// Upstreams are the members it waits for, with the condition of each
	// edge.
	Upstreams []FlowUpstream `json:"upstreams,omitempty"`
}

// FlowUpstream is an upstream of a run member.
type FlowUpstream struct {
	Exec string `json:"exec"`
	On   string `json:"on"` // success, failure or done
}

// Template is one flow served by name (ffrun --flows DIR).
type Template struct {
	Name      string         `json:"name"`
	Namespace string         `json:"namespace"`
	Lane      string         `json:"lane"`
	Input     *plan.TypeRef  `json:"input,omitempty"`
	Output    *plan.TypeRef  `json:"output,omitempty"`
	Result    string         `json:"result,omitempty"`
	Types     []plan.Type    `json:"types,omitempty"`
	Execs     []TemplateExec `json:"execs"`
	Edges     []plan.Edge    `json:"edges,omitempty"`
	Plan      *plan.Flow     `json:"plan,omitempty"` // GET /v1/templates/{name} only
}

// TemplateExec summarises one exec of a template.
type TemplateExec struct {
	Name      string        `json:"name"`
	Kind      string        `json:"kind"`
	Lane      string        `json:"lane"`
	Input     *plan.TypeRef `json:"input,omitempty"`
	Output    *plan.TypeRef `json:"output,omitempty"`
	Join      plan.Join     `json:"join"`
	Upstreams []string      `json:"upstreams,omitempty"`
	Requires  []string      `json:"requires,omitempty"`
}

// TemplateList is the answer of GET /v1/templates.
type TemplateList struct {
	Templates []Template `json:"templates"`
}

// Health is the body of /healthz and /readyz.
type Health struct {
	Status string `json:"status"`          // "ok" or "unavailable"
	Error  string `json:"error,omitempty"` // why not ready
}

// NamespaceList answers GET /v1/namespaces: every namespace that has
// lanes (it holds executions or flow runs) or connected workers, by name.
type NamespaceList struct {
	Namespaces []Namespace `json:"namespaces"`
}

// Namespace sums up one namespace. The counts are read one by one, not
// as one atomic picture.
type Namespace struct {
	Name    string `json:"name"`
	Runs    int64  `json:"runs"`    // flow runs kept: running, or ended and not deleted yet
	Workers int64  `json:"workers"` // connected worker instances
	// Lanes holds each lane that ever had an execution, by name (absent
	// with lanes=false, or when there is none).
	Lanes []LaneCounts `json:"lanes,omitempty"`
}

// LaneCounts counts the executions of one lane by what they wait for.
// Running ones are not counted by lane (GET /v1/executions?state=active
// lists them).
type LaneCounts struct {
	Lane          string `json:"lane"`
	Eligible      int64  `json:"eligible"`       // waiting for a worker
	Delayed       int64  `json:"delayed"`        // waiting for a time (delay, retry backoff)
	Pending       int64  `json:"pending"`        // flow members waiting for their upstreams
	Blocked       int64  `json:"blocked"`        // waiting for a worker with the capabilities
	BlockedBudget int64  `json:"blocked_budget"` // waiting for a budget
	BlockedQuota  int64  `json:"blocked_quota"`  // waiting for a quota
	Terminal      int64  `json:"terminal"`       // ended, kept until retention
}

// BulkRuns is the body of POST /v1/flows/cancel and POST /v1/flows/replay:
// act on the runs of a namespace that match the filters, newest first, a
// run at a time (each run's change is atomic, the whole is not).
type BulkRuns struct {
	Namespace string `json:"namespace,omitempty"` // default: the default namespace
	Flow      string `json:"flow,omitempty"`      // only runs of this flow
	// State selects the runs of a replay: failed (the default) or
	// cancelled. A cancel acts on running runs only.
	State  string `json:"state,omitempty"`
	Reason string `json:"reason,omitempty"` // cancel: why (recorded on each member)
	// Limit bounds the runs acted on: 1..1000, default 100.
	Limit int `json:"limit,omitempty"`
	// Cursor continues from where an answer's NextCursor says.
	Cursor string `json:"cursor,omitempty"`
}

// BulkRunsResult answers POST /v1/flows/cancel and /replay.
type BulkRunsResult struct {
	// Runs are the runs cancelled or replayed, newest first.
	Runs []string `json:"runs"`
	// Refused are the matching runs the action did not apply to (one that
	// ended, or was replayed, between the listing and the action; one
	// whose members retention deleted), with why.
	Refused []BulkRunRefusal `json:"refused,omitempty"`
	// NextCursor is set when matching runs may be left: send the same
	// body with it as cursor. Absent once the whole index was read.
	NextCursor string `json:"next_cursor,omitempty"`
}

// BulkRunRefusal is a run a bulk action left as it was.
type BulkRunRefusal struct {
	RunID string    `json:"run_id"`
	Error ErrorBody `json:"error"`
}

// CheckToken reports why tok cannot be an API bearer token, or nil. An
// HTTP header cannot carry a control character and servers trim the white
// space around a header's value, so a token holding either (most often
// the line break that ends the file it was read from) could never be sent
// or matched: every request would be refused.
func CheckToken(tok string) error {
	if t := strings.TrimSpace(tok); t != tok {
		return errors.New("the API token starts or ends with white space (the line break ending the file it was read from?): remove it")
	}
	for i := 0; i < len(tok); i++ {
		if c := tok[i]; c < ' ' || c == 0x7f {
			return fmt.Errorf("the API token holds a control character (byte %d): it cannot be sent in an HTTP header", i)
		}
	}
	return nil
}
