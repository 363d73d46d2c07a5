package valkeytest

// Cluster mode. With FF_TEST_CLUSTER=1 in the environment, every server
// that Start, Launch and Shared give is a single-node Valkey Cluster that
// owns all 16384 slots. One node is enough for the check that matters: in
// cluster mode the server refuses a command or a script touching keys of
// two slots (CROSSSLOT, "Script attempted to access keys that do not hash
// to the same slot"), so every test then proves that its calls keep to one
// hash tag. StartCluster gives a real cluster of several primaries, for the
// tests of what one node cannot show (routing, the library on every node).
// StartPlain and LaunchPlain give a plain server in either mode, for tests
// of server-wide behaviour a cluster does not have.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flowfabric/ff/runtime/devserver"
	"github.com/valkey-io/valkey-go"
)

// ClusterEnv is the environment variable that turns cluster mode on
// (value "1").
const ClusterEnv = "FF_TEST_CLUSTER"

// ClusterMode reports whether the harness starts single-node clusters.
func ClusterMode() bool { return os.Getenv(ClusterEnv) == "1" }

// Slots is the number of hash slots of a Valkey Cluster.
const Slots = 16384

// clusterReadyTimeout bounds the wait for cluster_state:ok.
const clusterReadyTimeout = 15 * time.Second

// StartPlain starts a dedicated plain (non-cluster) server for t, whatever
// the mode, and stops it when t ends: for tests of what a cluster node
// does not offer (SELECT of another database, for one).
func StartPlain(t testing.TB) string {
	t.Helper()
	srv, err := LaunchPlain()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	return srv.Addr
}

// LaunchPlain is Launch for a plain server, whatever the mode.
func LaunchPlain() (*Server, error) { return launch(false) }

// launch starts a server: a single-node cluster owning every slot when
// cluster is set.
func launch(cluster bool) (*Server, error) { return launchWith(cluster, node{}) }

// node is how a server starts besides its mode.
type node struct {
	port int      // client port; 0 = a free one
	args []string // more command-line arguments (TLS)
}

// launchWith is launch with the options of n.
func launchWith(cluster bool, n node) (*Server, error) {
	s, err := launchNodeWith(cluster, n)
	if err != nil || !cluster {
		return s, err
	}
	if err := s.initSingleNode(); err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}

// launchNode starts a server process in a temporary directory, cluster
// enabled (no slots yet) when cluster is set.
func launchNode(cluster bool) (*Server, error) { return launchNodeWith(cluster, node{}) }

// launchNodeWith is launchNode with the options of n.
func launchNodeWith(cluster bool, n node) (*Server, error) {
	var lastErr error
	for range 3 { // another process may take the bus port first
		dir, err := os.MkdirTemp("", "valkeytest-")
		if err != nil {
			return nil, fmt.Errorf("valkeytest: temp dir: %w", err)
		}
		cfg := devserver.Config{Dir: dir, NoPersistence: true, Port: n.port}
		if cluster {
			// The bus port is given: the default, the client port + 10000,
			// does not exist for a client port above 55535.
			bus, err := freePort()
			if err != nil {
				os.RemoveAll(dir)
				return nil, err
			}
			cfg.ExtraArgs = []string{
				"--cluster-enabled", "yes",
				"--cluster-config-file", filepath.Join(dir, "nodes.conf"),
				"--cluster-port", strconv.Itoa(bus),
				// A replica (StartReplica) syncs at once instead of after
				// 5 s, and is listed in CLUSTER SLOTS once its offset
				// moves: at the primary's first ping to its replicas,
				// after 1 s instead of 10 on a primary never written to.
				"--repl-diskless-sync-delay", "0",
				"--repl-ping-replica-period", "1",
			}
		}
		cfg.ExtraArgs = append(cfg.ExtraArgs, n.args...)
		srv, err := devserver.Start(context.Background(), cfg)
		if err == nil {
			return &Server{Addr: srv.Addr, srv: srv, dir: dir}, nil
		}
		os.RemoveAll(dir)
		lastErr = fmt.Errorf("valkeytest: %w", err)
		if !cluster || n.port != 0 { // a given port is not another try
			break
		}
	}
	return nil, lastErr
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("valkeytest: free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// initSingleNode gives the node every slot and waits until the cluster is
// up.
func (s *Server) initSingleNode() error {
	c, err := nodeClient(s.Addr)
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), clusterReadyTimeout)
	defer cancel()
	if err := addSlots(ctx, c, 0, Slots-1); err != nil {
		return fmt.Errorf("valkeytest: %s: %w", s.Addr, err)
	}
	return waitClusterOK(ctx, map[string]valkey.Client{s.Addr: c}, 1)
}

// StartCluster starts a Valkey Cluster of n primaries (no replicas), the
// slots split evenly in order, and stops it when t ends. It returns the
// nodes' addresses; any one of them is a seed for a cluster client.
func StartCluster(t testing.TB, n int) []string {
	t.Helper()
	return startCluster(t, n, nil)
}

