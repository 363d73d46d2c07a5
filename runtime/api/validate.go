package api

import (
	"cmp"
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/flowfabric/ff/compiler/plan"
	"github.com/flowfabric/ff/runtime/store"
	"github.com/flowfabric/ff/runtime/wire"
)

// Limits of requests. The store enforces the same ones; checking them here
// lets a batch be rejected as a whole before anything is written.
const (
	NameMaxBytes     = store.MaxNameBytes           // namespace, lane
	KindMaxBytes     = store.MaxKindBytes           // kind
	WorkerIDMaxBytes = store.MaxWorkerIDBytes       // worker and instance id
	IdemKeyMaxBytes  = store.MaxIdempotencyKeyBytes // idempotency key
	TagsMax          = store.MaxTags                // tags per execution
	TagMaxBytes      = store.MaxTagBytes            // key or value of a tag
	PayloadMaxBytes  = store.MaxPayloadBytes        // input or output of an execution
	ReasonMaxBytes   = 1024                         // cancel / revoke reasons
	MessageMaxBytes  = store.MaxErrorBytes          // failure messages (longer ones are cut, not rejected)
	DurationMaxMs    = plan.MaxDurationMs
	ListLimitMax     = store.ListLimitMax
	ListLimitDef     = store.ListLimitDefault
)

// checkName validates a namespace or a lane as the store does
// (plan.LabelProblem): 1..NameMaxBytes of letters, digits, '_', '-', '.'
// and '/'.
func checkName(field, v string) *Error { return nameError(func() string { return field }, v) }

// nameError is checkName with the field's name built only for an error.
func nameError(field func() string, v string) *Error {
	if p := plan.LabelProblem(v); p != "" {
		return invalid(field(), "%s", p)
	}
	return nil
}

// checkIdent validates an identifier-like string: non-empty, at most limit
// bytes, no whitespace, control characters or (when noColon) ':', which
// separates names in wake-up messages.

func checkIdent(field, v string, limit int, noColon bool) *Error {
	return identError(func() string { return field }, v, limit, noColon)
}

// identError is checkIdent with the field's name built only for an
// error: names of list items ("kinds[3]") cost an allocation each, and
// every claim and report carries such lists.
func identError(field func() string, v string, limit int, noColon bool) *Error {
	if v == "" {
		return invalid(field(), "must not be empty")
	}
	if len(v) > limit {
		return invalid(field(), "is %d bytes, the limit is %d", len(v), limit)
	}
	if !utf8.ValidString(v) {
		return invalid(field(), "is not valid UTF-8")
	}
	for _, r := range v {
		if unicode.IsSpace(r) || unicode.IsControl(r) {
			return invalid(field(), "%q contains whitespace or a control character", v)
		}
		if noColon && r == ':' {
			return invalid(field(), "%q contains ':'", v)
		}
	}
	return nil
}

// item returns a function naming item i of list field ("kinds[3]").
func item(field string, i int) func() string {
	return func() string { return field + "[" + strconv.Itoa(i) + "]" }
}

// checkCapabilities validates a capability set with the plan's rules
// (plan.ValidateCapabilities).
func checkCapabilities(field string, caps []string) *Error {
	if err := plan.ValidateCapabilities(caps); err != nil {
		return invalid(field, "%v", err)
	}
	return nil
}

// checkKinds validates the kinds a worker has handlers for.
func checkKinds(field string, kinds []string) *Error {
	if len(kinds) > store.MaxKinds {
		return invalid(field, "has %d kinds, the limit is %d", len(kinds), store.MaxKinds)
	}
	for i, k := range kinds {
		// The rule of a kind an execution may have (plan.ValidateKind): a
		// kind claimed that no execution can have would match nothing.
		if err := plan.ValidateKind(k); err != nil {
			return invalid(item(field, i)(), "%v", err)
		}
	}
	return nil
}

func checkDuration(field string, ms int64) *Error {
	if ms < 0 {
		return invalid(field, "must not be negative")
	}
	if ms > DurationMaxMs {
		return invalid(field, "is above the limit of %d ms", int64(DurationMaxMs))
	}
	return nil
}

