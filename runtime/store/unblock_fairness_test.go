package store

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/valkey-io/valkey-go"
)

// A budget-blocked execution whose budget was reset is unblocked even when
// more executions than the unblock share (Limit/indexes) sit ahead of it
// in the lane's blocked_budget index, blocked by another budget that is
// still at its hard limit: the passes' cursor moves past the entries
// looked at that stay blocked, so the next pass reads the ones behind them.
func TestUnblockBudgetNotStarvedBehindStillBreached(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *Config) { c.FlowPartitions = 1 })
	for _, id := range []string{"default/a", "default/b"} {
		if _, err := e.s.UpsertBudget(e.ctx, BudgetSpec{ID: id, Dimensions: []BudgetDimension{{Name: "n", Hard: 1}}}); err != nil {
			t.Fatal(err)
		}
		if _, err := e.s.ReportUsage(e.ctx, id, "n", 1, ""); err != nil {
			t.Fatal(err)
		}
	}
	const ahead = 60 // more than the share of one lane's blocked_budget index (Limit 100 / 2 indexes)
	for range ahead {
		e.create(CreateRequest{Budgets: []string{"a"}})
	}
	if g := e.claimAdm(worker1, MaxClaim, time.Minute); len(g) != 0 {
		t.Fatalf("granted %v", grantIDs(g))
	}
	time.Sleep(5 * time.Millisecond) // x is blocked after the others (a later score)
	x := e.create(CreateRequest{Budgets: []string{"b"}})
	if g := e.claimAdm(worker1, MaxClaim, time.Minute); len(g) != 0 {
		t.Fatalf("granted %v", grantIDs(g))
	}
	e.wantState(x.ID, StateBlocked)
	if _, err := e.s.ResetBudget(e.ctx, "default/b"); err != nil {
		t.Fatal(err)
	}
	// The unblock scanner runs every second with Limit 100 (LimitDefault),
	// keeping its cursor across passes (unblockAll keeps the env's): a few
	// passes are plenty.
	e.wantWaitingAfterUnblocks(x.ID, 5, fmt.Sprintf("%d executions of a budget still at its hard limit", ahead))
}

// The same for quotas: executions of a keyed quota's busy key fill the
// head of blocked_quota, and another key's blocked execution, whose slot
// is free again, is still reached (spec/runtime.md: a rate-limited key
// never holds up the others).
func TestUnblockQuotaNotStarvedBehindBusyKey(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *Config) { c.FlowPartitions = 1 })
	if _, err := e.s.UpsertQuota(e.ctx, QuotaSpec{ID: "default/t", Concurrency: 1, Key: "tenant"}); err != nil {
		t.Fatal(err)
	}
	mk := func(tenant string) *Execution {
		return e.create(CreateRequest{Quotas: []string{"t"}, Payload: []byte(`{"tenant":"` + tenant + `"}`)})
	}
	// b1 holds b's slot; b2 is blocked behind it.
	b1 := mk("b")
	g := e.claimAdm(worker1, 1, time.Minute)
	if len(g) != 1 || g[0].ExecutionID != b1.ID {
		t.Fatalf("granted %v", grantIDs(g))
	}
	// a1 holds a's slot; 60 more of a's are blocked.
	a1 := mk("a")
	ga := e.claimAdm(worker1, 1, time.Minute)
	if len(ga) != 1 || ga[0].ExecutionID != a1.ID {
		t.Fatalf("granted %v", grantIDs(ga))
	}
	const ahead = 60
	for range ahead {
		mk("a")
	}
	if g := e.claimAdm(worker1, MaxClaim, time.Minute); len(g) != 0 {
		t.Fatalf("granted %v", grantIDs(g))
	}
	time.Sleep(5 * time.Millisecond)
	b2 := mk("b")
	if g := e.claimAdm(worker1, MaxClaim, time.Minute); len(g) != 0 {
		t.Fatalf("granted %v", grantIDs(g))
	}
	e.wantState(b2.ID, StateBlocked)
	if err := e.s.Complete(e.ctx, g[0].Lease, nil); err != nil { // b's slot is free
		t.Fatal(err)
	}
	e.drain()
	e.wantWaitingAfterUnblocks(b2.ID, 5, fmt.Sprintf("%d blocked executions of key a", ahead))
}

