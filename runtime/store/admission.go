package store

import (
	"context"
	"errors"
	"fmt"
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
}

// ClaimAdmitted is the claim of the scheduler's grant cycle with budget and
// quota admission (spec/runtime.md, "Admission"):
//
//  1. req.BreachedBudgets (BreachedBudgets, cached per scan cycle) makes
//     the claim block — or fail, with on_hard_limit fail — candidates that
//     count against a budget at a hard limit;
//  2. a first ff_claim grants candidates without quotas and returns those
//     with quotas untouched;
//  3. each of their quota subjects is admitted (AdmitQuota, pipelined); a
//     candidate denied by any is blocked (waiting_for_quota, with the
//     detail and a recheck time after the window slides) and its other
//     admissions are given back;
//  4. a second ff_claim grants the admitted candidates (tried first);
//     admissions it did not use are given back at once. Admissions carry
//     a token random per call, so concurrent schedulers admitting the same
//     candidate each hold and give back only their own slot.
//
// A transport error during admission grants none of the quota candidates
// (fail closed) and is logged; the grants of step 2 are returned. An error
// of the second claim leaves its admissions to ReconcileQuotaSlots (the
// outcome is unknown, so they are not released blindly).
func (s *Store) ClaimAdmitted(ctx context.Context, req ClaimRequest) ([]Grant, error) {
	var needs []Candidate
	grants, err := s.claim(ctx, req, &needs)
	if err != nil || len(needs) == 0 || len(grants) >= req.Max {
		return grants, err
	}
	if room := req.Max - len(grants); len(needs) > room {
		needs = needs[:room] // admit no more than the second claim can grant
	}
	token := randomToken(8)
	var items []admitItem
	for _, c := range needs {
		for _, q := range c.Quotas {
			items = append(items, admitItem{q, Admitted{ExecutionID: c.ExecutionID, Attempt: c.Attempt, Token: token}})
		}
	}
	res, err := s.admitMany(ctx, items)
	if err != nil {
		s.log.WarnContext(ctx, "quota admission failed; quota-limited executions not granted", attrError, err)
		s.releaseItems(ctx, items)
		return grants, nil
	}
	var admitted []Admitted
	var given []admitItem // admitted for candidates of the second claim
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
			admitted = append(admitted, Admitted{ExecutionID: c.ExecutionID, Attempt: c.Attempt, Token: token})
			given = append(given, took...)
			continue
		}
		s.releaseItems(ctx, took)
		err := s.Block(ctx, c.ExecutionID, WaitingForQuota, denied.Detail(), denied.RetryAfter)
		if err != nil && !errors.Is(err, ErrWrongState) && !errors.Is(err, ErrNotFound) {
			s.log.WarnContext(ctx, "block for quota failed", attrExecution, c.ExecutionID, attrError, err)
		}
	}
	if len(admitted) == 0 {
		return grants, nil
	}
	second := req
	second.Max = req.Max - len(grants)
	second.Admitted = admitted
	more, err := s.claim(ctx, second, nil)
	if err != nil {
		s.log.WarnContext(ctx, "claim of admitted executions failed; the reconciler frees their slots", attrError, err)
		return grants, nil
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
	return append(grants, more...), nil
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
	_, err = s.single(ctx, call{fn: "ff_block", partition: p,
		args: []string{uuid, string(reason), clip(detail, MaxErrorBytes), ms(recheck)}}, id, "block")
	return err
}