// normalizeCreate applies defaults to r and validates it with every rule
// the store applies to a create (so that a batch with a bad item is
// refused whole before anything is written). prefix names the item in a
// batch ("executions[3].").
func normalizeCreate(prefix string, r *wire.CreateExecution) *Error {
	r.Namespace = cmp.Or(r.Namespace, plan.DefaultNamespace)
	r.Lane = cmp.Or(r.Lane, plan.DefaultLane)
	if e := checkName(prefix+"namespace", r.Namespace); e != nil {
		return e
	}
	if e := checkName(prefix+"lane", r.Lane); e != nil {
		return e
	}
	if err := plan.ValidateKind(r.Kind); err != nil {
		return invalid(prefix+"kind", "%v", err)
	}
	if len(r.Input) > PayloadMaxBytes {
		e := tooLarge(PayloadMaxBytes)
		e.Message = fmt.Sprintf("%sinput is %d bytes, the limit is %d", prefix, len(r.Input), PayloadMaxBytes)
		e.Details["field"] = prefix + "input"
		return e
	}
	if r.Priority == nil {
		p := plan.PriorityDefault
		r.Priority = &p
	}
	if *r.Priority < plan.PriorityMin || *r.Priority > plan.PriorityMax {
		return invalid(prefix+"priority", "%d is outside %d..%d", *r.Priority, plan.PriorityMin, plan.PriorityMax)
	}
	if e := checkIdemKey(prefix+"idempotency_key", r.IdempotencyKey); e != nil {
		return e
	}
	if len(r.Tags) > TagsMax {
		return invalid(prefix+"tags", "has %d entries, the limit is %d", len(r.Tags), TagsMax)
	}
	for k, v := range r.Tags {
		if k == "" || len(k) > TagMaxBytes || len(v) > TagMaxBytes {
			return invalid(prefix+"tags", "key %q: keys must be non-empty and keys and values at most %d bytes", k, TagMaxBytes)
		}
	}
	if r.Retry == nil {
		r.Retry = &plan.Retry{Attempts: plan.DefaultAttempts, Backoff: plan.BackoffFixed, DelayMs: plan.DefaultDelayMs}
	}
	rt := r.Retry
	if rt.Attempts == 0 {
		rt.Attempts = plan.DefaultAttempts
	}
	if rt.Attempts < 1 || rt.Attempts > plan.MaxAttempts {
		return invalid(prefix+"retry.attempts", "%d is outside 1..%d", rt.Attempts, plan.MaxAttempts)
	}
	rt.Backoff = cmp.Or(rt.Backoff, plan.BackoffFixed)
	if rt.Backoff != plan.BackoffFixed && rt.Backoff != plan.BackoffExponential {
		return invalid(prefix+"retry.backoff", "%q is not %q or %q", rt.Backoff, plan.BackoffFixed, plan.BackoffExponential)
	}
	if e := checkDuration(prefix+"retry.delay_ms", rt.DelayMs); e != nil {
		return e
	}
	if e := checkDuration(prefix+"retry.max_delay_ms", rt.MaxDelayMs); e != nil {
		return e
	}
	if rt.MaxDelayMs == 0 {
		rt.MaxDelayMs = max(plan.DefaultMaxDelayMs, rt.DelayMs)
	}
	if rt.MaxDelayMs < rt.DelayMs {
		return invalid(prefix+"retry.max_delay_ms", "%d is below retry.delay_ms %d", rt.MaxDelayMs, rt.DelayMs)
	}
	for _, f := range []struct {
		name string
		v    int64
	}{{"timeout_ms", r.TimeoutMs}, {"deadline_ms", r.DeadlineMs}, {"delay_ms", r.DelayMs}} {
		if e := checkDuration(prefix+f.name, f.v); e != nil {
			return e
		}
	}
	return checkCapabilities(prefix+"requires", r.Requires)
}

// checkLease checks a lease given under field (a list item,
// "completions[2]"), or, with field "", as members of the body itself (the
// single-execution routes: {"lease_id": …, "epoch": …}).
func checkLease(field string, l wire.Lease) *Error { return checkLeaseItem(field, -1, l) }

// checkLeaseItem is checkLease of item i of the list field (field itself
// when i < 0), whose name ("completions[2]") is written only for an
// error: a batch of reports is not charged a string per item.
func checkLeaseItem(field string, i int, l wire.Lease) *Error {
	path := func(f string) string {
		if i >= 0 {
			return field + "[" + strconv.Itoa(i) + "]." + f
		}
		if field == "" {
			return f
		}
		return field + "." + f
	}
	if l.ExecutionID == "" {
		return invalid(path("execution_id"), "must not be empty")
	}
	if l.LeaseID == "" {
		return invalid(path("lease_id"), "must not be empty")
	}
	if l.Epoch < 1 {
		return invalid(path("epoch"), "must be at least 1")
	}
	return nil
}

func checkBatchLen(field string, n int) *Error {
	if n == 0 {
		return invalid(field, "must not be empty")
	}
	if n > wire.BatchMax {
		return invalid(field, "has %d items, the limit is %d", n, wire.BatchMax)
	}
	return nil
}

func cutMessage(s string) string {
	if len(s) <= MessageMaxBytes {
		return s
	}
	// Room for the marker: the store keeps at most MessageMaxBytes.
	s = s[:MessageMaxBytes-len("…")]
	for !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + "…"
}

func checkReason(field, s string) *Error {
	if len(s) > ReasonMaxBytes {
		return invalid(field, "is %d bytes, the limit is %d", len(s), ReasonMaxBytes)
	}
	if strings.ContainsFunc(s, func(r rune) bool { return r == 0 }) {
		return invalid(field, "contains a NUL byte")
	}
	return nil
}

// checkIdemKey refuses an idempotency key the store would refuse
// (store.IdempotencyKeyProblem: too long, not UTF-8, control characters)
// before anything is read or written for the request.
func checkIdemKey(field, key string) *Error {
	if p := store.IdempotencyKeyProblem(key); p != "" {
		return invalid(field, "%s", p)
	}
	return nil
}
