package store

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/flowfabric/ff/lua"
	"github.com/valkey-io/valkey-go"
)

// Upgrade of the budget and quota indexes. Budgets and quotas created by a
// release without the indexes are not in them: a store opened on a
// deployment that existed before (its config holds partition counts but
// not limitsIndexedField) backfills them in the background
// (BackfillLimitIndexes), with a SCAN of every primary for the budget and
// quota records and one ff_limit_index call per partition and batch. A
// rolling upgrade leaves processes of the older release running, which
// create budgets and quotas without indexing them: the backfill marks the
// deployment as indexed only when, after a pass, no other library version
// is recorded as in use (see KeepLibrary: a version leaves the record
// LibraryIdleAfter after its last process stopped); until then it makes a
// pass every LimitsBackfillRetry. Any budget or quota touched by this
// release (upserted, reported to, reset, paused) is indexed anyway.
const (
	// LimitsBackfillRetry is how long the backfill waits before another
	// pass while processes of another library version may still create
	// budgets and quotas without indexing them.
	LimitsBackfillRetry = LibraryIdleAfter
	// limitsIndexedField is the field of <prefix>ff:config that says the
	// indexes hold every budget and quota (its value: when, ms).
	limitsIndexedField = "limits_indexed"
	// backfillBatch bounds the ids of one ff_limit_index call.
	backfillBatch = 500
	// backfillScanCount is the COUNT of one SCAN of the backfill.
	backfillScanCount = 1000
	// limitsBackfillLock (after the key prefix) is held by the process
	// making a pass, for LimitsBackfillRetry at most.
	limitsBackfillLock = "ff:limits_backfill"
)

// LimitsBackfill is the outcome of one BackfillLimitIndexes pass.
type LimitsBackfill struct {
	Budgets int // ids added to budget indexes
	Quotas  int // ids added to quota indexes
	// Done says the deployment is marked as indexed (now, or before: then
	// nothing was scanned).
	Done bool
	// Skipped says another process was making a pass (its lock held):
	// this one scanned nothing.
	Skipped bool
}

// BackfillLimitIndexes adds every budget and quota record to its
// partition's index, unless the deployment is already marked as indexed;
// it marks it when no other library version is recorded as in use (see
// the upgrade notes above). It SCANs the whole key space of every primary
// once: a store runs it in the background when it opens a deployment that
// needs it.
func (s *Store) BackfillLimitIndexes(ctx context.Context) (LimitsBackfill, error) {
	var out LimitsBackfill
	done, err := s.c.Do(ctx, s.c.B().Hexists().Key(s.k.config()).Field(limitsIndexedField).Build()).AsBool()
	if err != nil {
		return out, fmt.Errorf("store: read %s: %w", limitsIndexedField, err)
	}
	if done {
		out.Done = true
		return out, nil
	}
	// One pass at a time across processes: each is a full SCAN.
	lock, token := s.k.prefix+limitsBackfillLock, newUUID()
	took, err := s.c.Do(ctx, s.c.B().Set().Key(lock).Value(token).Nx().Px(LimitsBackfillRetry).Build()).AsBool()
	if err != nil && !valkey.IsValkeyNil(err) {
		return out, fmt.Errorf("store: take the backfill lock: %w", err)
	}
	if !took {
		out.Skipped = true // another process makes a pass now
		return out, nil
	}
	defer func() {
		// Released at the end, only while it is still this pass's: a pass
		// that outlived the lock's lifetime must not free the next one's.
		_, _ = s.single(context.WithoutCancel(ctx), call{fn: "ff_unlock", keys: []string{lock}, args: []string{token}}, "", "release the backfill lock")
	}()
	// Another version in use at the start may create unindexed budgets
	// while the scan runs, even if its record is gone by the end.
	before, err := s.otherVersions(ctx)
	if err != nil {
		return out, err
	}
	// Every primary, or no pass: a node left out would leave its keys
	// out for good once the deployment is marked.
	nodes, err := s.primaries(ctx, true)
	if err != nil {
		return out, err
	}
	batches := map[string][]string{} // index key -> ids not sent yet
	flush := func(index string) error {
		ids := batches[index]
		delete(batches, index)
		if len(ids) == 0 {
			return nil
		}
		items, err := s.single(ctx, call{fn: "ff_limit_index", keys: []string{index}, args: ids}, "", "backfill "+index)
		if err != nil {
			return err
		}
		n, _ := items[0].AsInt64()
		if strings.HasSuffix(index, ":budgets") {
			out.Budgets += int(n)
		} else {
			out.Quotas += int(n)
		}
		return nil
	}
	pattern := globEscape(s.k.prefix) + "ff:{[bq]:*}:*"
	for _, n := range nodes {
		for cursor := uint64(0); ; {
			e, err := n.c.Do(ctx, n.c.B().Scan().Cursor(cursor).Match(pattern).Count(backfillScanCount).Type("hash").Build()).AsScanEntry()
			if err != nil {
				return out, fmt.Errorf("store: SCAN for budgets and quotas%s: %w", n.desc, err)
			}
			for _, key := range e.Elements {
				index, id, ok := s.limitRecord(key)
				if !ok {
					continue
				}
				batches[index] = append(batches[index], id)
				if len(batches[index]) >= backfillBatch {
					if err := flush(index); err != nil {
						return out, err
					}
				}
			}
			if cursor = e.Cursor; cursor == 0 {
				break
			}
		}
	}
	for index := range batches {
		if err := flush(index); err != nil {
			return out, err
		}
	}
	after, err := s.otherVersions(ctx)
	if err != nil {
		return out, err
	}
	if before || after {
		return out, nil // another release may still create unindexed ones
	}
	err = s.c.Do(ctx, s.c.B().Hset().Key(s.k.config()).FieldValue().
		FieldValue(limitsIndexedField, strconv.FormatInt(time.Now().UnixMilli(), 10)).Build()).Error()
	if err != nil {
		return out, fmt.Errorf("store: mark the budget and quota indexes: %w", err)
	}
	out.Done = true
	return out, nil
}

