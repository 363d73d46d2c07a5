package server_test

import (
	"slices"
	"testing"

	"github.com/flowfabric/ff/runtime/server"
	"github.com/flowfabric/ff/runtime/server/servertest"
	"github.com/flowfabric/ff/runtime/wire"
)

// A bulk cancel or replay acts on runs of at most Config.BulkRunMembers
// members in all, and answers with a cursor to go on from the first run it
// left: a cancel of 1,000 runs of 10,000 members each was one request of
// minutes. A run larger than the bound alone is still acted on (one run a
// request), so a bulk request always makes progress.
func TestBulkRunsBoundedByMembers(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t, func(c *server.Config) { c.BulkRunMembers = 5 }) // two-step runs: 2 members each
	c := env.Client
	ctx := ctxT(t)
	for range 5 {
		stageTwoStep(t, env)
	}
	list, err := c.ListRuns(ctx, clientRuns("two"))
	if err != nil || len(list.Runs) != 5 {
		t.Fatalf("ListRuns = %+v, %v", list, err)
	}
	var ids []string // newest first
	for _, r := range list.Runs {
		ids = append(ids, r.ID)
	}
	var got [][]string
	cursor := ""
	for range 5 {
		res, err := c.CancelRuns(ctx, wire.BulkRuns{Flow: "two", Limit: 100, Cursor: cursor})
		if err != nil || len(res.Refused) != 0 {
			t.Fatalf("CancelRuns = %+v, %v", res, err)
		}
		got = append(got, res.Runs)
		if cursor = res.NextCursor; cursor == "" {
			break
		}
	}
	want := [][]string{ids[:2], ids[2:4], ids[4:]}
	if !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("runs cancelled per request = %v, want %v (at most 5 members a request)", got, want)
	}
	for _, id := range ids {
		if r, err := c.GetRun(ctx, id); err != nil || r.State != wire.RunCancelled {
			t.Fatalf("run %s: %+v, %v; want cancelled", id, r, err)
		}
	}

	// One run over the bound: still replayed, one a request.
	small := servertest.Start(t, func(c *server.Config) { c.BulkRunMembers = 1 })
	for range 2 {
		stageTwoStep(t, small)
	}
	if res, err := small.Client.CancelRuns(ctx, wire.BulkRuns{Flow: "two", Limit: 100}); err != nil || len(res.Runs) != 1 || res.NextCursor == "" {
		t.Fatalf("cancel over the bound = %+v, %v; want one run and a cursor", res, err)
	} else if res, err := small.Client.CancelRuns(ctx, wire.BulkRuns{Flow: "two", Limit: 100, Cursor: res.NextCursor}); err != nil || len(res.Runs) != 1 {
		t.Fatalf("second cancel over the bound = %+v, %v; want the other run", res, err)
	}
	res, err := small.Client.ReplayRuns(ctx, wire.BulkRuns{State: wire.RunCancelled, Limit: 100})
	if err != nil || len(res.Runs) != 1 || res.NextCursor == "" {
		t.Fatalf("replay over the bound = %+v, %v; want one run and a cursor", res, err)
	}
}
