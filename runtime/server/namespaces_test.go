package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flowfabric/ff/compiler/plan"
	"github.com/flowfabric/ff/runtime/client"
	"github.com/flowfabric/ff/runtime/server"
	"github.com/flowfabric/ff/runtime/server/servertest"
	"github.com/flowfabric/ff/runtime/wire"
	"github.com/flowfabric/ff/runtime/worker"
)

// TestNamespaces: GET /v1/namespaces sums up each namespace that holds
// work or had workers: its lanes' counts (over every partition), its flow
// runs and its connected workers; a namespace appears once something was
// created in it.
func TestNamespaces(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t, func(c *server.Config) { c.Templates = []*plan.Flow{twoStep()} })
	c := env.Client
	ctx := ctxT(t)
	if l, err := c.Namespaces(ctx, client.NamespaceOptions{}); err != nil || len(l.Namespaces) != 0 {
		t.Fatalf("Namespaces of an empty store = %+v, %v", l, err)
	}
	// billing: three eligible in lane a, one delayed in lane b; no worker
	// there, so they stay.
	for i, lane := range []string{"a", "a", "a", "b"} {
		req := wire.CreateExecution{Namespace: "billing", Lane: lane, Kind: "k", Input: json.RawMessage(`{}`)}
		if i == 3 {
			req.DelayMs = time.Hour.Milliseconds()
		}
		if _, _, err := c.CreateExecution(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	// etl: two runs of the two-step flow, waiting for a worker; a worker
	// of another namespace, ops, that has no work.
	for range 2 {
		if _, err := c.StageTemplate(ctx, "two", map[string]string{"s": "x"}, client.WithNamespace("etl")); err != nil {
			t.Fatal(err)
		}
	}
	echo := func(_ context.Context, task *worker.Task) (json.RawMessage, error) { return task.Input(), nil }
	runWorker(t, env, worker.Config{Name: "w", Namespace: "ops", Concurrency: 1}, map[string]worker.Handler{"x": echo})
	want := []wire.Namespace{
		{Name: "billing", Lanes: []wire.LaneCounts{{Lane: "a", Eligible: 3}, {Lane: "b", Delayed: 1}}},
		{Name: "etl", Runs: 2, Lanes: []wire.LaneCounts{{Lane: "default", Eligible: 2, Pending: 2}}},
		{Name: "ops", Workers: 1},
	}
	var got *wire.NamespaceList
	var err error
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		got, err = c.Namespaces(ctx, client.NamespaceOptions{})
		if err == nil && cmp.Equal(got.Namespaces, want) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Namespaces (-got +want), %v:\n%s", err, cmp.Diff(got, &wire.NamespaceList{Namespaces: want}))
		}
	}
	// One namespace; without the lanes' counts.
	one, err := c.Namespaces(ctx, client.NamespaceOptions{Namespace: "etl"})
	if err != nil || !cmp.Equal(one.Namespaces, want[1:2]) {
		t.Fatalf("Namespaces of etl = %+v, %v; want %+v", one, err, want[1:2])
	}
	bare, err := c.Namespaces(ctx, client.NamespaceOptions{WithoutLanes: true})
	if err != nil || len(bare.Namespaces) != 3 || bare.Namespaces[0].Lanes != nil || bare.Namespaces[1].Runs != 2 || bare.Namespaces[2].Workers != 1 {
		t.Fatalf("Namespaces without lanes = %+v, %v", bare, err)
	}
	if none, err := c.Namespaces(ctx, client.NamespaceOptions{Namespace: "nowhere"}); err != nil || len(none.Namespaces) != 0 {
		t.Fatalf("Namespaces of an unknown namespace = %+v, %v", none, err)
	}
	for _, q := range []string{"?limit=1", "?lanes=maybe", "?namespace=a+b"} {
		if r := env.Do(t, http.MethodGet, "/v1/namespaces"+q, nil, ""); r.Status != http.StatusBadRequest {
			t.Fatalf("GET /v1/namespaces%s = %d %s; want 400", q, r.Status, r.Body)
		}
	}
}
