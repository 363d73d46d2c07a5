package server_test

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/flowfabric/ff/lua"
	"github.com/flowfabric/ff/runtime/internal/valkeytest"
	"github.com/flowfabric/ff/runtime/server"
	"github.com/flowfabric/ff/runtime/server/servertest"
	"github.com/flowfabric/ff/runtime/wire"
	"github.com/valkey-io/valkey-go"
)

// TestClusterOverTLS: Config.ValkeyTLS serves every node of a cluster
// that accepts TLS connections with client certificates only: the
// library is loaded on every primary, and executions of every partition
// are created, claimed and completed.
func TestClusterOverTLS(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	addrs, pki := valkeytest.StartClusterTLS(t, 3, valkeytest.TLSOptions{ClientAuth: true})
	env := servertest.Start(t, func(c *server.Config) {
		c.ValkeyAddr = addrs[0]
		c.ValkeyTLS = pki.ClientConfig()
		c.FlowPartitions = 16
	})
	for _, addr := range addrs {
		c, err := valkey.NewClient(valkey.ClientOption{InitAddress: []string{addr}, DisableCache: true, ForceSingleClient: true, TLSConfig: pki.ClientConfig()})
		if err != nil {
			t.Fatalf("connect %s over TLS: %v", addr, err)
		}
		v, err := c.Do(ctx, c.B().Fcall().Function(lua.Function("ff_version")).Numkeys(0).Build()).ToString()
		c.Close()
		if err != nil || v != lua.Version() {
			t.Errorf("node %s: ff_version = %q, %v; want the library %s loaded on every primary", addr, v, err, lua.Version())
		}
	}
	// Idempotency keys spread the executions over the partitions.
	const n = 32
	for i := range n {
		if _, _, err := env.Client.CreateExecution(ctx, wire.CreateExecution{Kind: "tls", IdempotencyKey: "x" + strconv.Itoa(i)}); err != nil {
			t.Fatal(err)
		}
	}
	done := 0
	for done < n {
		tasks, err := env.Client.Claim(ctx, wire.ClaimRequest{WorkerID: "w", Max: 8, WaitMs: 2000})
		if err != nil {
			t.Fatal(err)
		}
		if len(tasks) == 0 {
			t.Fatalf("claimed %d of %d executions, then none", done, n)
		}
		for _, task := range tasks {
			l := wire.Lease{ExecutionID: task.ExecutionID, LeaseID: task.LeaseID, Epoch: task.Epoch}
			if _, err := env.Client.CompleteOne(ctx, l, json.RawMessage(`1`)); err != nil {
				t.Fatal(err)
			}
			done++
		}
	}
}
