package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/valkey-io/valkey-go"
)

// Candidate is an eligible execution that Claim passed over because it
// needs quota admission for its next attempt.
type Candidate struct {
	ExecutionID ExecutionID
	Attempt     int      // the attempt a grant would start
	Quotas      []string // its quota subjects
	// Resets is how many times a replay reset the execution (a flow
	// member) when the claim read it: the later calls of the grant cycle
	// act only while it is unchanged.
	Resets int
}

// ClaimAdmitted is the claim of the scheduler's grant cycle with budget and
// quota admission (spec/runtime.md, "Admission"):
//
//  1. req.BreachedBudgets (ClaimBreaches, which the scheduler caches and
//     checks once per scan cycle by its version) makes the claim block —
//     or fail, with on_hard_limit fail — candidates that count against a
//     budget at a hard limit;
//  2. a first ff_claim grants candidates without quotas and returns those
//     with quotas untouched;
//  3. each of their quota subjects is admitted (AdmitQuota, pipelined); a
//     candidate denied by any is blocked (waiting_for_quota, with the
//     detail and a recheck time: after the window slides, or the pause
//     ends, at most Config.PauseRecheck) and its other
//     admissions are given back;
//  4. a second ff_claim grants the admitted candidates (tried first);
//     admissions it did not use are given back at once. Admissions carry
//     a token random per call, so concurrent schedulers admitting the same
//     candidate each hold and give back only their own slot.
//
// Steps 3 and 4 (and the settling of deferred quota keys in step 2) act
// on a candidate only while its next attempt and reset count
// (Candidate.Resets) are those the first claim read: a run replayed in
// between resets a flow member to the same attempt number and deferred
// quota references, and its input changes.
//
// A transport error during admission grants none of the quota candidates
// (fail closed) and is logged; the grants of step 2 are returned. An error
// of the second claim leaves its admissions to ReconcileQuotaSlots (the
// outcome is unknown, so they are not released blindly).
//
// Candidates blocked in step 3 leave the eligible index: what was behind
// them is claimed in the same call (steps 2 – 4 again, until a round
// blocks none or ClaimBlockedMax were blocked in all), so quota-denied
// work at the head of a lane does not hold up the work behind it until
// the next scan.
func (s *Store) ClaimAdmitted(ctx context.Context, req ClaimRequest) ([]Grant, error) {
	var all []Grant
	for blocked := 0; ; {
		round := req
		round.Max = req.Max - len(all)
		grants, n, err := s.claimRound(ctx, round)
		all = append(all, grants...)
		blocked += n
		if err != nil || n == 0 || len(all) >= req.Max || blocked >= ClaimBlockedMax {
			return all, err
		}
	}
}

// ClaimBlockedMax bounds the candidates one ClaimAdmitted blocks for their
// quotas (each round blocks up to its Max): a lane headed by more denied
// ones is cleared over several claims.
const ClaimBlockedMax = 64