// The same for capability parking: executions parked for a capability no
// worker will bring fill the head of the route-blocked index, and one
// parked for a capability a worker now has is still promoted by the
// unblock scanner's calls (Limit 100, one cursor across the calls).
func TestUnblockRouteNotStarvedBehindUncoverable(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *Config) { c.FlowPartitions = 1 })
	park := func() {
		g, err := e.s.Claim(e.ctx, ClaimRequest{Partition: 0, Lanes: []string{"default"}, Worker: worker1, Max: MaxClaim,
			LeaseTTL: time.Minute, RouteBlocking: true})
		if err != nil || len(g) != 0 {
			t.Fatalf("claim: %v %v", grantIDs(g), err)
		}
	}
	const ahead = 110
	for range ahead {
		e.create(CreateRequest{RequiredCapabilities: []string{"quantum"}})
	}
	park()
	time.Sleep(5 * time.Millisecond)
	x := e.create(CreateRequest{RequiredCapabilities: []string{"gpu"}})
	park()
	e.wantState(x.ID, StateBlocked)
	// A gpu worker connects: the union now covers x.
	var cursor UnblockCursor
	for range 5 {
		res, err := e.s.UnblockRoute(e.ctx, 0, "default", []string{"gpu"}, 100, &cursor)
		if err != nil {
			t.Fatal(err)
		}
		if res.Processed == 0 && res.More {
			t.Fatalf("a call that promoted nothing asks to hurry: %+v", res)
		}
	}
	if got := e.get(x.ID).State.Public; got != StateWaiting {
		t.Fatalf("x (needs gpu) is %s after 5 route unblock passes with gpu connected, want waiting "+
			"(starved behind %d executions needing a capability nobody has)", got, ahead)
	}
	// Those nobody can run are all still parked.
	n, err := e.c.Do(e.ctx, e.c.B().Zcard().Key(e.s.k.lane(0, "default", "default", "blocked")).Build()).AsInt64()
	if err != nil || n != ahead {
		t.Fatalf("route-blocked index holds %d (%v), want %d", n, err, ahead)
	}
}

