package store

import (
	"bytes"
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flowfabric/ff/lua"
	"github.com/flowfabric/ff/runtime/internal/valkeytest"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/valkey-io/valkey-go"
)

func TestLifecycleCreateClaimComplete(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	payload := []byte{0, 1, 2, 0xff, '\n', 0} // binary-safe
	x := e.create(CreateRequest{Kind: "email.send", Priority: 7, Payload: payload,
		Tags: map[string]string{"tenant": "a"}, RequiredCapabilities: []string{"smtp", "eu"}})
	want := StateVector{Lifecycle: LifecycleRunnable, Ownership: OwnershipUnowned, Eligibility: EligibleNow,
		BlockingReason: WaitingForWorker, Outcome: OutcomeNone, AttemptState: AttemptPendingFirst, Public: StateWaiting}
	if diff := cmp.Diff(want, x.State); diff != "" {
		t.Fatalf("created state (-want +got):\n%s", diff)
	}
	got := e.get(x.ID)
	if diff := cmp.Diff(x, got, cmpopts.IgnoreFields(Execution{}, "Attempts")); diff != "" {
		t.Fatalf("CreateExecution and GetExecution disagree (-create +get):\n%s", diff)
	}

	// A worker without the capabilities gets nothing; one with them does.
	if g := e.claimAll(worker1, 10, 0); len(g) != 0 {
		t.Fatalf("worker without capabilities was granted %v", grantIDs(g))
	}
	w := worker1
	w.Capabilities = []string{"eu", "smtp", "gpu"}
	g := e.claim(x.ID, w, time.Minute)
	if g.Kind != "email.send" || !bytes.Equal(g.Payload, payload) || g.Attempt != 1 || g.AttemptType != AttemptInitial ||
		g.Epoch != 1 || g.Tags["tenant"] != "a" || g.MaxAttempts != 1 {
		t.Fatalf("grant = %+v", g)
	}
	a := e.wantState(x.ID, StateActive)
	if a.Lease == nil || a.Lease.ID != g.ID || a.Lease.WorkerID != "w1" || len(a.Attempts) != 1 || a.Attempts[0].Outcome != AttemptRunningNow {
		t.Fatalf("active execution: lease %+v attempts %+v", a.Lease, a.Attempts)
	}

	result := []byte("\x00result\xfe")
	if err := e.s.Complete(e.ctx, g.Lease, result); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	done := e.wantState(x.ID, StateCompleted)
	if !bytes.Equal(done.Result, result) || done.State.AttemptState != AttemptTerminal || done.EndedAt.IsZero() {
		t.Fatalf("completed execution = %+v", done)
	}
	wantAttempts := []Attempt{{Index: 1, Type: AttemptInitial, WorkerID: "w1", InstanceID: "w1-a", LeaseID: g.ID, LeaseEpoch: 1, Outcome: AttemptSucceeded}}
	if diff := cmp.Diff(wantAttempts, done.Attempts, cmpopts.IgnoreFields(Attempt{}, "StartedAt", "EndedAt")); diff != "" {
		t.Fatalf("attempts (-want +got):\n%s", diff)
	}
	r, err := e.s.Result(e.ctx, x.ID)
	if err != nil || r.State != StateCompleted || !bytes.Equal(r.Result, result) {
		t.Fatalf("Result = %+v, %v", r, err)
	}
	// Completing twice is refused and changes nothing.
	if err := e.s.Complete(e.ctx, g.Lease, []byte("again")); !errors.Is(err, ErrStaleLease) {
		t.Fatalf("second Complete = %v, want ErrStaleLease", err)
	}
	if again := e.get(x.ID); !bytes.Equal(again.Result, result) {
		t.Fatalf("result changed to %q", again.Result)
	}
}

func TestResultNotFinishedAndNotFound(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	x := e.create(CreateRequest{})
	if _, err := e.s.Result(e.ctx, x.ID); !errors.Is(err, ErrNotFinished) {
		t.Fatalf("Result of waiting = %v, want ErrNotFinished", err)
	}
	missing := makeID(0, newUUID())
	if _, err := e.s.GetExecution(e.ctx, missing); !errors.Is(err, ErrNotFound) {
		t.Fatalf("GetExecution(missing) = %v", err)
	}
	if _, err := e.s.Cancel(e.ctx, missing, ""); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Cancel(missing) = %v", err)
	}
	if _, err := e.s.GetExecution(e.ctx, "not-an-id"); !errors.Is(err, ErrInvalid) {
		t.Fatalf("GetExecution(malformed) = %v", err)
	}
	if _, err := e.s.GetExecution(e.ctx, makeID(99, newUUID())); !errors.Is(err, ErrNotFound) {
		t.Fatalf("GetExecution(partition out of range) = %v", err)
	}
}

func TestIdempotentCreate(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	req := CreateRequest{Kind: "k", IdempotencyKey: "order-42", Payload: []byte("first")}
	first, created, err := e.s.CreateExecution(e.ctx, req)
	if err != nil || !created {
		t.Fatalf("first create = %v, %v", created, err)
	}
	req.Payload = []byte("second")
	again, created, err := e.s.CreateExecution(e.ctx, req)
	if err != nil || created || again.ID != first.ID || string(again.Payload) != "first" {
		t.Fatalf("repeat = %s %v %q %v; want %s not created", again.ID, created, again.Payload, err, first.ID)
	}
	// The same key in another namespace is another execution.
	req.Namespace = "other"
	other, created, err := e.s.CreateExecution(e.ctx, req)
	if err != nil || !created || other.ID == first.ID {
		t.Fatalf("other namespace = %s %v %v", other.ID, created, err)
	}
}

func TestRetryWithBackoffThenSuccess(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	x := e.create(CreateRequest{Retry: RetryPolicy{Attempts: 3, Backoff: BackoffExponential, Delay: 200 * time.Millisecond}})
	p, _ := x.ID.Partition()

	g1 := e.claim(x.ID, worker1, time.Minute)
	r, err := e.s.Fail(e.ctx, g1.Lease, "boom 1", true)
	if err != nil || r.State != StateDelayed {
		t.Fatalf("Fail = %+v, %v", r, err)
	}
	d := e.wantState(x.ID, StateDelayed)
	if d.State.BlockingReason != WaitingForRetryBackoff || d.State.AttemptState != AttemptPendingRetry || d.FailureReason != "boom 1" {
		t.Fatalf("after first failure: %+v reason %q", d.State, d.FailureReason)
	}
	backoff := r.RetryAt.Sub(d.UpdatedAt)
	if backoff != 200*time.Millisecond {
		t.Fatalf("first backoff = %s, want 200ms", backoff)
	}
	// Not due yet: promotion does nothing and nothing can be claimed.
	if res, err := e.s.PromoteDelayed(e.ctx, p, 100); err != nil || res.Processed != 0 {
		t.Fatalf("early PromoteDelayed = %+v, %v", res, err)
	}
	waitUntil(t, 2*time.Second, "promotion", func() bool {
		res, err := e.s.PromoteDelayed(e.ctx, p, 100)
		return err == nil && res.Processed == 1
	})
	e.wantState(x.ID, StateWaiting)

	g2 := e.claim(x.ID, worker2, time.Minute)
	if g2.Attempt != 2 || g2.AttemptType != AttemptRetry || g2.Epoch != 2 {
		t.Fatalf("second grant = %+v", g2)
	}
	r, err = e.s.Fail(e.ctx, g2.Lease, "boom 2", true)
	if err != nil || r.State != StateDelayed {
		t.Fatalf("second Fail = %+v, %v", r, err)
	}
	if backoff := r.RetryAt.Sub(e.get(x.ID).UpdatedAt); backoff != 400*time.Millisecond {
		t.Fatalf("second backoff = %s, want 400ms (exponential)", backoff)
	}
	waitUntil(t, 3*time.Second, "promotion", func() bool {
		res, err := e.s.PromoteDelayed(e.ctx, p, 100)
		return err == nil && res.Processed == 1
	})
	g3 := e.claim(x.ID, worker1, time.Minute)
	if err := e.s.Complete(e.ctx, g3.Lease, []byte("ok")); err != nil {
		t.Fatal(err)
	}
	done := e.wantState(x.ID, StateCompleted)
	var outcomes []AttemptOutcome
	for _, a := range done.Attempts {
		outcomes = append(outcomes, a.Outcome)
	}
	if diff := cmp.Diff([]AttemptOutcome{AttemptFailed, AttemptFailed, AttemptSucceeded}, outcomes); diff != "" {
		t.Fatalf("attempt outcomes (-want +got):\n%s", diff)
	}
	if done.Attempts[0].Error != "boom 1" || done.Attempts[1].Type != AttemptRetry {
		t.Fatalf("attempts = %+v", done.Attempts)
	}
}