// claimRound is steps 2 – 4 of ClaimAdmitted once; it returns the grants
// and how many candidates it blocked for their quotas.
func (s *Store) claimRound(ctx context.Context, req ClaimRequest) ([]Grant, int, error) {
	var needs []Candidate
	grants, err := s.claim(ctx, req, &needs)
	if err != nil || len(needs) == 0 || len(grants) >= req.Max {
		return grants, 0, err
	}
	if room := req.Max - len(grants); len(needs) > room {
		needs = needs[:room] // admit no more than the second claim can grant
	}
	token := randomToken(8)
	var items []admitItem
	for _, c := range needs {
		for _, q := range c.Quotas {
			items = append(items, admitItem{q, Admitted{ExecutionID: c.ExecutionID, Attempt: c.Attempt, Resets: c.Resets, Token: token}})
		}
	}
	res, err := s.admitMany(ctx, items)
	if err != nil {
		s.log.WarnContext(ctx, "quota admission failed; quota-limited executions not granted", attrError, err)
		s.releaseItems(ctx, items)
		return grants, 0, nil
	}
	var admitted []Admitted
	var given []admitItem // admitted for candidates of the second claim
	blocked := 0
	i := 0
	for _, c := range needs {
		var denied *AdmitResult
		var took []admitItem
		for range c.Quotas {
			if res[i].Admitted {
				took = append(took, items[i])
			} else if denied == nil {
				denied = &res[i]
			}
			i++
		}
		if denied == nil {
			admitted = append(admitted, Admitted{ExecutionID: c.ExecutionID, Attempt: c.Attempt, Resets: c.Resets, Token: token})
			given = append(given, took...)
			continue
		}
		s.releaseItems(ctx, took)
		if denied.Cause == QuotaDeniedContended {
			continue // another scheduler's claim grants it: left eligible
		}
		// Fenced by the attempt and reset count the claim read: a member a
		// replay reset meanwhile is left eligible, for the next claim to
		// read its references again.
		err := s.block(ctx, c.ExecutionID, WaitingForQuota, denied.Detail(), denied.RetryAfter, &c)
		switch {
		case err == nil:
			blocked++
		case !errors.Is(err, ErrWrongState) && !errors.Is(err, ErrNotFound):
			s.log.WarnContext(ctx, "block for quota failed", attrExecution, c.ExecutionID, attrError, err)
		}
	}
	if len(admitted) == 0 {
		return grants, blocked, nil
	}
	second := req
	second.Max = req.Max - len(grants)
	second.Admitted = admitted
	more, err := s.claim(ctx, second, nil)
	if err != nil {
		s.log.WarnContext(ctx, "claim of admitted executions failed; the reconciler frees their slots", attrError, err)
		return grants, 0, nil
	}
	granted := map[ExecutionID]bool{}
	for _, g := range more {
		granted[g.ExecutionID] = true
	}
	var unused []admitItem
	for _, it := range given {
		if !granted[it.a.ExecutionID] {
			unused = append(unused, it)
		}
	}
	s.releaseItems(ctx, unused)
	return append(grants, more...), blocked, nil
}

// releaseItems gives back unused admissions; a failure is logged (the
// reconciler frees them later).
func (s *Store) releaseItems(ctx context.Context, items []admitItem) {
	by := map[string][]string{}
	for _, it := range items {
		by[it.subject] = append(by[it.subject], it.a.holder())
	}
	if err := s.releaseMany(ctx, by, true); err != nil {
		s.log.WarnContext(ctx, "releasing unused quota admissions failed; the reconciler frees them", attrError, err)
	}
}

// Block moves an eligible execution to its lane's blocked index for an
// admission reason (WaitingForBudget, WaitingForQuota or
// WaitingForCapableWorker) with a human-readable detail; the unblock
// scanner looks at it again after recheck (0 = at its next tick). An
// execution that is not eligible now gets a *StateError.
func (s *Store) Block(ctx context.Context, id ExecutionID, reason BlockingReason, detail string, recheck time.Duration) error {
	return s.block(ctx, id, reason, detail, recheck, nil)
}

// block is Block that, with a candidate of the claim that was denied,
// blocks the execution only while its next attempt and reset count are
// the candidate's (a *StateError otherwise).
func (s *Store) block(ctx context.Context, id ExecutionID, reason BlockingReason, detail string, recheck time.Duration,
	c *Candidate) error {
	switch reason {
	case WaitingForBudget, WaitingForQuota, WaitingForCapableWorker:
	default:
		return invalid("reason", "%q is not an admission blocking reason", reason)
	}
	if recheck < 0 {
		recheck = 0
	}
	p, uuid, err := s.locate(id)
	if err != nil {
		return err
	}
	args := []string{uuid, string(reason), clip(detail, MaxErrorBytes), ms(recheck)}
	if c != nil {
		args = append(args, strconv.Itoa(c.Attempt), strconv.Itoa(c.Resets))
	}
	_, err = s.single(ctx, call{fn: "ff_block", partition: p, args: args}, id, "block")
	return err
}

// Unblock makes executions of partition p that are blocked for reason
// (WaitingForBudget or WaitingForQuota) eligible again; the caller checked
// that the reason cleared. Executions no longer blocked for that reason are
// left alone. It returns how many were unblocked.
func (s *Store) Unblock(ctx context.Context, p int, reason BlockingReason, ids []ExecutionID) (int, error) {
	return s.unblock(ctx, p, reason, ids, nil)
}

