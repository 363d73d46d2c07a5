package store

import (
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/flowfabric/ff/compiler/plan"
)

func invalid(field, format string, args ...any) *ValidationError {
	return &ValidationError{Field: field, Msg: fmt.Sprintf(format, args...)}
}

// checkName checks a namespace or lane (plan.LabelProblem): 1..MaxNameBytes
// of letters, digits, '_', '-', '.' and '/'. Names never contain ':' (a
// key separator).
func checkName(field, s string) error {
	if p := plan.LabelProblem(s); p != "" {
		return invalid(field, "%s", p)
	}
	return nil
}

// checkToken checks a printable token without whitespace, control
// characters or commas, as used for kinds, worker ids, capabilities and
// quota key values (tokenProblem).
func checkToken(field, s string, max int) error {
	if p := tokenProblem(s, max); p != "" {
		return invalid(field, "%s", p)
	}
	return nil
}

// tokenProblem says why s is not a token of at most max bytes, or "".
func tokenProblem(s string, max int) string {
	if s == "" {
		return "must not be empty"
	}
	if len(s) > max {
		return fmt.Sprintf("%q is longer than %d bytes", s, max)
	}
	if !utf8.ValidString(s) {
		return fmt.Sprintf("%q is not valid UTF-8", s)
	}
	for _, r := range s {
		if r <= ' ' || r == 0x7f || r == ',' || (r >= 0x80 && r < 0xa0) {
			return fmt.Sprintf("%q contains a space, comma or control character", s)
		}
	}
	return ""
}

// QuotaKeyProblem says why key is not a key value a keyed quota's subject
// can have (one an execution's input can give: 1..MaxQuotaKeyBytes, no
// space, comma or control character), or "" when it is. The API checks
// the key of a quota's pause, resume and read with it.
func QuotaKeyProblem(key string) string { return tokenProblem(key, MaxQuotaKeyBytes) }

// normCapabilities checks a capability set and returns it sorted, unique
// and comma-joined.
func normCapabilities(field string, caps []string) (string, error) {
	if len(caps) > plan.MaxCapabilities {
		return "", invalid(field, "%d capabilities, at most %d allowed", len(caps), plan.MaxCapabilities)
	}
	for _, c := range caps {
		if err := checkToken(field, c, plan.MaxCapabilityBytes); err != nil {
			return "", err
		}
	}
	s := slices.Clone(caps)
	slices.Sort(s)
	s = slices.Compact(s)
	joined := strings.Join(s, ",")
	if len(joined) > plan.MaxCapabilityBytes {
		return "", invalid(field, "capabilities take %d bytes, at most %d allowed", len(joined), plan.MaxCapabilityBytes)
	}
	return joined, nil
}

// checkRefs checks budget or quota references ("id" or, for quotas,
// "id=key") and returns them comma-joined.
func checkRefs(field string, refs []string) (string, error) {
	for _, r := range refs {
		if err := checkToken(field, r, plan.MaxQuotaRefLen); err != nil {
			return "", err
		}
	}
	return strings.Join(refs, ","), nil
}

func checkPayload(field string, b []byte) error {
	if len(b) > MaxPayloadBytes {
		return &ValidationError{Field: field, Msg: fmt.Sprintf("%d bytes, at most %d allowed", len(b), MaxPayloadBytes), Err: ErrTooLarge}
	}
	return nil
}

func checkPriority(p int) error {
	if p < plan.PriorityMin || p > plan.PriorityMax {
		return invalid("priority", "%d is outside %d..%d", p, plan.PriorityMin, plan.PriorityMax)
	}
	return nil
}

