package store

import (
	"errors"
	"fmt"
)

// Sentinel errors. Typed errors below match them with errors.Is.
var (
	// ErrNotFound: no such execution.
	ErrNotFound = errors.New("store: not found")
	// ErrInvalid: a request failed validation; nothing was written.
	// Returned as a *ValidationError.
	ErrInvalid = errors.New("store: invalid request")
	// ErrTooLarge: a payload or result exceeds MaxPayloadBytes (also
	// matches ErrInvalid).
	ErrTooLarge = errors.New("store: payload too large")
	// ErrStaleLease: the lease in a worker call is not the execution's
	// current lease (expired, revoked, superseded, or the execution was
	// cancelled or finished). Nothing changed. Returned as a *LeaseError.
	ErrStaleLease = errors.New("store: stale lease")
	// ErrWrongState: the operation is not allowed in the execution's current
	// state (e.g. change priority of a running execution). Returned as a
	// *StateError.
	ErrWrongState = errors.New("store: operation not allowed in this state")
	// ErrNotFinished: Result of an execution that is not terminal.
	ErrNotFinished = errors.New("store: execution not finished")
	// ErrPartitionMismatch: the server holds other partition counts.
	ErrPartitionMismatch = errors.New("store: partition counts differ from the stored ones")
	// ErrStagingExpired: a run staged in chunks took longer than
	// StagingTTL; retention dropped it and nothing of it is left.
	ErrStagingExpired = errors.New("store: staging expired")
	// ErrUnsupportedServer: the server is older than Valkey 7.2 / Redis 7.0.
	ErrUnsupportedServer = errors.New("store: unsupported server version")
)

// ValidationError says which field of a request is wrong.
type ValidationError struct {
	Field string // request field, e.g. "lane" or "tags"
	Msg   string
	Err   error // ErrInvalid, or ErrTooLarge for oversize payloads
}

func (e *ValidationError) Error() string {
	return fmt.Sprintf("invalid %s: %s", e.Field, e.Msg)
}

// Unwrap makes errors.Is(e, ErrInvalid) true, and ErrTooLarge when set.
func (e *ValidationError) Unwrap() []error {
	if e.Err != nil && e.Err != ErrInvalid {
		return []error{ErrInvalid, e.Err}
	}
	return []error{ErrInvalid}
}

// LeaseError explains why a lease was rejected.
type LeaseError struct {
	ExecutionID ExecutionID
	Reason      string // LeaseReason… value
	State       PublicState
}

// Values of LeaseError.Reason.
const (
	LeaseReasonMismatch  = "lease_mismatch" // another lease (id or epoch) is current
	LeaseReasonNotActive = "not_active"     // the execution is not running (finished, cancelled, requeued)
	LeaseReasonExpired   = "lease_expired"  // the lease's expiry has passed
	// The attempt's timeout has passed: the call ended the attempt as timed
	// out (a retry when attempts remain), as the timeout scanner would.
	LeaseReasonTimedOut = "attempt_timed_out"
	// The execution's deadline has passed: the call ended it expired, as
	// the deadline scanner would.
	LeaseReasonDeadline = "deadline_passed"
)

func (e *LeaseError) Error() string {
	return fmt.Sprintf("stale lease on %s: %s (state %s)", e.ExecutionID, e.Reason, e.State)
}

// Unwrap makes errors.Is(e, ErrStaleLease) true.
func (e *LeaseError) Unwrap() error { return ErrStaleLease }

// StateError explains why an operation was refused by state.
type StateError struct {
	ExecutionID ExecutionID // or the run's id (Run)
	Op          string
	State       PublicState // for a run: its state, or "purged"
	Run         bool        // the operation was on a flow run
	// Reason, when set, says why the state does not allow it after all:
	// ReasonNothingToReplay, ReasonReplayDropped, ReasonReplayCancelled.
	Reason string
}

// ReasonNothingToReplay refuses the replay of a failed or cancelled run
// none of whose members would run again or change: the members that
// succeeded decide every other (an on failure branch of a member that
// succeeded stays skipped).
const ReasonNothingToReplay = "nothing_to_replay"

// ReasonReplayDropped says that a replay by steps was dropped before it
// was decided: a cancel of the run came while it was decided (or another
// caller's step of it found it could not be: members purged, nothing to
// replay). Nothing was replayed: the run is as it ended (State).
const ReasonReplayDropped = "replay_dropped"

// ReasonReplayCancelled says that a replay by steps was decided (the run
// counts it) and a cancel of the run came before the caller's last step:
// the run is cancelled (or being cancelled), not running.
const ReasonReplayCancelled = "replay_cancelled"

func (e *StateError) Error() string {
	what := "execution"
	if e.Run {
		what = "run"
	}
	switch e.Reason {
	case ReasonNothingToReplay:
		return fmt.Sprintf("nothing to replay in %s %s (%s): none of its members would run again, the members that succeeded decide every other", what, e.ExecutionID, e.State)
	case ReasonReplayDropped:
		return fmt.Sprintf("the replay of %s %s was dropped before it was decided (a cancel of the %s came meanwhile): nothing was replayed, it is %s as it ended",
			what, e.ExecutionID, what, e.State)
	case ReasonReplayCancelled:
		return fmt.Sprintf("the replay of %s %s was stopped by a cancel of the %s: it is %s", what, e.ExecutionID, what, e.State)
	}
	return fmt.Sprintf("cannot %s %s %s in state %s", e.Op, what, e.ExecutionID, e.State)
}

// Unwrap makes errors.Is(e, ErrWrongState) true.
func (e *StateError) Unwrap() error { return ErrWrongState }

// IdempotencyError refuses a staging whose idempotency key was used, in
// the same namespace and within the key's lifetime, by a run of another
// flow. Nothing was staged. A repeat of the same flow returns the first
// run instead; a key names one piece of work, so a run of another flow
// answered as the caller's own would hand it a result of the wrong shape.
type IdempotencyError struct {
	Key   string
	Flow  string // the flow of the run that holds the key
	RunID RunID  // that run
}

func (e *IdempotencyError) Error() string {
	return fmt.Sprintf("idempotency key %q is taken by run %s of flow %q", e.Key, e.RunID, e.Flow)
}

// Unwrap makes errors.Is(e, ErrWrongState) true.
func (e *IdempotencyError) Unwrap() error { return ErrWrongState }