// unblock is Unblock that also heals, in the same FCALL, the entries of
// stale (found in the reason's index, not blocked for the reason): they
// leave the index unless they are blocked for it after all.
func (s *Store) unblock(ctx context.Context, p int, reason BlockingReason, ids, stale []ExecutionID) (int, error) {
	if reason != WaitingForBudget && reason != WaitingForQuota {
		return 0, invalid("reason", "%q: want %s or %s", reason, WaitingForBudget, WaitingForQuota)
	}
	if len(ids)+len(stale) == 0 {
		return 0, nil
	}
	args := make([]string, 0, 2+len(ids)+len(stale))
	args = append(args, string(reason), strconv.Itoa(len(ids)))
	for _, id := range slices.Concat(ids, stale) {
		ip, uuid, err := splitID(string(id))
		if err != nil {
			return 0, err
		}
		if ip != p {
			return 0, invalid("ids", "%s is not on partition %d", id, p)
		}
		args = append(args, uuid)
	}
	items, err := s.single(ctx, call{fn: "ff_unblock", partition: p, args: args}, "", "unblock")
	if err != nil {
		return 0, err
	}
	n, _ := items[0].AsInt64()
	return int(n), nil
}

// BlockedExecution is an execution waiting in a blocked index.
type BlockedExecution struct {
	ID      ExecutionID
	Reason  BlockingReason
	Budgets []string
	Quotas  []string
}

// AdmissionUnblock configures UnblockAdmission.
type AdmissionUnblock struct {
	Partition int
	Limit     int // 1..ScanLimitMax blocked executions looked at
	// Breached is the current BreachedBudgets; BudgetsKnown says it was
	// read. When it was not (a read error), budget-blocked executions stay
	// blocked (fail closed).
	Breached     []BudgetBreach
	BudgetsKnown bool
	// Room is the quota room of the pass over the flow partitions this
	// call is part of (the unblock scanner makes one per tick), so that
	// what one partition unblocks is not offered again to the next. Nil:
	// the call has a room of its own (a pass over one partition).
	Room *QuotaRoom
	// Cursor is where the unblock scanner's passes left off in each
	// blocked index (it keeps one across ticks). Nil: every index is read
	// from its head.
	Cursor *UnblockCursor
}

// UnblockCursor remembers, per blocked index, where the next unblock pass
// starts reading it, so that passes sharing one cursor go through a long
// line of executions that stay blocked a share at a time instead of
// reading its head again and again. No entry moves: the score of a
// blocked execution does not change while it stays blocked, so listings
// and the park log see a stable order.
//
// The passes go through an index in laps. A lap starts at the head and
// ends where the index ended when it started (its length then): entries
// blocked during a lap come after its end and are read by the next lap,
// so a line growing at its tail never keeps the passes away from its head,
// and an execution whose reason cleared is looked at within one lap (the
// index's length over the share, in passes). A read that fills its share
// moves the offset past the entries read that stay blocked (those
// unblocked or healed leave the index, so what followed them slides down,
// the lap's end with it); a read that reaches the end of the index or of
// the lap sends the next pass back to the head, starting a new lap.
//
// It lives in the memory of one process. A stale offset (the index changed
// under it) or several processes reading one index with cursors of their
// own only change which entries a pass looks at first, never what a pass
// does to an entry it looks at. The zero value is ready to use; a nil
// cursor reads every index from its head and keeps nothing. It is not safe
// for concurrent use: one scanner goroutine owns it.
type UnblockCursor struct {
	offsets map[string]lap                // blocked_budget, blocked_quota index key -> lap
	lanes   map[routeGroup]map[string]lap // route-blocked indexes: lane -> lap
}

// lap is where the next read of a blocked index starts (off, a rank) and
// where the current lap through it ends (end, the rank past its last
// entry). The zero lap starts a new lap at the head.
type lap struct {
	off, end int64
}

// next returns the lap after a read from l that looked at n entries,
// leaving of which left the index, and filled its share or not: past the
// entries that stay, or a new lap (also when none stayed past the head)
// when the read reached the end of the index or of the lap.
func (l lap) next(n, leaving int, full bool) lap {
	nl := lap{off: l.off + int64(n-leaving), end: l.end - int64(leaving)}
	if !full || nl.off <= 0 || nl.off >= nl.end {
		return lap{}
	}
	return nl
}

