package store

import (
	"context"
	"log/slog"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/flowfabric/ff/runtime/internal/valkeytest"
	"github.com/google/go-cmp/cmp"
	"github.com/valkey-io/valkey-go"
)

func TestMain(m *testing.M) {
	code := m.Run()
	valkeytest.StopShared()
	os.Exit(code)
}

// testLogger writes to t.Log.
func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tWriter struct{ t testing.TB }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(string(p))
	return len(p), nil
}

// env is a store on the shared server with keys of its own.
type env struct {
	t      testing.TB
	ctx    context.Context
	c      valkey.Client
	s      *Store
	prefix string
	// ended collects FinishResult.RunEnded of the finishes drive made.
	ended []*Run
	// cursor is the UnblockCursor unblockAll keeps across its passes, as
	// the unblock scanner keeps one across its ticks.
	cursor UnblockCursor
}

func newEnv(t testing.TB, mod ...func(*Config)) *env {
	t.Helper()
	c := valkeytest.Client(t, valkeytest.Shared(t))
	cfg := Config{Client: c, KeyPrefix: valkeytest.Prefix(t), FlowPartitions: 4, Logger: testLogger(t)}
	for _, f := range mod {
		f(&cfg)
	}
	s, err := Open(context.Background(), cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return &env{t: t, ctx: context.Background(), c: c, s: s, prefix: cfg.KeyPrefix}
}

var worker1 = WorkerIdentity{WorkerID: "w1", InstanceID: "w1-a", Namespace: "default"}
var worker2 = WorkerIdentity{WorkerID: "w2", InstanceID: "w2-a", Namespace: "default"}

func (e *env) create(req CreateRequest) *Execution {
	e.t.Helper()
	if req.Kind == "" {
		req.Kind = "test.kind"
	}
	x, created, err := e.s.CreateExecution(e.ctx, req)
	if err != nil || !created {
		e.t.Fatalf("CreateExecution = %v, %v", created, err)
	}
	e.check(x.ID)
	return x
}

// hookedStore returns a store of e's keys whose client runs hook once,
// right after the first reply to an FCALL of fn (hookClient): what another
// caller does between two calls of one store method (ClaimAdmitted makes
// several).
func (e *env) hookedStore(fn string, hook func()) *Store {
	e.t.Helper()
	h := &hookClient{Client: e.c, fn: fn, hook: hook}
	s, err := Open(e.ctx, Config{Client: h, KeyPrefix: e.prefix, FlowPartitions: e.s.FlowPartitions(), Logger: testLogger(e.t)})
	if err != nil {
		e.t.Fatal(err)
	}
	return s
}

func (e *env) get(id ExecutionID) *Execution {
	e.t.Helper()
	x, err := e.s.GetExecution(e.ctx, id)
	if err != nil {
		e.t.Fatalf("GetExecution(%s): %v", id, err)
	}
	return x
}

// claimAll claims up to max executions of lanes over every partition.
func (e *env) claimAll(w WorkerIdentity, max int, ttl time.Duration, lanes ...string) []Grant {
	e.t.Helper()
	if len(lanes) == 0 {
		lanes = []string{"default"}
	}
	var out []Grant
	for p := range e.s.FlowPartitions() {
		if len(out) >= max {
			break
		}
		g, err := e.s.Claim(e.ctx, ClaimRequest{Partition: p, Lanes: lanes, Worker: w, Max: max - len(out), LeaseTTL: ttl})
		if err != nil {
			e.t.Fatalf("Claim: %v", err)
		}
		out = append(out, g...)
	}
	for _, g := range out {
		e.check(g.ExecutionID)
	}
	return out
}

// claim claims the best eligible execution of id's partition and fails
// unless it is id.
func (e *env) claim(id ExecutionID, w WorkerIdentity, ttl time.Duration) Grant {
	e.t.Helper()
	p, _ := id.Partition()
	g, err := e.s.Claim(e.ctx, ClaimRequest{Partition: p, Lanes: []string{"default"}, Worker: w, Max: 1, LeaseTTL: ttl})
	if err != nil {
		e.t.Fatalf("Claim: %v", err)
	}
	if len(g) != 1 || g[0].ExecutionID != id {
		e.t.Fatalf("Claim granted %v, want %s", grantIDs(g), id)
	}
	e.check(id)
	return g[0]
}

func grantIDs(gs []Grant) []ExecutionID {
	var ids []ExecutionID
	for _, g := range gs {
		ids = append(ids, g.ExecutionID)
	}
	return ids
}

// check verifies the invariants of an execution: a consistent state vector
// and membership of exactly the indexes its state implies.
func (e *env) check(id ExecutionID) *Execution {
	e.t.Helper()
	x := e.get(id)
	if !x.State.Consistent() {
		e.t.Fatalf("%s: inconsistent state vector %+v", id, x.State)
	}
	p, uuid, _ := splitID(string(id))
	k := e.s.k
	in := func(key string) bool {
		_, err := e.c.Do(e.ctx, e.c.B().Zscore().Key(key).Member(uuid).Build()).AsFloat64()
		return err == nil
	}
	var got []string
	for _, idx := range []string{indexEligible, indexDelayed, indexActive, indexTerminal, indexPending, indexBlocked, indexBlockedBudget, indexBlockedQuota} {
		// indexActive has no key: an execution in it is a bug.
		if in(k.lane(p, x.Namespace, x.Lane, idx)) {
			got = append(got, idx)
		}
	}
	for name, key := range map[string]string{"leases": k.leases(p), "timeouts": k.timeouts(p), "deadlines": k.deadlines(p)} {
		if in(key) {
			got = append(got, name)
		}
	}
	slices.Sort(got)
	var want []string
	switch x.State.Public {
	case StateWaiting:
		want = []string{indexEligible}
	case StateDelayed:
		want = []string{indexDelayed}
	case StatePending:
		want = []string{indexPending}
	case StateBlocked:
		want = []string{map[Eligibility]string{BlockedByRoute: indexBlocked, BlockedByBudget: indexBlockedBudget,
			BlockedByQuota: indexBlockedQuota}[x.State.Eligibility]}
	case StateActive:
		want = []string{"leases"}
		if x.AttemptTimeout > 0 {
			want = append(want, "timeouts")
		}
	default:
		want = []string{indexTerminal}
	}
	if !x.DeadlineAt.IsZero() && !x.State.Public.Terminal() {
		want = append(want, "deadlines")
	}
	slices.Sort(want)
	if diff := cmp.Diff(want, got); diff != "" {
		e.t.Fatalf("%s in state %s: indexes (-want +got):\n%s", id, x.State.Public, diff)
	}
	return x
}

// wantState fails unless id is in state st.
func (e *env) wantState(id ExecutionID, st PublicState) *Execution {
	e.t.Helper()
	x := e.check(id)
	if x.State.Public != st {
		e.t.Fatalf("%s: state %s, want %s (vector %+v)", id, x.State.Public, st, x.State)
	}
	return x
}

// claimMemory reports whether key is a worker instance's memory of its
// last claim (B:claimed:<instance>), which expires with the claim's leases
// and which retention leaves to that.
func claimMemory(key string) bool { return strings.Contains(key, ":claimed:") }

// keys returns every key of the env's prefix.
func (e *env) keys() []string {
	e.t.Helper()
	ks, err := e.c.Do(e.ctx, e.c.B().Keys().Pattern(e.prefix+"*").Build()).AsStrSlice()
	if err != nil {
		e.t.Fatal(err)
	}
	slices.Sort(ks)
	return ks
}

// wantPurged fails unless every key of the env's prefix is gone but the
// lane registries and the config (what retention leaves).
func (e *env) wantPurged() {
	e.t.Helper()
	for _, k := range e.keys() {
		if !strings.HasSuffix(k, ":lanes") && !strings.HasSuffix(k, "ff:config") && !strings.HasSuffix(k, "ff:libraries") && !claimMemory(k) {
			e.t.Fatalf("key left after purge: %s", k)
		}
	}
}

// waitUntil polls cond (test helper for scanner-driven transitions).
func waitUntil(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
