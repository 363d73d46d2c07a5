// Package valkeytest starts real Valkey (or Redis) servers for tests.
//
// Start launches a dedicated server for one test and stops it when the test
// ends. Shared returns a server shared by every test of the test binary; its
// tests isolate their keys with Prefix, which gives each test a key prefix of
// its own (the store prefixes every key, its configuration and its wake-up
// channel with it), so tests using the shared server may run in parallel. A
// test that changes server-wide state (FUNCTION FLUSH, CONFIG SET, DEBUG)
// uses Start instead.
//
// Servers are started by package devserver, as ffrun dev starts its child:
// valkey-server when it is on PATH, else redis-server, on a free local port,
// here without persistence and in a temporary directory. A missing binary
// fails the test: it is never skipped. A server is stopped when the test
// binary exits even if it crashes (Linux parent-death signal), or earlier
// by Stop/t.Cleanup.
package valkeytest

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/flowfabric/ff/runtime/devserver"
	"github.com/valkey-io/valkey-go"
)

// Server is a running server process.
type Server struct {
	Addr string // host:port

	srv  *devserver.Server
	dir  string
	once sync.Once
}

// Start starts a dedicated server for t and stops it when t ends. Failing to
// start it is a test failure.
func Start(t testing.TB) string {
	t.Helper()
	srv, err := Launch()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	return srv.Addr
}

// Launch starts a server outside of any test (for benchmarks and TestMain).
// The caller must call Stop. It is ffrun dev's child (package devserver)
// without persistence, in a temporary directory; with FF_TEST_CLUSTER=1, a
// single-node cluster (cluster.go).
func Launch() (*Server, error) { return launch(ClusterMode()) }

// Stop stops the server and removes its directory. It is safe to call twice.
func (s *Server) Stop() {
	s.once.Do(func() {
		_ = s.srv.Stop(context.Background())
		os.RemoveAll(s.dir)
	})
}

var shared struct {
	once sync.Once
	srv  *Server
	err  error
}

// Shared returns the address of the server shared by every test of this
// test binary, starting it on first use. Use Prefix to isolate keys. The
// server is killed when the test binary exits; call StopShared from
// TestMain to stop it earlier.
func Shared(t testing.TB) string {
	t.Helper()
	shared.once.Do(func() { shared.srv, shared.err = Launch() })
	if shared.err != nil {
		t.Fatal(shared.err)
	}
	return shared.srv.Addr
}

// StopShared stops the shared server if it was started.
func StopShared() {
	if shared.srv != nil {
		shared.srv.Stop()
	}
}

var prefixSeq atomic.Int64

var unsafeChars = regexp.MustCompile(`[^A-Za-z0-9_]+`)

// Prefix returns a key prefix unique to t within this test binary, such as
// "t12_TestClaim:". It never contains braces, so it leaves hash tags alone.
func Prefix(t testing.TB) string {
	name := unsafeChars.ReplaceAllString(t.Name(), "_")
	if len(name) > 40 {
		name = name[:40]
	}
	return fmt.Sprintf("t%d_%s:", prefixSeq.Add(1), name)
}

// Client returns a valkey-go client connected to addr, closed when t ends.
func Client(t testing.TB, addr string) valkey.Client {
	t.Helper()
	c, err := valkey.NewClient(valkey.ClientOption{InitAddress: []string{addr}, DisableCache: true})
	if err != nil {
		t.Fatalf("valkeytest: connect %s: %v", addr, err)
	}
	t.Cleanup(c.Close)
	return c
}

// Flush deletes every key and function of the server c talks to. Use it
// only on a dedicated server from Start.
func Flush(ctx context.Context, c valkey.Client) error {
	if err := c.Do(ctx, c.B().Flushall().Build()).Error(); err != nil {
		return err
	}
	return c.Do(ctx, c.B().FunctionFlush().Build()).Error()
}

// CommandCalls sums the calls of INFO commandstats of the server c talks
// to (commands run inside functions included), leaving out INFO, PING and
// HELLO: the difference of two readings is what was run between them. The
// counts are the server's, for every client: read them on a server from
// Start, not the shared one.
func CommandCalls(t testing.TB, c valkey.Client) int64 {
	t.Helper()
	info, err := c.Do(context.Background(), c.B().Info().Section("commandstats").Build()).ToString()
	if err != nil {
		t.Fatalf("valkeytest: INFO commandstats: %v", err)
	}
	var n int64
	for _, line := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":calls=")
		if !ok || name == "cmdstat_info" || name == "cmdstat_ping" || name == "cmdstat_hello" {
			continue
		}
		v, _, _ := strings.Cut(rest, ",")
		k, _ := strconv.ParseInt(v, 10, 64)
		n += k
	}
	return n
}