// routeGroup names the route-blocked indexes of one namespace on one
// partition.
type routeGroup struct {
	partition int
	namespace string
}

// at returns where the next read of the index key starts and its lap ends.
func (c *UnblockCursor) at(key string) lap {
	if c == nil {
		return lap{}
	}
	return c.offsets[key]
}

// set records where the next read of the index key starts and its lap
// ends; a new lap (offset 0, the head) is kept as no entry.
func (c *UnblockCursor) set(key string, l lap) {
	if c == nil {
		return
	}
	if l.off <= 0 {
		delete(c.offsets, key)
		return
	}
	if c.offsets == nil {
		c.offsets = map[string]lap{}
	}
	c.offsets[key] = l
}

// routeLaps returns the laps of the route-blocked lanes of g that do not
// start at the head.
func (c *UnblockCursor) routeLaps(g routeGroup) map[string]lap {
	if c == nil {
		return nil
	}
	return c.lanes[g]
}

// setRouteLap records where the next read of the route-blocked index of
// lane starts and its lap ends; a new lap (offset 0) is kept as no entry.
func (c *UnblockCursor) setRouteLap(g routeGroup, lane string, l lap) {
	if c == nil {
		return
	}
	if l.off <= 0 {
		if m := c.lanes[g]; m != nil {
			delete(m, lane)
			if len(m) == 0 {
				delete(c.lanes, g)
			}
		}
		return
	}
	if c.lanes == nil {
		c.lanes = map[routeGroup]map[string]lap{}
	}
	if c.lanes[g] == nil {
		c.lanes[g] = map[string]lap{}
	}
	c.lanes[g][lane] = l
}

// KeepNamespaces forgets where the passes left off in the route-blocked
// indexes of every namespace but those of names (the unblock scanner
// passes its tick's namespaces), so that the cursor keeps nothing of a
// namespace gone (PruneNamespaces).
func (c *UnblockCursor) KeepNamespaces(names []string) {
	if c == nil {
		return
	}
	for g := range c.lanes {
		if !slices.Contains(names, g.namespace) {
			delete(c.lanes, g)
		}
	}
}

// keepIndexes forgets where the passes left off in the indexes whose key
// starts with prefix (those of a partition) but the keys of keep (its
// indexes read now), so that the cursor keeps nothing of a lane gone
// (PruneLanes).
func (c *UnblockCursor) keepIndexes(prefix string, keep map[string]bool) {
	if c == nil {
		return
	}
	for key := range c.offsets {
		if strings.HasPrefix(key, prefix) && !keep[key] {
			delete(c.offsets, key)
		}
	}
}

// QuotaRoom is the quota room of one unblock pass over the flow
// partitions: how many more admissions each quota subject has room for.
// UnblockAdmission reads a subject's room when the pass first meets it and
// takes from it every execution it unblocks, so one freed slot wakes one
// execution in the whole pass, not one per partition. The zero value is an
// empty room, ready to use; it serves one pass, and one call at a time.
type QuotaRoom struct {
	free map[string]int64 // subject -> admissions it has room for (0 when undefined)
}

