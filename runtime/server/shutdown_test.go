package server_test

// Shutdown with a hung Valkey, and what a failed Open leaves: over real
// HTTP, on a real Valkey (behind a proxy the test can freeze).

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"runtime/pprof"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flowfabric/ff/runtime/api"
	"github.com/flowfabric/ff/runtime/internal/goroutinetest"
	"github.com/flowfabric/ff/runtime/internal/valkeytest"
	"github.com/flowfabric/ff/runtime/server"
	"github.com/flowfabric/ff/runtime/server/servertest"
)

// freezingProxy forwards TCP connections to a backend until Freeze: from
// then on it forwards nothing either way and keeps every connection open
// (a hung Valkey host, a partition), and refuses nothing. Close closes
// the connections, as a Valkey that comes back after a restart would.
type freezingProxy struct {
	ln      net.Listener
	backend string

	mu     sync.Mutex
	frozen bool
	thaw   chan struct{} // closed by Close
	conns  []net.Conn
	once   sync.Once
}

// newFreezingProxy forwards to backend until t ends (or Close).
func newFreezingProxy(t *testing.T, backend string) *freezingProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &freezingProxy{ln: ln, backend: backend, thaw: make(chan struct{})}
	go p.accept()
	t.Cleanup(p.Close)
	return p
}

func (p *freezingProxy) Addr() string { return p.ln.Addr().String() }

func (p *freezingProxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		if !p.track(c) {
			return
		}
		go p.serve(c)
	}
}

// track keeps c to close at Close; after Close it closes c and says so.
func (p *freezingProxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.thaw:
		c.Close()
		return false
	default:
	}
	p.conns = append(p.conns, c)
	return true
}

func (p *freezingProxy) serve(c net.Conn) {
	b, err := net.Dial("tcp", p.backend)
	if err != nil {
		c.Close()
		return
	}
	if !p.track(b) {
		c.Close()
		return
	}
	go p.pipe(b, c)
	p.pipe(c, b)
}

// pipe copies from src to dst, holding every read back once frozen.
func (p *freezingProxy) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			frozen := p.frozen
			p.mu.Unlock()
			if frozen {
				<-p.thaw // never forwarded: the connection hangs
				return
			}
			if _, err := dst.Write(buf[:n]); err != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// Freeze stops forwarding.
func (p *freezingProxy) Freeze() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.frozen = true
}

// Close stops the proxy and closes every connection. Safe to call twice.
func (p *freezingProxy) Close() {
	p.once.Do(func() {
		p.ln.Close()
		p.mu.Lock()
		defer p.mu.Unlock()
		close(p.thaw)
		for _, c := range p.conns {
			c.Close()
		}
	})
}

// bufferedConfig is a server configuration on the shared Valkey whose log
// goes to a buffer, shown when t fails: what a goroutine left running
// logs after t ended must not call t.Log.
func bufferedConfig(t *testing.T) server.Config {
	logs := &servertest.LogBuffer{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(logs.String())
		}
	})
	return server.Config{
		ValkeyAddr:      valkeytest.Shared(t),
		KeyPrefix:       valkeytest.Prefix(t),
		FlowPartitions:  4,
		Scanners:        servertest.FastScanners,
		ResyncInterval:  200 * time.Millisecond,
		ShutdownTimeout: 5 * time.Second,
		Logger:          slog.New(slog.NewTextHandler(logs, nil)),
	}
}

