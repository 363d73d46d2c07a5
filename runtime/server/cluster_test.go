package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/valkey-io/valkey-go"

	"github.com/flowfabric/ff/lua"
	"github.com/flowfabric/ff/runtime/client"
	"github.com/flowfabric/ff/runtime/internal/valkeytest"
	"github.com/flowfabric/ff/runtime/server"
	"github.com/flowfabric/ff/runtime/worker"
)

const clusterFF = `
type Job { n: int }

budget spend {
  dimension units { hard 1000 }
  on_hard_limit block
}

quota two { concurrency 2 }

flow chain(Job) -> Job {
  exec inc(Job) -> Job {}
  exec double(Job) -> Job {}
  inc -> double
  result double
}

flow guarded(Job) -> Job {
  budget spend
  quota two
  exec go(Job) -> Job {}
  result go
}
`

// TestThreeNodeCluster runs ffrun on a Valkey Cluster of three primaries:
// the library is on every primary, runs whose partitions live on
// different nodes all succeed with the right result, and a task under a
// budget and a quota is admitted, counted and released.
func TestThreeNodeCluster(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	addrs := valkeytest.StartCluster(t, 3)
	flows := compileFlows(t, clusterFF)
	env := startAdmission(t, flows, func(c *server.Config) {
		c.ValkeyAddr = addrs[0]
		c.FlowPartitions = 16
		// Wake-ups alone bring new work to parked claims: they are
		// published on the node of the work's partition and must reach
		// the subscription on whichever node it is.
		c.ResyncInterval = time.Minute
	})
	nodes := make([]valkey.Client, len(addrs))
	for i, addr := range addrs {
		nodes[i] = nodeClient(t, addr)
		v, err := nodes[i].Do(ctx, nodes[i].B().Fcall().Function(lua.Function("ff_version")).Numkeys(0).Build()).ToString()
		if err != nil || v != lua.Version() {
			t.Errorf("node %s: ff_version = %q, %v; want the library %s loaded on every primary", addr, v, err, lua.Version())
		}
	}

	var mu sync.Mutex
	running, peak := 0, 0
	runWorker(t, env, worker.Config{Name: "w", Concurrency: 8, ClaimWait: 30 * time.Second}, map[string]worker.Handler{
		"chain.inc":    jobStep(func(n int) int { return n + 1 }),
		"chain.double": jobStep(func(n int) int { return n * 2 }),
		"guarded.go": func(ctx context.Context, task *worker.Task) (json.RawMessage, error) {
			mu.Lock()
			running++
			peak = max(peak, running)
			mu.Unlock()
			defer func() { mu.Lock(); running--; mu.Unlock() }()
			if _, err := task.ReportUsage(ctx, "units", 1); err != nil {
				return nil, err
			}
			time.Sleep(20 * time.Millisecond)
			return task.Input(), nil
		},
	})

	// Idempotency keys spread the runs over the partitions (without a key
	// a streak of runs shares one).
	const chains, guarded = 24, 6
	var runs []*client.Run
	for i := range chains + guarded {
		f := flows["chain"]
		if i >= chains {
			f = flows["guarded"]
		}
		r, err := env.Client.StageFlow(ctx, f, map[string]any{"n": i}, client.WithIdempotencyKey("run-"+strconv.Itoa(i)))
		if err != nil {
			t.Fatalf("stage run %d: %v", i, err)
		}
		runs = append(runs, r)
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for i, r := range runs {
		out, err := r.Result(wctx)
		if err != nil {
			t.Fatalf("run %d (%s): %v", i, r.ID, err)
		}
		want := (i + 1) * 2
		if i >= chains {
			want = i
		}
		var got struct{ N int }
		if err := json.Unmarshal(out, &got); err != nil || got.N != want {
			t.Errorf("run %d: result %s (%v), want n = %d", i, out, err, want)
		}
	}

	// The runs' partitions live on every node.
	holders := map[int]bool{}
	for _, r := range runs {
		p, _, _ := strings.Cut(r.ID, ".")
		slot, err := nodes[0].Do(ctx, nodes[0].B().ClusterKeyslot().Key("{fp:"+p+"}").Build()).AsInt64()
		if err != nil {
			t.Fatal(err)
		}
		for i, n := range nodes {
			if k, err := n.Do(ctx, n.B().ClusterCountkeysinslot().Slot(slot).Build()).AsInt64(); err == nil && k > 0 {
				holders[i] = true
			}
		}
	}
	if len(holders) != len(nodes) {
		t.Errorf("runs stored on nodes %v, want all %d: stage more runs or other keys", holders, len(nodes))
	}

	mu.Lock()
	if peak > 2 {
		t.Errorf("%d guarded tasks ran at once, want at most 2 (quota two)", peak)
	}
	mu.Unlock()
	b, err := env.Client.GetBudget(ctx, "default/spend")
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Dimensions) != 1 || b.Dimensions[0].Used != guarded {
		t.Errorf("budget default/spend: %+v, want %d units used", b.Dimensions, guarded)
	}
	eventually(t, 5*time.Second, "quota slots released", func() (bool, string) {
		q, err := env.Client.GetQuota(ctx, "default/two")
		if err != nil {
			return false, err.Error()
		}
		for _, s := range q.Subjects {
			if s.ActiveCount != 0 {
				return false, fmt.Sprintf("%+v", q.Subjects)
			}
		}
		return true, ""
	})
}

// jobStep is a handler that maps a Job's n.
func jobStep(f func(int) int) worker.Handler {
	return func(_ context.Context, task *worker.Task) (json.RawMessage, error) {
		var in struct{ N int }
		if err := json.Unmarshal(task.Input(), &in); err != nil {
			return nil, err
		}
		return json.Marshal(map[string]int{"n": f(in.N)})
	}
}

// nodeClient talks to one node of a cluster, never to the cluster.
func nodeClient(t *testing.T, addr string) valkey.Client {
	t.Helper()
	c, err := valkey.NewClient(valkey.ClientOption{InitAddress: []string{addr}, DisableCache: true, ForceSingleClient: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}