func TestRetryJitterAndCap(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for range 5 {
		x := e.create(CreateRequest{Retry: RetryPolicy{Attempts: 2, Backoff: BackoffFixed, Delay: 10 * time.Second, Jitter: true}})
		g := e.claim(x.ID, worker1, time.Minute)
		r, err := e.s.Fail(e.ctx, g.Lease, "x", true)
		if err != nil {
			t.Fatal(err)
		}
		d := r.RetryAt.Sub(e.get(x.ID).UpdatedAt)
		if d < 5*time.Second || d > 10*time.Second {
			t.Fatalf("jittered delay %s outside [5s,10s]", d)
		}
	}
	x := e.create(CreateRequest{Retry: RetryPolicy{Attempts: 9, Backoff: BackoffExponential, Delay: time.Second, MaxDelay: 1500 * time.Millisecond}})
	g := e.claim(x.ID, worker1, time.Minute)
	e.s.Fail(e.ctx, g.Lease, "x", true)
	if _, err := e.s.ChangePriority(e.ctx, x.ID, 5); err != nil { // delayed executions accept priority changes
		t.Fatal(err)
	}
	// Retry 2 would be 2s exponential; the cap makes it 1.5s. Force the
	// second attempt by promoting after the first delay.
	p, _ := x.ID.Partition()
	waitUntil(t, 3*time.Second, "promotion", func() bool {
		res, _ := e.s.PromoteDelayed(e.ctx, p, 10)
		return res.Processed == 1
	})
	g = e.claim(x.ID, worker1, time.Minute)
	r, _ := e.s.Fail(e.ctx, g.Lease, "x", true)
	if d := r.RetryAt.Sub(e.get(x.ID).UpdatedAt); d != 1500*time.Millisecond {
		t.Fatalf("capped delay = %s, want 1.5s", d)
	}
}

func TestRetriesExhaustedAndPermanent(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	x := e.create(CreateRequest{Retry: RetryPolicy{Attempts: 2}}) // zero delay: straight back to eligible
	g := e.claim(x.ID, worker1, time.Minute)
	if r, err := e.s.Fail(e.ctx, g.Lease, "first", true); err != nil || r.State != StateWaiting || !r.RetryAt.IsZero() {
		t.Fatalf("Fail with zero backoff = %+v, %v", r, err)
	}
	g = e.claim(x.ID, worker1, time.Minute)
	if r, err := e.s.Fail(e.ctx, g.Lease, "second", true); err != nil || r.State != StateFailed {
		t.Fatalf("last Fail = %+v, %v", r, err)
	}
	f := e.wantState(x.ID, StateFailed)
	if f.FailureReason != "second" || f.AttemptCount != 2 {
		t.Fatalf("failed execution: reason %q attempts %d", f.FailureReason, f.AttemptCount)
	}
	r, err := e.s.Result(e.ctx, x.ID)
	if err != nil || r.Outcome != OutcomeFailed || r.Error != "second" {
		t.Fatalf("Result = %+v, %v", r, err)
	}

	// A permanent failure ends the execution even with attempts left.
	y := e.create(CreateRequest{Retry: RetryPolicy{Attempts: 5}})
	g = e.claim(y.ID, worker1, time.Minute)
	if r, err := e.s.Fail(e.ctx, g.Lease, "bad input", false); err != nil || r.State != StateFailed {
		t.Fatalf("permanent Fail = %+v, %v", r, err)
	}
	e.wantState(y.ID, StateFailed)
}

func TestLeaseExpiryRequeueExactlyOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	// One attempt (no retry): a worker that dies does not use it up.
	x := e.create(CreateRequest{})
	p, _ := x.ID.Partition()
	dead := e.claim(x.ID, worker1, 100*time.Millisecond) // this worker "dies"
	waitUntil(t, 2*time.Second, "lease expiry", func() bool {
		res, err := e.s.ExpireLeases(e.ctx, p, 10)
		return err == nil && res.Processed == 1
	})
	w := e.wantState(x.ID, StateWaiting)
	if w.State.AttemptState != AttemptPendingReclaim || w.Attempts[0].Outcome != AttemptLeaseExpired || w.Reclaims != 1 {
		t.Fatalf("after expiry: %+v reclaims %d attempts %+v", w.State, w.Reclaims, w.Attempts)
	}
	// Running the scanner again (another ffrun) changes nothing.
	if res, err := e.s.ExpireLeases(e.ctx, p, 10); err != nil || res.Processed != 0 {
		t.Fatalf("second ExpireLeases = %+v, %v", res, err)
	}
	live := e.claim(x.ID, worker2, time.Minute)
	if live.AttemptType != AttemptReclaim || live.Attempt != 2 || live.Epoch != 2 {
		t.Fatalf("reclaim grant = %+v", live)
	}
	// The dead worker wakes up: every call is refused and changes nothing.
	before := e.get(x.ID)
	if err := e.s.Complete(e.ctx, dead.Lease, []byte("stale")); !errors.Is(err, ErrStaleLease) {
		t.Fatalf("stale Complete = %v", err)
	}
	if _, err := e.s.Fail(e.ctx, dead.Lease, "stale", true); !errors.Is(err, ErrStaleLease) {
		t.Fatalf("stale Fail = %v", err)
	}
	rr, err := e.s.Renew(e.ctx, []Lease{dead.Lease}, time.Minute)
	if err != nil || !errors.Is(rr[0].Err, ErrStaleLease) {
		t.Fatalf("stale Renew = %+v, %v", rr, err)
	}
	if diff := cmp.Diff(before, e.get(x.ID)); diff != "" {
		t.Fatalf("stale calls changed the execution (-before +after):\n%s", diff)
	}
	if err := e.s.Complete(e.ctx, live.Lease, []byte("once")); err != nil {
		t.Fatal(err)
	}
	done := e.wantState(x.ID, StateCompleted)
	wantTypes := []AttemptType{AttemptInitial, AttemptReclaim}
	var gotTypes []AttemptType
	for _, a := range done.Attempts {
		gotTypes = append(gotTypes, a.Type)
	}
	if string(done.Result) != "once" || !cmp.Equal(wantTypes, gotTypes) {
		t.Fatalf("done: result %q attempts %+v", done.Result, done.Attempts)
	}
}

func TestReclaimsExhausted(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	// Two reclaims allowed: the third lost lease fails it.
	y := e.create(CreateRequest{MaxReclaims: 2})
	py, _ := y.ID.Partition()
	var outcomes []PublicState
	for range 3 {
		e.claim(y.ID, worker1, 100*time.Millisecond)
		waitUntil(t, 2*time.Second, "lease expiry", func() bool {
			res, _ := e.s.ExpireLeases(e.ctx, py, 10)
			return res.Processed == 1
		})
		outcomes = append(outcomes, e.check(y.ID).State.Public)
	}
	if diff := cmp.Diff([]PublicState{StateWaiting, StateWaiting, StateFailed}, outcomes); diff != "" {
		t.Fatalf("states after each lost lease (-want +got):\n%s", diff)
	}
	f := e.get(y.ID)
	if !strings.HasPrefix(f.FailureReason, "reclaims_exhausted") || f.Reclaims != 3 || f.MaxReclaims != 2 || len(f.Attempts) != 3 {
		t.Fatalf("failed execution: reason %q reclaims %d/%d attempts %d", f.FailureReason, f.Reclaims, f.MaxReclaims, len(f.Attempts))
	}

	// A reclaim does not use the retry policy's attempts, but a failure
	// after it does: with one attempt, the failure is final.
	z := e.create(CreateRequest{})
	pz, _ := z.ID.Partition()
	e.claim(z.ID, worker1, 100*time.Millisecond)
	waitUntil(t, 2*time.Second, "lease expiry", func() bool {
		res, _ := e.s.ExpireLeases(e.ctx, pz, 10)
		return res.Processed == 1
	})
	g := e.claim(z.ID, worker2, time.Minute)
	if res, err := e.s.Fail(e.ctx, g.Lease, "boom", true); err != nil || res.State != StateFailed {
		t.Fatalf("Fail after reclaim = %+v, %v", res, err)
	}

	// An attempt timeout stays a charged failure.
	to := e.create(CreateRequest{AttemptTimeout: 50 * time.Millisecond})
	pt, _ := to.ID.Partition()
	e.claim(to.ID, worker1, time.Minute)
	waitUntil(t, 2*time.Second, "attempt timeout", func() bool {
		res, _ := e.s.TimeoutAttempts(e.ctx, pt, 10)
		return res.Processed == 1
	})
	if x := e.wantState(to.ID, StateFailed); x.FailureReason != "attempt timed out" || x.Reclaims != 0 {
		t.Fatalf("timed out: reason %q reclaims %d", x.FailureReason, x.Reclaims)
	}

	// Bad allowances are refused.
	if _, _, err := e.s.CreateExecution(e.ctx, CreateRequest{Kind: "k", MaxReclaims: -1}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("MaxReclaims -1 = %v", err)
	}
}

