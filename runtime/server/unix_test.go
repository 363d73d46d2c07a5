package server_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/flowfabric/ff/runtime/devserver"
	"github.com/flowfabric/ff/runtime/server"
	"github.com/flowfabric/ff/runtime/server/servertest"
	"github.com/flowfabric/ff/runtime/wire"
)

func TestValkeyNetwork(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		addr, network, address, err string
	}{
		{addr: "127.0.0.1:6379", network: "tcp", address: "127.0.0.1:6379"},
		{addr: "valkey.internal:6380", network: "tcp", address: "valkey.internal:6380"},
		{addr: "unix:/run/valkey.sock", network: "unix", address: "/run/valkey.sock"},
		{addr: "unix:///run/valkey.sock", network: "unix", address: "/run/valkey.sock"},
		{addr: "unix:data/valkey.sock", network: "unix", address: "data/valkey.sock"},
		{addr: "unix:", err: "no socket path"},
		{addr: "unix://", err: "no socket path"},
		{addr: "localhost", err: "want host:port or unix:PATH"},
		{addr: "/run/valkey.sock", err: "want host:port or unix:PATH"},
		{addr: "127.0.0.1:", err: "no port after the colon"},
		{addr: "redis://127.0.0.1:6379", err: "not a redis:// URL"},
		{addr: "rediss://user:s3cret@valkey.internal:6380/0", err: "not a rediss:// URL"},
		{addr: "[::1]:6379", network: "tcp", address: "[::1]:6379"},
		// A URL with its scheme cut off: refused without quoting it.
		{addr: "default:s3cret@localhost:6379", err: "not user info"},
		{addr: ":s3cret@localhost:6379", err: "not user info"},
		{addr: "default:s3cret@localhost", err: "not user info"},
		{addr: "localhost:0", err: "not a number in 1..65535"},
		{addr: "localhost:65536", err: "not a number in 1..65535"},
		{addr: "localhost:redis", err: "not a number in 1..65535"},
	} {
		network, address, err := server.ValkeyNetwork(tc.addr)
		if err != nil && strings.Contains(err.Error(), "s3cret") {
			t.Errorf("ValkeyNetwork(%q): the error %q shows the password", tc.addr, err)
		}
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ValkeyNetwork(%q) = %q %q %v, want an error with %q", tc.addr, network, address, err, tc.err)
			}
			continue
		}
		if err != nil || network != tc.network || address != tc.address {
			t.Errorf("ValkeyNetwork(%q) = %q %q %v, want %q %q", tc.addr, network, address, err, tc.network, tc.address)
		}
	}
}

// TestServeOverUnixSocket: ffrun reaches a Valkey through its Unix socket
// (as ffrun dev reaches its child) and runs the lifecycle over it.
func TestServeOverUnixSocket(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	child, err := devserver.Start(ctx, devserver.Config{Dir: t.TempDir(), NoPersistence: true})
	if err != nil {
		t.Fatal(err)
	}
	defer child.Stop(context.Background())
	if child.Socket == "" || child.ClientAddr() != "unix:"+child.Socket {
		t.Fatalf("child socket %q, client address %q", child.Socket, child.ClientAddr())
	}
	env := servertest.Start(t, func(c *server.Config) { c.ValkeyAddr = child.ClientAddr() })
	ex, _, err := env.Client.CreateExecution(ctx, wire.CreateExecution{Kind: "k"})
	if err != nil {
		t.Fatal(err)
	}
	tasks, err := env.Client.Claim(ctx, wire.ClaimRequest{WorkerID: "w", WaitMs: 2000})
	if err != nil || len(tasks) != 1 || tasks[0].ExecutionID != ex.ID {
		t.Fatalf("claim: %+v %v", tasks, err)
	}
	l := wire.Lease{ExecutionID: ex.ID, LeaseID: tasks[0].LeaseID, Epoch: tasks[0].Epoch}
	res, err := env.Client.Complete(ctx, wire.CompleteRequest{Completions: []wire.Completion{{Lease: l}}})
	if err != nil || len(res) != 1 || !res[0].OK {
		t.Fatalf("complete: %+v %v", res, err)
	}
	got, err := env.Client.GetExecution(ctx, ex.ID)
	if err != nil || got.State != "completed" {
		t.Fatalf("after complete: %+v %v", got, err)
	}
}

// TestBadConfigRefused: an address that is neither host:port nor
// unix:PATH, a negative run poll, or an ACL user without a password, is
// refused before anything is dialled.
func TestBadConfigRefused(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		cfg  server.Config
		want string
	}{
		{server.Config{ValkeyAddr: "unix:"}, "no socket path"},
		{server.Config{ValkeyAddr: "127.0.0.1:1", RunPoll: -time.Second}, "RunPoll -1s is negative"},
		{server.Config{ValkeyAddr: "127.0.0.1:1", ValkeyUsername: "ff"}, "ValkeyUsername is set without Config.ValkeyPassword"},
	} {
		if _, err := server.Open(context.Background(), tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Open(%+v) = %v, want a refusal containing %q", tc.cfg, err, tc.want)
		}
	}
}
