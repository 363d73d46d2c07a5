package store

import (
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/valkey-io/valkey-go"
)

// spec/runtime.md, Principles: every state change is one FCALL that
// validates before its first write. The server does not roll back what a
// function wrote before it raised an error, and index updates are applied
// only at the end of a call (flush): a raise after a write leaves records
// that no index lists (an execution active with no lease entry never
// expires). The tests below send each function an argument that is used
// only after earlier writes of the call, and check that the call is
// refused and changed nothing.

// snapshot returns every key of the env's prefix with its serialized value
// (DUMP), so that two snapshots differ when any key was written.
func (e *env) snapshot() map[string]string {
	e.t.Helper()
	out := map[string]string{}
	for _, k := range e.keys() {
		v, err := e.c.Do(e.ctx, e.c.B().Dump().Key(k).Build()).ToString()
		if err != nil && !valkey.IsValkeyNil(err) {
			e.t.Fatalf("DUMP %s: %v", k, err)
		}
		out[k] = v
	}
	return out
}

// refusedUnchanged runs c, which must be refused with code invalid and
// field, and fails when any key of the env changed.
func (e *env) refusedUnchanged(what string, c call, field string) {
	e.t.Helper()
	before := e.snapshot()
	msg, err := e.s.fcall(e.ctx, c)
	if err != nil {
		e.t.Errorf("%s: %v, want a refusal", what, err)
	} else if _, ref, err := envelope(msg); err != nil || ref == nil || ref.code != "invalid" ||
		len(ref.detail) == 0 || ref.detail[0] != field {
		e.t.Errorf("%s: refusal %+v (%v), want invalid %s", what, ref, err, field)
	}
	if diff := cmp.Diff(before, e.snapshot()); diff != "" {
		e.t.Errorf("%s: a refused call wrote (-before +after):\n%s", what, diff)
	}
}

