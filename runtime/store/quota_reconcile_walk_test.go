package store

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/flowfabric/ff/runtime/internal/valkeytest"
)

// A keyed quota with a rate (per-user rate limiting: a new key value per
// user, a window of a minute or an hour) keeps each key value's subject in
// <prefix>ff:{q:K}:subjects until its window empties. One
// ReconcileQuotaSlots call looks at about limit of them (SSCAN from a
// stored cursor), so its cost follows its limit, not the key values seen
// in the window: with 3,050 subjects it runs no more commands than a few
// per subject of its limit.
func TestReconcileCostFollowsItsLimit(t *testing.T) {
	c := valkeytest.Client(t, valkeytest.Start(t))
	s, err := Open(context.Background(), Config{Client: c, KeyPrefix: valkeytest.Prefix(t), FlowPartitions: 1, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, ctx: context.Background(), c: c, s: s, prefix: valkeytest.Prefix(t)}
	const id = "default/peruser"
	if _, err := s.UpsertQuota(e.ctx, QuotaSpec{ID: id, Rate: 100, Window: time.Hour, Key: "user"}); err != nil {
		t.Fatal(err)
	}
	q := s.quotaPart(id)
	const limit = 100
	cost := func(users int) int64 {
		t.Helper()
		var items []admitItem
		held := map[string][]string{}
		for i := range users {
			a := Admitted{ExecutionID: ExecutionID(fmt.Sprintf("0.00000000-0000-4000-8000-%012d", i)), Attempt: 1, Token: "t"}
			sub := fmt.Sprintf("%s=user-%d", id, i)
			items = append(items, admitItem{sub, a})
			held[sub] = []string{a.holder()}
		}
		if _, err := s.admitMany(e.ctx, items); err != nil {
			t.Fatal(err)
		}
		if err := s.releaseMany(e.ctx, held, false); err != nil { // the attempts ended
			t.Fatal(err)
		}
		before := valkeytest.CommandCalls(t, e.c)
		if _, err := s.ReconcileQuotaSlots(e.ctx, q, 30*time.Second, limit); err != nil {
			t.Fatal(err)
		}
		return valkeytest.CommandCalls(t, e.c) - before
	}
	small := cost(50)
	large := cost(3000)
	if subjects := e.scard(s.k.subjects(q)); subjects < 3000 {
		t.Fatalf("%d subjects after 3,050 users, want every one kept while its window holds an admission", subjects)
	}
	t.Logf("one call (limit %d): %d commands with 50 key values in their window, %d with 3,050", limit, small, large)
	if large > 10*limit {
		t.Errorf("one ReconcileQuotaSlots call (limit %d, no slot held) ran %d commands with 50 key values in their window "+
			"and %d with 3,050: its cost grows with the key values seen in the window, not with its limit", limit, small, large)
	}
}

// Subjects that hold no slot and whose window emptied are forgotten a part
// per call: the calls walk the subjects from where the last one stopped
// (the cursor <prefix>ff:{q:K}:subjects:sweep, deleted at the end of a
// pass) and report More while the pass goes on and forgets some, so a
// scanner's ticks go through them all.
func TestReconcileForgetsIdleSubjectsAPartPerCall(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *Config) { c.QuotaPartitions = 1 })
	const id = "default/peruser"
	if _, err := e.s.UpsertQuota(e.ctx, QuotaSpec{ID: id, Concurrency: 1, Key: "user"}); err != nil {
		t.Fatal(err)
	}
	const users, limit = 600, 50
	var items []admitItem
	held := map[string][]string{}
	for i := range users {
		a := Admitted{ExecutionID: ExecutionID(fmt.Sprintf("0.00000000-0000-4000-8000-%012d", i)), Attempt: 1, Token: "t"}
		sub := fmt.Sprintf("%s=user-%d", id, i)
		items = append(items, admitItem{sub, a})
		held[sub] = []string{a.holder()}
	}
	if _, err := e.s.admitMany(e.ctx, items); err != nil {
		t.Fatal(err)
	}
	if err := e.s.releaseMany(e.ctx, held, false); err != nil { // the attempts ended
		t.Fatal(err)
	}
	subjects, sweep := e.s.k.subjects(0), e.s.k.subjects(0)+":sweep"
	if n := e.scard(subjects); n != users {
		t.Fatalf("%d subjects, want %d", n, users)
	}
	calls, sawCursor := 0, false
	for {
		before := e.scard(subjects)
		res, err := e.s.ReconcileQuotaSlots(e.ctx, 0, time.Minute, limit)
		if err != nil {
			t.Fatal(err)
		}
		calls++
		if forgot := before - e.scard(subjects); forgot > 4*limit {
			t.Fatalf("call %d forgot %d subjects, limit %d", calls, forgot, limit)
		}
		if n, _ := e.c.Do(e.ctx, e.c.B().Exists().Key(sweep).Build()).AsInt64(); n == 1 {
			sawCursor = true
		}
		if !res.More {
			break
		}
		if calls > 100 {
			t.Fatal("reconcile does not converge")
		}
	}
	if n := e.scard(subjects); n != 0 || !sawCursor || calls < users/(4*limit) {
		t.Fatalf("after %d calls: %d subjects left, cursor seen %v; want every one forgotten a part per call", calls, n, sawCursor)
	}
	if n, _ := e.c.Do(e.ctx, e.c.B().Exists().Key(sweep).Build()).AsInt64(); n != 0 {
		t.Fatal("the cursor is left after the pass ended")
	}
	if q := e.quota(id); len(q.Subjects) != 0 {
		t.Fatalf("quota lists %d subjects, want none", len(q.Subjects))
	}
}