func TestExpiredLeaseRefusedBeforeScanner(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	x := e.create(CreateRequest{Retry: RetryPolicy{Attempts: 3}})
	g := e.claim(x.ID, worker1, 100*time.Millisecond)
	time.Sleep(150 * time.Millisecond)
	var le *LeaseError
	if err := e.s.Complete(e.ctx, g.Lease, nil); !errors.As(err, &le) || le.Reason != LeaseReasonExpired {
		t.Fatalf("Complete after expiry = %v, want lease_expired", err)
	}
	// The refusal applied the expiry: the execution is eligible again.
	e.wantState(x.ID, StateWaiting)
}

// TestLimitsPassedRefusedBeforeScanner: a report or renew that comes
// after the attempt's timeout or the execution's deadline is refused and
// ends the attempt as the scanner would have, whether or not the scanner
// came by: the outcome does not depend on its timing. When two limits
// passed, the first to pass decides.
func TestLimitsPassedRefusedBeforeScanner(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	wantRefused := func(what string, err error, reason string) {
		t.Helper()
		var le *LeaseError
		if !errors.As(err, &le) || le.Reason != reason {
			t.Fatalf("%s = %v, want %s", what, err, reason)
		}
	}
	// A success after the attempt timeout: the attempt timed out, and is
	// retried (attempts remain); the result is not kept.
	x := e.create(CreateRequest{AttemptTimeout: 50 * time.Millisecond, Retry: RetryPolicy{Attempts: 2}})
	g := e.claim(x.ID, worker1, time.Minute)
	time.Sleep(70 * time.Millisecond)
	wantRefused("Complete after the timeout", e.s.Complete(e.ctx, g.Lease, []byte(`"late"`)), LeaseReasonTimedOut)
	w := e.wantState(x.ID, StateWaiting)
	if len(w.Attempts) != 1 || w.Attempts[0].Outcome != AttemptTimedOut || len(w.Result) != 0 {
		t.Fatalf("after the refused complete: attempts %+v, result %q", w.Attempts, w.Result)
	}
	// The same through a renew, on the last attempt: failed for good.
	g = e.claim(x.ID, worker1, time.Minute)
	time.Sleep(70 * time.Millisecond)
	rr, err := e.s.Renew(e.ctx, []Lease{g.Lease}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	wantRefused("Renew after the timeout", rr[0].Err, LeaseReasonTimedOut)
	if f := e.wantState(x.ID, StateFailed); f.FailureReason != "attempt timed out" {
		t.Fatalf("reason %q", f.FailureReason)
	}
	p, _ := x.ID.Partition()
	if res, err := e.s.TimeoutAttempts(e.ctx, p, 10); err != nil || res.Processed != 0 {
		t.Fatalf("the scanner found %+v, %v after the call applied the timeout", res, err)
	}

	// A failure report after the execution's deadline: expired, not retried.
	d := e.create(CreateRequest{Deadline: 50 * time.Millisecond, Retry: RetryPolicy{Attempts: 3}})
	g = e.claim(d.ID, worker1, time.Minute)
	time.Sleep(70 * time.Millisecond)
	_, err = e.s.Fail(e.ctx, g.Lease, "boom", true)
	wantRefused("Fail after the deadline", err, LeaseReasonDeadline)
	e.wantState(d.ID, StateExpired)

	// Both passed: the lease expired first, so the attempt is a reclaim (not
	// charged), not a timeout.
	b := e.create(CreateRequest{AttemptTimeout: 300 * time.Millisecond, Retry: RetryPolicy{Attempts: 1}})
	g = e.claim(b.ID, worker1, LeaseTTLMin)
	time.Sleep(350 * time.Millisecond)
	wantRefused("Complete after both", e.s.Complete(e.ctx, g.Lease, nil), LeaseReasonExpired)
	if w := e.wantState(b.ID, StateWaiting); w.Reclaims != 1 {
		t.Fatalf("reclaims %d, want 1", w.Reclaims)
	}
}

// TestCompleteSentAgain: a worker whose complete went through but whose
// answer was lost sends it again; the repeat (same lease, same output) is
// answered as recorded and changes nothing. Any other late call of the
// lease, another output included, stays refused.
func TestCompleteSentAgain(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	x := e.create(CreateRequest{Retry: RetryPolicy{Attempts: 2}})
	g := e.claim(x.ID, worker1, time.Minute)
	if err := e.s.Complete(e.ctx, g.Lease, []byte(`"first"`)); err != nil {
		t.Fatal(err)
	}
	before := e.get(x.ID)
	if err := e.s.Complete(e.ctx, g.Lease, []byte(`"first"`)); err != nil {
		t.Fatalf("the same complete again = %v, want it answered as recorded", err)
	}
	if diff := cmp.Diff(before, e.get(x.ID)); diff != "" {
		t.Fatalf("the repeat changed the execution (-before +after):\n%s", diff)
	}
	var le *LeaseError
	if err := e.s.Complete(e.ctx, g.Lease, []byte(`"second"`)); !errors.As(err, &le) || le.Reason != LeaseReasonNotActive {
		t.Fatalf("a complete with another output = %v, want not_active", err)
	}
	if _, err := e.s.Fail(e.ctx, g.Lease, "late", true); !errors.As(err, &le) || le.Reason != LeaseReasonNotActive {
		t.Fatalf("a fail after the success = %v, want not_active", err)
	}
	if err := e.s.Complete(e.ctx, Lease{ExecutionID: x.ID, ID: g.ID, Epoch: g.Epoch + 1}, nil); !errors.As(err, &le) || le.Reason != LeaseReasonNotActive {
		t.Fatalf("a complete of another epoch = %v, want not_active", err)
	}
	// A success after the attempt failed is no repeat: refused.
	y := e.create(CreateRequest{Retry: RetryPolicy{Attempts: 1}})
	gy := e.claim(y.ID, worker1, time.Minute)
	if _, err := e.s.Fail(e.ctx, gy.Lease, "boom", false); err != nil {
		t.Fatal(err)
	}
	if err := e.s.Complete(e.ctx, gy.Lease, nil); !errors.As(err, &le) || le.Reason != LeaseReasonNotActive {
		t.Fatalf("a complete after the failure = %v, want not_active", err)
	}
}

// TestFailSentAgain: as TestCompleteSentAgain for a failure: the repeat
// (same lease, same message) is answered as the first was (a retry's due
// time included) and changes nothing; another message stays refused.
func TestFailSentAgain(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	x := e.create(CreateRequest{Retry: RetryPolicy{Attempts: 2, Delay: time.Hour, MaxDelay: time.Hour}})
	g := e.claim(x.ID, worker1, time.Minute)
	first, err := e.s.Fail(e.ctx, g.Lease, "boom", true)
	if err != nil || first.State != StateDelayed {
		t.Fatalf("Fail = %+v, %v; want delayed", first, err)
	}
	before := e.get(x.ID)
	again, err := e.s.Fail(e.ctx, g.Lease, "boom", true)
	if err != nil || again != first {
		t.Fatalf("the same fail again = %+v, %v; want %+v", again, err, first)
	}
	if diff := cmp.Diff(before, e.get(x.ID)); diff != "" {
		t.Fatalf("the repeat changed the execution (-before +after):\n%s", diff)
	}
	var le *LeaseError
	if _, err := e.s.Fail(e.ctx, g.Lease, "other", true); !errors.As(err, &le) || le.Reason != LeaseReasonNotActive {
		t.Fatalf("a fail with another message = %v, want not_active", err)
	}
	if err := e.s.Complete(e.ctx, g.Lease, nil); !errors.As(err, &le) || le.Reason != LeaseReasonNotActive {
		t.Fatalf("a complete after the failure = %v, want not_active", err)
	}
	// A final failure: answered failed again.
	y := e.create(CreateRequest{Retry: RetryPolicy{Attempts: 1}})
	gy := e.claim(y.ID, worker1, time.Minute)
	if _, err := e.s.Fail(e.ctx, gy.Lease, "bad input", false); err != nil {
		t.Fatal(err)
	}
	if r, err := e.s.Fail(e.ctx, gy.Lease, "bad input", false); err != nil || r.State != StateFailed {
		t.Fatalf("the final failure again = %+v, %v; want failed", r, err)
	}
}

func TestStaleLeaseAndEpoch(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	x := e.create(CreateRequest{})
	g := e.claim(x.ID, worker1, time.Minute)
	before := e.get(x.ID)
	for name, l := range map[string]Lease{
		"wrong id":    {ExecutionID: x.ID, ID: "nope", Epoch: g.Epoch},
		"wrong epoch": {ExecutionID: x.ID, ID: g.ID, Epoch: g.Epoch + 1},
	} {
		var le *LeaseError
		if err := e.s.Complete(e.ctx, l, nil); !errors.As(err, &le) || le.Reason != LeaseReasonMismatch || le.State != StateActive {
			t.Fatalf("%s: Complete = %v", name, err)
		}
	}
	if diff := cmp.Diff(before, e.get(x.ID)); diff != "" {
		t.Fatalf("stale calls changed the execution (-before +after):\n%s", diff)
	}
}

func TestCancel(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	// While running: the worker's calls are refused afterwards.
	x := e.create(CreateRequest{})
	g := e.claim(x.ID, worker1, time.Minute)
	c, err := e.s.Cancel(e.ctx, x.ID, "operator said so")
	if err != nil || c.State.Public != StateCancelled {
		t.Fatalf("Cancel = %+v, %v", c, err)
	}
	e.wantState(x.ID, StateCancelled)
	if c.Attempts[0].Outcome != AttemptCancelled || c.FailureReason != "operator said so" {
		t.Fatalf("cancelled: attempts %+v reason %q", c.Attempts, c.FailureReason)
	}
	var le *LeaseError
	if err := e.s.Complete(e.ctx, g.Lease, nil); !errors.As(err, &le) || le.State != StateCancelled {
		t.Fatalf("Complete after cancel = %v", err)
	}
	rr, _ := e.s.Renew(e.ctx, []Lease{g.Lease}, time.Minute)
	if !errors.Is(rr[0].Err, ErrStaleLease) {
		t.Fatalf("Renew after cancel = %v", rr[0].Err)
	}
	// Idempotent.
	if _, err := e.s.Cancel(e.ctx, x.ID, ""); err != nil {
		t.Fatalf("second Cancel = %v", err)
	}
	// Waiting and delayed ones.
	w := e.create(CreateRequest{})
	d := e.create(CreateRequest{Delay: time.Hour, Deadline: 2 * time.Hour})
	for _, id := range []ExecutionID{w.ID, d.ID} {
		if _, err := e.s.Cancel(e.ctx, id, ""); err != nil {
			t.Fatal(err)
		}
		e.wantState(id, StateCancelled)
	}
	if len(e.claimAll(worker1, 10, 0)) != 0 {
		t.Fatal("a cancelled execution was claimed")
	}
	// Another terminal state cannot be cancelled.
	y := e.create(CreateRequest{})
	gy := e.claim(y.ID, worker1, time.Minute)
	e.s.Complete(e.ctx, gy.Lease, nil)
	if _, err := e.s.Cancel(e.ctx, y.ID, ""); !errors.Is(err, ErrWrongState) {
		t.Fatalf("Cancel of completed = %v", err)
	}
}

func TestDelayUntil(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	x := e.create(CreateRequest{Delay: 300 * time.Millisecond})
	d := e.wantState(x.ID, StateDelayed)
	if d.State.BlockingReason != WaitingForDelay || d.EligibleAt.Sub(d.CreatedAt) != 300*time.Millisecond {
		t.Fatalf("delayed: %+v eligible at %s", d.State, d.EligibleAt)
	}
	if len(e.claimAll(worker1, 10, 0)) != 0 {
		t.Fatal("a delayed execution was claimed")
	}
	p, _ := x.ID.Partition()
	waitUntil(t, 2*time.Second, "promotion", func() bool {
		res, _ := e.s.PromoteDelayed(e.ctx, p, 10)
		return res.Processed == 1
	})
	if g := e.claim(x.ID, worker1, time.Minute); g.AttemptType != AttemptInitial {
		t.Fatalf("grant after delay = %+v", g)
	}
	// An absolute time in the past is eligible at once.
	y := e.create(CreateRequest{DelayUntil: time.Now().Add(-time.Hour)})
	e.wantState(y.ID, StateWaiting)
	z := e.create(CreateRequest{DelayUntil: time.Now().Add(time.Hour)})
	e.wantState(z.ID, StateDelayed)
}

func TestExecutionDeadline(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	waiting := e.create(CreateRequest{Deadline: 500 * time.Millisecond})
	running := e.create(CreateRequest{Deadline: 500 * time.Millisecond, Priority: 10}) // claimed first
	later := e.create(CreateRequest{Deadline: time.Hour})
	g := e.claim(running.ID, worker1, time.Minute)
	time.Sleep(550 * time.Millisecond)
	n := 0
	for p := range e.s.FlowPartitions() {
		res, err := e.s.ExpireDeadlines(e.ctx, p, 10)
		if err != nil {
			t.Fatal(err)
		}
		n += res.Processed
	}
	if n != 2 {
		t.Fatalf("expired %d, want 2", n)
	}
	e.wantState(waiting.ID, StateExpired)
	r := e.wantState(running.ID, StateExpired)
	if r.Attempts[0].Outcome != AttemptExpired {
		t.Fatalf("attempts = %+v", r.Attempts)
	}
	if err := e.s.Complete(e.ctx, g.Lease, nil); !errors.Is(err, ErrStaleLease) {
		t.Fatalf("Complete after deadline = %v", err)
	}
	e.wantState(later.ID, StateWaiting)
}

func TestAttemptTimeout(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	x := e.create(CreateRequest{AttemptTimeout: 100 * time.Millisecond, Retry: RetryPolicy{Attempts: 2}})
	p, _ := x.ID.Partition()
	g := e.claim(x.ID, worker1, time.Minute)
	if g.AttemptDeadline.Sub(g.LeaseExpiresAt.Add(-time.Minute)) != 100*time.Millisecond {
		t.Fatalf("attempt deadline %s, lease expiry %s", g.AttemptDeadline, g.LeaseExpiresAt)
	}
	waitUntil(t, 2*time.Second, "attempt timeout", func() bool {
		res, _ := e.s.TimeoutAttempts(e.ctx, p, 10)
		return res.Processed == 1
	})
	w := e.wantState(x.ID, StateWaiting) // retried at once (zero backoff)
	if w.Attempts[0].Outcome != AttemptTimedOut {
		t.Fatalf("attempts = %+v", w.Attempts)
	}
	if err := e.s.Complete(e.ctx, g.Lease, nil); !errors.Is(err, ErrStaleLease) {
		t.Fatalf("Complete after timeout = %v", err)
	}
	e.claim(x.ID, worker1, time.Minute)
	waitUntil(t, 2*time.Second, "attempt timeout", func() bool {
		res, _ := e.s.TimeoutAttempts(e.ctx, p, 10)
		return res.Processed == 1
	})
	if f := e.wantState(x.ID, StateFailed); f.FailureReason != "attempt timed out" {
		t.Fatalf("reason %q", f.FailureReason)
	}
}

func TestPriorityOrderingAndChange(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *Config) { c.FlowPartitions = 1 })
	low1 := e.create(CreateRequest{Priority: 1})
	high := e.create(CreateRequest{Priority: 900})
	time.Sleep(2 * time.Millisecond) // equal priorities go by creation time, in milliseconds
	low2 := e.create(CreateRequest{Priority: 1})
	mid := e.create(CreateRequest{Priority: 500})
	boosted := e.create(CreateRequest{Priority: 0})
	if _, err := e.s.ChangePriority(e.ctx, boosted.ID, 1000); err != nil {
		t.Fatal(err)
	}
	e.check(boosted.ID)
	g := e.claimAll(worker1, 10, time.Minute)
	want := []ExecutionID{boosted.ID, high.ID, mid.ID, low1.ID, low2.ID}
	if diff := cmp.Diff(want, grantIDs(g)); diff != "" {
		t.Fatalf("claim order (-want +got):\n%s", diff)
	}
	if _, err := e.s.ChangePriority(e.ctx, high.ID, 3); !errors.Is(err, ErrWrongState) {
		t.Fatalf("ChangePriority of active = %v", err)
	}
	if _, err := e.s.ChangePriority(e.ctx, high.ID, 1001); !errors.Is(err, ErrInvalid) {
		t.Fatalf("ChangePriority out of range = %v", err)
	}
}