// uuidOf returns the uuid part of an execution id.
func uuidOf(t *testing.T, id ExecutionID) string {
	t.Helper()
	_, u, err := splitID(string(id))
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// leaseArgs returns the uuid, lease id and epoch of g, as ff_renew and
// ff_finish take them.
func leaseArgs(t *testing.T, g Grant) []string {
	t.Helper()
	return []string{uuidOf(t, g.ExecutionID), g.Lease.ID, strconv.FormatInt(g.Lease.Epoch, 10)}
}

// ff_renew: an expired lease is expired on the spot (written) before the
// next item is renewed with the lease duration: a malformed duration is
// refused before the first item.
func TestMalformedRenewBadTTLWritesNothing(t *testing.T) {
	t.Parallel()
	e := onePartition(t)
	x1 := e.create(CreateRequest{Priority: 9})
	x2 := e.create(CreateRequest{Priority: 1})
	g1 := e.claim(x1.ID, worker1, LeaseTTLMin)
	g2 := e.claim(x2.ID, worker1, time.Minute)
	time.Sleep(LeaseTTLMin + 30*time.Millisecond) // g1's lease expired, not yet swept
	args := append(append([]string{"soon"}, leaseArgs(t, g1)...), leaseArgs(t, g2)...)
	e.refusedUnchanged("renew with lease duration \"soon\"", call{fn: "ff_renew", partition: 0, args: args}, "lease_ttl")
	e.check(x1.ID)
	e.check(x2.ID)
}

// ff_finish: items are written one after the other and their index
// updates applied at the end; a group missing its data, or a hand-off
// whose lease duration is not a number (used by the grants, after every
// item), is refused before the first item.
func TestMalformedFinishWritesNothing(t *testing.T) {
	t.Parallel()
	e := onePartition(t)
	x1 := e.create(CreateRequest{Priority: 9})
	x2 := e.create(CreateRequest{Priority: 1})
	g1 := e.claim(x1.ID, worker1, time.Minute)
	g2 := e.claim(x2.ID, worker1, time.Minute)
	head := []string{"7", "0", "", "", "", "", "", "0", "", ""}
	args := append(append(append(append([]string{}, head...), leaseArgs(t, g1)...), "retry", "boom"),
		append(leaseArgs(t, g2), "ok")...) // no result
	e.refusedUnchanged("finish with an incomplete group", call{fn: "ff_finish", partition: 0, args: args}, "items")
	e.check(x1.ID)
	e.check(x2.ID)

	// A flow member's success fires its downstream, which the hand-off
	// would grant with the lease duration.
	r := e.stage(flow7("pair", execs("a", "b"), "a->b"), `{}`)
	ga := e.claimP0(worker1, time.Minute)
	if len(ga) != 1 || ga[0].FlowNode != "a" {
		t.Fatalf("claim = %+v, want a", ga)
	}
	head = []string{"7", "1", worker1.WorkerID, worker1.InstanceID, "", "default", "default", "a minute", "tok", ""}
	args = append(append(append([]string{}, head...), leaseArgs(t, ga[0])...), "ok", `"done"`)
	e.refusedUnchanged("finish with hand-off lease duration \"a minute\"", call{fn: "ff_finish", partition: 0, args: args}, "handoff")
	for _, n := range r.Nodes {
		e.check(n.ExecutionID)
	}
}

// ff_claim: a candidate no connected worker can run is parked (written)
// before the next is granted with the lease duration and id prefix.
func TestMalformedClaimBadTTLWritesNothing(t *testing.T) {
	t.Parallel()
	e := onePartition(t)
	x1 := e.create(CreateRequest{Priority: 9, RequiredCapabilities: []string{"gpu"}})
	x2 := e.create(CreateRequest{Priority: 1})
	k := e.s.k
	keys := []string{k.anchor(0), k.leases(0), k.timeouts(0),
		k.lane(0, "default", "default", indexEligible), k.lane(0, "default", "default", indexBlocked)}
	for _, tc := range []struct {
		name     string
		ttl, pre string
	}{
		{"lease duration \"x\"", "x", "p"},
		{"no lease id prefix", "60000", ""},
	} {
		args := []string{worker1.WorkerID, worker1.InstanceID, "", "2", tc.ttl, tc.pre, "", "", "0", "0", "default"}
		if tc.pre == "" {
			// Without a prefix the arguments end early: the lanes are lost too.
			args = args[:5]
		}
		e.refusedUnchanged("claim with "+tc.name, call{fn: "ff_claim", partition: 0, keys: keys, args: args}, "claim")
	}
	e.check(x1.ID)
	e.check(x2.ID)
}

// ff_claim: the counts of breached budgets and of admissions bound the
// loops that read them; one that is not a whole number, or that the
// arguments do not cover, is refused before anything is read or written.
func TestMalformedClaimCountsRefused(t *testing.T) {
	t.Parallel()
	e := onePartition(t)
	x := e.create(CreateRequest{})
	k := e.s.k
	keys := []string{k.anchor(0), k.leases(0), k.timeouts(0),
		k.lane(0, "default", "default", indexEligible), k.lane(0, "default", "default", indexBlocked)}
	head := []string{worker1.WorkerID, worker1.InstanceID, "", "1", "60000", "p", "*", ""}
	for _, tc := range []struct {
		name string
		tail []string
	}{
		{"a breached-budget count that is no number", []string{"some", "0", "default"}},
		{"an admission count that is no number", []string{"0", "few", "default"}},
		{"a negative breached-budget count", []string{"-1", "0", "default"}},
		{"a fractional admission count", []string{"0", "0.5", "default"}},
		{"a breached-budget count past the arguments", []string{"2", "b", "block", "d", "0", "default"}},
		{"an admission count past the arguments", []string{"0", "3", "u", "1", "t", "default"}},
	} {
		args := append(append([]string{}, head...), tc.tail...)
		e.refusedUnchanged("claim with "+tc.name, call{fn: "ff_claim", partition: 0, keys: keys, args: args}, "claim")
	}
	e.wantState(x.ID, StateWaiting)
}

// ff_block: the record is written before the blocked index score is
// computed from the recheck delay.
func TestMalformedBlockBadDelayWritesNothing(t *testing.T) {
	t.Parallel()
	e := onePartition(t)
	x := e.create(CreateRequest{})
	args := []string{uuidOf(t, x.ID), "waiting_for_budget", "over budget", "later"}
	e.refusedUnchanged("block with recheck delay \"later\"", call{fn: "ff_block", partition: 0, args: args}, "delay")
	e.wantState(x.ID, StateWaiting)
}

// ff_stage_chunk: the members are written before the staging is
// registered with its lifetime; members written without it would be
// dropped by no retention.
func TestMalformedStageChunkBadLifetimeWritesNothing(t *testing.T) {
	t.Parallel()
	e := onePartition(t)
	args := []string{newUUID(), "default", "{}", "ten minutes"}
	for _, name := range []string{"a", "b"} {
		args = append(args, "10", name, newUUID(), "default", "500", "0", "0", "1", "0", "kind", "test.kind")
	}
	e.refusedUnchanged("stage chunk with lifetime \"ten minutes\"", call{fn: "ff_stage_chunk", partition: 0, args: args}, "staging_ttl")
}

// createItem returns an ff_create_many item (count first) of a new
// execution of the default lane with priority, delay-until, delay and
// deadline as given, and idempotency key ikey.
func createItem(priority, until, delay, deadline, ikey string) []string {
	item := []string{newUUID(), "default", "default", priority, until, delay, deadline, ikey,
		"ns", "default", "lane", "default", "kind", "test.kind"}
	return append([]string{strconv.Itoa(len(item))}, item...)
}

// ff_create_many writes each item's record before reading the next; a
// malformed item after a good one is refused before the first write.
// ff_create sets the idempotency key after the record and its indexes.
func TestMalformedCreateWritesNothing(t *testing.T) {
	t.Parallel()
	e := onePartition(t)
	e.create(CreateRequest{}) // the partition's lane registry exists
	good := createItem("500", "0", "0", "0", "")
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"a priority that is no number", append(append([]string{"60000"}, good...), createItem("high", "0", "0", "0", "")...)},
		{"a deadline that is no number", append(append([]string{"60000"}, good...), createItem("500", "0", "0", "soon", "")...)},
		{"an entry count past the end", append(append([]string{"60000"}, good...), "40", newUUID(), "default")},
		{"an idempotency key lifetime of 0", append(append([]string{"0"}, good...), createItem("500", "0", "0", "0", "k1")...)},
	} {
		e.refusedUnchanged("create_many with "+tc.name, call{fn: "ff_create_many", partition: 0, args: tc.args}, "items")
	}
	k := e.s.k
	odd := append(createItem("500", "0", "0", "0", ""), "orphan")
	odd[0] = strconv.Itoa(len(odd) - 1) // the count covers the orphan
	for _, tc := range []struct {
		name string
		ttl  string
		item []string
	}{
		{"an idempotency key lifetime of 0", "0", createItem("500", "0", "0", "0", "k2")},
		// Refused like ff_create_many's items, not raised.
		{"a priority that is no number", "60000", createItem("high", "0", "0", "0", "")},
		{"a delay-until that is no number", "60000", createItem("500", "later", "0", "0", "")},
		{"a delay that is no number", "60000", createItem("500", "0", "1s", "0", "")},
		{"a deadline that is no number", "60000", createItem("500", "0", "0", "soon", "")},
		{"an odd field list", "60000", odd},
	} {
		item := tc.item
		keys := []string{k.anchor(0), k.core(0, item[1]), k.lane(0, "default", "default", indexEligible),
			k.lane(0, "default", "default", indexDelayed), k.deadlines(0), k.idem(0, "default", "k2")}
		args := append(append([]string{tc.ttl}, item...), e.s.WakeChannel(), "0:default:default")
		e.refusedUnchanged("create with "+tc.name, call{fn: "ff_create", partition: 0, keys: keys, args: args}, "items")
	}
}