// serveOnHungValkey serves a server with shutdownTimeout on a Valkey of
// its own behind a proxy (plain: a cluster would send the client to its
// nodes' own addresses), once it is ready; after a write and a few
// scanner ticks, with the client's connections in use, the proxy is
// frozen: Valkey hangs, taking bytes and answering nothing. stop ends
// Serve's ctx; served gives what Serve returned.
func serveOnHungValkey(t *testing.T, shutdownTimeout time.Duration) (addr string, proxy *freezingProxy, stop func(), served <-chan error) {
	t.Helper()
	vk, err := valkeytest.LaunchPlain()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(vk.Stop)
	proxy = newFreezingProxy(t, vk.Addr)
	cfg := bufferedConfig(t)
	cfg.ValkeyAddr = proxy.Addr()
	cfg.ShutdownTimeout = shutdownTimeout
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	srv, err := server.Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	url := "http://" + ln.Addr().String()
	for deadline := time.Now().Add(10 * time.Second); ; {
		res, err := http.Get(url + "/readyz")
		if err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("server not ready: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	res, err := http.Post(url+"/v1/executions", "application/json", strings.NewReader(`{"kind":"k"}`))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	time.Sleep(200 * time.Millisecond) // the scanners tick on the connections
	proxy.Freeze()
	time.Sleep(100 * time.Millisecond) // a scanner tick now waits on Valkey
	return ln.Addr().String(), proxy, cancel, done
}

// A shutdown with Valkey hung ends within its bound: ShutdownTimeout,
// and a second more when nothing is left of it (spec/api.md: the
// supervisor's stop timeout a little more than --shutdown-timeout).
// Closing the Valkey client waits up to a second for each of its
// connections, one after the other: it is left to the background.
func TestShutdownWithValkeyHungEndsInTime(t *testing.T) {
	t.Parallel()
	const shutdownTimeout = time.Second
	_, _, stop, served := serveOnHungValkey(t, shutdownTimeout)
	start := time.Now()
	stop()
	// The bound with room for a loaded machine; closing the client alone
	// took some 10 s.
	const bound = shutdownTimeout + time.Second + 3*time.Second
	select {
	case err := <-served:
		took := time.Since(start)
		if err != nil {
			t.Errorf("Serve: %v", err)
		}
		if took > bound {
			t.Fatalf("Serve returned %s after the stop with Valkey hung, want at most %s (ShutdownTimeout %s)",
				took.Round(100*time.Millisecond), bound, shutdownTimeout)
		}
	case <-time.After(90 * time.Second):
		t.Fatalf("Serve had not returned 90s after the stop with Valkey hung (ShutdownTimeout %s)", shutdownTimeout)
	}
}

// A shutdown releases the parked claims, then stops accepting connections
// at once, and lets the requests in flight finish (spec/api.md): with
// Valkey hung too, where the end of the scheduler's wake-up subscription
// waits on it (until ShutdownTimeout, or the client gives the connection
// up after its 10 s timeout), the listener closes without waiting for
// that: it stayed open as long, leaving the requests in flight no time.
func TestShutdownWithValkeyHungClosesTheListenerFirst(t *testing.T) {
	t.Parallel()
	const shutdownTimeout = time.Minute
	addr, proxy, stop, served := serveOnHungValkey(t, shutdownTimeout)
	stop()
	// The listener closes at once; the bound is generous for a loaded
	// machine, and well under the 10 s the subscription waits.
	const bound = 3 * time.Second
	for deadline := time.Now().Add(bound); ; {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			break // refused: the listener is closed
		}
		c.Close()
		if time.Now().After(deadline) {
			t.Fatalf("the API still takes connections %s into a shutdown with Valkey hung; want the listener closed once the claims are released", bound)
		}
		time.Sleep(20 * time.Millisecond)
	}
	select {
	case err := <-served:
		t.Fatalf("Serve returned (%v) with Valkey hung, before ShutdownTimeout: the subscriptions were not waited for", err)
	default:
	}
	// Valkey's connections drop: what waited on them ends, and so does Serve.
	proxy.Close()
	select {
	case err := <-served:
		if err != nil {
			t.Errorf("Serve: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Serve had not returned 30s after Valkey's connections dropped")
	}
}

// An Open that fails after it opened the store (here: api.New refuses the
// body limit) leaves nothing running. On a deployment whose budget and
// quota indexes are not backfilled yet (made by an older release), the
// store runs the backfill in the background; it must be stopped
// (Store.Wait) before the client is closed, else it retries on a closed
// client every LimitsBackfillRetry for the life of the process.
func TestFailedOpenLeavesNothingRunning(t *testing.T) {
	t.Parallel()
	cfg := bufferedConfig(t)
	cfg.DisableScanners = true
	ctx := ctxT(t)
	// The deployment exists (its partition counts are stored) ...
	srv, err := server.Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv.Close()
	// ... and was made by a release without the limit indexes, while
	// another process makes the backfill pass (its lock held).
	vk := valkeytest.Client(t, cfg.ValkeyAddr)
	if err := vk.Do(ctx, vk.B().Hdel().Key(cfg.KeyPrefix+"ff:config").Field("limits_indexed").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	if err := vk.Do(ctx, vk.B().Set().Key(cfg.KeyPrefix+"ff:limits_backfill").Value("another").Px(time.Minute).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	bad := cfg
	bad.BodyLimit = api.BodyLimitMax + 1 // refused by api.New, after the store opened
	pprof.Do(ctx, pprof.Labels("open", "failed"), func(ctx context.Context) {
		srv, err := server.Open(ctx, bad)
		if err == nil {
			srv.Close()
			t.Fatal("Open with a body limit over the maximum succeeded")
		}
		if !strings.Contains(err.Error(), "BodyLimit") {
			t.Fatalf("Open with a body limit over the maximum: %v, want api.New's refusal", err)
		}
	})
	goroutinetest.WaitNone(t, "open", "failed", 10*time.Second, "Open failed")
}