func checkRetry(r RetryPolicy) error {
	if r.Attempts < 0 || r.Attempts > plan.MaxAttempts {
		return invalid("retry.attempts", "%d is outside 0..%d", r.Attempts, plan.MaxAttempts)
	}
	switch r.Backoff {
	case "", BackoffFixed, BackoffExponential:
	default:
		return invalid("retry.backoff", "%q: want %q or %q", r.Backoff, BackoffFixed, BackoffExponential)
	}
	if r.Delay < 0 || r.MaxDelay < 0 {
		return invalid("retry.delay", "delays must not be negative")
	}
	return nil
}

func checkDuration(field string, d time.Duration) error {
	if d < 0 {
		return invalid(field, "must not be negative")
	}
	if d > 0 && d < time.Millisecond {
		return invalid(field, "must be at least 1ms")
	}
	return nil
}

// normalize applies defaults to req and validates it.
func (req *CreateRequest) normalize() error {
	if req.Namespace == "" {
		req.Namespace = plan.DefaultNamespace
	}
	if req.Lane == "" {
		req.Lane = plan.DefaultLane
	}
	if err := checkName("namespace", req.Namespace); err != nil {
		return err
	}
	if err := checkName("lane", req.Lane); err != nil {
		return err
	}
	if err := checkToken("kind", req.Kind, MaxKindBytes); err != nil {
		return err
	}
	if err := checkPriority(req.Priority); err != nil {
		return err
	}
	if len(req.Tags) > MaxTags {
		return invalid("tags", "%d tags, at most %d allowed", len(req.Tags), MaxTags)
	}
	for k, v := range req.Tags {
		if k == "" || len(k) > MaxTagBytes || len(v) > MaxTagBytes {
			return invalid("tags", "tag %q: keys must be 1..%d bytes and values at most %d bytes", k, MaxTagBytes, MaxTagBytes)
		}
	}
	if err := checkPayload("payload", req.Payload); err != nil {
		return err
	}
	if err := checkRetry(req.Retry); err != nil {
		return err
	}
	if err := checkDuration("attempt_timeout", req.AttemptTimeout); err != nil {
		return err
	}
	if err := checkDuration("deadline", req.Deadline); err != nil {
		return err
	}
	if err := checkDuration("delay", req.Delay); err != nil {
		return err
	}
	if req.MaxReclaims < 0 || req.MaxReclaims > MaxReclaimsMax {
		return invalid("max_reclaims", "%d is outside 0..%d (0 = the default, %d)", req.MaxReclaims, MaxReclaimsMax, MaxReclaimsDefault)
	}
	if req.Delay > 0 && !req.DelayUntil.IsZero() {
		return invalid("delay_until", "set delay or delay_until, not both")
	}
	return checkIdempotencyKey(req.IdempotencyKey)
}

// checkIdempotencyKey checks an idempotency key (IdempotencyKeyProblem).
func checkIdempotencyKey(k string) error {
	if p := IdempotencyKeyProblem(k); p != "" {
		return invalid("idempotency_key", "%s", p)
	}
	return nil
}

// IdempotencyKeyProblem says why k is not a valid idempotency key (of an
// execution or a run) or dedup key (of a usage report), or "" when it is:
// "" (none) or valid UTF-8 of at most MaxIdempotencyKeyBytes without
// control characters. The API checks requests with it before anything is
// written.
func IdempotencyKeyProblem(k string) string {
	if len(k) > MaxIdempotencyKeyBytes || !utf8.ValidString(k) || strings.ContainsFunc(k, func(r rune) bool { return r < ' ' || r == 0x7f }) {
		return fmt.Sprintf("must be valid UTF-8 of at most %d bytes without control characters", MaxIdempotencyKeyBytes)
	}
	return ""
}

func (w *WorkerIdentity) validate() error {
	if err := checkToken("worker_id", w.WorkerID, MaxWorkerIDBytes); err != nil {
		return err
	}
	if err := checkToken("worker_instance_id", w.InstanceID, MaxWorkerIDBytes); err != nil {
		return err
	}
	if w.Namespace == "" {
		w.Namespace = plan.DefaultNamespace
	}
	return checkName("namespace", w.Namespace)
}