// stageMember returns the ff_stage_flow entries of a member (count
// first) with deps_total and deadline as given.
func stageMember(name, u, deps, deadline string) []string {
	m := []string{name, u, "default", "500", deps, deps, "1", deadline, "kind", "test.kind"}
	if deps != "0" {
		m = append(m, "deps_total", deps)
	}
	return append([]string{strconv.Itoa(len(m))}, m...)
}

// Staging writes each member's record before reading the next: a
// malformed member after a good one would leave the good one in no index
// and no run (nor staging), where retention never finds it.
func TestMalformedStageWritesNothing(t *testing.T) {
	t.Parallel()
	e := onePartition(t)
	head := []string{newUUID(), "default", "pair", "", "", "60000", "{}", "", ""}
	good := stageMember("a", newUUID(), "0", "0")
	for _, tc := range []struct {
		name string
		bad  []string
	}{
		{"a deadline that is no number", stageMember("b", newUUID(), "1", "soon")},
		{"deps_total that is no number", stageMember("b", newUUID(), "one", "0")},
		{"an entry count past the end", []string{"30", "b", newUUID()}},
		{"an odd field/value list", []string{"9", "b", newUUID(), "default", "500", "1", "1", "0", "0", "kind"}},
	} {
		args := append(append(append([]string{}, head...), good...), tc.bad...)
		e.refusedUnchanged("stage_flow with "+tc.name, call{fn: "ff_stage_flow", partition: 0, args: args}, "members")
		args = append(append([]string{head[0], "default", "{}", "600000"}, good...), tc.bad...)
		e.refusedUnchanged("stage_chunk with "+tc.name, call{fn: "ff_stage_chunk", partition: 0, args: args}, "members")
	}
	args := append(append(append([]string{}, head[:4]...), "k", "0", "{}", "", ""), good...)
	e.refusedUnchanged("stage_flow with an idempotency key lifetime of 0", call{fn: "ff_stage_flow", partition: 0, args: args}, "members")
}