func TestClaimAcrossLanesAndBatch(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *Config) { c.FlowPartitions = 1 })
	a := e.create(CreateRequest{Lane: "a", Priority: 10})
	b := e.create(CreateRequest{Lane: "b", Priority: 20})
	e.create(CreateRequest{Lane: "c", Priority: 30})
	// Eligible order is priority, then creation time in ms: one created in
	// the same millisecond as a would tie with it (and go by id).
	time.Sleep(2 * time.Millisecond)
	a2 := e.create(CreateRequest{Lane: "a", Priority: 10})
	g := e.claimAll(worker1, 2, time.Minute, "a", "b")
	if diff := cmp.Diff([]ExecutionID{b.ID, a.ID}, grantIDs(g)); diff != "" {
		t.Fatalf("grants (-want +got):\n%s", diff)
	}
	if g[0].Lane != "b" || g[0].ID == g[1].ID {
		t.Fatalf("grants = %+v", g)
	}
	// Another namespace sees nothing.
	w := worker1
	w.Namespace = "elsewhere"
	if g := e.claimAll(w, 10, time.Minute, "a", "b", "c"); len(g) != 0 {
		t.Fatalf("other namespace granted %v", grantIDs(g))
	}
	rest := e.claimAll(worker1, 10, time.Minute, "a")
	if diff := cmp.Diff([]ExecutionID{a2.ID}, grantIDs(rest)); diff != "" {
		t.Fatalf("rest (-want +got):\n%s", diff)
	}
}

