package store

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"time"
)

// ScanLimitMax bounds the limit of one scanner step.
const ScanLimitMax = 1000

// scan runs one scanner step on one partition.
func (s *Store) scan(ctx context.Context, fn string, partition, limit int, extra ...string) (ScanResult, error) {
	if partition < 0 || partition >= s.cfg.FlowPartitions {
		return ScanResult{}, invalid("partition", "%d is outside 0..%d", partition, s.cfg.FlowPartitions-1)
	}
	if limit < 1 || limit > ScanLimitMax {
		return ScanResult{}, invalid("limit", "%d is outside 1..%d", limit, ScanLimitMax)
	}
	items, err := s.single(ctx, call{fn: fn, partition: partition, args: append([]string{strconv.Itoa(limit)}, extra...)}, "", fn)
	if err != nil {
		return ScanResult{}, err
	}
	n, _ := items[0].AsInt64()
	more, _ := items[1].AsInt64()
	return ScanResult{Processed: int(n), More: more == 1}, nil
}

// ExpireLeases handles up to limit executions of partition whose lease
// expired: the attempt ends as lease_expired without being charged to the
// retry policy; the execution is eligible again at once (its next attempt
// is a reclaim) until its reclaims exceed its max_reclaims, then it fails
// with reason reclaims_exhausted. An attempt whose timeout or execution
// deadline passed before its lease expired is timed out or expired
// instead: the first limit to pass decides, whichever scanner comes first.
func (s *Store) ExpireLeases(ctx context.Context, partition, limit int) (ScanResult, error) {
	return s.scan(ctx, "ff_expire_leases", partition, limit, jitterSeed())
}

// PromoteDelayed makes up to limit due delayed executions of partition
// eligible.
func (s *Store) PromoteDelayed(ctx context.Context, partition, limit int) (ScanResult, error) {
	return s.scan(ctx, "ff_promote_delayed", partition, limit)
}

// TimeoutAttempts fails up to limit running attempts of partition whose
// attempt timeout passed; they are retried per the policy. An attempt
// whose lease expired or execution deadline passed before its timeout is
// reclaimed or expired instead, as ExpireLeases and ExpireDeadlines would
// have done.
func (s *Store) TimeoutAttempts(ctx context.Context, partition, limit int) (ScanResult, error) {
	return s.scan(ctx, "ff_timeout_attempts", partition, limit, jitterSeed())
}

// ExpireDeadlines ends up to limit executions of partition whose execution
// deadline passed, with outcome expired, whatever their state. A running
// attempt whose lease expired or timeout passed before the deadline first
// ends as that limit ends it (reclaim, retry or failure); the execution
// then expires unless that ended it.
func (s *Store) ExpireDeadlines(ctx context.Context, partition, limit int) (ScanResult, error) {
	return s.scan(ctx, "ff_expire_deadlines", partition, limit, jitterSeed())
}

// jitterSeed returns a random seed of the retry jitter of a call.
func jitterSeed() string { return strconv.Itoa(rand.IntN(1_000_000_000)) }

// PurgeTerminal deletes the flow runs of partition that ended longer ago
// than age, with their members (a large run's members over several calls),
// then executions that have been terminal for longer than age, with every
// key and index entry (a flow member goes with its run, never before it),
// then stagings of large runs never committed whose lifetime passed (a
// staging's members about limit per call: a staging stays listed until
// they are all gone). limit bounds the entries handled in all three;
// Processed counts the executions deleted (run members included).
//
// The run-scoped budgets of the runs it deletes (RunBudgetID) are deleted
// after, with their breached entries: budgets live on other hash slots
// than runs, so the call that deletes a run cannot. Deleting them at the
// run's end instead would be wrong: a failed or cancelled run can be
// replayed, and its budget must then still stop it; a deleted run never
// runs again. Until its run is deleted, a budget at its hard limit costs
// only the readers of the breached hashes (ClaimBreaches leaves it out of
// claims once its run ended). The cost is bounded: one call per budget the
// members deleted name, at most a few per run. A failed deletion is
// logged and leaves the budget to its lifetime (RunBudgetTTL after its
// last report), as before.
func (s *Store) PurgeTerminal(ctx context.Context, partition int, age time.Duration, limit int) (ScanResult, error) {
	if age < 0 {
		return ScanResult{}, invalid("age", "must not be negative")
	}
	if partition < 0 || partition >= s.cfg.FlowPartitions {
		return ScanResult{}, invalid("partition", "%d is outside 0..%d", partition, s.cfg.FlowPartitions-1)
	}
	if limit < 1 || limit > ScanLimitMax {
		return ScanResult{}, invalid("limit", "%d is outside 1..%d", limit, ScanLimitMax)
	}
	items, err := s.single(ctx, call{fn: "ff_purge_terminal", partition: partition, args: []string{strconv.Itoa(limit), ms(age)}}, "", "ff_purge_terminal")
	if err != nil {
		return ScanResult{}, err
	}
	if len(items) < 2 {
		return ScanResult{}, fmt.Errorf("store: ff_purge_terminal: malformed reply of %d items", len(items))
	}
	n, _ := items[0].AsInt64()
	more, _ := items[1].AsInt64()
	res := ScanResult{Processed: int(n), More: more == 1}
	if len(items) > 2 {
		budgets, err := items[2].AsStrSlice()
		if err == nil && len(budgets) > 0 {
			err = s.deleteRunBudgets(ctx, budgets)
		}
		if err != nil {
			s.log.WarnContext(ctx, "store: retention: delete the run-scoped budgets of deleted runs (left to their lifetime)",
				slog.Int("partition", partition), slog.Any("error", err))
		}
	}
	return res, nil
}