// UnblockAdmission re-checks up to Limit executions of a flow partition
// blocked for a budget or a quota whose recheck time passed, and makes
// eligible those whose reason cleared: no budget of theirs is at a hard
// limit any more (reset or limit raised), or each of their quota subjects
// has room (its window slid or a slot freed) — at most as many per subject
// as it has room for in the pass (req.Room), so a freed slot does not wake
// a crowd. Each execution is judged by its own references only, so nothing
// crosses namespaces. Read errors unblock nothing.
//
// Each blocked index of the partition gets a share of Limit (what an index
// leaves unused goes to the ones after it), starting at an index that
// rotates with the clock, and its due entries are read from where
// req.Cursor says the last pass left off: passes that share a cursor, as
// the unblock scanner's do, go through a long line blocked by a budget
// still at its limit, or by a busy quota key, a share at a time, in laps
// that end where the index ended when they started (see UnblockCursor),
// so even a line growing at its tail never hides one whose reason cleared
// for more than a lap. Entries that stay blocked keep
// their place and score. More is set only when something was unblocked and
// an index's read filled its share, and for quotas only while a subject
// met still has room (executions that stay blocked do not make the scanner
// hurry).
func (s *Store) UnblockAdmission(ctx context.Context, req AdmissionUnblock) (ScanResult, error) {
	p := req.Partition
	if p < 0 || p >= s.cfg.FlowPartitions {
		return ScanResult{}, invalid("partition", "%d is outside 0..%d", p, s.cfg.FlowPartitions-1)
	}
	if req.Limit < 1 || req.Limit > ScanLimitMax {
		return ScanResult{}, invalid("limit", "%d is outside 1..%d", req.Limit, ScanLimitMax)
	}
	room := req.Room
	if room == nil {
		room = &QuotaRoom{}
	}
	resps := s.c.DoMulti(ctx, s.c.B().Smembers().Key(s.k.anchor(p)).Build(), s.c.B().Time().Build())
	lanes, err := resps[0].AsStrSlice()
	if err != nil {
		return ScanResult{}, fmt.Errorf("store: read lanes: %w", err)
	}
	now, err := timeOf(resps[1])
	if err != nil {
		return ScanResult{}, err
	}
	slices.Sort(lanes)
	type source struct {
		ns, lane, index string
		reason          BlockingReason
	}
	var sources []source
	for _, l := range lanes {
		if ns, lane, ok := strings.Cut(l, ":"); ok {
			sources = append(sources, source{ns, lane, indexBlockedBudget, WaitingForBudget},
				source{ns, lane, indexBlockedQuota, WaitingForQuota})
		}
	}
	if c := req.Cursor; c != nil && len(c.offsets) > 0 {
		current := make(map[string]bool, len(sources))
		for _, src := range sources {
			current[s.k.lane(p, src.ns, src.lane, src.index)] = true
		}
		c.keepIndexes(s.k.base(p)+":q:", current)
	}
	if len(sources) > 0 {
		// When the sources outnumber what the limit covers, each gets its
		// turn at the front.
		k := int(now % int64(len(sources)))
		sources = append(sources[k:], sources[:k]...)
	}
	// read is the read of one index: where it started and its lap ends,
	// whether it filled its share, and how many of its entries leave the
	// index in this pass (unblocked, stale or without a record).
	type read struct {
		key        string
		at         lap
		n, leaving int
		full       bool
	}
	var reads []read
	// looked is a blocked execution looked at, and the read it came from.
	type looked struct {
		BlockedExecution
		read int
	}
	var blocked []looked
	stale := map[BlockingReason][]ExecutionID{} // entries not blocked for their index's reason: healed
	seen := 0
	cutBy := map[BlockingReason]bool{} // a read of an index of the reason filled its share
	for si, src := range sources {
		if seen >= req.Limit {
			cutBy[WaitingForBudget], cutBy[WaitingForQuota] = true, true // not read at all
			break
		}
		left := len(sources) - si
		n := (req.Limit - seen + left - 1) / left // this index's share: what is left, spread evenly
		key := s.k.lane(p, src.ns, src.lane, src.index)
		// The due entries (score <= now) are the head of the index by rank,
		// so reading by rank from the offset and keeping the due ones is
		// ZRANGEBYSCORE key -inf now LIMIT off n without walking the offset.
		// A lap that starts at the head ends where the index ends now.
		at := req.Cursor.at(key)
		cmds := valkey.Commands{s.c.B().Zrange().Key(key).Min(strconv.FormatInt(at.off, 10)).
			Max(strconv.FormatInt(at.off+int64(n)-1, 10)).Withscores().Build()}
		if at.off == 0 {
			cmds = append(cmds, s.c.B().Zcard().Key(key).Build())
		}
		rs := s.c.DoMulti(ctx, cmds...)
		entries, err := rs[0].AsZScores()
		if err != nil {
			return ScanResult{}, fmt.Errorf("store: read blocked: %w", err)
		}
		if at.off == 0 {
			if at.end, err = rs[1].AsInt64(); err != nil {
				return ScanResult{}, fmt.Errorf("store: read blocked: %w", err)
			}
		}
		var uuids []string
		for _, z := range entries {
			if z.Score > float64(now) {
				break
			}
			uuids = append(uuids, z.Member)
		}
		seen += len(uuids)
		ri := len(reads)
		reads = append(reads, read{key: key, at: at, n: len(uuids), full: len(uuids) >= n})
		cutBy[src.reason] = cutBy[src.reason] || reads[ri].full
		if len(uuids) == 0 {
			continue
		}
		var gone []string // entries without a record: dropped
		cmds = make(valkey.Commands, len(uuids))
		for i, u := range uuids {
			cmds[i] = s.c.B().Hmget().Key(s.k.core(p, u)).Field("state", "budgets", "quotas").Build()
		}
		for i, r := range s.c.DoMulti(ctx, cmds...) {
			v, err := r.ToArray()
			if err != nil {
				return ScanResult{}, fmt.Errorf("store: read blocked execution: %w", err)
			}
			id := makeID(p, uuids[i])
			if v[0].IsNil() {
				gone = append(gone, uuids[i])
				reads[ri].leaving++
				continue
			}
			if decodeState(str(v[0]), "").BlockingReason != src.reason {
				stale[src.reason] = append(stale[src.reason], id) // ff_unblock heals it
				reads[ri].leaving++
				continue
			}
			blocked = append(blocked, looked{BlockedExecution{ID: id, Reason: src.reason,
				Budgets: splitList(str(v[1])), Quotas: splitList(str(v[2]))}, ri})
		}
		if len(gone) > 0 {
			if err := s.c.Do(ctx, s.c.B().Zrem().Key(key).Member(gone...).Build()).Error(); err != nil {
				return ScanResult{}, fmt.Errorf("store: drop blocked entries without a record: %w", err)
			}
		}
	}
	breached := map[string]bool{}
	for _, b := range req.Breached {
		breached[b.BudgetID] = true
	}
	var missing map[string]bool
	if req.BudgetsKnown {
		var err error
		var ids []string
		for _, b := range blocked {
			if b.Reason == WaitingForBudget {
				ids = append(ids, b.Budgets...)
			}
		}
		if missing, err = s.keepRunBudgets(ctx, ids); err != nil {
			return ScanResult{}, err
		}
	}
	var subjects []string
	for _, b := range blocked {
		if b.Reason == WaitingForQuota {
			subjects = append(subjects, b.Quotas...)
		}
	}
	if err := s.readQuotaRoom(ctx, room, subjects, now); err != nil {
		return ScanResult{}, err
	}
	cleared := map[BlockingReason][]ExecutionID{}
	for _, b := range blocked {
		ok := true
		switch b.Reason {
		case WaitingForBudget:
			if !req.BudgetsKnown {
				continue // not judged: left where it is
			}
			for _, id := range b.Budgets {
				// A run-scoped budget that is gone (expired: nothing kept
				// it) is no room: its run stays blocked rather than run
				// without limits.
				ok = ok && !breached[id] && !missing[id]
			}
		case WaitingForQuota:
			for _, q := range b.Quotas {
				ok = ok && room.free[q] > 0
			}
			if ok {
				for _, q := range b.Quotas {
					room.free[q]--
				}
			}
		}
		if ok {
			cleared[b.Reason] = append(cleared[b.Reason], b.ID)
			reads[b.read].leaving++
		}
	}
	n1, err := s.unblock(ctx, p, WaitingForBudget, cleared[WaitingForBudget], stale[WaitingForBudget])
	if err != nil {
		return ScanResult{}, err
	}
	n2, err := s.unblock(ctx, p, WaitingForQuota, cleared[WaitingForQuota], stale[WaitingForQuota])
	if err != nil {
		return ScanResult{Processed: n1}, err
	}
	// The next pass starts past the entries read that stay blocked, or at
	// the head (a new lap) when this read reached the end of the due
	// entries or of its lap. (A failed call above leaves the cursor as it
	// was: the next pass reads the same entries again.)
	for _, r := range reads {
		req.Cursor.set(r.key, r.at.next(r.n, r.leaving, r.full))
	}
	// Hurry only for what the next pass can unblock: more budget-blocked
	// entries, or quota-blocked ones while a subject met still has room.
	more := cutBy[WaitingForBudget] && n1 > 0
	if cutBy[WaitingForQuota] && n2 > 0 {
		for _, sub := range subjects {
			more = more || room.free[sub] > 0
		}
	}
	return ScanResult{Processed: n1 + n2, More: more}, nil
}