func TestRevokeLease(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	x := e.create(CreateRequest{}) // one attempt: a revoke is not charged
	g := e.claim(x.ID, worker1, time.Minute)
	r, err := e.s.RevokeLease(e.ctx, x.ID, "draining host")
	if err != nil || r.State.Public != StateWaiting || r.State.AttemptState != AttemptPendingReclaim {
		t.Fatalf("RevokeLease = %+v, %v", r, err)
	}
	e.check(x.ID)
	if err := e.s.Complete(e.ctx, g.Lease, nil); !errors.Is(err, ErrStaleLease) {
		t.Fatalf("Complete after revoke = %v", err)
	}
	g2 := e.claim(x.ID, worker2, time.Minute)
	if g2.AttemptType != AttemptReclaim || g2.Epoch != 2 {
		t.Fatalf("grant after revoke = %+v", g2)
	}
	if err := e.s.Complete(e.ctx, g2.Lease, nil); err != nil {
		t.Fatal(err)
	}
	done := e.wantState(x.ID, StateCompleted)
	if done.Attempts[0].Outcome != AttemptRevoked || done.Attempts[0].Error != "draining host" {
		t.Fatalf("attempts = %+v", done.Attempts)
	}
	if _, err := e.s.RevokeLease(e.ctx, x.ID, ""); !errors.Is(err, ErrWrongState) {
		t.Fatalf("RevokeLease of completed = %v", err)
	}
}

// TestRevokeLeaseOf: a revoke fenced by a lease takes only that lease.
func TestRevokeLeaseOf(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	x := e.create(CreateRequest{})
	old := e.claim(x.ID, worker1, time.Minute)
	if _, err := e.s.RevokeLease(e.ctx, x.ID, "operator"); err != nil {
		t.Fatal(err)
	}
	cur := e.claim(x.ID, worker2, time.Minute)
	if _, err := e.s.RevokeLeaseOf(e.ctx, old.Lease, "late hand-back"); !errors.Is(err, ErrStaleLease) {
		t.Fatalf("RevokeLeaseOf an old lease = %v, want ErrStaleLease", err)
	}
	e.wantState(x.ID, StateActive)
	r, err := e.s.RevokeLeaseOf(e.ctx, cur.Lease, "hand-back")
	if err != nil || r.State.Public != StateWaiting {
		t.Fatalf("RevokeLeaseOf the current lease = %+v, %v", r, err)
	}
	e.check(x.ID)
}

// TestRevokeGrants: only the lease given is revoked (fenced by id and
// epoch); the attempt is not charged and the execution is claimable again.
func TestRevokeGrants(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	x := e.create(CreateRequest{}) // one attempt: a revoke is not charged
	g := e.claim(x.ID, worker1, time.Minute)
	stale := g.Lease
	stale.Epoch++
	if n, err := e.s.RevokeGrants(e.ctx, []Lease{stale}, "gone"); err != nil || n != 0 {
		t.Fatalf("RevokeGrants of another epoch = %d, %v; want 0 revoked", n, err)
	}
	e.wantState(x.ID, StateActive)
	if n, err := e.s.RevokeGrants(e.ctx, []Lease{g.Lease}, "gone"); err != nil || n != 1 {
		t.Fatalf("RevokeGrants = %d, %v; want 1 revoked", n, err)
	}
	e.check(x.ID)
	r := e.wantState(x.ID, StateWaiting)
	if r.State.AttemptState != AttemptPendingReclaim || r.Attempts[0].Outcome != AttemptRevoked || r.Attempts[0].Error != "gone" {
		t.Fatalf("after RevokeGrants: %+v", r)
	}
	if n, err := e.s.RevokeGrants(e.ctx, []Lease{g.Lease}, "gone"); err != nil || n != 0 {
		t.Fatalf("RevokeGrants again = %d, %v; want 0 revoked", n, err)
	}
	g2 := e.claim(x.ID, worker2, time.Minute)
	if err := e.s.Complete(e.ctx, g2.Lease, nil); err != nil {
		t.Fatalf("complete after revoke: %v", err)
	}
}