// ff_commit_flow makes each staged root eligible before it reads the next
// member: a malformed group after a root is refused before the first
// write, and the staging is kept (a malformed count used to drop it).
func TestMalformedCommitWritesNothing(t *testing.T) {
	t.Parallel()
	e := onePartition(t)
	run, ua, ub := newUUID(), newUUID(), newUUID()
	args := append(append([]string{run, "default", "{}", "600000"}, stageMember("a", ua, "0", "0")...),
		stageMember("b", ub, "1", "0")...)
	if msg, err := e.s.fcall(e.ctx, call{fn: "ff_stage_chunk", partition: 0, args: args}); err != nil {
		t.Fatal(err)
	} else if _, ref, err := envelope(msg); err != nil || ref != nil {
		t.Fatalf("stage chunk: %v %+v", err, ref)
	}
	head := []string{run, "default", "pair", "", "", "60000", "{}", ""}
	for _, tc := range []struct {
		name string
		tail []string
	}{
		{"deps_total that is no number", []string{"2", "a", ua, "default", "500", "0", "0", "b", ub, "default", "500", "one", "0"}},
		{"a priority that is no number", []string{"2", "a", ua, "default", "500", "0", "0", "b", ub, "default", "high", "1", "0"}},
		{"a count that is no number", []string{"two", "a", ua, "default", "500", "0", "0", "b", ub, "default", "500", "1", "0"}},
		{"fewer groups than the count", []string{"3", "a", ua, "default", "500", "0", "0", "b", ub, "default", "500", "1", "0"}},
	} {
		args := append(append([]string{}, head...), tc.tail...)
		e.refusedUnchanged("commit with "+tc.name, call{fn: "ff_commit_flow", partition: 0, args: args}, "members")
	}
	// The staging is intact: the well-formed commit makes the run visible.
	args = append(append([]string{}, head...), "2", "a", ua, "default", "500", "0", "0", "b", ub, "default", "500", "1", "0")
	msg, err := e.s.fcall(e.ctx, call{fn: "ff_commit_flow", partition: 0, args: args})
	if err != nil {
		t.Fatal(err)
	}
	if items, ref, err := envelope(msg); err != nil || ref != nil || str(items[0]) != "created" {
		t.Fatalf("commit = %v %+v %v, want created", items, ref, err)
	}
	e.wantState(ExecutionID(makeID(0, ua)), StateWaiting)
	e.wantState(ExecutionID(makeID(0, ub)), StatePending)
}

// ff_resolve_quotas writes an item before it reads the next: an
// incomplete quint after a good one is refused before the first write.
func TestMalformedResolveQuotasWritesNothing(t *testing.T) {
	t.Parallel()
	e := onePartition(t)
	if _, err := e.s.UpsertQuota(e.ctx, QuotaSpec{ID: "default/q", Concurrency: 1}); err != nil {
		t.Fatal(err)
	}
	x1 := e.create(CreateRequest{Quotas: []string{"q"}})
	x2 := e.create(CreateRequest{Quotas: []string{"q"}})
	q := e.get(x1.ID).Quotas[0]
	args := []string{uuidOf(t, x1.ID), "0", q, q + ",default/other", "", uuidOf(t, x2.ID), "0", q}
	e.refusedUnchanged("resolve quotas with an incomplete quint", call{fn: "ff_resolve_quotas", partition: 0, args: args}, "items")
}

