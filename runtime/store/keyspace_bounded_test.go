package store

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// keyspace measures what lives under the env's prefix: keys without a
// time to live (by kind: the trailing part of the key after the hash
// tag, ids replaced), the members of those that are sets, sorted sets
// or hashes, and keys with a time to live (they go on their own).
type keyspace struct {
	persistent int
	members    int64
	expiring   int
	list, ttl  []string
}

func (e *env) keyspace() keyspace {
	e.t.Helper()
	var ks keyspace
	for _, k := range e.keys() {
		ttl, err := e.c.Do(e.ctx, e.c.B().Pttl().Key(k).Build()).AsInt64()
		if err != nil {
			e.t.Fatal(err)
		}
		if ttl >= 0 {
			ks.expiring++
			ks.ttl = append(ks.ttl, strings.TrimPrefix(k, e.prefix))
			continue
		}
		if ttl == -2 {
			continue // gone meanwhile
		}
		ks.persistent++
		typ, err := e.c.Do(e.ctx, e.c.B().Type().Key(k).Build()).ToString()
		if err != nil {
			e.t.Fatal(err)
		}
		var n int64
		switch typ {
		case "set":
			n, err = e.c.Do(e.ctx, e.c.B().Scard().Key(k).Build()).AsInt64()
		case "zset":
			n, err = e.c.Do(e.ctx, e.c.B().Zcard().Key(k).Build()).AsInt64()
		case "hash":
			n, err = e.c.Do(e.ctx, e.c.B().Hlen().Key(k).Build()).AsInt64()
		}
		if err != nil {
			e.t.Fatal(err)
		}
		ks.members += n
		ks.list = append(ks.list, fmt.Sprintf("%s %s %d", strings.TrimPrefix(k, e.prefix), typ, n))
	}
	return ks
}

