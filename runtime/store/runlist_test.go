package store

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"
)

// stageListed stages n runs of flow name in namespace ns, spread over the
// partitions by their idempotency keys, and returns them.
func (e *env) stageListed(name, ns string, n int) []*Run {
	e.t.Helper()
	f := flowOf(name, execs("a"))
	var out []*Run
	for i := range n {
		r, created, err := e.s.StageFlow(e.ctx, StageRequest{Flow: f, Namespace: ns, IdempotencyKey: fmt.Sprintf("%s-%s-%d-%s", ns, name, i, newUUID())})
		if err != nil || !created {
			e.t.Fatalf("StageFlow = %v, %v", created, err)
		}
		out = append(out, r)
	}
	return out
}

// listAll pages through ListRuns with req, checking that only the last
// page has no cursor, and returns the ids in the order listed.
func (e *env) listAll(req RunListRequest) []RunID {
	e.t.Helper()
	var ids []RunID
	for pages := 0; ; pages++ {
		if pages > 100 {
			e.t.Fatal("ListRuns does not end")
		}
		page, err := e.s.ListRuns(e.ctx, req)
		if err != nil {
			e.t.Fatal(err)
		}
		if len(page.Runs) > cmp.Or(req.Limit, ListLimitDefault) {
			e.t.Fatalf("page of %d runs, limit %d", len(page.Runs), req.Limit)
		}
		for _, r := range page.Runs {
			ids = append(ids, r.ID)
		}
		// The tests' indexes are far shorter than one call's scan budget:
		// only a full page may be followed by another.
		if len(page.Runs) < cmp.Or(req.Limit, ListLimitDefault) && page.Cursor != "" {
			e.t.Fatalf("a page of %d runs (limit %d) has a cursor", len(page.Runs), req.Limit)
		}
		if page.Cursor == "" {
			return ids
		}
		req.Cursor = page.Cursor
	}
}

// newestFirst returns the ids of runs in the order ListRuns lists them.
func newestFirst(runs []*Run) []RunID {
	runs = slices.Clone(runs)
	slices.SortFunc(runs, func(a, b *Run) int {
		return cmp.Or(b.CreatedAt.Compare(a.CreatedAt), cmp.Compare(b.ID, a.ID))
	})
	var ids []RunID
	for _, r := range runs {
		ids = append(ids, r.ID)
	}
	return ids
}

func TestListRunsPagesNewestFirstAcrossPartitions(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var all []*Run
	for i := range 4 {
		all = append(all, e.stageListed("alpha", "default", 6)...)
		all = append(all, e.stageListed("beta", "default", 4)...)
		if i == 1 {
			time.Sleep(3 * time.Millisecond) // runs of different milliseconds too
		}
	}
	e.stageListed("alpha", "other", 5) // another namespace: never listed with default's
	parts := map[int]bool{}
	for _, r := range all {
		p, _, _ := splitID(string(r.ID))
		parts[p] = true
	}
	if len(parts) < 3 {
		t.Fatalf("runs on %d partitions; the test needs them spread", len(parts))
	}
	// Cancel some: a state to filter on.
	cancelled := map[RunID]bool{}
	for i, r := range all {
		if i%3 == 0 {
			c, err := e.s.CancelRun(e.ctx, r.ID, "")
			if err != nil {
				t.Fatal(err)
			}
			all[i] = c
			cancelled[r.ID] = true
		}
	}
	for _, limit := range []int{1, 7, 40, 500} {
		if diff := gocmp.Diff(newestFirst(all), e.listAll(RunListRequest{Namespace: "default", Limit: limit})); diff != "" {
			t.Fatalf("limit %d (-want +got):\n%s", limit, diff)
		}
	}
	pick := func(keep func(*Run) bool) []RunID {
		var out []*Run
		for _, r := range all {
			if keep(r) {
				out = append(out, r)
			}
		}
		return newestFirst(out)
	}
	cases := []struct {
		req  RunListRequest
		want []RunID
	}{
		{RunListRequest{Flow: "beta"}, pick(func(r *Run) bool { return r.Flow == "beta" })},
		{RunListRequest{State: RunCancelled}, pick(func(r *Run) bool { return cancelled[r.ID] })},
		{RunListRequest{State: RunRunning, Flow: "alpha"}, pick(func(r *Run) bool { return !cancelled[r.ID] && r.Flow == "alpha" })},
		{RunListRequest{State: RunSucceeded}, nil},
		{RunListRequest{Flow: "gamma"}, nil},
	}
	for _, c := range cases {
		c.req.Namespace, c.req.Limit = "default", 3
		if diff := gocmp.Diff(c.want, e.listAll(c.req)); diff != "" {
			t.Errorf("%+v (-want +got):\n%s", c.req, diff)
		}
	}
	// What a listed run says.
	page, err := e.s.ListRuns(e.ctx, RunListRequest{Namespace: "other", Limit: 1})
	if err != nil || len(page.Runs) != 1 || page.Cursor == "" {
		t.Fatalf("ListRuns(other) = %+v, %v", page, err)
	}
	got := page.Runs[0]
	if got.Namespace != "other" || got.Flow != "alpha" || got.State != RunRunning || got.Total != 1 || got.Done != 0 ||
		got.CreatedAt.IsZero() || len(got.Nodes) != 0 || got.Result != nil {
		t.Fatalf("listed run = %+v", got)
	}
}