// startCluster is StartCluster with more arguments for each node; args
// gives them for node i.
func startCluster(t testing.TB, n int, args func(i int) []string) []string {
	t.Helper()
	if n < 1 {
		t.Fatalf("valkeytest: StartCluster(%d): want at least one node", n)
	}
	addrs := make([]string, n)
	clients := make(map[string]valkey.Client, n)
	for i := range n {
		var nd node
		if args != nil {
			nd.args = args(i)
		}
		srv, err := launchNodeWith(true, nd)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(srv.Stop)
		c, err := nodeClient(srv.Addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		addrs[i], clients[srv.Addr] = srv.Addr, c
	}
	ctx, cancel := context.WithTimeout(context.Background(), clusterReadyTimeout)
	defer cancel()
	// Every node meets the first one, on its client and bus ports.
	host, port, _ := strings.Cut(addrs[0], ":")
	bus, err := clients[addrs[0]].Do(ctx, clients[addrs[0]].B().ConfigGet().Parameter("cluster-port").Build()).AsStrMap()
	if err != nil || bus["cluster-port"] == "" {
		t.Fatalf("valkeytest: %s: CONFIG GET cluster-port = %v, %v", addrs[0], bus, err)
	}
	for i, addr := range addrs {
		c := clients[addr]
		if i > 0 {
			if err := c.Do(ctx, c.B().Arbitrary("CLUSTER", "MEET").Args(host, port, bus["cluster-port"]).Build()).Error(); err != nil {
				t.Fatalf("valkeytest: %s: CLUSTER MEET %s: %v", addr, addrs[0], err)
			}
		}
		first, last := i*Slots/n, (i+1)*Slots/n-1
		if err := addSlots(ctx, c, first, last); err != nil {
			t.Fatalf("valkeytest: %s: %v", addr, err)
		}
	}
	if err := waitClusterOK(ctx, clients, n); err != nil {
		t.Fatal(err)
	}
	return addrs
}

// nodeClient is a client of one node, never a cluster client: the node may
// not own slots yet.
func nodeClient(addr string) (valkey.Client, error) {
	c, err := valkey.NewClient(valkey.ClientOption{InitAddress: []string{addr}, DisableCache: true, ForceSingleClient: true})
	if err != nil {
		return nil, fmt.Errorf("valkeytest: connect %s: %w", addr, err)
	}
	return c, nil
}

// addSlots assigns the slots first..last to the node c talks to
// (CLUSTER ADDSLOTSRANGE, Redis 7.0+).
func addSlots(ctx context.Context, c valkey.Client, first, last int) error {
	cmd := c.B().Arbitrary("CLUSTER", "ADDSLOTSRANGE").Args(fmt.Sprint(first), fmt.Sprint(last)).Build()
	if err := c.Do(ctx, cmd).Error(); err != nil {
		return fmt.Errorf("CLUSTER ADDSLOTSRANGE %d %d: %w", first, last, err)
	}
	return nil
}

// waitClusterOK waits until every node reports cluster_state:ok and knows
// n nodes.
func waitClusterOK(ctx context.Context, clients map[string]valkey.Client, n int) error {
	want := []string{"cluster_state:ok", fmt.Sprintf("cluster_known_nodes:%d", n)}
	for addr, c := range clients {
		for {
			info, err := c.Do(ctx, c.B().ClusterInfo().Build()).ToString()
			if err == nil && containsAll(info, want) {
				break
			}
			if ctx.Err() != nil {
				return fmt.Errorf("valkeytest: %s: no %s within %s (last CLUSTER INFO: %q, %v)",
					addr, strings.Join(want, ", "), clusterReadyTimeout, firstLines(info, 3), errors.Join(err, ctx.Err()))
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return nil
}

func containsAll(info string, lines []string) bool {
	for _, l := range lines {
		if !strings.Contains(info, l+"\r\n") && !strings.HasSuffix(strings.TrimSpace(info), l) {
			return false
		}
	}
	return true
}

func firstLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.Join(lines, " ")
}

// StartReplica starts a node that replicates the cluster primary at
// primary and stops it when t ends (or at Stop, for tests of a replica
// going away). It returns once the replica has synced and the primary
// lists it in CLUSTER SLOTS, where cluster clients learn the topology.
func StartReplica(t testing.TB, primary string) *Server {
	t.Helper()
	srv, err := launchNode(true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	pc, err := nodeClient(primary)
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	rc, err := nodeClient(srv.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), clusterReadyTimeout)
	defer cancel()
	id, err := pc.Do(ctx, pc.B().Arbitrary("CLUSTER", "MYID").Build()).ToString()
	if err != nil {
		t.Fatalf("valkeytest: %s: CLUSTER MYID: %v", primary, err)
	}
	bus, err := pc.Do(ctx, pc.B().ConfigGet().Parameter("cluster-port").Build()).AsStrMap()
	if err != nil || bus["cluster-port"] == "" {
		t.Fatalf("valkeytest: %s: CONFIG GET cluster-port = %v, %v", primary, bus, err)
	}
	host, port, _ := strings.Cut(primary, ":")
	if err := rc.Do(ctx, rc.B().Arbitrary("CLUSTER", "MEET").Args(host, port, bus["cluster-port"]).Build()).Error(); err != nil {
		t.Fatalf("valkeytest: %s: CLUSTER MEET %s: %v", srv.Addr, primary, err)
	}
	// REPLICATE needs the new node to know the primary: retry until gossip
	// has told it.
	for {
		err := rc.Do(ctx, rc.B().Arbitrary("CLUSTER", "REPLICATE").Args(id).Build()).Error()
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("valkeytest: %s: CLUSTER REPLICATE %s: %v", srv.Addr, id, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	_, rport, _ := strings.Cut(srv.Addr, ":")
	for {
		info, err := rc.Do(ctx, rc.B().Info().Section("replication").Build()).ToString()
		slots, err2 := pc.Do(ctx, pc.B().ClusterSlots().Build()).ToAny()
		if err == nil && err2 == nil && strings.Contains(info, "master_link_status:up") &&
			strings.Contains(fmt.Sprint(slots), " "+rport+" ") {
			return srv
		}
		if ctx.Err() != nil {
			t.Fatalf("valkeytest: %s: replica of %s not synced and listed within %s (%v, %v; slots %v)",
				srv.Addr, primary, clusterReadyTimeout, err, err2, slots)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
