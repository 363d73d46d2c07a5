// Package servertest runs a real ffrun server for tests: real Valkey from
// the valkeytest harness (shared server, per-test key prefix), the real
// store, scheduler, scanners and Echo API on a local listener.
package servertest

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flowfabric/ff/runtime/client"
	"github.com/flowfabric/ff/runtime/internal/valkeytest"
	"github.com/flowfabric/ff/runtime/server"
	"github.com/flowfabric/ff/runtime/wire"
	"github.com/flowfabric/ff/runtime/worker"
)

// Env is one running server.
type Env struct {
	URL    string
	Client *client.Client
	Server *server.Server
	Config server.Config

	cancel context.CancelFunc
	done   chan error
}

// FastScanners are scanner intervals short enough for tests.
var FastScanners = server.ScannerConfig{
	LeaseExpiry:     50 * time.Millisecond,
	DelayedPromoter: 50 * time.Millisecond,
	AttemptTimeout:  50 * time.Millisecond,
	Deadline:        50 * time.Millisecond,
	Retention:       time.Second,
}

// Start serves ffrun for t and stops it when t ends. mod may change the
// configuration (the Valkey address and key prefix are already set).
func Start(t testing.TB, mod ...func(*server.Config)) *Env {
	t.Helper()
	return StartConfig(t, config(t, mod))
}

// StartOn is Start serving on ln (a listener that counts or breaks
// connections, say) instead of a new loopback one.
func StartOn(t testing.TB, ln net.Listener, mod ...func(*server.Config)) *Env {
	t.Helper()
	return StartConfigOn(t, config(t, mod), ln)
}

// config is Start's configuration.
func config(t testing.TB, mod []func(*server.Config)) server.Config {
	cfg := server.Config{
		ValkeyAddr:      valkeytest.Shared(t),
		KeyPrefix:       valkeytest.Prefix(t),
		FlowPartitions:  4,
		Scanners:        FastScanners,
		ResyncInterval:  200 * time.Millisecond,
		ShutdownTimeout: 5 * time.Second,
		Logger:          Logger(t),
	}
	for _, m := range mod {
		m(&cfg)
	}
	return cfg
}

// StartOwnValkey serves ffrun for t on a Valkey of its own instead of the
// shared one, with no scanners, for tests that stop Valkey: stopValkey
// does (safe to call twice; t's end calls it too).
func StartOwnValkey(t testing.TB, mod ...func(*server.Config)) (env *Env, stopValkey func()) {
	t.Helper()
	vk, err := valkeytest.LaunchPlain()
	if err != nil {
		t.Fatalf("servertest: own Valkey: %v", err)
	}
	t.Cleanup(vk.Stop)
	env = Start(t, append([]func(*server.Config){func(c *server.Config) {
		c.ValkeyAddr = vk.Addr
		c.DisableScanners = true
	}}, mod...)...)
	return env, vk.Stop
}

// RunWorker runs a worker SDK instance with handlers against e until t
// ends or stop is called; cfg's URL and token are e's, its claim wait 2 s
// unless set, its drain 2 s.
func (e *Env) RunWorker(t testing.TB, cfg worker.Config, handlers map[string]worker.Handler) (stop func()) {
	t.Helper()
	cfg.URL = e.URL
	cfg.Token = e.Config.Token
	if cfg.ClaimWait == 0 {
		cfg.ClaimWait = 2 * time.Second
	}
	cfg.DrainTimeout = 2 * time.Second
	w, err := worker.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for k, h := range handlers {
		if err := w.Handle(k, h); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := w.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("worker %s: %v", cfg.Name, err)
		}
	}()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return stop
}

// StartConfig serves ffrun with exactly cfg.
func StartConfig(t testing.TB, cfg server.Config) *Env {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("servertest: listen: %v", err)
	}
	return StartConfigOn(t, cfg, ln)
}

// StartConfigOn serves ffrun with exactly cfg on ln (closed when it
// stops).
func StartConfigOn(t testing.TB, cfg server.Config, ln net.Listener) *Env {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := server.Open(ctx, cfg)
	if err != nil {
		cancel()
		ln.Close()
		t.Fatalf("servertest: open: %v", err)
	}
	e := &Env{URL: "http://" + ln.Addr().String(), Server: srv, Config: cfg, cancel: cancel, done: make(chan error, 1)}
	go func() { e.done <- srv.Serve(ctx, ln) }()
	e.Client, err = client.New(e.URL, client.WithToken(cfg.Token))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := e.Stop(); err != nil {
			t.Errorf("servertest: stop: %v", err)
		}
	})
	return e
}

// Stop shuts the server down gracefully and returns what Serve returned.
// Safe to call twice.
func (e *Env) Stop() error {
	e.cancel()
	select {
	case err, ok := <-e.done:
		if ok {
			close(e.done)
		}
		return err
	case <-time.After(15 * time.Second):
		return errors.New("server did not stop within 15s")
	}
}

// Logger returns a logger writing to t.Log at info level.
func Logger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

type tWriter struct{ t testing.TB }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// Silent takes every connection ln accepts and never answers on it (a
// hung server, a partition) until t ends, when ln and the connections are
// closed. The channel it returns receives once per connection taken (those
// that come while it holds 64 unread are not told).
func Silent(t testing.TB, ln net.Listener) <-chan struct{} {
	var mu sync.Mutex
	var conns []net.Conn
	accepted := make(chan struct{}, 64)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			select {
			case accepted <- struct{}{}:
			default:
			}
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return accepted
}

// LogBuffer is a log destination safe for the concurrent writes of a
// server's goroutines, for tests that read what was logged.
type LogBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *LogBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String returns what was written so far.
func (l *LogBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// StopShared stops the Valkey server that the tests of this binary share
// (Start uses it); call it from TestMain after m.Run. Packages outside
// runtime/ cannot reach the internal harness directly.
func StopShared() { valkeytest.StopShared() }

// Response is the server's answer to Env.Do.
type Response struct {
	Status int
	Header http.Header
	Body   string
	Err    wire.ErrorBody // the envelope of an error answer (Status >= 400)
}

// Field returns the error's details.field ("" when none).
func (r Response) Field() string {
	f, _ := r.Err.Details["field"].(string)
	return f
}

// Do sends one request over real HTTP with the given headers (a JSON
// Content-Type is added to a body) and reads the answer. An error answer
// that is not a JSON error envelope fails t.
func (e *Env) Do(t testing.TB, method, path string, header map[string]string, body string) Response {
	t.Helper()
	req, err := http.NewRequest(method, e.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	r := Response{Status: res.StatusCode, Header: res.Header, Body: string(b)}
	if res.StatusCode >= 400 {
		if ct := res.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
			t.Errorf("%s %s: error with content type %q", method, path, ct)
		}
		var env wire.ErrorEnvelope
		if err := json.Unmarshal(b, &env); err != nil || env.Error.Code == "" || env.Error.Message == "" {
			t.Errorf("%s %s: error body is not a JSON error envelope: %s", method, path, b)
		}
		r.Err = env.Error
	}
	return r
}