// ff_cancel of a running attempt that holds quota slots queues their
// release and drops qheld before it records the attempt's end with the
// reason: a call without a reason cancels with the default reason,
// instead of raising after that write with the release lost.
func TestMalformedCancelWithoutReason(t *testing.T) {
	t.Parallel()
	e := onePartition(t)
	if _, err := e.s.UpsertQuota(e.ctx, QuotaSpec{ID: "default/q", Concurrency: 1}); err != nil {
		t.Fatal(err)
	}
	x := e.create(CreateRequest{Quotas: []string{"q"}})
	if g := e.claimAdm(worker1, 1, time.Minute); len(g) != 1 || g[0].ExecutionID != x.ID {
		t.Fatalf("ClaimAdmitted = %v, want %s", grantIDs(g), x.ID)
	}
	msg, err := e.s.fcall(e.ctx, call{fn: "ff_cancel", partition: 0, args: []string{uuidOf(t, x.ID)}})
	if err != nil {
		t.Fatalf("ff_cancel without a reason: %v", err)
	}
	if items, ref, err := envelope(msg); err != nil || ref != nil || str(items[0]) != string(StateCancelled) {
		t.Fatalf("ff_cancel = %v %+v %v, want cancelled", items, ref, err)
	}
	got := e.wantState(x.ID, StateCancelled)
	if got.FailureReason != "cancelled" {
		t.Errorf("failure reason %q, want cancelled", got.FailureReason)
	}
	n, err := e.c.Do(e.ctx, e.c.B().Zcard().Key(e.s.k.qrelease(0)).Build()).AsInt64()
	if err != nil || n != 1 {
		t.Errorf("quota releases queued: %d (%v), want 1", n, err)
	}
}

// ff_finish: a group's kind is ok, retry or fail; any other is refused
// before the first item is written (it used to end the attempt as a
// permanent failure with the data as its error, retries left or not).
func TestMalformedFinishUnknownKindRefused(t *testing.T) {
	t.Parallel()
	e := onePartition(t)
	x1 := e.create(CreateRequest{Priority: 9, Retry: RetryPolicy{Attempts: 3}})
	x2 := e.create(CreateRequest{Priority: 1, Retry: RetryPolicy{Attempts: 3}})
	g1 := e.claim(x1.ID, worker1, time.Minute)
	g2 := e.claim(x2.ID, worker1, time.Minute)
	head := []string{"7", "0", "", "", "", "", "", "0", "", ""}
	for _, kind := range []string{"okay", "OK", ""} {
		args := append(append(append(append([]string{}, head...), leaseArgs(t, g1)...), "ok", `"done"`),
			append(leaseArgs(t, g2), kind, `"done"`)...)
		e.refusedUnchanged("finish with kind "+strconv.Quote(kind), call{fn: "ff_finish", partition: 0, args: args}, "items")
	}
	e.wantState(x1.ID, StateActive)
	e.wantState(x2.ID, StateActive)
}

// spec/runtime.md, Functions: a number argument the store never sends (a
// limit, an age, a lifetime that is no whole number, a priority outside
// 0..1000) is refused with invalid and writes nothing, instead of raising
// a Lua error (or, for a priority, being stored).
func TestMalformedNumbersRefused(t *testing.T) {
	t.Parallel()
	e := onePartition(t)
	x := e.create(CreateRequest{})
	u := uuidOf(t, x.ID)
	k := e.s.k
	hb := func(ttl string) call {
		return call{fn: "ff_worker_heartbeat", keys: []string{k.workers("default"), k.worker("default", "i1")},
			args: []string{"default", "i1", "w1", "default", "", ttl, ""}}
	}
	for _, tc := range []struct {
		name  string
		c     call
		field string
	}{
		{"ff_change_priority, priority \"high\"", call{fn: "ff_change_priority", args: []string{u, "high"}}, "priority"},
		{"ff_change_priority, priority 5000", call{fn: "ff_change_priority", args: []string{u, "5000"}}, "priority"},
		{"ff_change_priority, priority -1", call{fn: "ff_change_priority", args: []string{u, "-1"}}, "priority"},
		{"ff_change_priority, priority 2.5", call{fn: "ff_change_priority", args: []string{u, "2.5"}}, "priority"},
		{"ff_change_priority, no priority", call{fn: "ff_change_priority", args: []string{u}}, "priority"},
		{"ff_expire_leases, limit \"many\"", call{fn: "ff_expire_leases", args: []string{"many", "1"}}, "limit"},
		{"ff_expire_leases, limit 0", call{fn: "ff_expire_leases", args: []string{"0", "1"}}, "limit"},
		{"ff_timeout_attempts, limit \"many\"", call{fn: "ff_timeout_attempts", args: []string{"many", "1"}}, "limit"},
		{"ff_expire_deadlines, limit \"many\"", call{fn: "ff_expire_deadlines", args: []string{"many", "1"}}, "limit"},
		{"ff_promote_delayed, limit \"many\"", call{fn: "ff_promote_delayed", args: []string{"many"}}, "limit"},
		{"ff_promote_delayed, limit 1e3", call{fn: "ff_promote_delayed", args: []string{"1e3"}}, "limit"},
		{"ff_purge_terminal, limit \"many\"", call{fn: "ff_purge_terminal", args: []string{"many", "0"}}, "limit"},
		{"ff_purge_terminal, age \"a day\"", call{fn: "ff_purge_terminal", args: []string{"100", "a day"}}, "age"},
		{"ff_purge_terminal, no age", call{fn: "ff_purge_terminal", args: []string{"100"}}, "age"},
		{"ff_budget_resets, limit \"many\"", call{fn: "ff_budget_resets", keys: []string{k.resets(0)}, args: []string{"many"}}, "limit"},
		{"ff_worker_heartbeat, TTL \"a minute\"", hb("a minute"), "ttl"},
		{"ff_worker_heartbeat, TTL 0", hb("0"), "ttl"},
	} {
		e.refusedUnchanged(tc.name, tc.c, tc.field)
	}
	e.wantState(x.ID, StateWaiting)
	if got := e.get(x.ID).Priority; got != x.Priority {
		t.Errorf("priority %d after the refused changes, want %d", got, x.Priority)
	}
}