func TestRenewBatch(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for range 8 {
		e.create(CreateRequest{})
	}
	g := e.claimAll(worker1, 8, 500*time.Millisecond)
	if len(g) != 8 {
		t.Fatalf("granted %d", len(g))
	}
	leases := []Lease{{ExecutionID: "bad"}}
	for _, x := range g {
		leases = append(leases, x.Lease)
	}
	res, err := e.s.Renew(e.ctx, leases, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(res[0].Err, ErrInvalid) {
		t.Fatalf("malformed id: %v", res[0].Err)
	}
	for i, r := range res[1:] {
		if r.Err != nil || r.ExpiresAt.Before(g[i].LeaseExpiresAt.Add(30*time.Second)) {
			t.Fatalf("renew %d = %+v", i, r)
		}
	}
	time.Sleep(550 * time.Millisecond) // past the first expiry, not the renewed one
	for p := range e.s.FlowPartitions() {
		if res, _ := e.s.ExpireLeases(e.ctx, p, 10); res.Processed != 0 {
			t.Fatalf("renewed leases expired on partition %d", p)
		}
	}
	for _, x := range g {
		e.wantState(x.ExecutionID, StateActive)
	}
}

func TestFinishManyAcrossPartitions(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for range 12 {
		e.create(CreateRequest{Retry: RetryPolicy{Attempts: 2, Delay: time.Hour}})
	}
	g := e.claimAll(worker1, 12, time.Minute)
	if len(g) != 12 {
		t.Fatalf("granted %d", len(g))
	}
	var items []Finish
	for i, x := range g {
		switch i % 3 {
		case 0:
			items = append(items, Finish{Lease: x.Lease, Result: []byte{byte(i)}})
		case 1:
			items = append(items, Finish{Lease: x.Lease, Failed: true, Error: "retry me", Retryable: true})
		case 2:
			items = append(items, Finish{Lease: x.Lease, Failed: true, Error: "give up"})
		}
	}
	items = append(items, Finish{Lease: g[0].Lease, Result: []byte("dup")}) // stale by then
	res, err := e.s.FinishMany(e.ctx, items)
	if err != nil {
		t.Fatal(err)
	}
	for i, x := range g {
		want := []PublicState{StateCompleted, StateDelayed, StateFailed}[i%3]
		if res[i].Err != nil || res[i].State != want {
			t.Fatalf("item %d = %+v, want %s", i, res[i], want)
		}
		e.wantState(x.ExecutionID, want)
	}
	if !errors.Is(res[12].Err, ErrStaleLease) {
		t.Fatalf("duplicate completion = %v", res[12].Err)
	}
	if r := e.get(g[0].ExecutionID); !bytes.Equal(r.Result, []byte{0}) {
		t.Fatalf("result %v", r.Result)
	}
}

// TestFinishManyOnePartitionFails: when the call of one partition fails
// (here a Lua error: the record is not a hash), its items carry the error
// and the other partitions' finishes stand and are reported; when every
// call fails, the whole request does.
func TestFinishManyOnePartitionFails(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	// Two executions on two partitions (the idempotency key places them).
	byPart := map[int]ExecutionID{}
	for i := 0; len(byPart) < 2; i++ {
		x := e.create(CreateRequest{Kind: "k", IdempotencyKey: "key-" + strconv.Itoa(i)})
		p, _, err := splitID(string(x.ID))
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := byPart[p]; !ok {
			byPart[p] = x.ID
		}
	}
	g := e.claimAll(worker1, 10, time.Minute)
	var good, bad Grant
	for _, x := range g {
		p, uuid, _ := splitID(string(x.ExecutionID))
		switch {
		case good.ExecutionID == "" && byPart[p] == x.ExecutionID:
			good = x
		case bad.ExecutionID == "" && byPart[p] == x.ExecutionID:
			bad = x
			key := e.s.k.core(p, uuid)
			if err := e.c.Do(e.ctx, e.c.B().Set().Key(key).Value("not a hash").Build()).Error(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if good.ExecutionID == "" || bad.ExecutionID == "" {
		t.Fatalf("claimed %v", grantIDs(g))
	}
	res, err := e.s.FinishMany(e.ctx, []Finish{{Lease: good.Lease, Result: []byte(`1`)}, {Lease: bad.Lease, Result: []byte(`2`)}})
	if err != nil {
		t.Fatalf("FinishMany with one failing partition = %v, want per-item results", err)
	}
	if res[0].Err != nil || res[0].State != StateCompleted || res[1].Err == nil {
		t.Fatalf("results = %+v", res)
	}
	e.wantState(good.ExecutionID, StateCompleted)
	if _, err := e.s.FinishMany(e.ctx, []Finish{{Lease: bad.Lease, Result: []byte(`2`)}}); err == nil {
		t.Fatal("FinishMany whose every call fails = nil error")
	}
}

func TestValidationWritesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	before := e.keys()
	huge := make([]byte, MaxPayloadBytes+1)
	for _, tc := range []struct {
		name  string
		req   CreateRequest
		field string
	}{
		{"no kind", CreateRequest{}, "kind"},
		{"bad lane", CreateRequest{Kind: "k", Lane: "a:b"}, "lane"},
		{"bad namespace", CreateRequest{Kind: "k", Namespace: "has space"}, "namespace"},
		{"kind with space", CreateRequest{Kind: "a b"}, "kind"},
		{"priority", CreateRequest{Kind: "k", Priority: 1001}, "priority"},
		{"payload", CreateRequest{Kind: "k", Payload: huge}, "payload"},
		{"capability", CreateRequest{Kind: "k", RequiredCapabilities: []string{"a,b"}}, "required_capabilities"},
		{"empty capability", CreateRequest{Kind: "k", RequiredCapabilities: []string{""}}, "required_capabilities"},
		{"retry attempts", CreateRequest{Kind: "k", Retry: RetryPolicy{Attempts: -1}}, "retry.attempts"},
		{"retry backoff", CreateRequest{Kind: "k", Retry: RetryPolicy{Backoff: "linear"}}, "retry.backoff"},
		{"negative timeout", CreateRequest{Kind: "k", AttemptTimeout: -time.Second}, "attempt_timeout"},
		{"delay and until", CreateRequest{Kind: "k", Delay: time.Second, DelayUntil: time.Now()}, "delay_until"},
		{"idempotency key", CreateRequest{Kind: "k", IdempotencyKey: "a\nb"}, "idempotency_key"},
	} {
		_, _, err := e.s.CreateExecution(e.ctx, tc.req)
		var ve *ValidationError
		if !errors.As(err, &ve) || ve.Field != tc.field || !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: err = %v, want a validation error on %q", tc.name, err, tc.field)
		}
	}
	if _, _, err := e.s.CreateExecution(e.ctx, CreateRequest{Kind: "k", Payload: huge}); !errors.Is(err, ErrTooLarge) {
		t.Errorf("oversize payload: %v, want ErrTooLarge", err)
	}
	if _, err := e.s.Claim(e.ctx, ClaimRequest{Partition: 0, Lanes: []string{"default"}, Worker: worker1, Max: 0}); !errors.Is(err, ErrInvalid) {
		t.Errorf("claim max 0: %v", err)
	}
	if diff := cmp.Diff(before, e.keys()); diff != "" {
		t.Errorf("refused creates and claims changed keys (-before +after):\n%s", diff)
	}
	x := e.create(CreateRequest{})
	g := e.claim(x.ID, worker1, time.Minute)
	before = e.keys()
	snapshot := e.get(x.ID)
	if err := e.s.Complete(e.ctx, g.Lease, huge); !errors.Is(err, ErrTooLarge) {
		t.Errorf("oversize result: %v", err)
	}
	if diff := cmp.Diff(before, e.keys()); diff != "" {
		t.Errorf("refused requests changed keys (-before +after):\n%s", diff)
	}
	if diff := cmp.Diff(snapshot, e.get(x.ID)); diff != "" {
		t.Errorf("refused result changed the execution:\n%s", diff)
	}
}

func TestValidationBeforeCreateWritesNoKeys(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	before := e.keys()
	e.s.CreateExecution(e.ctx, CreateRequest{Kind: "k", Priority: -1})
	if diff := cmp.Diff(before, e.keys()); diff != "" {
		t.Fatalf("keys changed (-before +after):\n%s", diff)
	}
}

func TestRetentionPurges(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *Config) { c.FlowPartitions = 1 })
	before := e.keys()
	x := e.create(CreateRequest{IdempotencyKey: "keep-once", Deadline: time.Hour})
	y := e.create(CreateRequest{Retry: RetryPolicy{Attempts: 3}})
	g := e.claimAll(worker1, 2, time.Minute)
	for _, gr := range g {
		if gr.ExecutionID == y.ID {
			e.s.Fail(e.ctx, gr.Lease, "once", true)
		} else {
			e.s.Complete(e.ctx, gr.Lease, []byte("r"))
		}
	}
	// Young terminal executions are kept; waiting ones are never purged.
	if res, err := e.s.PurgeTerminal(e.ctx, 0, time.Hour, 10); err != nil || res.Processed != 0 {
		t.Fatalf("PurgeTerminal(1h) = %+v, %v", res, err)
	}
	time.Sleep(5 * time.Millisecond)
	res, err := e.s.PurgeTerminal(e.ctx, 0, time.Millisecond, 10)
	if err != nil || res.Processed != 1 || res.More {
		t.Fatalf("PurgeTerminal = %+v, %v", res, err)
	}
	if _, err := e.s.GetExecution(e.ctx, x.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("purged execution: %v", err)
	}
	e.wantState(y.ID, StateWaiting)
	// The idempotency key is gone with it: the key may be reused.
	z, created, err := e.s.CreateExecution(e.ctx, CreateRequest{Kind: "k", IdempotencyKey: "keep-once"})
	if err != nil || !created || z.ID == x.ID {
		t.Fatalf("reuse of purged key: %v %v", created, err)
	}
	e.s.Cancel(e.ctx, z.ID, "")
	e.s.Cancel(e.ctx, y.ID, "")
	time.Sleep(5 * time.Millisecond)
	if res, _ := e.s.PurgeTerminal(e.ctx, 0, time.Millisecond, 1); res.Processed != 1 || !res.More {
		t.Fatalf("bounded purge = %+v", res)
	}
	e.s.PurgeTerminal(e.ctx, 0, time.Millisecond, 10)
	// Nothing is left but the lane registry.
	after := e.keys()
	var extra []string
	for _, k := range after {
		if !strings.HasSuffix(k, ":lanes") && !strings.HasSuffix(k, "ff:config") && !strings.HasSuffix(k, "ff:libraries") && !claimMemory(k) {
			extra = append(extra, k)
		}
	}
	if len(extra) != 0 {
		t.Fatalf("keys left after purge: %v (before: %v)", extra, before)
	}
}

