package client_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/flowfabric/ff/runtime/client"
)

// freezer is a TCP proxy whose connections so far can be frozen: they stay
// open and forward nothing (a NAT or load balancer that dropped the flow,
// a peer gone without a FIN). Connections accepted later work.
type freezer struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	frozen chan struct{} // closed by freeze, for the connections so far
	done   chan struct{} // closed at the test's end: frozen pipes return
}

func (f *freezer) serve() {
	for {
		c, err := f.ln.Accept()
		if err != nil {
			return
		}
		f.mu.Lock()
		frozen := f.frozen
		f.mu.Unlock()
		go func() {
			up, err := net.Dial("tcp", f.target)
			if err != nil {
				c.Close()
				return
			}
			pipe := func(dst, src net.Conn) {
				buf := make([]byte, 32<<10)
				for {
					n, err := src.Read(buf)
					select {
					case <-frozen:
						<-f.done // forward nothing, close nothing
						return
					default:
					}
					if n > 0 {
						dst.Write(buf[:n])
					}
					if err != nil {
						dst.Close()
						return
					}
				}
			}
			go pipe(up, c)
			go pipe(c, up)
		}()
	}
}

func (f *freezer) freeze() {
	f.mu.Lock()
	defer f.mu.Unlock()
	close(f.frozen)
	f.frozen = make(chan struct{})
}

// TestDefaultTransportLeavesASilentConnection: over HTTP/2 every request
// of a client shares one connection; one that went silent (frozen here by
// a proxy that forwards nothing and closes nothing) is found out by the
// default transport's pings and closed, so that requests get through on
// a new one, instead of failing until TCP gives up minutes later (a
// worker's renewals among them). Takes the ping interval and timeout.
func TestDefaultTransportLeavesASilentConnection(t *testing.T) {
	t.Parallel()
	if err := requestsAfterFreeze(t, client.HTTP2PingAfter+client.HTTP2PingTimeout+5*time.Second); err != nil {
		t.Fatalf("no request got through on a new connection: %v", err)
	}
}

// requestsAfterFreeze makes a request through a proxy with the client's
// default transport, freezes the proxy's connection and sends requests
// with 300 ms timeouts for up to within: nil as soon as one is answered.
func requestsAfterFreeze(t *testing.T, within time.Duration) error {
	t.Helper()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{}`))
	}))
	srv.EnableHTTP2 = true
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	defer srv.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	f := &freezer{ln: ln, target: srv.Listener.Addr().String(), frozen: make(chan struct{}), done: make(chan struct{})}
	defer close(f.done)
	go f.serve()
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	cfg := &tls.Config{RootCAs: roots}
	// httptest's certificate names 127.0.0.1.
	c, err := client.New("https://"+ln.Addr().String(), client.WithTLSConfig(cfg))
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseIdleConnections()
	if err := c.Health(context.Background()); err != nil {
		t.Fatal(err)
	}
	f.freeze()
	var lastErr error
	for end := time.Now().Add(within); time.Now().Before(end); {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		lastErr = c.Health(ctx)
		cancel()
		if lastErr == nil {
			return nil
		}
	}
	return lastErr
}

// WithTLSConfig must not change the caller's tls.Config: net/http's
// Transport (unlike Server.ServeTLS) does not clone TLSClientConfig and
// writes "h2"/"http/1.1" into its NextProtos on the first request. A
// config shared by two clients (two workers with one Config.TLS) is then
// written by both at once: a data race (go test -race).
func TestWithTLSConfigLeavesCallersConfigAlone(t *testing.T) {
	t.Parallel()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{}`))
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	cfg := &tls.Config{RootCAs: roots}
	var wg sync.WaitGroup
	for range 2 {
		c, err := client.New(srv.URL, client.WithTLSConfig(cfg))
		if err != nil {
			t.Fatal(err)
		}
		defer c.CloseIdleConnections()
		wg.Go(func() {
			if err := c.Health(context.Background()); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if len(cfg.NextProtos) != 0 {
		t.Fatalf("the caller's tls.Config was changed: NextProtos = %q (want it cloned, untouched)", cfg.NextProtos)
	}
}
