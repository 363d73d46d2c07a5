package store

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/flowfabric/ff/runtime/internal/valkeytest"
)

// ownEnv is an env on a server of its own with one flow partition, for
// tests that count the server's commands.
func ownEnv(t *testing.T) *env {
	t.Helper()
	c := valkeytest.Client(t, valkeytest.Start(t))
	prefix := valkeytest.Prefix(t)
	s, err := Open(context.Background(), Config{Client: c, KeyPrefix: prefix, FlowPartitions: 1, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	return &env{t: t, ctx: context.Background(), c: c, s: s, prefix: prefix}
}

// The delayed promoter reads the lanes that have something due (the
// partition's B:due:delayed), not every lane: beside 3,000 lanes with
// nothing delayed a call costs about its limit, and executions delayed in
// a few of them are promoted when due.
func TestPromoteDelayedReadsTheLanesWithSomethingDue(t *testing.T) {
	e := ownEnv(t)
	const lanes, limit = 3000, 100
	for start := 0; start < lanes; start += 1000 {
		var reqs []CreateRequest
		for i := start; i < start+1000; i++ {
			reqs = append(reqs, CreateRequest{Kind: "k", Lane: fmt.Sprintf("tenant-%04d", i)})
		}
		if _, err := e.s.CreateMany(e.ctx, reqs); err != nil {
			t.Fatal(err)
		}
	}
	cost := func() (int64, ScanResult) {
		t.Helper()
		before := valkeytest.CommandCalls(t, e.c)
		res, err := e.s.PromoteDelayed(e.ctx, 0, limit)
		if err != nil {
			t.Fatal(err)
		}
		return valkeytest.CommandCalls(t, e.c) - before, res
	}
	if n, res := cost(); n > 3*limit {
		t.Fatalf("a PromoteDelayed call with nothing delayed beside %d lanes ran %d commands (%+v), want about its limit at most", lanes, n, res)
	}
	var delayed []*Execution
	for _, lane := range []string{"tenant-0007", "tenant-2999", "late"} {
		x, _, err := e.s.CreateExecution(e.ctx, CreateRequest{Kind: "k", Lane: lane, Delay: 100 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		delayed = append(delayed, x)
	}
	if _, res := cost(); res.Processed != 0 {
		t.Fatalf("promoted %d before they were due", res.Processed)
	}
	time.Sleep(150 * time.Millisecond)
	n, res := cost()
	if res.Processed != len(delayed) || n > 3*limit {
		t.Fatalf("a call after the delays: promoted %d of %d, %d commands", res.Processed, len(delayed), n)
	}
	for _, x := range delayed {
		e.wantState(x.ID, StateWaiting)
	}
	if got, err := e.c.Do(e.ctx, e.c.B().Zcard().Key(e.s.k.base(0)+":due:delayed").Build()).AsInt64(); err != nil || got != 0 {
		t.Fatalf("B:due:delayed holds %d lanes (%v) once nothing is delayed, want none", got, err)
	}
}

// A delayed entry the list of lanes lacks (written by a release before
// it) is found by the promoter's pass over the lane set, a few lanes per
// call, and promoted.
func TestPromoteDelayedFindsLanesTheListLacks(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	x, _, err := e.s.CreateExecution(e.ctx, CreateRequest{Kind: "k", Lane: "old", Delay: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	p, _, _ := e.s.locate(x.ID)
	if err := e.c.Do(e.ctx, e.c.B().Del().Key(e.s.k.base(p)+":due:delayed").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(60 * time.Millisecond)
	for i := 0; ; i++ {
		if i == 50 {
			t.Fatal("the delayed execution of a lane missing from B:due:delayed was never promoted")
		}
		if _, err := e.s.PromoteDelayed(e.ctx, p, 100); err != nil {
			t.Fatal(err)
		}
		if got := e.get(x.ID); got.State.Public == StateWaiting {
			break
		}
	}
}
