// Package plan defines the compiled form of a .ff package: the versioned,
// JSON-serialisable intermediate representation that the compiler produces,
// the code generator consumes and ffrun stages.
//
// The plan is the only contract between the authoring half (dsl, compiler,
// gen) and the runtime. Durations are carried as integer milliseconds in
// fields whose JSON names end in "_ms". Every slice is emitted in a
// deterministic order so that plans, and the code generated from them, are
// byte-identical across runs.
package plan

import "encoding/json"

// SchemaVersion is the version of the plan JSON schema written in the
// "schema" field of Package and Flow. A reader refuses other versions.
const SchemaVersion = 1

// Package is everything declared by the .ff files of one package.
type Package struct {
	Schema  int      `json:"schema"`
	Package string   `json:"package"` // Go package name of generated code; may be empty
	Types   []Type   `json:"types"`   // sorted by name
	Budgets []Budget `json:"budgets"` // sorted by name
	Quotas  []Quota  `json:"quotas"`  // sorted by name
	Flows   []Flow   `json:"flows"`   // sorted by name
	// Schedules are the declared schedules, sorted by name; ffrun --flows
	// creates or replaces each through the API at start.
	Schedules []Schedule `json:"schedules,omitempty"`
}

// Schedule is a declared schedule: a run of Flow at every fire time of
// Cron, as PUT /v1/schedules/{name} takes it (Flow is its template).
type Schedule struct {
	Name     string `json:"name"`
	Flow     string `json:"flow"`
	Cron     string `json:"cron"`               // five fields, a macro or "@every D" (package runtime/cron)
	Timezone string `json:"timezone,omitempty"` // IANA name; "" = UTC
	// Input is the input of each run as JSON, before the fire-time
	// placeholders ({{fire_date}} ...) in its strings are filled in;
	// absent for a flow that takes none.
	Input json.RawMessage `json:"input,omitempty"`
}

// Type is a declared record type.
type Type struct {
	Name   string  `json:"name"`
	Fields []Field `json:"fields"` // in declaration order
}

// Field is one field of a record type.
type Field struct {
	Name     string  `json:"name"`
	Type     TypeRef `json:"type"`
	Optional bool    `json:"optional,omitempty"`
}

// Kinds of TypeRef.
const (
	KindString   = "string"
	KindInt      = "int"
	KindFloat    = "float"
	KindBool     = "bool"
	KindBytes    = "bytes"    // JSON: base64 string
	KindTime     = "time"     // JSON: RFC 3339 string
	KindDuration = "duration" // JSON: integer nanoseconds (Go time.Duration)
	KindJSON     = "json"     // any JSON value
	KindList     = "list"     // Elem is the element type
	KindMap      = "map"      // string keys; Elem is the value type
	KindNamed    = "named"    // Name is a declared Type
)

// TypeRef is a reference to a type: a scalar, a list, a map or a named type.
type TypeRef struct {
	Kind string   `json:"kind"`
	Elem *TypeRef `json:"elem,omitempty"`
	Name string   `json:"name,omitempty"`
}

// Budget is a declared budget.
type Budget struct {
	Name        string      `json:"name"`
	Dimensions  []Dimension `json:"dimensions"` // in declaration order
	ResetMs     int64       `json:"reset_ms,omitempty"`
	OnHardLimit string      `json:"on_hard_limit"` // OnHardLimitBlock or OnHardLimitFail
	Scope       string      `json:"scope"`         // ScopeShared or ScopeRun
}

// Values of Budget.OnHardLimit.
const (
	OnHardLimitBlock = "block"
	OnHardLimitFail  = "fail"
)

// Values of Budget.Scope.
const (
	ScopeShared = "shared" // one usage counter shared by every run
	ScopeRun    = "run"    // a fresh usage counter per flow run
)

// Dimension is one metered dimension of a budget. Zero means "no limit".
type Dimension struct {
	Name string `json:"name"`
	Hard int64  `json:"hard,omitempty"`
	Soft int64  `json:"soft,omitempty"`
}

// Quota is a declared admission quota.
type Quota struct {
	Name        string `json:"name"`
	Rate        int64  `json:"rate,omitempty"`      // admissions per window; 0 = no rate limit
	WindowMs    int64  `json:"window_ms,omitempty"` // sliding window length
	Concurrency int64  `json:"concurrency,omitempty"`
	JitterMs    int64  `json:"jitter_ms,omitempty"`
	Key         string `json:"key,omitempty"` // dotted field path into the execution input; "" = unkeyed
}

// Flow is one compiled flow: self-contained, so a runtime can stage it
// without the rest of its package.
type Flow struct {
	Schema    int      `json:"schema"`
	Package   string   `json:"package,omitempty"`
	Name      string   `json:"name"`
	Namespace string   `json:"namespace"`
	Lane      string   `json:"lane"`
	Input     *TypeRef `json:"input,omitempty"`
	Output    *TypeRef `json:"output,omitempty"`
	Result    string   `json:"result,omitempty"`  // exec whose output is the flow's result
	Budgets   []string `json:"budgets,omitempty"` // flow-level budgets: every exec counts against them
	Execs     []Exec   `json:"execs"`             // in declaration order
	Edges     []Edge   `json:"edges"`             // sorted by (from, to)
	// Types, BudgetDefs and QuotaDefs hold every declaration the flow refers
	// to (transitively for types), sorted by name.
	Types      []Type   `json:"types,omitempty"`
	BudgetDefs []Budget `json:"budget_defs,omitempty"`
	QuotaDefs  []Quota  `json:"quota_defs,omitempty"`
}

