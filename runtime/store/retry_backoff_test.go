package store

import (
	"testing"
	"time"

	"github.com/flowfabric/ff/compiler/plan"
)

// An exponential backoff without cap (RetryPolicy.MaxDelay 0) doubles the
// delay per retry: after some fifty retries of a one-second delay the
// wait no longer fit in the millisecond clock, and the retry became due at
// once. Every delay is capped at 366 days.
func TestUncappedExponentialBackoffStaysInTheFuture(t *testing.T) {
	t.Parallel()
	e := onePartition(t)
	x := e.create(CreateRequest{Retry: RetryPolicy{Attempts: 100, Backoff: BackoffExponential, Delay: time.Second}})
	g := e.claim(x.ID, worker1, time.Minute)
	// As if 60 attempts had failed already (each waiting 2^n seconds).
	p, uuid, _ := splitID(string(x.ID))
	if err := e.c.Do(e.ctx, e.c.B().Hset().Key(e.s.k.core(p, uuid)).FieldValue().FieldValue("charged_attempts", "60").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	res, err := e.s.Fail(e.ctx, g.Lease, "again", true)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	stored, _ := e.c.Do(e.ctx, e.c.B().Hget().Key(e.s.k.core(p, uuid)).Field("eligible_at").Build()).ToString()
	const capped = 366 * 24 * time.Hour
	if res.State != StateDelayed || res.RetryAt.Before(now.Add(capped-time.Minute)) || res.RetryAt.After(now.Add(capped+time.Minute)) {
		t.Errorf("the 61st failure: %s, retry at %v (now %v): want delayed by 366 days (stored eligible_at %q)", res.State, res.RetryAt, now, stored)
	}
	if _, err := e.s.PromoteDelayed(e.ctx, 0, 10); err != nil {
		t.Fatal(err)
	}
	if st := e.get(x.ID).State.Public; st != StateDelayed {
		t.Fatalf("after a promotion pass the retry is %s, want still delayed", st)
	}
}

// A plan's retry without max_delay_ms (a plan written by hand) gets the
// language's default cap, as an execution created over the API does.
func TestRetryPolicyFromPlanDefaultCap(t *testing.T) {
	for _, c := range []struct {
		delayMs int64
		want    time.Duration
	}{{1000, 5 * time.Minute}, {600_000, 10 * time.Minute}} {
		r := RetryPolicyFromPlan(plan.Retry{Attempts: 3, Backoff: BackoffExponential, DelayMs: c.delayMs})
		if r.MaxDelay != c.want {
			t.Errorf("delay %d ms without max_delay_ms: MaxDelay %v, want %v", c.delayMs, r.MaxDelay, c.want)
		}
	}
	if r := RetryPolicyFromPlan(plan.Retry{Attempts: 3, DelayMs: 1000, MaxDelayMs: 2000}); r.MaxDelay != 2*time.Second {
		t.Errorf("a given max_delay_ms: MaxDelay %v, want 2s", r.MaxDelay)
	}
}