// otherVersions reports whether a library version other than this one is
// recorded as in use (KeepLibrary).
func (s *Store) otherVersions(ctx context.Context) (bool, error) {
	versions, err := s.c.Do(ctx, s.c.B().Hkeys().Key(s.k.libraries()).Build()).AsStrSlice()
	if err != nil {
		return false, fmt.Errorf("store: read library versions: %w", err)
	}
	for _, v := range versions {
		if v != lua.Version() {
			return true, nil
		}
	}
	return false, nil
}

// limitRecord reports whether key is the record of a budget or quota, and
// returns the index it belongs in and its id. The records of the other
// keys the scan matches (usage, subjects, pauses, the partition keys) are
// told apart by their ids, which could not be valid ones.
func (s *Store) limitRecord(key string) (index, id string, ok bool) {
	rest, found := strings.CutPrefix(key, s.k.prefix+"ff:{")
	if !found || len(rest) < 2 || rest[1] != ':' {
		return "", "", false
	}
	kind := rest[0]
	num, rest, found := strings.Cut(rest[2:], "}:")
	if !found {
		return "", "", false
	}
	part, err := strconv.Atoi(num)
	if err != nil || strconv.Itoa(part) != num {
		return "", "", false
	}
	switch kind {
	case 'b':
		id, found = strings.CutPrefix(rest, "budget:")
		if !found || part >= s.cfg.BudgetPartitions || s.budgetPart(id) != part {
			return "", "", false
		}
		if _, _, _, err := splitResourceID("id", id, true); err != nil {
			return "", "", false
		}
		return s.k.budgetIndex(part), id, true
	case 'q':
		id, found = strings.CutPrefix(rest, "quota:")
		if !found || part >= s.cfg.QuotaPartitions || s.quotaPart(id) != part {
			return "", "", false
		}
		if _, _, _, err := splitResourceID("id", id, false); err != nil {
			return "", "", false
		}
		return s.k.quotaIndex(part), id, true
	}
	return "", "", false
}

// globEscape escapes the characters SCAN's MATCH gives a meaning to.
func globEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// startLimitsBackfill runs BackfillLimitIndexes in the background (passes
// every LimitsBackfillRetry until it is done) when the deployment needs
// it. fresh says that the deployment had no partition counts stored when
// this store opened it: it has no budgets or quotas older than the
// indexes, and is marked as indexed at once.
func (s *Store) startLimitsBackfill(ctx context.Context, fresh bool) error {
	if fresh {
		err := s.c.Do(ctx, s.c.B().Hsetnx().Key(s.k.config()).Field(limitsIndexedField).
			Value(strconv.FormatInt(time.Now().UnixMilli(), 10)).Build()).Error()
		if err != nil {
			return fmt.Errorf("store: mark the budget and quota indexes: %w", err)
		}
		return nil
	}
	done, err := s.c.Do(ctx, s.c.B().Hexists().Key(s.k.config()).Field(limitsIndexedField).Build()).AsBool()
	if err != nil {
		return fmt.Errorf("store: read %s: %w", limitsIndexedField, err)
	}
	if done {
		return nil
	}
	bctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s.backfill.cancel = cancel
	s.backfill.done.Add(1)
	go func() {
		defer s.backfill.done.Done()
		s.backfillLoop(bctx)
	}()
	return nil
}

// backfillLoop makes backfill passes until one is done or ctx ends.
func (s *Store) backfillLoop(ctx context.Context) {
	for {
		start := time.Now()
		r, err := s.BackfillLimitIndexes(ctx)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			s.log.WarnContext(ctx, "budget and quota index backfill failed; trying again later", attrError, err)
		case r.Skipped:
			s.log.DebugContext(ctx, "budget and quota index backfill left to the process making a pass")
		default:
			s.log.InfoContext(ctx, "budget and quota indexes backfilled", attrBudgets, r.Budgets, attrQuotas, r.Quotas,
				attrDone, r.Done, attrTook, time.Since(start).Round(time.Millisecond))
			if r.Done {
				return
			}
		}
		t := time.NewTimer(LimitsBackfillRetry)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// stopLimitsBackfill stops the background backfill and waits for it.
func (s *Store) stopLimitsBackfill() {
	if s.backfill.cancel != nil {
		s.backfill.cancel()
	}
	s.backfill.done.Wait()
}
