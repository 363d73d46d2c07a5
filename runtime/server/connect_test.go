package server_test

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flowfabric/ff/runtime/internal/valkeytest"
	"github.com/flowfabric/ff/runtime/server"
	"github.com/flowfabric/ff/runtime/store"
	"github.com/valkey-io/valkey-go"
)

// TestOpenWaitsWhileValkeyLoads: a server loading its dataset answers
// LOADING; Open fails at once with no wait, and waits it out with one.
func TestOpenWaitsWhileValkeyLoads(t *testing.T) {
	addr := valkeytest.StartArgs(t, "--enable-debug-command", "local")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	admin := valkeytest.Client(t, addr)
	for _, cmd := range [][]string{
		{"DEBUG", "POPULATE", "3000"},
		// 1 ms a key: loading takes about 3 s, during which the server
		// answers the other clients between keys.
		{"CONFIG", "SET", "key-load-delay", "1000"},
		{"CONFIG", "SET", "loading-process-events-interval-bytes", "1024"},
	} {
		if err := admin.Do(ctx, admin.B().Arbitrary(cmd...).Build()).Error(); err != nil {
			t.Fatalf("%v: %v", cmd, err)
		}
	}
	reloaded := make(chan error, 1)
	reloader := valkeytest.Client(t, addr)
	go func() { reloaded <- reloader.Do(ctx, reloader.B().Arbitrary("DEBUG", "RELOAD").Build()).Error() }()
	for {
		err := admin.Do(ctx, admin.B().Set().Key("probe").Value("1").Build()).Error() // a write: valkey-go retries reads on LOADING itself
		if verr, ok := errors.AsType[*valkey.ValkeyError](err); ok && verr.IsLoading() {
			break
		}
		select {
		case err := <-reloaded:
			t.Fatalf("DEBUG RELOAD ended (%v) before a LOADING reply was seen", err)
		case <-time.After(5 * time.Millisecond):
		}
	}
	cfg := server.Config{ValkeyAddr: addr, KeyPrefix: valkeytest.Prefix(t), DisableScanners: true}
	if s, err := server.Open(ctx, cfg); err == nil || !strings.Contains(err.Error(), "LOADING") {
		if s != nil {
			s.Close()
		}
		t.Fatalf("Open with no wait while loading: %v, want LOADING", err)
	}
	var log lockedBuffer
	cfg.Logger = slog.New(slog.NewTextHandler(&log, nil))
	cfg.ValkeyWait = 50 * time.Second
	s, err := server.Open(ctx, cfg)
	if err != nil {
		t.Fatalf("Open with a wait: %v", err)
	}
	s.Close()
	if err := <-reloaded; err != nil {
		t.Fatalf("DEBUG RELOAD: %v", err)
	}
	for _, want := range []string{`msg="waiting for valkey"`, "LOADING", `msg="valkey reached"`} {
		if log.count(want) == 0 {
			t.Errorf("no %s in the log:\n%s", want, log.b.String()) // Open has returned: no more writes
		}
	}
}

// TestOpenDoesNotWaitForWhatCannotHeal: partition counts that differ from
// the stored ones fail at once, however long the wait.
func TestOpenDoesNotWaitForWhatCannotHeal(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cfg := server.Config{ValkeyAddr: valkeytest.Shared(t), KeyPrefix: valkeytest.Prefix(t), FlowPartitions: 4, DisableScanners: true}
	s, err := server.Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	cfg.FlowPartitions, cfg.ValkeyWait = 8, time.Minute
	start := time.Now()
	s, err = server.Open(ctx, cfg)
	if err == nil {
		s.Close()
		t.Fatal("Open with other partition counts succeeded")
	}
	if !errors.Is(err, store.ErrPartitionMismatch) || time.Since(start) > 10*time.Second {
		t.Fatalf("after %s: %v, want store.ErrPartitionMismatch at once", time.Since(start), err)
	}
}

func TestConfigValkeyTLSAndWait(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, tt := range []struct {
		cfg  server.Config
		want string
	}{
		{server.Config{ValkeyAddr: "unix:/tmp/v.sock", ValkeyTLS: &tls.Config{}}, "Config.ValkeyTLS is set but Config.ValkeyAddr is a Unix socket"},
		{server.Config{ValkeyAddr: "127.0.0.1:1", ValkeyWait: -time.Second}, "Config.ValkeyWait -1s is negative"},
	} {
		if _, err := server.Open(ctx, tt.cfg); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Open(%+v) = %v, want an error mentioning %q", tt.cfg, err, tt.want)
		}
	}
}

// TestOpenWaitsWhileValkeyIsFull: a Valkey at its maxclients hangs up on
// a new connection (its "max number of clients reached" reaches valkey-go
// as the end of the connection): waiting can heal that, as others hang
// up, so Open with a wait retries until there is room.
func TestOpenWaitsWhileValkeyIsFull(t *testing.T) {
	addr := valkeytest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	admin := valkeytest.Client(t, addr)
	n, err := admin.Do(ctx, admin.B().ClientList().Build()).ToString()
	if err != nil {
		t.Fatal(err)
	}
	// Room for the connections open now, none more.
	full := strconv.Itoa(strings.Count(strings.TrimSpace(n), "\n") + 1)
	if err := admin.Do(ctx, admin.B().ConfigSet().ParameterValue().ParameterValue("maxclients", full).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	cfg := server.Config{ValkeyAddr: addr, KeyPrefix: valkeytest.Prefix(t), DisableScanners: true}
	if s, err := server.Open(ctx, cfg); err == nil {
		s.Close()
		t.Fatal("Open with no wait on a full server succeeded")
	}
	var log lockedBuffer
	cfg.Logger = slog.New(slog.NewTextHandler(&log, nil))
	cfg.ValkeyWait = 50 * time.Second
	opened := make(chan error, 1)
	go func() {
		s, err := server.Open(ctx, cfg)
		if err == nil {
			s.Close()
		}
		opened <- err
	}()
	for log.count(`msg="waiting for valkey"`) == 0 {
		select {
		case err := <-opened:
			t.Fatalf("Open returned (%v) before it said it waits", err)
		case <-time.After(10 * time.Millisecond):
		}
	}
	if err := admin.Do(ctx, admin.B().ConfigSet().ParameterValue().ParameterValue("maxclients", "10000").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	if err := <-opened; err != nil {
		t.Fatalf("Open with a wait: %v", err)
	}
}