// Unblock passes move no entry that stays blocked: the blocked_budget and
// route-blocked indexes hold the same entries with the same scores after
// passes that read them all, a share at a time, and left them blocked (so
// listings that page by position and the park log see a stable index).
func TestUnblockPassesLeaveParkedEntriesInPlace(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *Config) { c.FlowPartitions = 1 })
	if _, err := e.s.UpsertBudget(e.ctx, BudgetSpec{ID: "default/a", Dimensions: []BudgetDimension{{Name: "n", Hard: 1}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.s.ReportUsage(e.ctx, "default/a", "n", 1, ""); err != nil {
		t.Fatal(err)
	}
	const budgetBlocked, parked = 120, 130 // more than one pass's share (Limit 100)
	for range budgetBlocked {
		e.create(CreateRequest{Budgets: []string{"a"}})
	}
	if g := e.claimAdm(worker1, MaxClaim, time.Minute); len(g) != 0 {
		t.Fatalf("granted %v", grantIDs(g))
	}
	for range parked {
		e.create(CreateRequest{RequiredCapabilities: []string{"quantum"}})
	}
	if g, err := e.s.Claim(e.ctx, ClaimRequest{Partition: 0, Lanes: []string{"default"}, Worker: worker1, Max: MaxClaim,
		LeaseTTL: time.Minute, RouteBlocking: true}); err != nil || len(g) != 0 {
		t.Fatalf("claim: %v %v", grantIDs(g), err)
	}
	budgetIndex := e.s.k.lane(0, "default", "default", indexBlockedBudget)
	routeIndex := e.s.k.lane(0, "default", "default", indexBlocked)
	snapshot := func(key string) []valkey.ZScore {
		t.Helper()
		zs, err := e.c.Do(e.ctx, e.c.B().Zrange().Key(key).Min("0").Max("-1").Withscores().Build()).AsZScores()
		if err != nil {
			t.Fatal(err)
		}
		return zs
	}
	budgetBefore, routeBefore := snapshot(budgetIndex), snapshot(routeIndex)
	if len(budgetBefore) != budgetBlocked || len(routeBefore) != parked {
		t.Fatalf("%d budget-blocked, %d route-parked; want %d and %d", len(budgetBefore), len(routeBefore), budgetBlocked, parked)
	}
	time.Sleep(2 * time.Millisecond) // a write would change the scores
	var route UnblockCursor
	advanced := false // a pass left the budget index's cursor past its head
	for range 4 {
		if n := e.unblockAll(); n != 0 {
			t.Fatalf("unblocked %d, want 0 (default/a is still at its hard limit)", n)
		}
		advanced = advanced || e.cursor.at(budgetIndex).off > 0
		if res, err := e.s.UnblockRoute(e.ctx, 0, "default", []string{"gpu"}, 100, &route); err != nil || res.Processed != 0 {
			t.Fatalf("UnblockRoute = %+v, %v; want nothing promoted", res, err)
		}
	}
	if !advanced {
		t.Fatalf("no pass read a full share of the %d due budget-blocked entries", budgetBlocked)
	}
	if diff := cmp.Diff(budgetBefore, snapshot(budgetIndex)); diff != "" {
		t.Fatalf("unblock passes moved budget-blocked entries (-before +after):\n%s", diff)
	}
	if diff := cmp.Diff(routeBefore, snapshot(routeIndex)); diff != "" {
		t.Fatalf("route unblock calls moved parked entries (-before +after):\n%s", diff)
	}
}

// A stale cursor (its offsets past the end of the indexes, as after
// another process unblocked many of them) only changes which entries a
// pass looks at first: the pass that reads nothing sends the next one back
// to the head, which promotes what cleared.
func TestUnblockStaleCursorStartsOver(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *Config) { c.FlowPartitions = 1 })
	if _, err := e.s.UpsertBudget(e.ctx, BudgetSpec{ID: "default/b", Dimensions: []BudgetDimension{{Name: "n", Hard: 1}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.s.ReportUsage(e.ctx, "default/b", "n", 1, ""); err != nil {
		t.Fatal(err)
	}
	b := e.create(CreateRequest{Budgets: []string{"b"}})
	if g := e.claimAdm(worker1, 1, time.Minute); len(g) != 0 {
		t.Fatalf("granted %v", grantIDs(g))
	}
	r := e.create(CreateRequest{RequiredCapabilities: []string{"gpu"}})
	if g, err := e.s.Claim(e.ctx, ClaimRequest{Partition: 0, Lanes: []string{"default"}, Worker: worker1, Max: 1,
		LeaseTTL: time.Minute, RouteBlocking: true}); err != nil || len(g) != 0 {
		t.Fatalf("claim: %v %v", grantIDs(g), err)
	}
	e.wantState(b.ID, StateBlocked)
	e.wantState(r.ID, StateBlocked)
	if _, err := e.s.ResetBudget(e.ctx, "default/b"); err != nil {
		t.Fatal(err)
	}
	e.cursor.set(e.s.k.lane(0, "default", "default", indexBlockedBudget), lap{off: 1000, end: 2000})
	var route UnblockCursor
	route.setRouteLap(routeGroup{0, "default"}, "default", lap{off: 1000, end: 2000})
	unblocked, promoted := 0, 0
	for range 2 {
		unblocked += e.unblockAll()
		res, err := e.s.UnblockRoute(e.ctx, 0, "default", []string{"gpu"}, 100, &route)
		if err != nil {
			t.Fatal(err)
		}
		promoted += res.Processed
	}
	if unblocked != 1 || promoted != 1 {
		t.Fatalf("two passes from a stale cursor unblocked %d and promoted %d, want 1 and 1", unblocked, promoted)
	}
	e.wantState(b.ID, StateWaiting)
	e.wantState(r.ID, StateWaiting)
	if len(e.cursor.offsets) != 0 || len(route.lanes) != 0 {
		t.Fatalf("cursors keep offsets %v and %v after reading every index to its end, want none", e.cursor.offsets, route.lanes)
	}
}

// ReconcileQuotaSlots frees a leaked slot even when more slots of
// long-running (live) attempts than its limit are due before it: the live
// slots it checked are re-scored, so the next pass starts with the others.
func TestReconcileReachesLeakedSlotBehindLiveSlots(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *Config) { c.FlowPartitions = 1; c.QuotaPartitions = 1 })
	for _, id := range []string{"default/a", "default/b"} {
		if _, err := e.s.UpsertQuota(e.ctx, QuotaSpec{ID: id, Concurrency: 10}); err != nil {
			t.Fatal(err)
		}
	}
	// Two long-running attempts under default/a (sorted first).
	e.create(CreateRequest{Quotas: []string{"a"}})
	e.create(CreateRequest{Quotas: []string{"a"}})
	if g := e.claimAdm(worker1, 2, time.Hour); len(g) != 2 {
		t.Fatalf("granted %v", grantIDs(g))
	}
	// A leaked admission under default/b (a scheduler died before its claim).
	orphan := e.create(CreateRequest{Quotas: []string{"b"}})
	if r, err := e.s.AdmitQuota(e.ctx, "default/b", Admitted{ExecutionID: orphan.ID, Attempt: 1, Token: "dead"}); err != nil || !r.Admitted {
		t.Fatalf("AdmitQuota = %+v, %v", r, err)
	}
	if _, err := e.s.Cancel(e.ctx, orphan.ID, "gone"); err != nil {
		t.Fatal(err)
	}
	const limit = 2
	freed := 0
	for range 10 {
		r, err := e.s.ReconcileQuotaSlots(e.ctx, 0, 0, limit)
		if err != nil {
			t.Fatal(err)
		}
		freed += r.Processed
	}
	if q := e.quota("default/b"); freed != 1 || q.Subjects[0].Active != 0 {
		t.Fatalf("after 10 reconcile passes (limit %d): freed %d, default/b active %d; want the leaked slot freed",
			limit, freed, q.Subjects[0].Active)
	}
	if q := e.quota("default/a"); q.Subjects[0].Active != 2 {
		t.Fatalf("default/a active %d, want its 2 running attempts' slots kept", q.Subjects[0].Active)
	}
}

// The reconciler reports More only while due slots are left unchecked:
// the live slots it checked are not due again until the grace passes, so
// it does not make the scanner hurry over them.
func TestReconcileMoreOnlyWhileDueSlotsLeft(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *Config) { c.FlowPartitions = 1; c.QuotaPartitions = 1 })
	if _, err := e.s.UpsertQuota(e.ctx, QuotaSpec{ID: "default/a", Concurrency: 10}); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		e.create(CreateRequest{Quotas: []string{"a"}})
	}
	if g := e.claimAdm(worker1, 3, time.Hour); len(g) != 3 {
		t.Fatalf("granted %v", grantIDs(g))
	}
	// The slots were admitted an hour ago (long-running attempts).
	slots := e.s.k.quota(0, "default/a") + ":slots"
	hs, err := e.c.Do(e.ctx, e.c.B().Zrange().Key(slots).Min("0").Max("-1").Build()).AsStrSlice()
	if err != nil || len(hs) != 3 {
		t.Fatalf("slots %v, %v", hs, err)
	}
	old := float64(time.Now().Add(-time.Hour).UnixMilli())
	z := e.c.B().Zadd().Key(slots).Xx().ScoreMember()
	for _, h := range hs {
		z = z.ScoreMember(old, h)
	}
	if err := e.c.Do(e.ctx, z.Build()).Error(); err != nil {
		t.Fatal(err)
	}
	var got []ScanResult
	for range 3 {
		r, err := e.s.ReconcileQuotaSlots(e.ctx, 0, time.Minute, 2)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, r)
	}
	want := []ScanResult{{More: true}, {}, {}} // 3 due, 2 checked; then 1; then none
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("reconcile passes (-want +got):\n%s", diff)
	}
	if q := e.quota("default/a"); q.Subjects[0].Active != 3 {
		t.Fatalf("active %d, want the running attempts' 3 slots kept", q.Subjects[0].Active)
	}
	// Every slot was checked once: each is now scored at its check, not an
	// hour ago.
	zs, err := e.c.Do(e.ctx, e.c.B().Zrange().Key(slots).Min("0").Max("-1").Withscores().Build()).AsZScores()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range zs {
		if s.Score <= old {
			t.Fatalf("slot %s still scored %v after its check", s.Member, s.Score)
		}
	}
}

