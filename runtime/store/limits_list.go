package store

import (
	"context"
	"encoding/base64"
	"fmt"
	"slices"
	"strconv"

	"github.com/flowfabric/ff/compiler/plan"
	"github.com/valkey-io/valkey-go"
)

// Listing budgets and quotas. Every budget partition keeps the ids of its
// budgets in an index (keys.budgetIndex), every quota partition those of
// its quotas (keys.quotaIndex), maintained by the Lua calls that create or
// touch them. A page reads every partition's index from the cursor on, in
// one pipelined round trip of ff_limit_list (each examines at most
// 4·limit+100 ids), merges them in id order, then reads the records of the
// page in one more: O(partitions × limit), however many budgets exist.
const (
	// LimitListDefault is the page size of ListBudgets and ListQuotas when
	// none is given.
	LimitListDefault = 100
	// LimitListMax bounds the page size of ListBudgets and ListQuotas.
	LimitListMax = 1000
	// QuotaListSubjectsMax bounds the key values ListQuotas reads of each
	// keyed quota (the first by key): a page costs at most LimitListMax
	// times that many subject reads.
	QuotaListSubjectsMax = 20
	// QuotaGetSubjectsMax bounds the key values GetQuota reads of a keyed
	// quota (the first by key).
	QuotaGetSubjectsMax = 1000
)

// ListBudgetsOptions filter and page ListBudgets. Empty fields do not
// filter.
type ListBudgetsOptions struct {
	Namespace string // only the budgets of this namespace (not of namespaces under it)
	Scope     string // plan.ScopeShared or plan.ScopeRun
	Cursor    string // NextCursor of the previous page
	Limit     int    // 0 = LimitListDefault; at most LimitListMax
}

// BudgetPage is one page of ListBudgets.
type BudgetPage struct {
	Budgets []Budget
	// NextCursor continues the listing; "" on the last page. A page may
	// hold fewer budgets than the limit, even none, and still have one
	// (filters are applied as the indexes are read, a bounded number of
	// entries per page).
	NextCursor string
}

// ListQuotasOptions filter and page ListQuotas. Empty fields do not filter.
type ListQuotasOptions struct {
	Namespace string // only the quotas of this namespace (not of namespaces under it)
	Cursor    string // NextCursor of the previous page
	Limit     int    // 0 = LimitListDefault; at most LimitListMax
}

// QuotaPage is one page of ListQuotas.
type QuotaPage struct {
	Quotas     []Quota
	NextCursor string // "" on the last page; see BudgetPage.NextCursor
}

// ListBudgets returns one page of budgets, shared and run-scoped, ordered
// by id (byte order), each as GetBudget returns it. Run-scoped budgets
// that expired are never listed.
func (s *Store) ListBudgets(ctx context.Context, o ListBudgetsOptions) (*BudgetPage, error) {
	if o.Scope != "" && o.Scope != plan.ScopeShared && o.Scope != plan.ScopeRun {
		return nil, invalid("scope", "%q: want %q or %q", o.Scope, plan.ScopeShared, plan.ScopeRun)
	}
	indexes := make([]string, s.cfg.BudgetPartitions)
	for m := range indexes {
		indexes[m] = s.k.budgetIndex(m)
	}
	ids, next, err := s.listLimitIDs(ctx, indexes, o.Namespace, o.Scope, o.Cursor, o.Limit, true)
	if err != nil {
		return nil, err
	}
	cmds := make(valkey.Commands, 0, 2*len(ids))
	for _, id := range ids {
		cmds = append(cmds, s.budgetReads(id)...)
	}
	page := &BudgetPage{Budgets: []Budget{}, NextCursor: next}
	if len(cmds) == 0 {
		return page, nil
	}
	resps := s.c.DoMulti(ctx, cmds...)
	for i, id := range ids {
		b, err := budgetFrom(id, resps[2*i], resps[2*i+1])
		if err != nil {
			return nil, err
		}
		if b != nil { // nil: it expired since the index was read
			page.Budgets = append(page.Budgets, *b)
		}
	}
	return page, nil
}

