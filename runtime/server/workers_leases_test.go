package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/flowfabric/ff/runtime/wire"
	"github.com/flowfabric/ff/runtime/worker"
)

// GET /v1/workers attributes every running execution of the namespace to
// the instance holding its lease, across lanes: two workers of different
// lanes, three executions each, are listed each with its own three.
func TestWorkersListAttributesLeasesAcrossLanes(t *testing.T) {
	env := startAdmission(t, nil)
	ctx := context.Background()
	c := env.Client
	hold := make(chan struct{})
	defer close(hold)
	block := func(ctx context.Context, _ *worker.Task) (json.RawMessage, error) {
		select {
		case <-hold:
		case <-ctx.Done():
		}
		return nil, nil
	}
	for _, lane := range []string{"a", "b"} {
		runWorker(t, env, worker.Config{Name: "w-" + lane, Lanes: []string{lane}, Concurrency: 3},
			map[string]worker.Handler{"k": block})
	}
	want := map[string][]string{}
	for _, lane := range []string{"a", "b"} {
		for range 3 {
			ex, _, err := c.CreateExecution(ctx, wire.CreateExecution{Kind: "k", Lane: lane})
			if err != nil {
				t.Fatal(err)
			}
			want["w-"+lane] = append(want["w-"+lane], ex.ID)
		}
		slices.Sort(want["w-"+lane])
	}
	eventually(t, 10*time.Second, "each worker listed with its leases", func() (bool, string) {
		ws, err := c.Workers(ctx, "default")
		if err != nil {
			return false, err.Error()
		}
		got := map[string][]string{}
		for _, w := range ws.Workers {
			l := slices.Clone(w.ActiveLeases)
			slices.Sort(l)
			got[w.WorkerID] = l
		}
		return fmt.Sprint(got) == fmt.Sprint(want) && !ws.LeasesTruncated, fmt.Sprintf("%v, want %v", got, want)
	})
}