// spec/runtime.md, Unblocking: a quota-blocked execution is promoted "at
// most as many per subject as it has room for, so one freed slot wakes one
// execution, not a crowd" — across the flow partitions of one pass, which
// share one QuotaRoom.
func TestOneFreedSlotWakesOneAcrossPartitions(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *Config) { c.FlowPartitions = 4 })
	if _, err := e.s.UpsertQuota(e.ctx, QuotaSpec{ID: "default/one", Concurrency: 1}); err != nil {
		t.Fatal(err)
	}
	parts := map[int]int{}
	for i := range 24 {
		// Idempotency keys spread them over the partitions (without one,
		// executions are placed in streaks).
		x := e.create(CreateRequest{Quotas: []string{"one"}, IdempotencyKey: fmt.Sprintf("k%d", i)})
		p, _ := x.ID.Partition()
		parts[p]++
	}
	g := e.claimAdm(worker1, MaxClaim, time.Minute)
	if len(g) != 1 {
		t.Fatalf("granted %v, want one", grantIDs(g))
	}
	// Every other one is blocked (a partition's second claim may leave
	// some eligible; claim again until all are blocked).
	for range 3 {
		if more := e.claimAdm(worker1, MaxClaim, time.Minute); len(more) != 0 {
			t.Fatalf("granted %v while the slot is held", grantIDs(more))
		}
	}
	if err := e.s.Complete(e.ctx, g[0].Lease, nil); err != nil {
		t.Fatal(err)
	}
	e.drain()
	blockedIn := map[int]int{}
	for p := range e.s.FlowPartitions() {
		n, _ := e.c.Do(e.ctx, e.c.B().Zcard().Key(e.s.k.lane(p, "default", "default", indexBlockedQuota)).Build()).AsInt64()
		blockedIn[p] = int(n)
	}
	t.Logf("blocked per partition %v", blockedIn)
	if n := e.unblockAll(); n != 1 {
		t.Fatalf("one freed slot of default/one (concurrency 1) woke %d blocked executions (partitions used: %v), want 1", n, parts)
	}
}