// ListQuotas returns one page of quotas ordered by id (byte order), each
// as GetQuota returns it but with at most QuotaListSubjectsMax subjects of
// a keyed quota (the first by key value; SubjectsMore counts the others).
func (s *Store) ListQuotas(ctx context.Context, o ListQuotasOptions) (*QuotaPage, error) {
	indexes := make([]string, s.cfg.QuotaPartitions)
	for q := range indexes {
		indexes[q] = s.k.quotaIndex(q)
	}
	ids, next, err := s.listLimitIDs(ctx, indexes, o.Namespace, "", o.Cursor, o.Limit, false)
	if err != nil {
		return nil, err
	}
	page := &QuotaPage{Quotas: []Quota{}, NextCursor: next}
	if len(ids) == 0 {
		return page, nil
	}
	// The server's clock; one round trip for the definitions and key
	// values, one for the states of every subject of the page (a cluster
	// client takes no keyless command among commands of several slots).
	now, err := timeOf(s.c.Do(ctx, s.c.B().Time().Build()))
	if err != nil {
		return nil, err
	}
	cmds := make(valkey.Commands, 0, 2*len(ids))
	for _, id := range ids {
		key := s.k.quota(s.quotaPart(id), id)
		cmds = append(cmds, s.c.B().Hgetall().Key(key).Build(), s.keysStep(key, 0))
	}
	resps := s.c.DoMulti(ctx, cmds...)
	type found struct {
		q        *Quota
		subjects []string
	}
	var quotas []found
	var reads valkey.Commands
	for i, id := range ids {
		def, err := resps[2*i].AsStrMap()
		if err != nil {
			return nil, fmt.Errorf("store: read quota %s: %w", id, err)
		}
		if len(def) == 0 {
			continue
		}
		keyVals, err := s.quotaKeys(ctx, s.k.quota(s.quotaPart(id), id), resps[2*i+1])
		if err != nil {
			return nil, fmt.Errorf("store: read quota keys %s: %w", id, err)
		}
		q, subjects := quotaFrom(id, def, keyVals, nil)
		if n := len(subjects); n > QuotaListSubjectsMax {
			q.SubjectsMore, subjects = n-QuotaListSubjectsMax, subjects[:QuotaListSubjectsMax]
		}
		quotas = append(quotas, found{q, subjects})
		reads = append(reads, s.subjectReads(s.quotaPart(id), subjects, q.Window, now)...)
	}
	var states []valkey.ValkeyResult
	if len(reads) > 0 {
		states = s.c.DoMulti(ctx, reads...)
	}
	for _, f := range quotas {
		st, err := subjectStatesFrom(states, len(f.subjects), now)
		if err != nil {
			return nil, err
		}
		states = states[3*len(f.subjects):]
		addSubjects(f.q, f.subjects, st)
		page.Quotas = append(page.Quotas, *f.q)
	}
	return page, nil
}

// listLimitIDs reads one page of ids from the indexes of every partition
// (ff_limit_list) and merges them: the page holds the smallest ids, at
// most limit, that every partition has read up to, and the cursor of the
// next page ("" when every partition reached its end).
func (s *Store) listLimitIDs(ctx context.Context, indexes []string, ns, scope, cursor string, limit int, allowRun bool) ([]string, string, error) {
	if limit == 0 {
		limit = LimitListDefault
	}
	if limit < 1 || limit > LimitListMax {
		return nil, "", invalid("limit", "%d is outside 1..%d", limit, LimitListMax)
	}
	after, err := decodeLimitCursor(cursor, allowRun)
	if err != nil {
		return nil, "", err
	}
	lo, hi, prefix := "-", "+", ""
	if ns != "" {
		if err := checkName("namespace", ns); err != nil {
			return nil, "", err
		}
		// The ids of ns lie in ["<ns>/", "<ns>0"): '0' follows '/'.
		prefix = ns + "/"
		lo, hi = "["+prefix, "("+ns+"0"
	}
	if after != "" && (prefix == "" || after >= prefix) {
		lo = "(" + after
	}
	calls := make([]call, len(indexes))
	for i, idx := range indexes {
		calls[i] = call{fn: "ff_limit_list", keys: []string{idx}, args: []string{lo, hi, strconv.Itoa(limit), prefix, scope}}
	}
	msgs, err := s.fcallMany(ctx, calls)
	if err != nil {
		return nil, "", err
	}
	var ids []string
	bound, bounded := "", false // every partition was read up to bound
	for i, msg := range msgs {
		items, ref, err := envelope(msg)
		if err != nil {
			return nil, "", fmt.Errorf("store: ff_limit_list: %w", err)
		}
		if ref != nil {
			return nil, "", refusalError(ref, "", "list "+indexes[i])
		}
		if len(items) < 2 {
			return nil, "", fmt.Errorf("store: ff_limit_list: malformed reply of %d items", len(items))
		}
		more, _ := items[0].AsInt64()
		if last := str(items[1]); more == 1 && (!bounded || last < bound) {
			bound, bounded = last, true
		}
		for _, m := range items[2:] {
			ids = append(ids, str(m))
		}
	}
	if bounded {
		ids = slices.DeleteFunc(ids, func(id string) bool { return id > bound })
	}
	slices.Sort(ids)
	next := ""
	switch {
	case len(ids) > limit:
		ids = ids[:limit]
		next = encodeLimitCursor(ids[limit-1])
	case bounded:
		next = encodeLimitCursor(bound)
	}
	return ids, next, nil
}

// A cursor of ListBudgets and ListQuotas is the last id the previous page
// covered, base64url-encoded: opaque to clients.
func encodeLimitCursor(id string) string { return base64.RawURLEncoding.EncodeToString([]byte(id)) }

func decodeLimitCursor(c string, allowRun bool) (string, error) {
	if c == "" {
		return "", nil
	}
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err == nil {
		_, _, _, err = splitResourceID("cursor", string(b), allowRun)
	}
	if err != nil {
		return "", invalid("cursor", "%q is not a cursor this listing returned", clip(c, 64))
	}
	return string(b), nil
}
