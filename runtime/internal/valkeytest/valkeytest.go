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
// The server binary is valkey-server when it is on PATH, else redis-server.
// A missing binary fails the test: it is never skipped. Servers run without
// persistence (--save "", --appendonly no) in a temporary directory, on a
// free local port, and are killed when the test binary exits even if it
// crashes (Linux parent-death signal), or earlier by Stop/t.Cleanup.
package valkeytest

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/valkey-io/valkey-go"
)

// startTimeout bounds how long a server may take to answer PING.
const startTimeout = 10 * time.Second

// Server is a running server process.
type Server struct {
	Addr string // host:port

	cmd  *exec.Cmd
	dir  string
	once sync.Once
}

// Binary returns the path of the server binary to use: valkey-server when
// it is on PATH, else redis-server.
func Binary() (string, error) {
	for _, name := range []string{"valkey-server", "redis-server"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("valkeytest: neither valkey-server nor redis-server is on PATH; install one (Debian: apt-get install redis-server)")
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
// The caller must call Stop.
func Launch() (*Server, error) {
	bin, err := Binary()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "valkeytest-")
	if err != nil {
		return nil, fmt.Errorf("valkeytest: temp dir: %w", err)
	}
	var lastErr error
	for range 5 { // retry when another process grabs the port first
		port, err := freePort()
		if err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		srv, err := launch(bin, dir, port)
		if err == nil {
			return srv, nil
		}
		lastErr = err
	}
	os.RemoveAll(dir)
	return nil, lastErr
}

func launch(bin, dir string, port int) (*Server, error) {
	cmd := exec.Command(bin,
		"--port", strconv.Itoa(port),
		"--bind", "127.0.0.1",
		"--dir", dir,
		"--save", "",
		"--appendonly", "no",
		"--daemonize", "no",
		"--loglevel", "warning",
		"--logfile", "",
	)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	out, err := os.Create(fmt.Sprintf("%s/server-%d.log", dir, port))
	if err != nil {
		return nil, fmt.Errorf("valkeytest: log file: %w", err)
	}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		out.Close()
		return nil, fmt.Errorf("valkeytest: start %s: %w", bin, err)
	}
	out.Close()
	srv := &Server{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), cmd: cmd, dir: dir}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	deadline := time.Now().Add(startTimeout)
	for {
		if ping(srv.Addr) == nil {
			return srv, nil
		}
		select {
		case <-exited:
			log, _ := os.ReadFile(fmt.Sprintf("%s/server-%d.log", dir, port))
			return nil, fmt.Errorf("valkeytest: %s exited at start: %s", bin, strings.TrimSpace(string(log)))
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			return nil, fmt.Errorf("valkeytest: %s on port %d did not answer PING within %s", bin, port, startTimeout)
		}
	}
}

// Stop kills the server and removes its directory. It is safe to call twice.
func (s *Server) Stop() {
	s.once.Do(func() {
		if s.cmd != nil && s.cmd.Process != nil {
			s.cmd.Process.Kill()
		}
		if s.dir != "" {
			os.RemoveAll(s.dir)
		}
	})
}

// ping sends a raw RESP PING and expects +PONG.
func ping(addr string) error {
	conn, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
	if err != nil {
		return err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(500 * time.Millisecond))
	if _, err := conn.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return err
	}
	if !strings.HasPrefix(line, "+PONG") {
		return fmt.Errorf("unexpected reply %q", line)
	}
	return nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("valkeytest: free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
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
