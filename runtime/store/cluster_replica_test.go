package store

import (
	"context"
	"fmt"
	"testing"

	"github.com/flowfabric/ff/runtime/internal/valkeytest"
)

// A replica that goes away does not make the store unready, nor stop it
// from opening or working: the library lives on primaries, and a replica
// gets it from its primary.
func TestClusterReplicaDownKeepsReady(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	addrs := valkeytest.StartCluster(t, 3)
	replica := valkeytest.StartReplica(t, addrs[0])
	c := valkeytest.Client(t, addrs[0])
	if n := len(c.Nodes()); n != 4 {
		t.Fatalf("the cluster client knows %d nodes, want 4 (3 primaries and the replica)", n)
	}
	cfg := Config{Client: c, KeyPrefix: valkeytest.Prefix(t), FlowPartitions: 8, Logger: testLogger(t)}
	s, err := Open(ctx, cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	if err := s.Ready(ctx); err != nil {
		t.Fatalf("Ready with the replica up: %v", err)
	}

	replica.Stop()
	if err := s.Ready(ctx); err != nil {
		t.Fatalf("Ready with the replica gone: %v", err)
	}
	if _, err := Open(ctx, cfg); err != nil {
		t.Fatalf("Open with the replica gone: %v", err)
	}
	for i := range 16 {
		if _, _, err := s.CreateExecution(ctx, CreateRequest{Kind: "k", IdempotencyKey: fmt.Sprint("k", i)}); err != nil {
			t.Fatalf("create with the replica gone: %v", err)
		}
	}
}