func TestListExecutions(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var all []ExecutionID
	for i := range 7 {
		x := e.create(CreateRequest{Lane: []string{"a", "b"}[i%2]})
		all = append(all, x.ID)
	}
	other := e.create(CreateRequest{Namespace: "other"})
	g := e.claimAll(worker1, 2, time.Minute, "a")
	e.s.Complete(e.ctx, g[0].Lease, nil)

	list := func(req ListRequest) []ExecutionID {
		t.Helper()
		var ids []ExecutionID
		for pages := 0; ; pages++ {
			page, err := e.s.ListExecutions(e.ctx, req)
			if err != nil {
				t.Fatalf("ListExecutions(%+v): %v", req, err)
			}
			for _, x := range page.Executions {
				ids = append(ids, x.ID)
				if x.Payload != nil || x.Namespace != req.Namespace {
					t.Fatalf("listed %+v", x)
				}
			}
			if page.Cursor == "" {
				return ids
			}
			if pages > 20 {
				t.Fatal("too many pages")
			}
			req.Cursor = page.Cursor
		}
	}
	sortIDs := cmpopts.SortSlices(func(a, b ExecutionID) bool { return a < b })
	if diff := cmp.Diff(all, list(ListRequest{Namespace: "default", Limit: 2}), sortIDs); diff != "" {
		t.Fatalf("all (-want +got):\n%s", diff)
	}
	if got := list(ListRequest{Namespace: "default", State: StateCompleted}); len(got) != 1 || got[0] != g[0].ExecutionID {
		t.Fatalf("completed = %v", got)
	}
	if got := list(ListRequest{Namespace: "default", State: StateActive, Lane: "a"}); len(got) != 1 || got[0] != g[1].ExecutionID {
		t.Fatalf("active = %v", got)
	}
	if got := list(ListRequest{Namespace: "default", State: StateWaiting, Lane: "b", Limit: 1}); len(got) != 3 {
		t.Fatalf("waiting in b = %v", got)
	}
	if got := list(ListRequest{Namespace: "other"}); len(got) != 1 || got[0] != other.ID {
		t.Fatalf("other namespace = %v", got)
	}
	for _, bad := range []ListRequest{{}, {Namespace: "default", State: "nope"}, {Namespace: "default", Limit: ListLimitMax + 1}, {Namespace: "default", Cursor: "garbage"}} {
		if _, err := e.s.ListExecutions(e.ctx, bad); !errors.Is(err, ErrInvalid) {
			t.Fatalf("ListExecutions(%+v) = %v", bad, err)
		}
	}
}