// ff_unblock and ff_unblock_route check their arguments before writing
// anything: a refused call leaves a blocked execution and its index entry
// as they were.
func TestUnblockFunctionsValidateBeforeWriting(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *Config) { c.FlowPartitions = 1 })
	if _, err := e.s.UpsertBudget(e.ctx, BudgetSpec{ID: "default/b", Dimensions: []BudgetDimension{{Name: "n", Hard: 1}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.s.ReportUsage(e.ctx, "default/b", "n", 1, ""); err != nil {
		t.Fatal(err)
	}
	x := e.create(CreateRequest{Budgets: []string{"b"}})
	if g := e.claimAdm(worker1, 1, time.Minute); len(g) != 0 {
		t.Fatalf("granted %v", grantIDs(g))
	}
	e.wantState(x.ID, StateBlocked)
	_, uuid, _ := splitID(string(x.ID))
	index := e.s.k.lane(0, "default", "default", indexBlockedBudget)
	snapshot := func() []valkey.ZScore {
		t.Helper()
		zs, err := e.c.Do(e.ctx, e.c.B().Zrange().Key(index).Min("0").Max("-1").Withscores().Build()).AsZScores()
		if err != nil {
			t.Fatal(err)
		}
		return zs
	}
	before := snapshot()
	time.Sleep(2 * time.Millisecond) // a write would change the score
	for _, tc := range []struct {
		fn    string
		args  []string
		field string
	}{
		{"ff_unblock", []string{"waiting_for_capable_worker", "0", uuid}, "reason"},
		{"ff_unblock", []string{"bogus", "1", uuid}, "reason"},
		{"ff_unblock", []string{"waiting_for_budget", "x", uuid}, "count"},
		{"ff_unblock", []string{"waiting_for_budget", "-1", uuid}, "count"},
		{"ff_unblock", []string{"waiting_for_budget", "0.5", uuid}, "count"},
		{"ff_unblock", []string{"waiting_for_budget", "2", uuid}, "count"},
		{"ff_unblock_route", []string{"0", "default", "gpu"}, "limit"},
		{"ff_unblock_route", []string{"1001", "default", "gpu"}, "limit"},
		{"ff_unblock_route", []string{"ten", "default", "gpu"}, "limit"},
		{"ff_unblock_route", []string{"10", "default", "gpu", "default"}, "offsets"},
		{"ff_unblock_route", []string{"10", "default", "gpu", "default", "1"}, "offsets"},
		{"ff_unblock_route", []string{"10", "default", "gpu", "default", "-1", "5"}, "offsets"},
		{"ff_unblock_route", []string{"10", "default", "gpu", "default", "1.5", "5"}, "offsets"},
		{"ff_unblock_route", []string{"10", "default", "gpu", "default", "x", "5"}, "offsets"},
		{"ff_unblock_route", []string{"10", "default", "gpu", "default", "4294967296", "5"}, "offsets"},
		{"ff_unblock_route", []string{"10", "default", "gpu", "default", "1", "-1"}, "offsets"},
		{"ff_unblock_route", []string{"10", "default", "gpu", "default", "1", "2.5"}, "offsets"},
		{"ff_unblock_route", []string{"10", "default", "gpu", "default", "1", "4294967296"}, "offsets"},
		{"ff_unblock_route", []string{"10", "default", "gpu", "a", "0", "0", "default", "inf", "5"}, "offsets"},
		{"ff_unblock_route", []string{"10", "default", "gpu", "a", "0", "0", "default", "1", "inf"}, "offsets"},
	} {
		_, err := e.s.single(e.ctx, call{fn: tc.fn, partition: 0, args: tc.args}, "", "test")
		var ve *ValidationError
		if !errors.As(err, &ve) || ve.Field != tc.field {
			t.Errorf("%s %v = %v, want a validation error of field %s", tc.fn, tc.args, err, tc.field)
		}
	}
	if diff := cmp.Diff(before, snapshot()); diff != "" {
		t.Fatalf("refused calls changed the blocked index (-before +after):\n%s", diff)
	}
	e.wantState(x.ID, StateBlocked)
	// The same execution passed as a stale entry while it is blocked for
	// the reason after all: it keeps its entry, score unchanged.
	if _, err := e.s.single(e.ctx, call{fn: "ff_unblock", partition: 0, args: []string{"waiting_for_budget", "0", uuid}}, "", "test"); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(before, snapshot()); diff != "" {
		t.Fatalf("ff_unblock changed the entry of an execution that stays blocked (-before +after):\n%s", diff)
	}
	e.wantState(x.ID, StateBlocked)
}

// The route unblock gives every lane of the namespace a share of its
// limit: a lane full of executions nobody can run never takes the whole
// limit on every call and hides another lane's execution that a worker
// now covers.
func TestUnblockRouteSharesLimitAcrossLanes(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *Config) { c.FlowPartitions = 1 })
	var xs []*Execution
	for _, lane := range []string{"a", "b"} {
		for range 120 {
			e.create(CreateRequest{Lane: lane, RequiredCapabilities: []string{"quantum"}})
		}
		g, err := e.s.Claim(e.ctx, ClaimRequest{Partition: 0, Lanes: []string{lane}, Worker: worker1, Max: MaxClaim,
			LeaseTTL: time.Minute, RouteBlocking: true})
		if err != nil || len(g) != 0 {
			t.Fatalf("claim: %v %v", grantIDs(g), err)
		}
		time.Sleep(5 * time.Millisecond) // x is parked after the others
		x := e.create(CreateRequest{Lane: lane, RequiredCapabilities: []string{"gpu"}})
		if g, err := e.s.Claim(e.ctx, ClaimRequest{Partition: 0, Lanes: []string{lane}, Worker: worker1, Max: MaxClaim,
			LeaseTTL: time.Minute, RouteBlocking: true}); err != nil || len(g) != 0 {
			t.Fatalf("claim: %v %v", grantIDs(g), err)
		}
		e.wantState(x.ID, StateBlocked)
		xs = append(xs, x)
	}
	// Each lane has 121 parked; with half of the limit each, a lane's
	// whole index is looked at in three calls sharing a cursor.
	var cursor UnblockCursor
	for range 6 {
		if _, err := e.s.UnblockRoute(e.ctx, 0, "default", []string{"gpu"}, 100, &cursor); err != nil {
			t.Fatal(err)
		}
	}
	for _, x := range xs {
		if got := e.get(x.ID).State.Public; got != StateWaiting {
			t.Fatalf("x of lane %s is %s after 6 route unblock calls, want waiting", x.Lane, got)
		}
	}
}

