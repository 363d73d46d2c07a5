package store

import (
	"testing"
	"time"

	"github.com/flowfabric/ff/compiler/plan"
	"github.com/google/go-cmp/cmp"
)

// ClaimAdmitted admits a flow member with quotas over several calls (the
// claim, ff_resolve_quotas, ff_quota_admit, ff_block, the admitted claim).
// A run cancelled and replayed between two of them resets the member to
// the very attempt number and deferred quota references it had, so the
// later calls tell it apart by its reset count (field resets), which the
// replay moves. These tests put the cancel and replay of another caller
// between two calls (hookedStore).

// cancelReplay cancels run id and replays it.
func (e *env) cancelReplay(id RunID) {
	e.t.Helper()
	if _, err := e.s.CancelRun(e.ctx, id, "stop"); err != nil {
		e.t.Fatal(err)
	}
	if _, err := e.s.ReplayRun(e.ctx, id); err != nil {
		e.t.Fatal(err)
	}
}

// acmeMember stages a run u -> m, m admitted by quota per_tenant
// (concurrency 1, keyed by its input's tenant), claims u and completes it
// with the output {"tenant":"acme"}: m is eligible, its deferred key about
// to be read by the next claim.
func (e *env) acmeMember() (*Run, map[string]ExecutionID) {
	e.t.Helper()
	x := execs("u", "m")
	x[1].Quotas = []string{"per_tenant"}
	fl := flowOf("q", x, "u->m")
	fl.QuotaDefs = []plan.Quota{{Name: "per_tenant", Concurrency: 1, Key: "tenant"}}
	r := e.stage(fl, `{}`)
	ids := nodeIDs(r)
	gs := e.claimAdm(worker1, 1, time.Minute)
	if len(gs) != 1 || gs[0].ExecutionID != ids["u"] {
		e.t.Fatalf("claim = %v, want u", grantIDs(gs))
	}
	if err := e.s.Complete(e.ctx, gs[0].Lease, []byte(`{"tenant":"acme"}`)); err != nil {
		e.t.Fatal(err)
	}
	return r, ids
}

