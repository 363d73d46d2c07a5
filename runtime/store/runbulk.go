package store

import (
	"context"
	"errors"
	"fmt"
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
	calls, at := s.runCalls(ids, errs, func(uuid string) []string { return []string{uuid, clip(reason, MaxErrorBytes)} }, "ff_cancel_run")
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
				errs[i] = fmt.Errorf("store: ff_cancel_run: %w", err)
				continue
			}
			if ref != nil {
				errs[i] = refusalError(ref, ExecutionID(ids[i]), "cancel")
				continue
			}
			// A running run has members to cancel; one that had ended
			// answers its state and none.
			n, more, ok := cancelReply(items)
			if !ok {
				errs[i] = fmt.Errorf("store: ff_cancel_run: malformed reply")
				continue
			}
			cancelled[i] = cancelled[i] || n > 0
			if more {
				again = append(again, calls[j])
				againAt = append(againAt, i)
			}
		}
		calls, at = again, againAt
	}
	return cancelled, errs
}

// ReplayRuns replays runs as ReplayRun does, a pipelined round trip per
// step: each step of each run's replay is its own atomic call, and a
// replay of more than ReplayStepMembers members takes several. errs[i] is
// nil when ids[i] was replayed, else why not (a *StateError with Run set
// for a run that is running or succeeded, or whose members retention
// deleted; ErrNotFound).
func (s *Store) ReplayRuns(ctx context.Context, ids []RunID) []error {
	errs := make([]error, len(ids))
	calls, at := s.runCalls(ids, errs, func(uuid string) []string { return []string{uuid} }, "ff_replay_run")
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
			switch {
			case err != nil:
				errs[i] = fmt.Errorf("store: ff_replay_run: %w", err)
			case ref != nil:
				err := refusalError(ref, ExecutionID(ids[i]), "replay")
				if se := (*StateError)(nil); errors.As(err, &se) {
					se.Run = true
				}
				errs[i] = err
			case len(items) < 2:
				errs[i] = fmt.Errorf("store: ff_replay_run: malformed reply")
			default:
				if more, _ := items[1].AsInt64(); more == 1 {
					again = append(again, calls[j])
					againAt = append(againAt, i)
				}
			}
		}
		calls, at = again, againAt
	}
	return errs
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
