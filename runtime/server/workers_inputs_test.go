package server_test

import (
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/flowfabric/ff/runtime/server/servertest"
	"github.com/flowfabric/ff/runtime/wire"
	"github.com/valkey-io/valkey-go"
)

// TestWorkersRouteReadsNoInputs: GET /v1/workers reads the running
// executions only to attribute their leases: not the input a flow member
// receives (its upstream's output, up to 1 MiB, for up to 500 members),
// which only the execution's own route reads.
func TestWorkersRouteReadsNoInputs(t *testing.T) {
	t.Parallel()
	env, _ := servertest.StartOwnValkey(t)
	ctx := ctxT(t)
	c := env.Client
	run, err := c.StageFlow(ctx, twoStep(), map[string]string{"s": "x"})
	if err != nil {
		t.Fatal(err)
	}
	tasks, err := c.Claim(ctx, wire.ClaimRequest{WorkerID: "w", Kinds: []string{"two.a"}, Max: 1, WaitMs: 2000})
	if err != nil || len(tasks) != 1 {
		t.Fatalf("claim a: %+v, %v", tasks, err)
	}
	big, _ := json.Marshal(map[string]string{"s": strings.Repeat("x", 900_000)})
	if _, err := c.Complete(ctx, wire.CompleteRequest{WorkerID: "w", Completions: []wire.Completion{{
		Lease: wire.Lease{ExecutionID: tasks[0].ExecutionID, LeaseID: tasks[0].LeaseID, Epoch: tasks[0].Epoch}, Output: big}}}); err != nil {
		t.Fatal(err)
	}
	if tasks, err = c.Claim(ctx, wire.ClaimRequest{WorkerID: "w", Kinds: []string{"two.b"}, Max: 1, WaitMs: 2000}); err != nil || len(tasks) != 1 {
		t.Fatalf("claim b of run %s: %+v, %v", run.ID, tasks, err)
	}
	vk, err := valkey.NewClient(valkey.ClientOption{InitAddress: []string{env.Config.ValkeyAddr}, DisableCache: true, ForceSingleClient: true})
	if err != nil {
		t.Fatal(err)
	}
	defer vk.Close()
	sent := func() int64 {
		info, err := vk.Do(ctx, vk.B().Info().Section("stats").Build()).ToString()
		if err != nil {
			t.Fatal(err)
		}
		m := regexp.MustCompile(`total_net_output_bytes:(\d+)`).FindStringSubmatch(info)
		n, _ := strconv.ParseInt(m[1], 10, 64)
		return n
	}
	before := sent()
	l, err := c.Workers(ctx, "default")
	if err != nil {
		t.Fatal(err)
	}
	after := sent()
	t.Logf("workers %+v; Valkey sent %d bytes for one GET /v1/workers", l.Workers, after-before)
	if after-before > 100_000 {
		t.Errorf("GET /v1/workers made Valkey send %d bytes: it read the running member's input (900 kB) to find one lease", after-before)
	}
}