// A member's deferred quota key read from its input by a claim is not
// stored once a replay reset the member (its deferred reference back, its
// input about to change): its next attempt is keyed by the input it gets
// after the replay.
func TestDeferredQuotaKeyIsNotStoredAfterAReplayResetTheMember(t *testing.T) {
	t.Parallel()
	e := onePartition(t)
	x := execs("f", "u", "m")
	x[1].InputFrom = plan.InputNone
	x[2].Quotas = []string{"per_tenant"}
	// u runs on f's failure, so that a replay (of the run f failed) runs u
	// again, and m with it.
	fl := flowOf("q", x, "f->u on failure", "u->m")
	fl.QuotaDefs = []plan.Quota{{Name: "per_tenant", Concurrency: 5, Key: "tenant"}}
	r := e.stage(fl, `{}`)
	ids := nodeIDs(r)
	run := func(name, out string, fail bool) {
		t.Helper()
		gs, err := e.s.ClaimAdmitted(e.ctx, ClaimRequest{Partition: 0, Lanes: []string{"default"}, Worker: worker1, Max: 1, LeaseTTL: time.Minute})
		if err != nil || len(gs) != 1 || gs[0].ExecutionID != ids[name] {
			t.Fatalf("claim = %v, %v; want %s", grantIDs(gs), err, name)
		}
		if res, err := e.s.FinishMany(e.ctx, []Finish{{Lease: gs[0].Lease, Result: []byte(out), Failed: fail, Error: "no"}}); err != nil || res[0].Err != nil {
			t.Fatalf("finish %s: %v %+v", name, err, res)
		}
	}
	run("f", "", true)
	run("u", `{"tenant":"acme"}`, false)
	deferred := e.wantState(ids["m"], StateWaiting).Quotas
	if !cmp.Equal(deferred, []string{"default/per_tenant?tenant"}) {
		t.Fatalf("m's quotas before its first claim: %v", deferred)
	}
	// The claim reads m's key from input acme; the run is cancelled and
	// replayed before the key is stored.
	hooked := e.hookedStore("ff_claim", func() { e.cancelReplay(r.ID) })
	gs, err := hooked.ClaimAdmitted(e.ctx, ClaimRequest{Partition: 0, Lanes: []string{"default"}, Worker: worker1, Max: 1, LeaseTTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if q := e.get(ids["m"]).Quotas; !cmp.Equal(q, deferred) {
		t.Fatalf("m, pending after the replay, has quotas %v; want its deferred reference (its input is not known yet)", q)
	}
	// f runs again (a second call of the claim may have granted it), then
	// u, on another tenant.
	if len(gs) == 0 {
		run("f", "", true)
	} else if gs[0].ExecutionID != ids["f"] {
		t.Fatalf("the claim granted %v across the replay, want nothing or f", grantIDs(gs))
	} else if res, err := e.s.FinishMany(e.ctx, []Finish{{Lease: gs[0].Lease, Failed: true, Error: "no"}}); err != nil || res[0].Err != nil {
		t.Fatalf("finish f: %v %+v", err, res)
	}
	run("u", `{"tenant":"globex"}`, false)
	g, err := e.s.ClaimAdmitted(e.ctx, ClaimRequest{Partition: 0, Lanes: []string{"default"}, Worker: worker1, Max: 1, LeaseTTL: time.Minute})
	if err != nil || len(g) != 1 || g[0].ExecutionID != ids["m"] || string(g[0].Payload) != `{"tenant":"globex"}` {
		t.Fatalf("claim of m = %+v, %v", g, err)
	}
	if q := e.get(ids["m"]).Quotas; !cmp.Equal(q, []string{"default/per_tenant=globex"}) {
		t.Fatalf("m runs on input globex under quota subjects %v, want default/per_tenant=globex", q)
	}
}

// An admission taken for a member's next attempt is not used once a
// replay reset the member (same attempt number, its deferred reference
// back): granted under it, the attempt would end with nothing to release
// the admitted slot by, which stayed held until the reconciler.
func TestAdmissionIsNotUsedAfterAReplayResetTheMember(t *testing.T) {
	t.Parallel()
	e := onePartition(t)
	r, ids := e.acmeMember()
	// m is admitted under acme; the run is cancelled and replayed (u kept,
	// m eligible again at once) before the claim that would use it.
	hooked := e.hookedStore("ff_quota_admit", func() { e.cancelReplay(r.ID) })
	gs, err := hooked.ClaimAdmitted(e.ctx, ClaimRequest{Partition: 0, Lanes: []string{"default"}, Worker: worker1, Max: 1, LeaseTTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if len(gs) != 0 {
		t.Fatalf("the claim granted %v (m's quotas %v) under the admission taken before the replay", grantIDs(gs), e.get(ids["m"]).Quotas)
	}
	active := func() int64 {
		var n int64
		for _, sub := range e.quota("default/per_tenant").Subjects {
			n += sub.Active
		}
		return n
	}
	if n := active(); n != 0 {
		t.Fatalf("%d slot(s) held after the claim gave back the admission it did not use", n)
	}
	// The next claim reads m's key again and grants it; its end frees the
	// slot.
	gs = e.claimAdm(worker1, 1, time.Minute)
	if len(gs) != 1 || gs[0].ExecutionID != ids["m"] {
		t.Fatalf("claim = %v, want m", grantIDs(gs))
	}
	if q := e.get(ids["m"]).Quotas; !cmp.Equal(q, []string{"default/per_tenant=acme"}) {
		t.Fatalf("m runs under %v, want default/per_tenant=acme", q)
	}
	if err := e.s.Complete(e.ctx, gs[0].Lease, []byte(`1`)); err != nil {
		t.Fatal(err)
	}
	e.drain()
	if n := active(); n != 0 {
		t.Fatalf("%d slot(s) held after m's attempt ended and the releases were drained", n)
	}
}

// A member denied admission is not blocked once a replay reset it (its
// deferred reference back): parked with that reference, it waited for a
// quota subject that does not exist, which never has room, and its run
// never ended.
func TestQuotaDenialDoesNotBlockAMemberAReplayReset(t *testing.T) {
	t.Parallel()
	e := onePartition(t)
	if _, err := e.s.UpsertQuota(e.ctx, QuotaSpec{ID: "default/per_tenant", Concurrency: 1, Key: "tenant"}); err != nil {
		t.Fatal(err)
	}
	// A task of tenant acme holds the only slot.
	holder := e.create(CreateRequest{Quotas: []string{"per_tenant=acme"}})
	hg := e.claimAdm(worker1, 1, time.Minute)
	if len(hg) != 1 || hg[0].ExecutionID != holder.ID {
		t.Fatalf("claim = %v, want the holder", grantIDs(hg))
	}
	r, ids := e.acmeMember()
	// m is denied (acme is full); the run is cancelled and replayed (u
	// kept, m eligible again) before the call that blocks it.
	hooked := e.hookedStore("ff_quota_admit", func() { e.cancelReplay(r.ID) })
	if gs, err := hooked.ClaimAdmitted(e.ctx, ClaimRequest{Partition: 0, Lanes: []string{"default"}, Worker: worker1, Max: 1,
		LeaseTTL: time.Minute}); err != nil || len(gs) != 0 {
		t.Fatalf("claim while acme is full = %v, %v", grantIDs(gs), err)
	}
	m := e.wantState(ids["m"], StateWaiting)
	if !cmp.Equal(m.Quotas, []string{"default/per_tenant?tenant"}) {
		t.Fatalf("m after the replay has quotas %v, want its deferred reference", m.Quotas)
	}
	// The slot frees: a claim runs m.
	if err := e.s.Complete(e.ctx, hg[0].Lease, []byte(`1`)); err != nil {
		t.Fatal(err)
	}
	e.drain()
	e.unblockAll()
	gs := e.claimAdm(worker2, 1, time.Minute)
	if len(gs) != 1 || gs[0].ExecutionID != ids["m"] {
		m := e.get(ids["m"])
		t.Fatalf("claim after the slot freed = %v, want m (%s: %q, quotas %v)", grantIDs(gs), m.State.BlockingReason,
			m.State.BlockingDetail, m.Quotas)
	}
}

// A slot admitted for a member's attempt before a replay reset it is not
// that attempt's after the reset: another scheduler admitting the member
// meanwhile (at the cap: the stale slot is the only one) is denied for
// concurrency, and blocks it, rather than contended, which left it at the
// head of its lane for a claim that would not come (the first
// scheduler's, fenced by the reset) until the slot was given back. The
// member runs once the slot is back.
func TestStaleAdmissionAcrossAReplayIsNotContended(t *testing.T) {
	t.Parallel()
	e := onePartition(t)
	r, ids := e.acmeMember()
	var second AdmitResult
	var secondGrants []Grant
	// The first scheduler admits m under acme (the only slot); the run is
	// cancelled and replayed (m eligible again, same attempt, reset), and
	// another scheduler claims before the first gives its slot back.
	hooked := e.hookedStore("ff_quota_admit", func() {
		e.cancelReplay(r.ID)
		if m := e.get(ids["m"]); m.AttemptCount != 0 || m.State.Public != StateWaiting {
			t.Errorf("m after the replay: %s with %d attempts, want waiting for its first", m.State.Public, m.AttemptCount)
		}
		var err error
		second, err = e.s.AdmitQuota(e.ctx, "default/per_tenant=acme",
			Admitted{ExecutionID: ids["m"], Attempt: 1, Resets: 1, Token: "second"})
		if err != nil {
			t.Error(err)
		}
		secondGrants, err = e.s.ClaimAdmitted(e.ctx, ClaimRequest{Partition: 0, Lanes: []string{"default"}, Worker: worker2, Max: 1,
			LeaseTTL: time.Minute})
		if err != nil {
			t.Error(err)
		}
	})
	gs, err := hooked.ClaimAdmitted(e.ctx, ClaimRequest{Partition: 0, Lanes: []string{"default"}, Worker: worker1, Max: 1, LeaseTTL: time.Minute})
	if err != nil || len(gs) != 0 {
		t.Fatalf("the first claim = %v, %v; want nothing (its admission predates the reset)", grantIDs(gs), err)
	}
	if second.Admitted || second.Cause != QuotaDeniedConcurrency {
		t.Fatalf("admission of m after the reset while the stale slot is held = %+v, want denied for concurrency", second)
	}
	if len(secondGrants) != 0 {
		t.Fatalf("the second claim granted %v while acme was full", grantIDs(secondGrants))
	}
	m := e.wantState(ids["m"], StateBlocked)
	if m.State.BlockingReason != WaitingForQuota {
		t.Fatalf("m after the second claim: %s (%s), want blocked waiting for its quota", m.State.Public, m.State.BlockingReason)
	}
	// The first scheduler gave its slot back: m is unblocked and runs.
	e.unblockAll()
	gs = e.claimAdm(worker1, 1, time.Minute)
	if len(gs) != 1 || gs[0].ExecutionID != ids["m"] {
		t.Fatalf("claim once the stale slot is back = %v, want m", grantIDs(gs))
	}
	// The slot reconciler finds the holder of the running reset member
	// (its attempt with the reset count) running: the slot stays.
	active := func() int64 {
		var n int64
		for _, sub := range e.quota("default/per_tenant").Subjects {
			n += sub.Active
		}
		return n
	}
	for q := range e.s.QuotaPartitions() {
		if _, err := e.s.ReconcileQuotaSlots(e.ctx, q, 0, 100); err != nil {
			t.Fatal(err)
		}
	}
	if n := active(); n != 1 {
		t.Fatalf("%d slot(s) held while m runs after the reconciler, want its 1", n)
	}
	if err := e.s.Complete(e.ctx, gs[0].Lease, []byte(`1`)); err != nil {
		t.Fatal(err)
	}
	e.drain()
	if n := active(); n != 0 {
		t.Fatalf("%d slot(s) held after m's attempt ended and the releases were drained", n)
	}
}
