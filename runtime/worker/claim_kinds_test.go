package worker_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/flowfabric/ff/runtime/server/servertest"
	"github.com/flowfabric/ff/runtime/wire"
	"github.com/flowfabric/ff/runtime/worker"
)

// TestClaimNamingManyLongKindsRuns: a worker with up to
// worker.KindsMax (1024) handler kinds names them all in its claims, and
// kinds may be up to 128 bytes (spec/language.md). 1000 kinds of 100
// bytes make a claim body of about 100 KB; the server must take it (or
// the worker must claim another way): a task of one of those kinds runs.
func TestClaimNamingManyLongKindsRuns(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	w := newWorker(t, env, func(c *worker.Config) { c.ClaimWait = 500 * time.Millisecond })
	const n = 1000
	var kinds []string
	for i := range n {
		k := fmt.Sprintf("%s.%04d", strings.Repeat("k", 95), i) // 100 bytes
		kinds = append(kinds, k)
		if err := w.Handle(k, func(context.Context, *worker.Task) (json.RawMessage, error) {
			return json.RawMessage(`"ok"`), nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	if n > worker.KindsMax {
		t.Fatalf("%d kinds is over KindsMax %d: the test must stay under it", n, worker.KindsMax)
	}
	run(t, w)
	id := create(t, env, wire.CreateExecution{Kind: kinds[n-1]})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := env.Client.WaitResult(ctx, id, 50*time.Millisecond)
	if err != nil {
		ex, _ := env.Client.GetExecution(context.Background(), id)
		state := "?"
		if ex != nil {
			state = ex.State
		}
		t.Fatalf("a task of one of %d kinds of 100 bytes was not run in 10 s (%v; it is %s): "+
			"the worker's claims naming its kinds are refused", n, err, state)
	}
	if r.State != "completed" {
		t.Fatalf("ended %s (%s)", r.State, r.Error)
	}
}
