package store

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"
)

// TestListRunsWhileRunsAreStaged: runs staged while a listing reads
// its index (the newest end of it, the first page) neither repeat a run
// nor skip one: one ListRuns call reads an index in several round trips
// when its filter discards entries, and each later read must continue
// after the entries the call already read, however many were added above
// them meanwhile.
func TestListRunsWhileRunsAreStaged(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *Config) { c.FlowPartitions = 1 })
	// Alternate flows: listing alpha discards every other entry, so a page
	// of 300 takes several reads of the index.
	var alpha []*Run
	for range 400 {
		alpha = append(alpha, e.stageListed("alpha", "default", 1)...)
		e.stageListed("beta", "default", 1)
	}
	want := newestFirst(alpha)

	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	var wg sync.WaitGroup
	wg.Go(func() { // beta runs keep coming: newer than every alpha run
		f := flowOf("beta", execs("a"))
		for i := 0; ctx.Err() == nil; i++ {
			if _, _, err := e.s.StageFlow(ctx, StageRequest{Flow: f, Namespace: "default",
				IdempotencyKey: fmt.Sprintf("late-%d-%s", i, newUUID())}); err != nil && ctx.Err() == nil {
				t.Error(err)
				return
			}
		}
	})
	defer func() { cancel(); wg.Wait() }()
	for round := range 15 {
		var got []RunID
		req := RunListRequest{Namespace: "default", Flow: "alpha", Limit: 300}
		for pages := 0; ; pages++ {
			if pages > 20 {
				t.Fatal("ListRuns does not end")
			}
			page, err := e.s.ListRuns(e.ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range page.Runs {
				got = append(got, r.ID)
			}
			if page.Cursor == "" {
				break
			}
			req.Cursor = page.Cursor
		}
		if diff := gocmp.Diff(want, got); diff != "" {
			t.Fatalf("round %d: alpha runs listed while beta runs were staged (-want +got):\n%s", round, diff)
		}
	}
}

// TestListRunsCursorOfPurgedRun: the cursor is a place, not a run:
// the run it was taken at may be purged before the next page is asked for.
func TestListRunsCursorOfPurgedRun(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *Config) { c.FlowPartitions = 3 })
	var runs []*Run
	for range 4 {
		runs = append(runs, e.stageListed("alpha", "default", 3)...)
		time.Sleep(2 * time.Millisecond)
	}
	order := newestFirst(runs)
	page, err := e.s.ListRuns(e.ctx, RunListRequest{Namespace: "default", Limit: 5})
	if err != nil || len(page.Runs) != 5 || page.Cursor == "" {
		t.Fatalf("first page = %+v, %v", page, err)
	}
	// The run the cursor was taken at ends and is purged.
	if _, err := e.s.CancelRun(e.ctx, order[4], ""); err != nil {
		t.Fatal(err)
	}
	for p := range 3 {
		if _, err := e.s.PurgeTerminal(e.ctx, p, 0, 100); err != nil {
			t.Fatal(err)
		}
	}
	rest := e.listAll(RunListRequest{Namespace: "default", Limit: 5, Cursor: page.Cursor})
	if diff := gocmp.Diff(order[5:], rest); diff != "" {
		t.Fatalf("after the cursor's run was purged (-want +got):\n%s", diff)
	}
}

// TestListRunsManyPartitions: a namespace spread over many
// partitions, most of them empty or holding one run, pages in order for
// every limit, including limits that end a page on the last run.
func TestListRunsManyPartitions(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *Config) { c.FlowPartitions = 32 })
	var runs []*Run
	for range 9 {
		runs = append(runs, e.stageListed("alpha", "default", 1)...)
		time.Sleep(time.Millisecond)
	}
	parts := map[int]bool{}
	for _, r := range runs {
		p, _, _ := splitID(string(r.ID))
		parts[p] = true
	}
	if len(parts) < 2 {
		t.Fatalf("runs on %d partitions; the test needs them spread", len(parts))
	}
	for _, limit := range []int{1, 2, 3, 8, 9, 10, ListLimitMax} {
		if diff := gocmp.Diff(newestFirst(runs), e.listAll(RunListRequest{Namespace: "default", Limit: limit})); diff != "" {
			t.Fatalf("limit %d (-want +got):\n%s", limit, diff)
		}
	}
	// An exact multiple of the limit: the last full page has no cursor
	// (nothing is left), or a cursor to an empty page; never a run twice.
	page, err := e.s.ListRuns(e.ctx, RunListRequest{Namespace: "default", Limit: 9})
	if err != nil || len(page.Runs) != 9 {
		t.Fatalf("ListRuns(limit 9) = %+v, %v", page, err)
	}
	if page.Cursor != "" {
		next, err := e.s.ListRuns(e.ctx, RunListRequest{Namespace: "default", Limit: 9, Cursor: page.Cursor})
		if err != nil || len(next.Runs) != 0 || next.Cursor != "" {
			t.Fatalf("page after the last run = %+v, %v", next, err)
		}
	}
}

// TestListRunsOnlyItsNamespace: an index entry whose record is a
// run of another namespace (a record rewritten, or an entry left over)
// is not listed as a run of this one.
func TestListRunsOnlyItsNamespace(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *Config) { c.FlowPartitions = 1 })
	mine := e.stageListed("alpha", "default", 2)
	other := e.stageListed("alpha", "other", 1)[0]
	_, uuid, _ := splitID(string(other.ID))
	key := e.s.k.base(0) + ":runs:ns:default"
	if err := e.s.c.Do(e.ctx, e.s.c.B().Zadd().Key(key).ScoreMember().ScoreMember(float64(time.Now().UnixMilli()), uuid).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	if diff := gocmp.Diff(newestFirst(mine), e.listAll(RunListRequest{Namespace: "default"})); diff != "" {
		t.Fatalf("default's listing (-want +got):\n%s", diff)
	}
}