// Unblock makes executions of partition p that are blocked for reason
// (WaitingForBudget or WaitingForQuota) eligible again; the caller checked
// that the reason cleared. Executions no longer blocked for that reason are
// left alone. It returns how many were unblocked.
func (s *Store) Unblock(ctx context.Context, p int, reason BlockingReason, ids []ExecutionID) (int, error) {
	if reason != WaitingForBudget && reason != WaitingForQuota {
		return 0, invalid("reason", "%q: want %s or %s", reason, WaitingForBudget, WaitingForQuota)
	}
	if len(ids) == 0 {
		return 0, nil
	}
	args := []string{string(reason)}
	for _, id := range ids {
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
}

// UnblockAdmission re-checks up to Limit executions of a flow partition
// blocked for a budget or a quota whose recheck time passed, and makes
// eligible those whose reason cleared: no budget of theirs is at a hard
// limit any more (reset or limit raised), or each of their quota subjects
// has room (its window slid or a slot freed) — at most as many per subject
// as it has room for, so a freed slot does not wake a crowd. Each
// execution is judged by its own references only, so nothing crosses
// namespaces. Read errors unblock nothing. Each blocked index of the
// partition gets a fair share of Limit; More is set only when something was
// unblocked and an index had more due entries (executions that stay
// blocked do not make the scanner hurry).
func (s *Store) UnblockAdmission(ctx context.Context, req AdmissionUnblock) (ScanResult, error) {
	p := req.Partition
	if p < 0 || p >= s.cfg.FlowPartitions {
		return ScanResult{}, invalid("partition", "%d is outside 0..%d", p, s.cfg.FlowPartitions-1)
	}
	if req.Limit < 1 || req.Limit > ScanLimitMax {
		return ScanResult{}, invalid("limit", "%d is outside 1..%d", req.Limit, ScanLimitMax)
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
	var blocked []BlockedExecution
	seen := 0
	type source struct{ ns, lane, index string }
	var sources []source
	for _, l := range lanes {
		if ns, lane, ok := strings.Cut(l, ":"); ok {
			sources = append(sources, source{ns, lane, indexBlockedBudget}, source{ns, lane, indexBlockedQuota})
		}
	}
	// Every index gets a fair share of the limit, so a long line in one
	// lane never starves the others.
	share := max(10, (req.Limit+len(sources)-1)/max(1, len(sources)))
	more := false
	for _, src := range sources {
		ns, lane := src.ns, src.lane
		if seen >= req.Limit {
			more = true
			break
		}
		n := min(share, req.Limit-seen)
		uuids, err := s.c.Do(ctx, s.c.B().Zrangebyscore().Key(s.k.lane(p, ns, lane, src.index)).Min("-inf").
			Max(strconv.FormatInt(now, 10)).Limit(0, int64(n)).Build()).AsStrSlice()
		if err != nil {
			return ScanResult{}, fmt.Errorf("store: read blocked: %w", err)
		}
		seen += len(uuids)
		more = more || len(uuids) >= n
		if len(uuids) == 0 {
			continue
		}
		cmds := make(valkey.Commands, len(uuids))
		for i, u := range uuids {
			cmds[i] = s.c.B().Hmget().Key(s.k.core(p, u)).Field("state", "budgets", "quotas").Build()
		}
		for i, r := range s.c.DoMulti(ctx, cmds...) {
			v, err := r.ToArray()
			if err != nil {
				return ScanResult{}, fmt.Errorf("store: read blocked execution: %w", err)
			}
			st := decodeState(str(v[0]), "")
			if st.BlockingReason != WaitingForBudget && st.BlockingReason != WaitingForQuota {
				continue
			}
			blocked = append(blocked, BlockedExecution{ID: makeID(p, uuids[i]),
				Reason: st.BlockingReason, Budgets: splitList(str(v[1])), Quotas: splitList(str(v[2]))})
		}
	}
	breached := map[string]bool{}
	for _, b := range req.Breached {
		breached[b.BudgetID] = true
	}
	room, err := s.quotaRoom(ctx, blocked, now)
	if err != nil {
		return ScanResult{}, err
	}
	var budgetIDs, quotaIDs []ExecutionID
	for _, b := range blocked {
		switch b.Reason {
		case WaitingForBudget:
			if !req.BudgetsKnown {
				continue
			}
			clear := true
			for _, id := range b.Budgets {
				if breached[id] {
					clear = false
				}
			}
			if clear {
				budgetIDs = append(budgetIDs, b.ID)
			}
		case WaitingForQuota:
			fits := true
			for _, q := range b.Quotas {
				if room[q] <= 0 {
					fits = false
				}
			}
			if fits {
				for _, q := range b.Quotas {
					room[q]--
				}
				quotaIDs = append(quotaIDs, b.ID)
			}
		}
	}
	n1, err := s.Unblock(ctx, p, WaitingForBudget, budgetIDs)
	if err != nil {
		return ScanResult{}, err
	}
	n2, err := s.Unblock(ctx, p, WaitingForQuota, quotaIDs)
	if err != nil {
		return ScanResult{Processed: n1}, err
	}
	return ScanResult{Processed: n1 + n2, More: more && n1+n2 > 0}, nil
}

// quotaRoom returns, for every quota subject of quota-blocked executions,
// how many more admissions it has room for now (0 when undefined).
func (s *Store) quotaRoom(ctx context.Context, blocked []BlockedExecution, now int64) (map[string]int64, error) {
	room := map[string]int64{}
	var subjects []string
	for _, b := range blocked {
		if b.Reason != WaitingForQuota {
			continue
		}
		for _, q := range b.Quotas {
			if _, ok := room[q]; !ok {
				room[q] = 0
				subjects = append(subjects, q)
			}
		}
	}
	if len(subjects) == 0 {
		return room, nil
	}
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
			return nil, fmt.Errorf("store: read quota %s: %w", subjects[i], err)
		}
		if !v[0].IsNil() {
			lim[i] = &limits{atoi64(str(v[0])), atoi64(str(v[1])), atoi64(str(v[2]))}
		}
	}
	cmds := make(valkey.Commands, 0, 2*len(subjects))
	for i, sub := range subjects {
		id, _ := splitSubject(sub)
		k := s.k.quota(s.quotaPart(id), sub)
		w := int64(0)
		if lim[i] != nil {
			w = lim[i].window
		}
		cmds = append(cmds,
			s.c.B().Zcount().Key(k+":window").Min("("+strconv.FormatInt(now-w, 10)).Max("+inf").Build(),
			s.c.B().Zcard().Key(k+":slots").Build())
	}
	rs := s.c.DoMulti(ctx, cmds...)
	for i, sub := range subjects {
		inWindow, err1 := rs[2*i].AsInt64()
		active, err2 := rs[2*i+1].AsInt64()
		if err := errors.Join(err1, err2); err != nil {
			return nil, fmt.Errorf("store: read quota state %s: %w", sub, err)
		}
		if lim[i] == nil {
			continue // undefined: no room
		}
		free := int64(1 << 62)
		if lim[i].rate > 0 {
			free = min(free, lim[i].rate-inWindow)
		}
		if lim[i].cap > 0 {
			free = min(free, lim[i].cap-active)
		}
		room[sub] = free
	}
	return room, nil
}
