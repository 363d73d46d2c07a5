package valkeytest

import (
	"context"
	"strings"
	"testing"

	"github.com/valkey-io/valkey-go"
)

// TestSingleNodeCluster: the server of cluster mode is a cluster that owns
// every slot, valkey-go talks to it as a cluster, and it refuses a command
// across two slots, the check cluster mode exists for.
func TestSingleNodeCluster(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv, err := launch(true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	c := Client(t, srv.Addr)
	if got := c.Mode(); got != valkey.ClientModeCluster {
		t.Fatalf("client mode = %v, want cluster", got)
	}
	info, err := c.Do(ctx, c.B().ClusterInfo().Build()).ToString()
	if err != nil || !strings.Contains(info, "cluster_slots_assigned:16384") {
		t.Fatalf("CLUSTER INFO = %q, %v; want every slot assigned", info, err)
	}
	n := nodeClientT(t, srv.Addr)
	err = n.Do(ctx, n.B().Mset().KeyValue().KeyValue("{a}x", "1").KeyValue("{b}x", "1").Build()).Error()
	if err == nil || !strings.Contains(err.Error(), "CROSSSLOT") {
		t.Fatalf("MSET across two slots: %v, want CROSSSLOT", err)
	}
}

// TestPlainIsPlain: StartPlain gives a server without cluster support in
// either mode.
func TestPlainIsPlain(t *testing.T) {
	c := Client(t, StartPlain(t))
	if got := c.Mode(); got == valkey.ClientModeCluster {
		t.Fatalf("client mode = %v, want a plain server", got)
	}
}

// TestStartCluster: three primaries that split the slots, each reachable
// through one cluster client that spreads keys over all of them.
func TestStartCluster(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	addrs := StartCluster(t, 3)
	c := Client(t, addrs[1])
	if got := c.Mode(); got != valkey.ClientModeCluster {
		t.Fatalf("client mode = %v, want cluster", got)
	}
	for i := range 30 {
		k := "{k" + string(rune('a'+i%26)) + "}" + strings.Repeat("x", i)
		if err := c.Do(ctx, c.B().Set().Key(k).Value("1").Build()).Error(); err != nil {
			t.Fatalf("SET %s: %v", k, err)
		}
	}
	for _, addr := range addrs {
		n := nodeClientT(t, addr)
		got, err := n.Do(ctx, n.B().Dbsize().Build()).AsInt64()
		if err != nil || got == 0 {
			t.Errorf("%s: DBSIZE = %d, %v; want keys on every node", addr, got, err)
		}
	}
}

func nodeClientT(t *testing.T, addr string) valkey.Client {
	t.Helper()
	c, err := nodeClient(addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}