// UnblockAdmission heals its indexes: an entry whose execution is not
// blocked for the index's reason, or has no record, leaves the index
// instead of taking a place at its head on every pass.
func TestUnblockAdmissionHealsStaleEntries(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *Config) { c.FlowPartitions = 1 })
	x := e.create(CreateRequest{}) // waiting: not blocked at all
	_, uuid, _ := splitID(string(x.ID))
	index := e.s.k.lane(0, "default", "default", indexBlockedBudget)
	if err := e.c.Do(e.ctx, e.c.B().Zadd().Key(index).ScoreMember().ScoreMember(1, uuid).ScoreMember(1, "no-such-record").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	if n := e.unblockAll(); n != 0 {
		t.Fatalf("unblocked %d, want 0 (nothing is blocked)", n)
	}
	if n, err := e.c.Do(e.ctx, e.c.B().Zcard().Key(index).Build()).AsInt64(); err != nil || n != 0 {
		t.Fatalf("blocked_budget holds %d stale entries (%v), want none", n, err)
	}
	e.wantState(x.ID, StateWaiting)
}

// Unblock passes sharing a cursor reach the head of a blocked line again
// while it grows at its tail by a share per pass: each lap ends where the
// index ended when the lap started, so x, at the head, read once while its
// budget was still at its hard limit and reset since, is unblocked within
// a lap even though every read fills its share with the executions of a
// budget still at its limit that keep being blocked behind it.
func TestUnblockCursorReachesHeadWhileLineGrows(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *Config) { c.FlowPartitions = 1 })
	for _, id := range []string{"default/a", "default/b"} {
		if _, err := e.s.UpsertBudget(e.ctx, BudgetSpec{ID: id, Dimensions: []BudgetDimension{{Name: "n", Hard: 1}}}); err != nil {
			t.Fatal(err)
		}
		if _, err := e.s.ReportUsage(e.ctx, id, "n", 1, ""); err != nil {
			t.Fatal(err)
		}
	}
	block := func(n int, budget string) []ExecutionID {
		var ids []ExecutionID
		for range n {
			ids = append(ids, e.create(CreateRequest{Budgets: []string{budget}}).ID)
		}
		if g := e.claimAdm(worker1, MaxClaim, time.Minute); len(g) != 0 {
			t.Fatalf("granted %v", grantIDs(g))
		}
		time.Sleep(3 * time.Millisecond) // later blocks get later scores
		return ids
	}
	const limit = 2 // the blocked_budget share is 1 or 2 (two indexes, rotating)
	pass := func() int {
		breached, err := e.s.BreachedBudgets(e.ctx)
		if err != nil {
			t.Fatal(err)
		}
		res, err := e.s.UnblockAdmission(e.ctx, AdmissionUnblock{Partition: 0, Limit: limit, Breached: breached,
			BudgetsKnown: true, Cursor: &e.cursor})
		if err != nil {
			t.Fatal(err)
		}
		return res.Processed
	}
	x := block(1, "b")[0]
	block(limit, "a")
	e.wantState(x, StateBlocked)
	pass() // reads x (still breached): the cursor moves past it
	if _, err := e.s.ResetBudget(e.ctx, "default/b"); err != nil {
		t.Fatal(err)
	}
	// The first lap ends at the 1+limit entries blocked when it started; a
	// pass reads at least one of them, so the lap after it, which reads x
	// first, starts within limit passes (one more to spare).
	const passes = limit + 2
	for range passes {
		block(limit, "a") // a steady stream of submissions to a budget at its limit
		if pass() > 0 {   // only x can be unblocked: default/a stays at its limit
			e.wantState(x, StateWaiting)
			return
		}
	}
	t.Fatalf("x (budget reset) is %s after %d unblock passes, want waiting: the cursor (laps %v) chases "+
		"the growing tail of blocked_budget and never returns to the head", e.get(x).State.Public, passes, e.cursor.offsets)
}