// keepRunBudgets renews the lifetime of the run-scoped budgets among ids
// (RunBudgetTTL from now, as a report would): a run blocked by its
// budget gets no reports, and its budget would expire under it, and with
// it the limit (its breached entry dropped, the run unblocked and run
// without limits). It returns those that no longer exist.
func (s *Store) keepRunBudgets(ctx context.Context, ids []string) (map[string]bool, error) {
	var run []string
	seen := map[string]bool{}
	for _, id := range ids {
		if strings.Contains(id, "@") && !seen[id] {
			seen[id] = true
			run = append(run, id)
		}
	}
	if len(run) == 0 {
		return nil, nil
	}
	ttl := RunBudgetTTL.Milliseconds()
	cmds := make(valkey.Commands, 0, 2*len(run))
	for _, id := range run {
		key := s.k.budget(s.budgetPart(id), id)
		cmds = append(cmds, s.c.B().Pexpire().Key(key).Milliseconds(ttl).Build(),
			s.c.B().Pexpire().Key(key+":usage").Milliseconds(ttl).Build())
	}
	missing := map[string]bool{}
	for i, r := range s.c.DoMulti(ctx, cmds...) {
		n, err := r.AsInt64()
		if err != nil {
			return nil, fmt.Errorf("store: keep run budgets: %w", err)
		}
		if i%2 == 0 && n == 0 {
			missing[run[i/2]] = true
		}
	}
	return missing, nil
}