// Exec is one execution (task) of a flow.
type Exec struct {
	Name       string   `json:"name"`
	Kind       string   `json:"kind"` // handler key; default "<flow>.<exec>"
	Lane       string   `json:"lane"`
	Priority   int      `json:"priority"`
	Input      *TypeRef `json:"input,omitempty"`
	Output     *TypeRef `json:"output,omitempty"`
	InputFrom  string   `json:"input_from"`           // InputFlow, InputExec or InputNone
	InputExec  string   `json:"input_exec,omitempty"` // upstream exec when InputFrom is InputExec
	Join       Join     `json:"join"`
	Requires   []string `json:"requires,omitempty"` // capability tokens, sorted, unique
	Budgets    []string `json:"budgets,omitempty"`  // exec-level budgets (flow-level ones are in Flow.Budgets)
	Quotas     []string `json:"quotas,omitempty"`
	Retry      Retry    `json:"retry"`
	TimeoutMs  int64    `json:"timeout_ms,omitempty"`  // per-attempt timeout; 0 = none
	DeadlineMs int64    `json:"deadline_ms,omitempty"` // whole-execution deadline from creation; 0 = none
	Upstreams  []string `json:"upstreams,omitempty"`   // every exec with an edge into this one, sorted
}

// Values of Exec.InputFrom.
const (
	InputFlow = "flow" // a root: receives the flow input
	InputExec = "exec" // receives the output of Exec.InputExec
	InputNone = "none" // receives no input
)

// Join says how many upstream edges must be satisfied before an exec runs.
type Join struct {
	Kind string `json:"kind"`        // JoinAll, JoinAny or JoinCount
	N    int    `json:"n,omitempty"` // for JoinCount
}

// Values of Join.Kind.
const (
	JoinAll   = "all"
	JoinAny   = "any"
	JoinCount = "count"
)

// Retry is the retry policy of an exec. Attempts counts every attempt,
// the first included: 1 means no retry.
type Retry struct {
	Attempts   int    `json:"attempts"`
	Backoff    string `json:"backoff"` // BackoffFixed or BackoffExponential
	DelayMs    int64  `json:"delay_ms"`
	MaxDelayMs int64  `json:"max_delay_ms,omitempty"`
	Jitter     bool   `json:"jitter,omitempty"` // randomise each delay in [delay/2, delay]
}

// Values of Retry.Backoff.
const (
	BackoffFixed       = "fixed"
	BackoffExponential = "exponential"
)

// Edge is a dependency: To waits for From, and runs only when From's
// terminal outcome matches On.
type Edge struct {
	From string `json:"from"`
	To   string `json:"to"`
	On   string `json:"on"` // OnSuccess, OnFailure or OnDone
}

// Values of Edge.On.
const (
	OnSuccess = "success"
	OnFailure = "failure"
	OnDone    = "done"
)

// Defaults and limits shared by the compiler and the runtime.
const (
	DefaultNamespace = "default"
	DefaultLane      = "default"

	PriorityMin     = 0
	PriorityMax     = 1000 // higher runs first
	PriorityDefault = 100

	DefaultAttempts   = 1 // no retry unless a retry block says so
	MaxAttempts       = 1000
	DefaultDelayMs    = 1_000
	DefaultMaxDelayMs = 300_000

	// Capability limits: a required or advertised set holds at most
	// MaxCapabilities tokens whose comma-joined form is at most
	// MaxCapabilityBytes bytes.
	MaxCapabilities    = 256
	MaxCapabilityBytes = 4096

	// MaxExecs bounds the execs of one flow: a run stages one execution
	// per exec, and the store stages at most this many.
	MaxExecs = 10_000

	// MaxDurationMs bounds every duration of a plan (timeouts, deadlines,
	// retry delays, budget resets, quota windows and jitter): 366 days,
	// the longest duration the API takes for an execution
	// (runtime/api.DurationMaxMs). Longer ones overflow time.Duration or
	// times the runtime writes as JSON.
	MaxDurationMs = 366 * 24 * 3600 * 1000

	// MaxStageBodyBytes is the largest body POST /v1/flows takes
	// (runtime/api.BodyLimitFlow): a flow's plan, the run's input (at
	// most MaxPayloadBytes) and the few fields around them.
	MaxStageBodyBytes = 16 << 20
	// MaxPlanBytes bounds a flow's plan as `ffc plan -flow` prints it and
	// the generated Stage<Flow> sends it (json.MarshalIndent, two spaces):
	// it leaves room in MaxStageBodyBytes for the largest input and 64 KiB
	// for the rest of the body.
	MaxPlanBytes = MaxStageBodyBytes - MaxPayloadBytes - 64<<10
)