// ff_quota_upsert checks every argument before its first write, as
// ff_budget_upsert does: a rate, window, concurrency or jitter that is no
// whole number, a rate and a concurrency both 0 (as UpsertQuota refuses
// them), a missing key path or an only-create flag other than 0 and 1 is
// refused, and neither a new quota nor its partition's index is written,
// nor an existing definition changed.
func TestMalformedQuotaUpsertWritesNothing(t *testing.T) {
	t.Parallel()
	e := onePartition(t)
	if _, err := e.s.UpsertQuota(e.ctx, QuotaSpec{ID: "default/kept", Rate: 5, Window: time.Second}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"default/new", "default/kept"} {
		key := e.s.k.quota(e.s.quotaPart(id), id)
		for _, tc := range []struct {
			name, field string
			args        []string
		}{
			{"rate \"fast\"", "rate", []string{"fast", "1000", "0", "0", "", "0"}},
			{"rate -1", "rate", []string{"-1", "1000", "0", "0", "", "0"}},
			{"window \"1s\"", "window", []string{"5", "1s", "0", "0", "", "0"}},
			{"concurrency 1.5", "concurrency", []string{"5", "1000", "1.5", "0", "", "0"}},
			{"rate and concurrency 0", "rate", []string{"0", "1000", "0", "0", "", "0"}},
			{"jitter \"some\"", "jitter", []string{"5", "1000", "0", "some", "", "0"}},
			{"no key path", "key", []string{"5", "1000", "0", "0"}},
			{"only create \"yes\"", "only_create", []string{"5", "1000", "0", "0", "", "yes"}},
			{"no only-create flag", "only_create", []string{"5", "1000", "0", "0", ""}},
		} {
			e.refusedUnchanged("quota upsert of "+id+" with "+tc.name, call{fn: "ff_quota_upsert", keys: []string{key}, args: tc.args}, tc.field)
		}
	}
	if _, err := e.s.GetQuota(e.ctx, "default/new"); !errors.Is(err, ErrNotFound) {
		t.Errorf("GetQuota of the quota only refused upserts named: %v, want not found", err)
	}
	// A quota that limits nothing: the function refuses it as UpsertQuota
	// does before the call (same field and message).
	_, goErr := e.s.UpsertQuota(e.ctx, QuotaSpec{ID: "default/new", Window: time.Second})
	msg, err := e.s.fcall(e.ctx, call{fn: "ff_quota_upsert", keys: []string{e.s.k.quota(e.s.quotaPart("default/new"), "default/new")},
		args: []string{"0", "1000", "0", "0", "", "0"}})
	if err != nil {
		t.Fatal(err)
	}
	_, ref, err := envelope(msg)
	if err != nil || ref == nil {
		t.Fatalf("ff_quota_upsert of a quota without limits: refusal %+v (%v)", ref, err)
	}
	if diff := cmp.Diff(goErr, refusalError(ref, "", "upsert quota")); diff != "" {
		t.Errorf("the refusals of a quota without limits (-UpsertQuota +ff_quota_upsert):\n%s", diff)
	}
}