// readQuotaRoom reads into room how many more admissions each of subjects
// that room does not hold yet has room for now (0 when undefined or
// paused).
func (s *Store) readQuotaRoom(ctx context.Context, room *QuotaRoom, subjects []string, now int64) error {
	if room.free == nil {
		room.free = map[string]int64{}
	}
	var missing []string
	for _, sub := range subjects {
		if _, ok := room.free[sub]; !ok {
			room.free[sub] = 0
			missing = append(missing, sub)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	subjects = missing
	defs := make(valkey.Commands, len(subjects))
	for i, sub := range subjects {
		id, _ := splitSubject(sub)
		defs[i] = s.c.B().Hmget().Key(s.k.quota(s.quotaPart(id), id)).Field("rate", "window_ms", "concurrency").Build()
	}
	type limits struct{ rate, window, cap int64 }
	lim := make([]*limits, len(subjects))
	for i, r := range s.c.DoMulti(ctx, defs...) {
		v, err := r.ToArray()
		if err != nil {
			return fmt.Errorf("store: read quota %s: %w", subjects[i], err)
		}
		if !v[0].IsNil() {
			lim[i] = &limits{atoi64(str(v[0])), atoi64(str(v[1])), atoi64(str(v[2]))}
		}
	}
	cmds := make(valkey.Commands, 0, 3*len(subjects))
	for i, sub := range subjects {
		id, _ := splitSubject(sub)
		k := s.k.quota(s.quotaPart(id), sub)
		w := int64(0)
		if lim[i] != nil {
			w = lim[i].window
		}
		cmds = append(cmds,
			s.c.B().Zcount().Key(k+":window").Min("("+strconv.FormatInt(now-w, 10)).Max("+inf").Build(),
			s.c.B().Zcard().Key(k+":slots").Build(),
			s.c.B().Hget().Key(k+":paused").Field("until").Build())
	}
	rs := s.c.DoMulti(ctx, cmds...)
	for i, sub := range subjects {
		inWindow, err1 := rs[3*i].AsInt64()
		active, err2 := rs[3*i+1].AsInt64()
		pausedTo, err3 := rs[3*i+2].AsInt64()
		if valkey.IsValkeyNil(err3) {
			err3 = nil
		}
		if err := errors.Join(err1, err2, err3); err != nil {
			return fmt.Errorf("store: read quota state %s: %w", sub, err)
		}
		if lim[i] == nil || pausedTo > now {
			continue // undefined or paused: no room
		}
		free := int64(1 << 62)
		if lim[i].rate > 0 {
			free = min(free, lim[i].rate-inWindow)
		}
		if lim[i].cap > 0 {
			free = min(free, lim[i].cap-active)
		}
		room.free[sub] = free
	}
	return nil
}
