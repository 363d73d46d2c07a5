package scanner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flowfabric/ff/runtime/internal/valkeytest"
	"github.com/flowfabric/ff/runtime/store"
)

func TestMain(m *testing.M) {
	code := m.Run()
	valkeytest.StopShared()
	os.Exit(code)
}

type tWriter struct{ t testing.TB }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

func openStore(t testing.TB, partitions int) *store.Store {
	t.Helper()
	c := valkeytest.Client(t, valkeytest.Shared(t))
	s, err := store.Open(context.Background(), store.Config{Client: c, KeyPrefix: valkeytest.Prefix(t), FlowPartitions: partitions})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

var worker = store.WorkerIdentity{WorkerID: "w", InstanceID: "w-1", Namespace: "default"}

func create(t testing.TB, s *store.Store, req store.CreateRequest) *store.Execution {
	t.Helper()
	req.Kind = "k"
	x, _, err := s.CreateExecution(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	return x
}

func claimAll(t testing.TB, s *store.Store, ttl time.Duration) []store.Grant {
	t.Helper()
	var out []store.Grant
	for p := range s.FlowPartitions() {
		g, err := s.Claim(context.Background(), store.ClaimRequest{Partition: p, Lanes: []string{"default"}, Worker: worker, Max: 100, LeaseTTL: ttl})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, g...)
	}
	return out
}

// waitState polls until id reaches state (the scanner runs in the
// background).
func waitState(t testing.TB, s *store.Store, id store.ExecutionID, state store.PublicState) *store.Execution {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		x, err := s.GetExecution(context.Background(), id)
		if err == nil && x.State.Public == state {
			return x
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not reach %s (last: %+v, %v)", id, state, x, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

type scanner interface {
	Start(context.Context) error
	Stop(context.Context) error
	RunOnce(context.Context) (int, bool, error)
}

func run(t *testing.T, sc scanner) {
	t.Helper()
	ctx := context.Background()
	if err := sc.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := sc.Start(ctx); err != nil { // twice is fine
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := sc.Stop(ctx); err != nil {
			t.Error(err)
		}
		if err := sc.Stop(ctx); err != nil {
			t.Error(err)
		}
	})
}

const fast = 20 * time.Millisecond

func TestLeaseExpiryScanner(t *testing.T) {
	t.Parallel()
	s := openStore(t, 4)
	x := create(t, s, store.CreateRequest{Retry: store.RetryPolicy{Attempts: 2}})
	claimAll(t, s, 100*time.Millisecond)
	sc, err := NewLeaseExpiry(LeaseExpiryConfig{Store: s, Interval: fast, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	run(t, sc)
	w := waitState(t, s, x.ID, store.StateWaiting)
	if w.Attempts[0].Outcome != store.AttemptLeaseExpired {
		t.Fatalf("attempts %+v", w.Attempts)
	}
}

func TestDelayedScanner(t *testing.T) {
	t.Parallel()
	s := openStore(t, 4)
	x := create(t, s, store.CreateRequest{Delay: 100 * time.Millisecond})
	sc, err := NewDelayed(DelayedConfig{Store: s, Interval: fast, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	run(t, sc)
	waitState(t, s, x.ID, store.StateWaiting)
}

func TestAttemptTimeoutScanner(t *testing.T) {
	t.Parallel()
	s := openStore(t, 4)
	x := create(t, s, store.CreateRequest{AttemptTimeout: 50 * time.Millisecond})
	claimAll(t, s, time.Minute)
	sc, err := NewAttemptTimeout(AttemptTimeoutConfig{Store: s, Interval: fast, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	run(t, sc)
	if f := waitState(t, s, x.ID, store.StateFailed); f.Attempts[0].Outcome != store.AttemptTimedOut {
		t.Fatalf("attempts %+v", f.Attempts)
	}
}

func TestDeadlineScanner(t *testing.T) {
	t.Parallel()
	s := openStore(t, 4)
	x := create(t, s, store.CreateRequest{Deadline: 50 * time.Millisecond, Delay: time.Hour})
	sc, err := NewDeadline(DeadlineConfig{Store: s, Interval: fast, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	run(t, sc)
	waitState(t, s, x.ID, store.StateExpired)
}

func TestRetentionScanner(t *testing.T) {
	t.Parallel()
	s := openStore(t, 4)
	x := create(t, s, store.CreateRequest{})
	keep := create(t, s, store.CreateRequest{})
	if _, err := s.Cancel(context.Background(), x.ID, ""); err != nil {
		t.Fatal(err)
	}
	sc, err := NewRetention(RetentionConfig{Store: s, Interval: fast, Age: 50 * time.Millisecond, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	run(t, sc)
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, err := s.GetExecution(context.Background(), x.ID)
		if errors.Is(err, store.ErrNotFound) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatal("terminal execution not purged")
		}
		time.Sleep(10 * time.Millisecond)
	}
	waitState(t, s, keep.ID, store.StateWaiting)
}

func TestRunOnceIsBounded(t *testing.T) {
	t.Parallel()
	s := openStore(t, 1)
	for range 5 {
		create(t, s, store.CreateRequest{Delay: time.Millisecond})
	}
	time.Sleep(5 * time.Millisecond)
	sc, err := NewDelayed(DelayedConfig{Store: s, Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var got []int
	for {
		n, more, err := sc.RunOnce(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, n)
		if !more {
			break
		}
	}
	if len(got) != 3 || got[0] != 2 || got[1] != 2 || got[2] != 1 {
		t.Fatalf("processed per pass = %v, want [2 2 1]", got)
	}
}

// TestConcurrentScannersTransitionOnce runs two lease-expiry scanners (as
// two ffrun processes would) over the same expired leases: every execution
// is requeued exactly once.
func TestConcurrentScannersTransitionOnce(t *testing.T) {
	t.Parallel()
	s := openStore(t, 4)
	var ids []store.ExecutionID
	for range 40 {
		ids = append(ids, create(t, s, store.CreateRequest{Retry: store.RetryPolicy{Attempts: 3}}).ID)
	}
	if g := claimAll(t, s, 100*time.Millisecond); len(g) != 40 {
		t.Fatalf("claimed %d", len(g))
	}
	time.Sleep(150 * time.Millisecond)
	var wg sync.WaitGroup
	total := make([]int, 2)
	for i := range 2 {
		sc, err := NewLeaseExpiry(LeaseExpiryConfig{Store: s, Limit: 7})
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				n, more, err := sc.RunOnce(context.Background())
				if err != nil {
					t.Error(err)
					return
				}
				total[i] += n
				if !more && n == 0 {
					return
				}
			}
		}()
	}
	wg.Wait()
	if total[0]+total[1] != 40 {
		t.Fatalf("transitions %v, want 40 in total", total)
	}
	for _, id := range ids {
		x, err := s.GetExecution(context.Background(), id)
		if err != nil || x.State.Public != store.StateWaiting || len(x.Attempts) != 1 {
			t.Fatalf("%s: %+v %v", id, x, err)
		}
	}
}

func TestConfigValidation(t *testing.T) {
	s := openStore(t, 2)
	if _, err := NewLeaseExpiry(LeaseExpiryConfig{}); err == nil || !strings.Contains(err.Error(), "Store") {
		t.Errorf("missing store: %v", err)
	}
	if _, err := NewDelayed(DelayedConfig{Store: s, Interval: time.Microsecond}); err == nil || !strings.Contains(err.Error(), "Interval") {
		t.Errorf("tiny interval: %v", err)
	}
	if _, err := NewDeadline(DeadlineConfig{Store: s, Limit: store.ScanLimitMax + 1}); err == nil || !strings.Contains(err.Error(), "Limit") {
		t.Errorf("huge limit: %v", err)
	}
	if _, err := NewRetention(RetentionConfig{Store: s, Age: -time.Second}); err == nil || !strings.Contains(err.Error(), "Age") {
		t.Errorf("negative age: %v", err)
	}
	set, err := NewSet(SetConfig{Store: s})
	if err != nil {
		t.Fatal(err)
	}
	if set.Delayed.interval != DelayedIntervalDefault || set.Retention.interval != RetentionIntervalDefault || set.Library.interval != store.LibraryKeepInterval {
		t.Errorf("defaults not applied: %s %s %s", set.Delayed.interval, set.Retention.interval, set.Library.interval)
	}
	ctx := context.Background()
	for range 2 {
		if err := set.Start(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 {
		if err := set.Stop(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := NewSet(SetConfig{}); err == nil {
		t.Error("NewSet without store accepted")
	}
}

func TestUnblockScanner(t *testing.T) {
	t.Parallel()
	s := openStore(t, 2)
	ctx := context.Background()
	x := create(t, s, store.CreateRequest{RequiredCapabilities: []string{"gpu"}})
	p, _ := x.ID.Partition()
	// A claim by a cpu-only worker, with no gpu worker connected, parks it.
	if _, err := s.Claim(ctx, store.ClaimRequest{Partition: p, Lanes: []string{"default"}, Worker: worker, Max: 1, RouteBlocking: true}); err != nil {
		t.Fatal(err)
	}
	waitState(t, s, x.ID, store.StateBlocked)
	sc, err := NewUnblock(UnblockConfig{Store: s, Interval: fast, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	run(t, sc)
	// A gpu worker of another namespace: still blocked.
	other := store.WorkerIdentity{WorkerID: "o", InstanceID: "o-1", Namespace: "tenant-b", Capabilities: []string{"gpu"}}
	if _, err := s.Heartbeat(ctx, store.Registration{Worker: other, TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * fast)
	waitState(t, s, x.ID, store.StateBlocked)
	gpu := store.WorkerIdentity{WorkerID: "g", InstanceID: "g-1", Namespace: "default", Capabilities: []string{"gpu"}}
	if _, err := s.Heartbeat(ctx, store.Registration{Worker: gpu, TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	waitState(t, s, x.ID, store.StateWaiting)
}

// The unblock scanner keeps its cursor across ticks: an execution parked
// for a capability a worker now has is promoted even when more executions
// than the scanner's limit, parked for a capability nobody has, sit ahead
// of it in the index (each tick reads the next share, not the head again).
func TestUnblockScannerReachesPastParkedBacklog(t *testing.T) {
	t.Parallel()
	s := openStore(t, 1)
	ctx := context.Background()
	park := func() {
		t.Helper()
		g, err := s.Claim(ctx, store.ClaimRequest{Partition: 0, Lanes: []string{"default"}, Worker: worker, Max: 100, RouteBlocking: true})
		if err != nil || len(g) != 0 {
			t.Fatalf("claim: %d grants, %v", len(g), err)
		}
	}
	const ahead = 150 // three times the scanner's limit
	for range ahead {
		create(t, s, store.CreateRequest{RequiredCapabilities: []string{"quantum"}})
	}
	park()
	time.Sleep(5 * time.Millisecond) // x is parked after the others (a later score)
	x := create(t, s, store.CreateRequest{RequiredCapabilities: []string{"gpu"}})
	park()
	waitState(t, s, x.ID, store.StateBlocked)
	gpu := store.WorkerIdentity{WorkerID: "g", InstanceID: "g-1", Namespace: "default", Capabilities: []string{"gpu"}}
	if _, err := s.Heartbeat(ctx, store.Registration{Worker: gpu, TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	sc, err := NewUnblock(UnblockConfig{Store: s, Limit: 50, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	promoted := 0
	for range 5 {
		n, _, err := sc.RunOnce(ctx)
		if err != nil {
			t.Fatal(err)
		}
		promoted += n
	}
	if got, err := s.GetExecution(ctx, x.ID); err != nil || got.State.Public != store.StateWaiting || promoted != 1 {
		t.Fatalf("after 5 ticks (limit 50) x is %+v (%v), %d promoted; want x waiting, the only one promoted "+
			"(behind %d executions needing a capability nobody has)", got.State, err, promoted, ahead)
	}
	page, err := s.ListExecutions(ctx, store.ListRequest{Namespace: "default", State: store.StateBlocked, Limit: store.ListLimitMax})
	if err != nil || len(page.Executions) != ahead {
		t.Fatalf("%d executions still parked (%v), want %d", len(page.Executions), err, ahead)
	}
}

// One tick of the unblock scanner shares one quota room over the flow
// partitions: a freed slot of a concurrency-1 quota wakes one blocked
// execution, not one in every partition that has one; and the ticks take
// turns at which partition picks first.
func TestUnblockScannerSharesQuotaRoomAcrossPartitions(t *testing.T) {
	t.Parallel()
	const parts = 4
	s := openStore(t, parts)
	ctx := context.Background()
	if _, err := s.UpsertQuota(ctx, store.QuotaSpec{ID: "default/one", Concurrency: 1}); err != nil {
		t.Fatal(err)
	}
	in := map[int]int{}
	for i := range 24 {
		// Idempotency keys spread them over the partitions.
		x := create(t, s, store.CreateRequest{Quotas: []string{"one"}, IdempotencyKey: fmt.Sprintf("k%d", i)})
		p, _ := x.ID.Partition()
		in[p]++
	}
	if len(in) < 2 {
		t.Fatalf("executions in partitions %v, want several", in)
	}
	// claim grants what it can in every partition until nothing is left
	// eligible: the rest are blocked.
	claim := func() []store.Grant {
		t.Helper()
		var out []store.Grant
		for range 3 {
			for p := range parts {
				g, err := s.ClaimAdmitted(ctx, store.ClaimRequest{Partition: p, Lanes: []string{"default"}, Worker: worker,
					Max: 100, LeaseTTL: time.Minute})
				if err != nil {
					t.Fatal(err)
				}
				out = append(out, g...)
			}
		}
		return out
	}
	sc, err := NewUnblock(UnblockConfig{Store: s, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	held := claim()
	woken := map[int]bool{} // partitions a freed slot woke an execution in
	for range 2 {
		if len(held) != 1 {
			t.Fatalf("granted %d, want one (concurrency 1)", len(held))
		}
		if err := s.Complete(ctx, held[0].Lease, nil); err != nil {
			t.Fatal(err)
		}
		for p := range parts {
			if _, err := s.DrainQuotaReleases(ctx, p, 100); err != nil {
				t.Fatal(err)
			}
		}
		n, _, err := sc.RunOnce(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if n != 1 {
			t.Fatalf("one freed slot woke %d blocked executions (executions per partition %v), want 1", n, in)
		}
		held = claim()
		if len(held) == 1 {
			p, _ := held[0].ExecutionID.Partition()
			woken[p] = true
		}
	}
	if len(woken) != 2 {
		t.Fatalf("two ticks woke executions of partitions %v, want two different ones (turns at the first pick)", woken)
	}
}

func TestBudgetResetAndUnblockScanners(t *testing.T) {
	t.Parallel()
	s := openStore(t, 2)
	ctx := context.Background()
	if _, err := s.UpsertBudget(ctx, store.BudgetSpec{ID: "default/b", Dimensions: []store.BudgetDimension{{Name: "n", Hard: 1}},
		ResetInterval: 300 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ReportUsage(ctx, "default/b", "n", 1, ""); err != nil {
		t.Fatal(err)
	}
	x := create(t, s, store.CreateRequest{Budgets: []string{"b"}})
	p, _ := x.ID.Partition()
	breached, err := s.BreachedBudgets(ctx)
	if err != nil || len(breached) != 1 {
		t.Fatalf("BreachedBudgets = %v, %v", breached, err)
	}
	if g, err := s.ClaimAdmitted(ctx, store.ClaimRequest{Partition: p, Lanes: []string{"default"}, Worker: worker, Max: 1, BreachedBudgets: breached}); err != nil || len(g) != 0 {
		t.Fatalf("ClaimAdmitted = %v, %v", g, err)
	}
	waitState(t, s, x.ID, store.StateBlocked)
	reset, err := NewBudgetReset(BudgetResetConfig{Store: s, Interval: fast, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	unblock, err := NewUnblock(UnblockConfig{Store: s, Interval: fast, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	run(t, reset)
	run(t, unblock)
	waitState(t, s, x.ID, store.StateWaiting)
	if b, err := s.GetBudget(ctx, "default/b"); err != nil || b.Resets < 1 || b.Dimensions[0].Used != 0 {
		t.Fatalf("GetBudget = %+v, %v", b, err)
	}
}

func TestQuotaScannersFreeSlots(t *testing.T) {
	t.Parallel()
	s := openStore(t, 2)
	ctx := context.Background()
	if _, err := s.UpsertQuota(ctx, store.QuotaSpec{ID: "default/q", Concurrency: 1}); err != nil {
		t.Fatal(err)
	}
	a := create(t, s, store.CreateRequest{Quotas: []string{"q"}})
	p, _ := a.ID.Partition()
	g, err := s.ClaimAdmitted(ctx, store.ClaimRequest{Partition: p, Lanes: []string{"default"}, Worker: worker, Max: 1, LeaseTTL: 100 * time.Millisecond})
	if err != nil || len(g) != 1 {
		t.Fatalf("ClaimAdmitted = %v, %v", g, err)
	}
	active := func() int64 {
		q, err := s.GetQuota(ctx, "default/q")
		if err != nil {
			t.Fatal(err)
		}
		return q.Subjects[0].Active
	}
	if active() != 1 {
		t.Fatal("slot not taken")
	}
	// The worker dies: lease expiry queues the release, the release
	// scanner frees the slot.
	expiry, err := NewLeaseExpiry(LeaseExpiryConfig{Store: s, Interval: fast})
	if err != nil {
		t.Fatal(err)
	}
	release, err := NewQuotaRelease(QuotaReleaseConfig{Store: s, Interval: fast})
	if err != nil {
		t.Fatal(err)
	}
	run(t, expiry)
	run(t, release)
	deadline := time.Now().Add(5 * time.Second)
	for active() != 0 {
		if time.Now().After(deadline) {
			t.Fatal("slot of a dead worker never freed")
		}
		time.Sleep(fast)
	}
	// An admission that no claim used is freed by the reconciler.
	if r, err := s.AdmitQuota(ctx, "default/q", store.Admitted{ExecutionID: a.ID, Attempt: 9, Token: "x"}); err != nil || !r.Admitted {
		t.Fatalf("AdmitQuota = %+v, %v", r, err)
	}
	rec, err := NewQuotaReconcile(QuotaReconcileConfig{Store: s, Interval: fast, Grace: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	run(t, rec)
	deadline = time.Now().Add(5 * time.Second)
	for active() != 0 {
		if time.Now().After(deadline) {
			t.Fatal("orphan admission never freed")
		}
		time.Sleep(fast)
	}
}

// A slot freed by the release scanner goes to what waits for it: the
// execution blocked by the quota is made eligible by an unblock tick the
// release kicks, not at the unblock scanner's next interval (an hour
// here), while new work would take the slot.
func TestQuotaReleaseKicksUnblock(t *testing.T) {
	t.Parallel()
	s := openStore(t, 1)
	ctx := context.Background()
	if _, err := s.UpsertQuota(ctx, store.QuotaSpec{ID: "default/one", Concurrency: 1}); err != nil {
		t.Fatal(err)
	}
	claim := func() []store.Grant {
		t.Helper()
		g, err := s.ClaimAdmitted(ctx, store.ClaimRequest{Partition: 0, Lanes: []string{"default"}, Worker: worker, Max: 1, LeaseTTL: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	create(t, s, store.CreateRequest{Quotas: []string{"one"}})
	held := claim()
	if len(held) != 1 {
		t.Fatalf("granted %d, want the slot's holder", len(held))
	}
	waiting := create(t, s, store.CreateRequest{Quotas: []string{"one"}})
	if g := claim(); len(g) != 0 {
		t.Fatalf("granted %d past the cap", len(g))
	}
	waitState(t, s, waiting.ID, store.StateBlocked)
	set, err := NewSet(SetConfig{Store: s, QuotaReleaseInterval: IntervalMin, UnblockInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if err := set.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = set.Stop(ctx) })
	if err := s.Complete(ctx, held[0].Lease, nil); err != nil {
		t.Fatal(err)
	}
	waitState(t, s, waiting.ID, store.StateWaiting) // eligible again: first in line for the slot
	if g := claim(); len(g) != 1 || g[0].ExecutionID != waiting.ID {
		t.Fatalf("the claim after the release granted %v, want %s", g, waiting.ID)
	}
}