func TestEligibleCountsAndWake(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	sub := valkeytest.Client(t, valkeytest.Shared(t))
	msgs := make(chan string, 16)
	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	ready := make(chan struct{})
	go sub.Receive(ctx, sub.B().Subscribe().Channel(e.s.WakeChannel()).Build(), func(m valkey.PubSubMessage) {
		msgs <- m.Message
	})
	// Wait until the subscription is live.
	waitUntil(t, 2*time.Second, "subscription", func() bool {
		n, _ := e.c.Do(e.ctx, e.c.B().PubsubNumsub().Channel(e.s.WakeChannel()).Build()).AsIntMap()
		return n[e.s.WakeChannel()] == 1
	})
	close(ready)

	x := e.create(CreateRequest{Lane: "fast"})
	e.create(CreateRequest{Lane: "slow", Delay: time.Hour}) // not eligible: no wake
	p, _ := x.ID.Partition()
	select {
	case m := <-msgs:
		w, err := ParseWake(m)
		if err != nil || w != (Wake{Partition: p, Namespace: "default", Lane: "fast"}) {
			t.Fatalf("wake %q = %+v, %v", m, w, err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("no wake-up published")
	}
	select {
	case m := <-msgs:
		t.Fatalf("unexpected wake %q", m)
	case <-time.After(50 * time.Millisecond):
	}
	counts, err := e.s.EligibleCounts(e.ctx, "default", []string{"fast", "slow"})
	if err != nil {
		t.Fatal(err)
	}
	want := make([]int64, e.s.FlowPartitions())
	want[p] = 1
	if diff := cmp.Diff(want, counts); diff != "" {
		t.Fatalf("counts (-want +got):\n%s", diff)
	}
}

func TestParseWake(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Wake
		ok   bool
	}{
		{"3:default:fast", Wake{3, "default", "fast"}, true},
		{"0:ns:a/b", Wake{0, "ns", "a/b"}, true},
		{"x:ns:l", Wake{}, false},
		{"1:ns", Wake{}, false},
		{"1::l", Wake{}, false},
	} {
		got, err := ParseWake(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("ParseWake(%q) = %+v, %v", tc.in, got, err)
		}
		if tc.ok && got.String() != tc.in {
			t.Errorf("String() = %q, want %q", got.String(), tc.in)
		}
	}
}

func TestParseExecutionID(t *testing.T) {
	good := "12.0d6c4e1a-5b7f-4c1e-9a53-2f0e7b9c1d4a"
	if id, err := ParseExecutionID(good); err != nil || string(id) != good {
		t.Fatalf("ParseExecutionID(%q) = %v", good, err)
	}
	if p, _ := ExecutionID(good).Partition(); p != 12 {
		t.Fatalf("partition %d", p)
	}
	for _, bad := range []string{"", "12", "x.0d6c4e1a-5b7f-4c1e-9a53-2f0e7b9c1d4a", "012.0d6c4e1a-5b7f-4c1e-9a53-2f0e7b9c1d4a",
		"-1.0d6c4e1a-5b7f-4c1e-9a53-2f0e7b9c1d4a", "1.0D6C4E1A-5B7F-4C1E-9A53-2F0E7B9C1D4A", "1.not-a-uuid"} {
		if _, err := ParseExecutionID(bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("ParseExecutionID(%q) = %v", bad, err)
		}
	}
}

func TestDerivePublicStateMatchesEveryStoredVector(t *testing.T) {
	// The Lua derivation is exercised by every test through env.check;
	// here the Go rule is pinned for each lifecycle.
	for _, tc := range []struct {
		l    Lifecycle
		e    Eligibility
		o    Outcome
		want PublicState
	}{
		{LifecycleRunnable, EligibleNow, OutcomeNone, StateWaiting},
		{LifecycleRunnable, EligibleNotUntilTime, OutcomeNone, StateDelayed},
		{LifecycleRunnable, BlockedByDependencies, OutcomeNone, StatePending},
		{LifecycleRunnable, BlockedByBudget, OutcomeNone, StateBlocked},
		{LifecycleRunnable, BlockedByQuota, OutcomeNone, StateBlocked},
		{LifecycleRunnable, BlockedByRoute, OutcomeNone, StateBlocked},
		{LifecycleActive, EligibilityNA, OutcomeNone, StateActive},
		{LifecycleTerminal, EligibilityNA, OutcomeSuccess, StateCompleted},
		{LifecycleTerminal, EligibilityNA, OutcomeFailed, StateFailed},
		{LifecycleTerminal, EligibilityNA, OutcomeCancelled, StateCancelled},
		{LifecycleTerminal, EligibilityNA, OutcomeExpired, StateExpired},
		{LifecycleTerminal, EligibilityNA, OutcomeSkipped, StateSkipped},
	} {
		if got := DerivePublicState(tc.l, tc.e, tc.o); got != tc.want {
			t.Errorf("DerivePublicState(%s, %s, %s) = %s, want %s", tc.l, tc.e, tc.o, got, tc.want)
		}
	}
}

func TestLibraryLoadsAndReloadsAfterFlush(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := valkeytest.Client(t, valkeytest.Start(t)) // dedicated: FUNCTION FLUSH is server-wide
	s, err := Open(ctx, Config{Client: c, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	v, err := c.Do(ctx, c.B().Fcall().Function(lua.Function("ff_version")).Numkeys(0).Build()).ToString()
	if err != nil || v != lua.Version() {
		t.Fatalf("ff_version = %q, %v; want %q", v, err, lua.Version())
	}
	x, _, err := s.CreateExecution(ctx, CreateRequest{Kind: "k"})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Do(ctx, c.B().FunctionFlush().Build()).Error(); err != nil {
		t.Fatal(err)
	}
	// The next call reloads the library transparently.
	if _, err := s.Cancel(ctx, x.ID, ""); err != nil {
		t.Fatalf("Cancel after FUNCTION FLUSH: %v", err)
	}
	c.Do(ctx, c.B().FunctionFlush().Build())
	if res, err := s.FinishMany(ctx, []Finish{{Lease: Lease{ExecutionID: x.ID, ID: "l", Epoch: 1}}}); err != nil || !errors.Is(res[0].Err, ErrStaleLease) {
		t.Fatalf("FinishMany after FUNCTION FLUSH: %+v, %v", res, err)
	}
}

func TestPartitionCountMismatchRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, err := Open(e.ctx, Config{Client: e.c, KeyPrefix: e.prefix, FlowPartitions: 8})
	if !errors.Is(err, ErrPartitionMismatch) || !strings.Contains(err.Error(), "flow=4") {
		t.Fatalf("Open with other counts = %v", err)
	}
	// The same counts are accepted again.
	if _, err := Open(e.ctx, Config{Client: e.c, KeyPrefix: e.prefix, FlowPartitions: 4}); err != nil {
		t.Fatal(err)
	}
}

func TestConfigValidation(t *testing.T) {
	c := valkeytest.Client(t, valkeytest.Shared(t))
	for _, cfg := range []Config{
		{},
		{Client: c, FlowPartitions: -1},
		{Client: c, FlowPartitions: PartitionsMax + 1},
		{Client: c, KeyPrefix: "{x}"},
	} {
		if _, err := Open(context.Background(), cfg); err == nil {
			t.Errorf("Open(%+v) accepted", cfg)
		}
	}
}

func TestServerVersionCheck(t *testing.T) {
	for _, tc := range []struct {
		info string
		ok   bool
	}{
		{"# Server\r\nredis_version:7.0.15\r\n", true},
		{"redis_version:7.2.4\r\nserver_name:valkey\r\nvalkey_version:8.0.1\r\n", true},
		{"redis_version:7.2.4\r\nvalkey_version:7.2.5\r\n", true},
		{"redis_version:6.2.14\r\n", false},
		{"redis_version:7.0.0\r\nserver_name:valkey\r\n", false}, // valkey needs 7.2
		{"redis_version:7.2.4\r\nvalkey_version:7.1.0\r\n", false},
		{"nothing\r\n", false},
	} {
		_, err := checkServerVersion(tc.info)
		if (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrUnsupportedServer)) {
			t.Errorf("checkServerVersion(%q) = %v", tc.info, err)
		}
	}
	// And the real server passes.
	c := valkeytest.Client(t, valkeytest.Shared(t))
	info, err := c.Do(context.Background(), c.B().Info().Section("server").Build()).ToString()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := checkServerVersion(info); err != nil {
		t.Fatal(err)
	}
}

func TestCreateMany(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	reqs := []CreateRequest{
		{Kind: "a", Payload: []byte("1")},
		{Kind: ""}, // invalid: written nowhere
		{Kind: "b", IdempotencyKey: "k1", Payload: []byte("first")},
		{Kind: "b", IdempotencyKey: "k1", Payload: []byte("second")}, // repeat within the batch
		{Kind: "c", Delay: time.Hour, Lane: "other"},
	}
	res, err := e.s.CreateMany(e.ctx, reqs)
	if err != nil {
		t.Fatal(err)
	}
	if !res[0].Created || res[0].Err != nil || string(e.get(res[0].Execution.ID).Payload) != "1" {
		t.Fatalf("item 0 = %+v", res[0])
	}
	if !errors.Is(res[1].Err, ErrInvalid) || res[1].Execution != nil {
		t.Fatalf("item 1 = %+v", res[1])
	}
	if !res[2].Created || res[3].Created || res[3].Execution.ID != res[2].Execution.ID || string(res[3].Execution.Payload) != "first" {
		t.Fatalf("items 2, 3 = %+v, %+v", res[2], res[3])
	}
	if res[4].Execution.State.Public != StateDelayed {
		t.Fatalf("item 4 = %+v", res[4].Execution.State)
	}
	for _, i := range []int{0, 2, 4} {
		x := e.check(res[i].Execution.ID)
		if diff := cmp.Diff(res[i].Execution, x, cmpopts.IgnoreFields(Execution{}, "Attempts")); diff != "" {
			t.Fatalf("item %d: CreateMany and GetExecution disagree (-create +get):\n%s", i, diff)
		}
	}
	// A repeat in a later call finds it too.
	again, err := e.s.CreateMany(e.ctx, []CreateRequest{{Kind: "b", IdempotencyKey: "k1"}})
	if err != nil || again[0].Created || again[0].Execution.ID != res[2].Execution.ID {
		t.Fatalf("repeat = %+v, %v", again[0], err)
	}
	if _, err := e.s.CreateMany(e.ctx, make([]CreateRequest, MaxBatch+1)); !errors.Is(err, ErrInvalid) {
		t.Fatalf("oversize batch = %v", err)
	}
}

func TestClaimNeverStartsPastDeadline(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *Config) { c.FlowPartitions = 1 })
	x := e.create(CreateRequest{Deadline: 50 * time.Millisecond})
	y := e.create(CreateRequest{})
	time.Sleep(80 * time.Millisecond)
	// No scanner ran: the claim itself expires x and grants y.
	g := e.claimAll(worker1, 2, time.Minute)
	if diff := cmp.Diff([]ExecutionID{y.ID}, grantIDs(g)); diff != "" {
		t.Fatalf("grants (-want +got):\n%s", diff)
	}
	e.wantState(x.ID, StateExpired)
}

func TestReady(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := valkeytest.Client(t, valkeytest.Start(t))
	s, err := Open(ctx, Config{Client: c})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Ready(ctx); err != nil {
		t.Fatalf("Ready = %v", err)
	}
	c.Do(ctx, c.B().FunctionFlush().Build())
	if err := s.Ready(ctx); err == nil {
		t.Fatal("Ready after FUNCTION FLUSH = nil")
	}
	if _, err := s.ExpireLeases(ctx, 0, 10); err != nil { // reloads
		t.Fatal(err)
	}
	if err := s.Ready(ctx); err != nil {
		t.Fatalf("Ready after reload = %v", err)
	}
}

// TestScannersRescheduleEarlyEntries covers the due-index walk of the lease,
// attempt-timeout and deadline scanners: an entry whose index score says due
// while its record says later is put back at the record's time, untouched.
func TestScannersRescheduleEarlyEntries(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	x := e.create(CreateRequest{Deadline: time.Hour, AttemptTimeout: time.Hour})
	g := e.claim(x.ID, worker1, time.Hour)
	p, uuid, _ := splitID(string(x.ID))
	for _, sc := range []struct {
		key  string
		want time.Time
		run  func(context.Context, int, int) (ScanResult, error)
	}{
		{e.s.k.leases(p), g.LeaseExpiresAt, e.s.ExpireLeases},
		{e.s.k.timeouts(p), g.AttemptDeadline, e.s.TimeoutAttempts},
		{e.s.k.deadlines(p), x.DeadlineAt, e.s.ExpireDeadlines},
	} {
		if err := e.c.Do(e.ctx, e.c.B().Zadd().Key(sc.key).ScoreMember().ScoreMember(1, uuid).Build()).Error(); err != nil {
			t.Fatal(err)
		}
		res, err := sc.run(e.ctx, p, 10)
		if err != nil {
			t.Fatal(err)
		}
		if res.Processed != 0 {
			t.Fatalf("%s: processed %d, want 0", sc.key, res.Processed)
		}
		score, err := e.c.Do(e.ctx, e.c.B().Zscore().Key(sc.key).Member(uuid).Build()).AsFloat64()
		if err != nil {
			t.Fatalf("%s: %v", sc.key, err)
		}
		if int64(score) != sc.want.UnixMilli() {
			t.Fatalf("%s: score %d, want %d", sc.key, int64(score), sc.want.UnixMilli())
		}
	}
	e.check(x.ID)
	e.wantState(x.ID, StateActive)
}