// TestListRunsCursorWithinAMillisecond: runs staged in the same
// millisecond are told apart by id, so that a page boundary among them
// neither repeats nor skips any.
func TestListRunsCursorWithinAMillisecond(t *testing.T) {
	t.Parallel()
	// Two partitions of 45 or so: more than one read of an index per page,
	// and pages that start after 32 entries of the cursor's millisecond.
	e := newEnv(t, func(c *Config) { c.FlowPartitions = 2 })
	runs := e.stageListed("alpha", "default", 90)
	// Put every run in one millisecond, as a burst of staging would.
	for _, r := range runs {
		p, uuid, _ := splitID(string(r.ID))
		key := e.s.k.base(p) + ":runs:ns:default"
		if err := e.s.c.Do(e.ctx, e.s.c.B().Zadd().Key(key).Xx().ScoreMember().ScoreMember(1_000, uuid).Build()).Error(); err != nil {
			t.Fatal(err)
		}
		r.CreatedAt = time.UnixMilli(1_000)
	}
	for _, limit := range []int{1, 5, 40} {
		if diff := gocmp.Diff(newestFirst(runs), e.listAll(RunListRequest{Namespace: "default", Limit: limit})); diff != "" {
			t.Fatalf("limit %d (-want +got):\n%s", limit, diff)
		}
	}
}

// TestListRunsMergesLongIndexes: indexes longer than one read are merged
// in order (a buffer that runs dry is read again before the merge goes on).
func TestListRunsMergesLongIndexes(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *Config) { c.FlowPartitions = 2 })
	var runs []*Run
	for range 5 {
		runs = append(runs, e.stageListed("alpha", "default", 30)...)
		time.Sleep(2 * time.Millisecond)
	}
	for _, limit := range []int{3, 100, 500} {
		if diff := gocmp.Diff(newestFirst(runs), e.listAll(RunListRequest{Namespace: "default", Limit: limit})); diff != "" {
			t.Fatalf("limit %d (-want +got):\n%s", limit, diff)
		}
	}
}

func TestListRunsAfterRetention(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *Config) { c.FlowPartitions = 1 })
	runs := e.stageListed("alpha", "default", 3)
	if _, err := e.s.CancelRun(e.ctx, runs[1].ID, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := e.s.PurgeTerminal(e.ctx, 0, 0, 100); err != nil {
		t.Fatal(err)
	}
	if diff := gocmp.Diff(newestFirst([]*Run{runs[0], runs[2]}), e.listAll(RunListRequest{Namespace: "default"})); diff != "" {
		t.Fatalf("after retention (-want +got):\n%s", diff)
	}
	n, err := e.s.c.Do(e.ctx, e.s.c.B().Zcard().Key(e.s.k.base(0)+":runs:ns:default").Build()).AsInt64()
	if err != nil || n != 2 {
		t.Fatalf("index holds %d entries, %v; want 2", n, err)
	}
	// A run whose record went without its index entry (a version before
	// the index was kept with it) is skipped, not an error.
	if err := e.s.c.Do(e.ctx, e.s.c.B().Del().Key(e.runKey(runs[0].ID)).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	if diff := gocmp.Diff([]RunID{runs[2].ID}, e.listAll(RunListRequest{Namespace: "default"})); diff != "" {
		t.Fatalf("after a record went (-want +got):\n%s", diff)
	}
}

func TestListRunsRefusesBadRequests(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, c := range []struct {
		req   RunListRequest
		field string
	}{
		{RunListRequest{Namespace: ""}, "namespace"},
		{RunListRequest{Namespace: "a b"}, "namespace"},
		{RunListRequest{Namespace: "default", Flow: "no-dash"}, "flow"},
		{RunListRequest{Namespace: "default", State: "done"}, "state"},
		{RunListRequest{Namespace: "default", Limit: ListLimitMax + 1}, "limit"},
		{RunListRequest{Namespace: "default", Limit: -1}, "limit"},
		{RunListRequest{Namespace: "default", Cursor: "x"}, "cursor"},
		{RunListRequest{Namespace: "default", Cursor: "12:notanid"}, "cursor"},
		{RunListRequest{Namespace: "default", Cursor: "-1:0." + newUUID()}, "cursor"},
		{RunListRequest{Namespace: "default", Cursor: strconv.Itoa(5) + ":"}, "cursor"},
	} {
		_, err := e.s.ListRuns(e.ctx, c.req)
		var ve *ValidationError
		if !errors.As(err, &ve) || ve.Field != c.field {
			t.Errorf("ListRuns(%+v) = %v, want a validation error of %s", c.req, err, c.field)
		}
	}
}
