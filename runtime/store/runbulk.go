package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/valkey-io/valkey-go"
)

// CancelRuns cancels runs as CancelRun does, a pipelined round trip per
// step: each step of each run's cancel is its own atomic call, and a run
// of more than CancelStepMembers members takes several. cancelled[i]
// reports that ids[i] was running and is now cancelled; errs[i] is why
// ids[i] could not be cancelled (ErrNotFound for a run retention deleted,
// or a transport error). A run that had ended is neither: it is left as
// it was.
func (s *Store) CancelRuns(ctx context.Context, ids []RunID, reason string) (cancelled []bool, errs []error) {
	cancelled = make([]bool, len(ids))
	errs = make([]error, len(ids))
	calls, at := s.runCalls(ids, errs, func(uuid string) []string { return []string{uuid, clip(reason, MaxErrorBytes), ""} }, "ff_cancel_run")
	s.runSteps(ctx, calls, at, errs, func(i int, c *call, items []valkey.ValkeyMessage, ref *refusal) (bool, error) {
		if ref != nil {
			return false, refusalError(ref, ExecutionID(ids[i]), "cancel")
		}
		// {state, members cancelled, more, generation, running}: the
		// first reply says whether the run was running (this cancel stops
		// it); the calls going on pass its generation, so that they only
		// go on with this cancel.
		if len(items) < 5 {
			return false, errMalformed
		}
		more, _ := items[2].AsInt64()
		if c.args[2] == "" {
			running, _ := items[4].AsInt64()
			cancelled[i] = running == 1
			gen, err := items[3].ToString()
			if err != nil {
				return false, errMalformed
			}
			c.args = []string{c.args[0], c.args[1], gen}
		}
		return more == 1, nil
	})
	return cancelled, errs
}

// ReplayRuns replays runs as ReplayRun does, a pipelined round trip per
// step: each step of each run's replay is its own atomic call, and a
// replay of more than ReplayStepMembers members takes several. errs[i] is
// nil when ids[i] was replayed, else why not (a *StateError with Run set
// for a run that is running or succeeded, or whose members retention
// deleted, or whose replay by steps a cancel of the run dropped while it
// was decided (ReasonReplayDropped) or stopped (ReasonReplayCancelled)
// before its last step; ErrNotFound).
func (s *Store) ReplayRuns(ctx context.Context, ids []RunID) []error {
	errs := make([]error, len(ids))
	step := ""
	if s.replayStep > 0 {
		step = strconv.Itoa(s.replayStep)
	}
	calls, at := s.runCalls(ids, errs, func(uuid string) []string { return []string{uuid, "", step} }, "ff_replay_run")
	s.runSteps(ctx, calls, at, errs, func(i int, c *call, items []valkey.ValkeyMessage, ref *refusal) (bool, error) {
		if ref != nil {
			err := refusalError(ref, ExecutionID(ids[i]), "replay")
			if se := (*StateError)(nil); errors.As(err, &se) {
				se.Run = true
			}
			return false, err
		}
		// {members reset, more, generation}: the calls going on pass the
		// first reply's generation, so that they only go on with this
		// replay (one another caller finished or a cancel stopped is done).
		if len(items) < 3 {
			return false, errMalformed
		}
		more, _ := items[1].AsInt64()
		if c.args[1] == "" {
			gen, err := items[2].ToString()
			if err != nil {
				return false, errMalformed
			}
			c.args = []string{c.args[0], gen, step}
		}
		return more == 1, nil
	})
	return errs
}

// errMalformed is what a step's reader says of a reply of the wrong shape.
var errMalformed = errors.New("malformed reply")

// runSteps makes calls (calls[j] for ids[at[j]]) in pipelined rounds until
// each is done: step reads the reply of call c for id i (the refusal, if
// it was refused) and says whether c must be made again (a run's cancel
// or replay by steps; step may change its arguments for that), or why it
// failed (set in errs[i], with a transport error).
func (s *Store) runSteps(ctx context.Context, calls []call, at []int, errs []error,
	step func(i int, c *call, items []valkey.ValkeyMessage, ref *refusal) (more bool, err error)) {
	for len(calls) > 0 {
		msgs, cerrs := s.fcallEach(ctx, calls)
		var again []call
		var againAt []int
		for j, i := range at {
			if cerrs[j] != nil {
				errs[i] = cerrs[j]
				continue
			}
			items, ref, err := envelope(msgs[j])
			if err != nil {
				errs[i] = fmt.Errorf("store: %s: %w", calls[j].fn, err)
				continue
			}
			more, err := step(i, &calls[j], items, ref)
			switch {
			case errors.Is(err, errMalformed):
				errs[i] = fmt.Errorf("store: %s: %w", calls[j].fn, err)
			case err != nil:
				errs[i] = err // a refusal, as the step typed it
			case more:
				again = append(again, calls[j])
				againAt = append(againAt, i)
			}
		}
		calls, at = again, againAt
	}
}

// runCalls builds one call of fn per run id; an id that names no
// partition gets its error in errs and no call. at maps each call to its
// id's index.
func (s *Store) runCalls(ids []RunID, errs []error, args func(uuid string) []string, fn string) (calls []call, at []int) {
	for i, id := range ids {
		p, uuid, err := s.locate(ExecutionID(id))
		if err != nil {
			errs[i] = err
			continue
		}
		calls = append(calls, call{fn: fn, partition: p, args: args(uuid)})
		at = append(at, i)
	}
	return calls, at
}