// TestKeyspaceBoundedAfterMixedRounds runs rounds of a realistic
// mix on fixed lanes and one namespace — plain tasks with idempotency
// keys, a retry, a lease lost and reclaimed, an attempt timeout, a
// deadline, a delay, a cancel, tasks under a keyed quota with a new key
// value each (and a paused key), tasks under a shared budget reporting
// usage through the lease fence, flows that succeed, fail, are cancelled
// and are replayed, and a worker instance with a new id each round that
// vanishes — then every scanner's store call past its horizon (retention
// age 1 ms with the lane and namespace pruning, reconcile grace 0). What stays without a time to live, and
// the members of its sets, sorted sets and hashes, must not grow from one
// round to the next: only keys with a time to live (idempotency, usage
// dedup and fence records) accumulate, until they expire.
func TestKeyspaceBoundedAfterMixedRounds(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *Config) { c.FlowPartitions = 2 })
	if _, err := e.s.UpsertQuota(e.ctx, QuotaSpec{ID: "default/perkey", Concurrency: 2, Key: "user"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.s.UpsertQuota(e.ctx, QuotaSpec{ID: "default/total", Concurrency: 50}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.s.UpsertBudget(e.ctx, BudgetSpec{ID: "default/tokens",
		Dimensions: []BudgetDimension{{Name: "tokens", Hard: 1 << 40}}}); err != nil {
		t.Fatal(err)
	}
	w := worker1
	complete := func(g Grant) {
		t.Helper()
		if err := e.s.Complete(e.ctx, g.Lease, []byte("ok")); err != nil {
			t.Fatal(err)
		}
	}
	const rounds = 4
	var seen []keyspace
	for r := range rounds {
		// A worker instance of this round (the last one's expired).
		w.InstanceID = fmt.Sprintf("deploy-%d", r)
		if _, err := e.s.Heartbeat(e.ctx, Registration{Worker: w, Lanes: []string{"default"}, TTL: LeaseTTLMin}); err != nil {
			t.Fatal(err)
		}
		// Plain tasks with idempotency keys.
		for i := range 5 {
			x := e.create(CreateRequest{IdempotencyKey: fmt.Sprintf("k-%d-%d", r, i)})
			complete(e.claim(x.ID, w, time.Minute))
		}
		// A retry.
		x := e.create(CreateRequest{Retry: RetryPolicy{Attempts: 2}})
		if _, err := e.s.Fail(e.ctx, e.claim(x.ID, w, time.Minute).Lease, "boom", true); err != nil {
			t.Fatal(err)
		}
		complete(e.claim(x.ID, w, time.Minute))
		// A cancel.
		x = e.create(CreateRequest{})
		if _, err := e.s.Cancel(e.ctx, x.ID, "no"); err != nil {
			t.Fatal(err)
		}
		// Keyed quota: a new key value per task, and a paused key.
		for i := range 6 {
			e.create(CreateRequest{Payload: fmt.Appendf(nil, `{"user":"u-%d-%d"}`, r, i), Quotas: []string{"perkey", "total"}})
		}
		if err := e.s.PauseQuota(e.ctx, "default/perkey", QuotaPause{Key: fmt.Sprintf("paused-%d", r), For: 50 * time.Millisecond}); err != nil {
			t.Fatal(err)
		}
		// Shared budget, usage through the fence.
		for range 2 {
			e.create(CreateRequest{Budgets: []string{"tokens"}})
		}
		for got := 0; got < 8; {
			gs := e.claimAdm(w, 8, time.Minute)
			if len(gs) == 0 {
				t.Fatalf("round %d: admitted %d of 8", r, got)
			}
			for _, g := range gs {
				if _, err := e.s.ReportAttemptUsage(e.ctx, g.Lease, "tokens", 3, "d"); err != nil {
					t.Fatal(err)
				}
				complete(g)
			}
			got += len(gs)
		}
		// Flows: succeeded, failed then replayed and succeeded, cancelled,
		// failed and left failed.
		e.stage(flowOf("ok", execs("a", "b"), "a->b"), "")
		e.drive(func(Grant) outcome { return outcome{} })
		replayed := e.stage(flowOf("again", execs("a", "b"), "a->b"), "")
		e.drive(func(Grant) outcome { return outcome{fail: true} })
		if _, err := e.s.ReplayRun(e.ctx, replayed.ID); err != nil {
			t.Fatal(err)
		}
		e.drive(func(Grant) outcome { return outcome{} })
		cancelled := e.stage(flowOf("stop", execs("a", "b"), "a->b"), "")
		if _, err := e.s.CancelRun(e.ctx, cancelled.ID, "stop"); err != nil {
			t.Fatal(err)
		}
		e.stage(flowOf("bad", execs("a", "b"), "a->b"), "")
		e.drive(func(Grant) outcome { return outcome{fail: true} })
		// Time-driven ends: a lost lease, an attempt timeout, a deadline, a delay.
		lost := e.create(CreateRequest{})
		e.claim(lost.ID, w, LeaseTTLMin)
		timed := e.create(CreateRequest{AttemptTimeout: 50 * time.Millisecond})
		e.claim(timed.ID, w, time.Minute)
		e.create(CreateRequest{Deadline: 50 * time.Millisecond})
		delayed := e.create(CreateRequest{Delay: 50 * time.Millisecond})
		time.Sleep(LeaseTTLMin + 60*time.Millisecond)
		for p := range e.s.FlowPartitions() {
			for _, f := range []func() (ScanResult, error){
				func() (ScanResult, error) { return e.s.ExpireLeases(e.ctx, p, 100) },
				func() (ScanResult, error) { return e.s.TimeoutAttempts(e.ctx, p, 100) },
				func() (ScanResult, error) { return e.s.ExpireDeadlines(e.ctx, p, 100) },
				func() (ScanResult, error) { return e.s.PromoteDelayed(e.ctx, p, 100) },
			} {
				if _, err := f(); err != nil {
					t.Fatal(err)
				}
			}
		}
		complete(e.claim(lost.ID, w, time.Minute))
		complete(e.claim(delayed.ID, w, time.Minute))
		// Every other scanner past its horizon.
		time.Sleep(3 * time.Millisecond)
		e.drain()
		for q := range e.s.QuotaPartitions() {
			if _, err := e.s.ReconcileQuotaSlots(e.ctx, q, 0, 100); err != nil {
				t.Fatal(err)
			}
		}
		for m := range e.s.BudgetPartitions() {
			if _, err := e.s.ResetDueBudgets(e.ctx, m, 100); err != nil {
				t.Fatal(err)
			}
		}
		for p := range e.s.FlowPartitions() {
			for {
				res, err := e.s.PurgeTerminal(e.ctx, p, time.Millisecond, 1000)
				if err != nil {
					t.Fatal(err)
				}
				if !res.More {
					break
				}
			}
			e.pruneLanes(p, 100)
		}
		if _, err := e.s.PruneNamespaces(e.ctx); err != nil {
			t.Fatal(err)
		}
		ks := e.keyspace()
		t.Logf("round %d: %d keys without a time to live (%d members), %d with one", r, ks.persistent, ks.members, ks.expiring)
		seen = append(seen, ks)
	}
	a, b := seen[1], seen[rounds-1]
	if b.persistent > a.persistent || b.members > a.members {
		t.Fatalf("keys without a time to live grew from round 1 to %d: %d keys, %d members -> %d keys, %d members\n"+
			"round 1: %v\nround %d: %v", rounds-1, a.persistent, a.members, b.persistent, b.members, a.list, rounds-1, b.list)
	}
}
