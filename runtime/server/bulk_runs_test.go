package server_test

import (
	"net/http"
	"slices"
	"testing"

	"github.com/flowfabric/ff/runtime/client"
	"github.com/flowfabric/ff/runtime/server/servertest"
	"github.com/flowfabric/ff/runtime/wire"
)

// TestBulkCancelAndReplay: POST /v1/flows/cancel cancels the running runs
// of a namespace (and flow) newest first, a limit at a time with a cursor
// to go on from, and leaves other namespaces alone; POST /v1/flows/replay
// replays the cancelled ones; refusals are 400s that name the field.
func TestBulkCancelAndReplay(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	c := env.Client
	ctx := ctxT(t)
	// No worker: every run stays running.
	for range 5 {
		stageTwoStep(t, env)
	}
	var ids []string // as listed: newest first (runs staged in one ms by id)
	list, err := c.ListRuns(ctx, clientRuns("two"))
	if err != nil || len(list.Runs) != 5 {
		t.Fatalf("ListRuns = %+v, %v", list, err)
	}
	for _, r := range list.Runs {
		ids = append(ids, r.ID)
	}
	other, err := c.StageFlow(ctx, twoStep(), map[string]string{"s": "x"}, client.WithNamespace("other"))
	if err != nil {
		t.Fatal(err)
	}
	first, err := c.CancelRuns(ctx, wire.BulkRuns{Flow: "two", Reason: "bad deploy", Limit: 3})
	if err != nil || !slices.Equal(first.Runs, ids[:3]) || len(first.Refused) != 0 || first.NextCursor == "" {
		t.Fatalf("first cancel = %+v, %v; want %v and a cursor", first, err, ids[:3])
	}
	rest, err := c.CancelRuns(ctx, wire.BulkRuns{Flow: "two", Reason: "bad deploy", Limit: 3, Cursor: first.NextCursor})
	if err != nil || !slices.Equal(rest.Runs, ids[3:]) || rest.NextCursor != "" {
		t.Fatalf("second cancel = %+v, %v; want %v and no cursor", rest, err, ids[3:])
	}
	for _, id := range ids {
		r, err := c.GetRun(ctx, id)
		if err != nil || r.State != wire.RunCancelled || r.Execs[0].Error != "bad deploy" {
			t.Fatalf("run %s after the cancel: %+v, %v", id, r, err)
		}
	}
	if r, err := c.GetRun(ctx, other.ID); err != nil || r.State != wire.RunRunning {
		t.Fatalf("the run of another namespace: %+v, %v; want it running", r, err)
	}
	// Nothing left to cancel in the default namespace.
	if again, err := c.CancelRuns(ctx, wire.BulkRuns{}); err != nil || len(again.Runs) != 0 || again.NextCursor != "" {
		t.Fatalf("cancel with none running = %+v, %v", again, err)
	}
	replayed, err := c.ReplayRuns(ctx, wire.BulkRuns{State: wire.RunCancelled, Limit: 1000})
	if err != nil || !slices.Equal(replayed.Runs, ids) {
		t.Fatalf("replay = %+v, %v; want %v", replayed, err, ids)
	}
	for _, id := range ids {
		if r, err := c.GetRun(ctx, id); err != nil || r.State != wire.RunRunning || r.Replays != 1 {
			t.Fatalf("run %s after the replay: %+v, %v", id, r, err)
		}
	}
	// The failed runs of the default namespace: none.
	if none, err := c.ReplayRuns(ctx, wire.BulkRuns{}); err != nil || len(none.Runs) != 0 {
		t.Fatalf("replay of failed runs = %+v, %v; want none", none, err)
	}
	for _, tc := range []struct{ path, body, field string }{
		{"/v1/flows/cancel", ``, ""},
		{"/v1/flows/cancel", `null`, ""},
		{"/v1/flows/cancel", `{"limit": 1001}`, "limit"},
		{"/v1/flows/cancel", `{"limit": -1}`, "limit"},
		{"/v1/flows/cancel", `{"limit": 0}`, "limit"},
		{"/v1/flows/cancel", `{"state": "failed"}`, "state"},
		{"/v1/flows/cancel", `{"namespace": "a b"}`, "namespace"},
		{"/v1/flows/cancel", `{"flow": "no such-flow!"}`, "flow"},
		{"/v1/flows/cancel", `{"cursor": "garbage"}`, "cursor"},
		{"/v1/flows/replay", `{"state": "running"}`, "state"},
		{"/v1/flows/replay", `{"reason": "x"}`, "reason"},
		{"/v1/flows/replay", `{"nope": 1}`, "nope"},
	} {
		r := env.Do(t, http.MethodPost, tc.path, map[string]string{"Content-Type": "application/json"}, tc.body)
		if r.Status != http.StatusBadRequest || tc.field != "" && r.Err.Details["field"] != tc.field {
			t.Errorf("POST %s %s = %d %s; want 400 on %q", tc.path, tc.body, r.Status, r.Body, tc.field)
		}
	}
}
