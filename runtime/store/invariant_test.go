package store

import (
	"errors"
	"math/rand/v2"
	"testing"
	"time"
)

// TestRandomOperationsKeepInvariants applies a seeded random sequence of
// every operation to a small set of executions and checks, after the steps
// that may touch them, that every execution's state vector is consistent
// and that it is in exactly the indexes its state implies (env.check). Refusals are fine;
// errors other than the typed refusals are not.
func TestRandomOperationsKeepInvariants(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *Config) { c.FlowPartitions = 2 })
	rng := rand.New(rand.NewPCG(1, 2))
	var ids []ExecutionID
	leases := map[ExecutionID]Lease{}
	refusal := func(err error) bool {
		return err == nil || errors.Is(err, ErrStaleLease) || errors.Is(err, ErrWrongState) || errors.Is(err, ErrNotFound)
	}
	// Admission: a quota with a cap of 2 and a budget with a hard limit.
	if _, err := e.s.UpsertQuota(e.ctx, QuotaSpec{ID: "default/q", Concurrency: 2}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.s.UpsertBudget(e.ctx, BudgetSpec{ID: "default/b", Dimensions: []BudgetDimension{{Name: "n", Hard: 2}}}); err != nil {
		t.Fatal(err)
	}
	// slots checks the quota: never more slots than its cap, and after the
	// release queues are drained, exactly one per running attempt with the
	// quota.
	seen := map[BlockingReason]bool{}
	peak := int64(0)
	slots := func(step int, drained bool) {
		q, err := e.s.GetQuota(e.ctx, "default/q")
		if err != nil {
			t.Fatal(err)
		}
		peak = max(peak, q.Subjects[0].Active)
		if q.Subjects[0].Active > 2 {
			t.Fatalf("step %d: %d slots held, cap 2", step, q.Subjects[0].Active)
		}
		if !drained {
			return
		}
		running := int64(0)
		for _, x := range ids {
			if got := e.get(x); got.State.Public == StateActive && len(got.Quotas) > 0 {
				running++
			}
		}
		if q.Subjects[0].Active != running {
			t.Fatalf("step %d: %d slots held, %d attempts with the quota running", step, q.Subjects[0].Active, running)
		}
	}
	for step := range 500 {
		op := rng.IntN(14)
		var id ExecutionID
		if len(ids) > 0 {
			id = ids[rng.IntN(len(ids))]
		}
		if len(ids) < 3 {
			op = 0
		}
		var err error
		switch op {
		case 0: // create, sometimes delayed, with retries, a deadline or a timeout
			req := CreateRequest{Kind: "k", Priority: rng.IntN(1001), Retry: RetryPolicy{Attempts: 1 + rng.IntN(3), Delay: time.Duration(rng.IntN(3)) * time.Millisecond}}
			if rng.IntN(4) == 0 {
				req.Delay = time.Duration(1+rng.IntN(5)) * time.Millisecond
			}
			if rng.IntN(5) == 0 {
				req.Deadline = time.Duration(1+rng.IntN(20)) * time.Millisecond
			}
			if rng.IntN(5) == 0 {
				req.AttemptTimeout = time.Duration(1+rng.IntN(10)) * time.Millisecond
			}
			switch rng.IntN(3) {
			case 0:
				req.Quotas = []string{"q"}
			case 1:
				req.Budgets = []string{"b"}
			}
			var x *Execution
			x, _, err = e.s.CreateExecution(e.ctx, req)
			if err == nil {
				ids = append(ids, x.ID)
			}
		case 1, 2: // claim
			ttl := LeaseTTLMin
			if rng.IntN(2) == 0 {
				ttl = time.Minute
			}
			var gs []Grant
			breached, berr := e.s.BreachedBudgets(e.ctx)
			if berr != nil {
				t.Fatal(berr)
			}
			gs, err = e.s.ClaimAdmitted(e.ctx, ClaimRequest{Partition: rng.IntN(2), Lanes: []string{"default"}, Worker: worker1,
				Max: 1 + rng.IntN(3), LeaseTTL: ttl, BreachedBudgets: breached})
			for _, g := range gs {
				leases[g.ExecutionID] = g.Lease
			}
		case 3: // complete, possibly with a stale lease
			if l, ok := leases[id]; ok {
				err = e.s.Complete(e.ctx, l, []byte("r"))
			}
		case 4: // fail
			if l, ok := leases[id]; ok {
				_, err = e.s.Fail(e.ctx, l, "boom", rng.IntN(3) > 0)
			}
		case 5:
			_, err = e.s.Cancel(e.ctx, id, "")
		case 6:
			_, err = e.s.RevokeLease(e.ctx, id, "")
		case 7:
			_, err = e.s.ChangePriority(e.ctx, id, rng.IntN(1001))
		case 8: // renew
			if l, ok := leases[id]; ok {
				var rr []RenewResult
				rr, err = e.s.Renew(e.ctx, []Lease{l}, LeaseTTLMin)
				if err == nil {
					err = rr[0].Err
				}
			}
		case 9: // let time pass
			time.Sleep(time.Duration(rng.IntN(4)) * time.Millisecond)
		case 10: // every scanner step on every partition
			for p := range 2 {
				for _, f := range []func() (ScanResult, error){
					func() (ScanResult, error) { return e.s.ExpireLeases(e.ctx, p, 10) },
					func() (ScanResult, error) { return e.s.PromoteDelayed(e.ctx, p, 10) },
					func() (ScanResult, error) { return e.s.TimeoutAttempts(e.ctx, p, 10) },
					func() (ScanResult, error) { return e.s.ExpireDeadlines(e.ctx, p, 10) },
				} {
					if _, err := f(); err != nil {
						t.Fatalf("step %d: scanner: %v", step, err)
					}
				}
			}
		case 11: // spend the budget
			_, err = e.s.ReportUsage(e.ctx, "default/b", "n", 1, "")
		case 12: // sometimes reset it
			if rng.IntN(3) == 0 {
				_, err = e.s.ResetBudget(e.ctx, "default/b")
			}
		case 13: // release, reconcile and unblock
			breached, berr := e.s.BreachedBudgets(e.ctx)
			if berr != nil {
				t.Fatal(berr)
			}
			for p := range 2 {
				if _, err := e.s.DrainQuotaReleases(e.ctx, p, 100); err != nil {
					t.Fatalf("step %d: drain: %v", step, err)
				}
				if _, err := e.s.UnblockAdmission(e.ctx, AdmissionUnblock{Partition: p, Limit: 100, Breached: breached, BudgetsKnown: true}); err != nil {
					t.Fatalf("step %d: unblock: %v", step, err)
				}
			}
			for q := range e.s.QuotaPartitions() {
				if _, err := e.s.ReconcileQuotaSlots(e.ctx, q, 0, 100); err != nil {
					t.Fatalf("step %d: reconcile: %v", step, err)
				}
			}
			slots(step, true)
		}
		slots(step, false)
		if !refusal(err) {
			t.Fatalf("step %d op %d on %s: %v", step, op, id, err)
		}
		if id != "" {
			seen[e.check(id).State.BlockingReason] = true
		}
		if step%20 == 0 || op == 1 || op == 2 || op == 10 {
			for _, x := range ids {
				seen[e.check(x).State.BlockingReason] = true
			}
		}
	}
	for _, x := range ids {
		e.check(x)
	}
	// The sequence exercised admission.
	if !seen[WaitingForQuota] || !seen[WaitingForBudget] || peak != 2 {
		t.Fatalf("admission not exercised: reasons seen %v, peak slots %d", seen, peak)
	}
	// Everything that ran did so under a lease that was current.
	for _, x := range ids {
		got := e.get(x)
		for _, a := range got.Attempts {
			if a.Outcome == AttemptSucceeded && got.State.Public != StateCompleted {
				t.Fatalf("%s: a successful attempt but state %s", x, got.State.Public)
			}
		}
	}
}