// Route unblock calls sharing a cursor reach the head of a lane's
// route-blocked index again while it grows at its tail by a share per
// call: x, parked at the head and looked at once before a gpu worker's
// capabilities covered it, is promoted within a lap even though
// executions needing a capability nobody has keep being parked behind it.
func TestUnblockRouteCursorReachesHeadWhileLineGrows(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *Config) { c.FlowPartitions = 1 })
	park := func(n int, capability string) []ExecutionID {
		var ids []ExecutionID
		for range n {
			ids = append(ids, e.create(CreateRequest{RequiredCapabilities: []string{capability}}).ID)
		}
		g, err := e.s.Claim(e.ctx, ClaimRequest{Partition: 0, Lanes: []string{"default"}, Worker: worker1, Max: MaxClaim,
			LeaseTTL: time.Minute, RouteBlocking: true})
		if err != nil || len(g) != 0 {
			t.Fatalf("claim: %v %v", grantIDs(g), err)
		}
		time.Sleep(3 * time.Millisecond)
		return ids
	}
	const limit = 5
	var cursor UnblockCursor
	call := func(union string) {
		if _, err := e.s.UnblockRoute(e.ctx, 0, "default", []string{union}, limit, &cursor); err != nil {
			t.Fatal(err)
		}
	}
	x := park(1, "gpu")[0]
	park(limit, "quantum")
	e.wantState(x, StateBlocked)
	call("cpu") // nobody covers x yet: the cursor moves past it
	// The first lap ended at the 1+limit entries parked when it started:
	// the next call reads past its end and the one after reads x first.
	const calls = 3 // one to spare
	for range calls {
		park(limit, "quantum")
		if res, err := e.s.UnblockRoute(e.ctx, 0, "default", []string{"gpu"}, limit, &cursor); err != nil {
			t.Fatal(err)
		} else if res.Processed > 0 { // only x can be promoted: nobody has quantum
			e.wantState(x, StateWaiting)
			return
		}
	}
	t.Fatalf("x (needs gpu, covered) is %s after %d route unblock calls, want waiting: the cursor (laps %v) chases "+
		"the growing tail of the route-blocked index and never returns to the head", e.get(x).State.Public, calls, cursor.lanes)
}

// A route unblock read that fills its share with the last entries of a
// lane ends its lap: the next call starts again at the head (not past the
// end of the lane, reading nothing), so x, at the head and covered since
// the second call, is promoted by that call.
func TestUnblockRouteReadEndingAtLaneEndReturnsToHead(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *Config) { c.FlowPartitions = 1 })
	park := func(capability string) ExecutionID {
		id := e.create(CreateRequest{RequiredCapabilities: []string{capability}}).ID
		g, err := e.s.Claim(e.ctx, ClaimRequest{Partition: 0, Lanes: []string{"default"}, Worker: worker1, Max: MaxClaim,
			LeaseTTL: time.Minute, RouteBlocking: true})
		if err != nil || len(g) != 0 {
			t.Fatalf("claim: %v %v", grantIDs(g), err)
		}
		time.Sleep(3 * time.Millisecond)
		return id
	}
	x := park("gpu")
	park("quantum")
	var cursor UnblockCursor
	// The first call reads both entries (the whole lane) and leaves them.
	if _, err := e.s.UnblockRoute(e.ctx, 0, "default", []string{"cpu"}, 2, &cursor); err != nil {
		t.Fatal(err)
	}
	// A gpu worker is there now: the next call must read x.
	res, err := e.s.UnblockRoute(e.ctx, 0, "default", []string{"gpu"}, 2, &cursor)
	if err != nil {
		t.Fatal(err)
	}
	if res.Processed != 1 {
		t.Fatalf("the call after a read that reached the end of the lane promoted %d, want 1 (x at the head); "+
			"the cursor after the first call: %v", res.Processed, cursor.lanes)
	}
	e.wantState(x, StateWaiting)
}

// A lap goes on past the entries read that stay blocked, its end moving
// back by those that left the index, and a read that is short or reaches
// the lap's end (exactly or beyond) starts a new lap at the head: the next
// read never starts at or past the end of what the lap covers.
func TestUnblockLapNext(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		at         lap
		n, leaving int
		full       bool
		want       lap
	}{
		{lap{0, 10}, 4, 0, true, lap{4, 10}},
		{lap{4, 10}, 4, 1, true, lap{7, 9}},   // one unblocked: the rest slid down by one
		{lap{0, 10}, 4, 4, true, lap{}},       // all four left: the head moved up to the offset
		{lap{8, 10}, 2, 0, true, lap{}},       // the read ended exactly at the lap's end
		{lap{8, 10}, 4, 1, true, lap{}},       // the read went past the lap's end
		{lap{4, 10}, 3, 0, false, lap{}},      // short read: the end of the (due) entries
		{lap{1000, 2000}, 0, 0, false, lap{}}, // stale offset past the end of the index
	} {
		if got := tc.at.next(tc.n, tc.leaving, tc.full); got != tc.want {
			t.Errorf("%+v.next(%d, %d, %t) = %+v, want %+v", tc.at, tc.n, tc.leaving, tc.full, got, tc.want)
		}
	}
}

// wantWaitingAfterUnblocks runs passes unblock passes (the scanner's limit,
// one cursor across them) and fails unless id is then waiting; behind says
// what it would be starved behind.
func (e *env) wantWaitingAfterUnblocks(id ExecutionID, passes int, behind string) {
	e.t.Helper()
	for range passes {
		e.unblockAll()
	}
	if got := e.get(id).State.Public; got != StateWaiting {
		e.t.Fatalf("%s is %s after %d unblock passes, want waiting (starved behind %s)", id, got, passes, behind)
	}
}
