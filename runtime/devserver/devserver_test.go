package devserver_test

import (
	"bufio"
	"context"
	"errors"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flowfabric/ff/runtime/devserver"
)

func TestStartStop(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := devserver.Start(ctx, devserver.Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", s.Addr)
	if err != nil {
		t.Fatalf("dial %s: %v", s.Addr, err)
	}
	conn.Close()
	// And on the Unix socket in the data directory.
	if want := filepath.Join(dir, "valkey.sock"); s.Socket != want || s.ClientAddr() != "unix:"+want {
		t.Fatalf("socket %q, client address %q; want %s", s.Socket, s.ClientAddr(), want)
	}
	if conn, err = net.Dial("unix", s.Socket); err != nil {
		t.Fatalf("dial %s: %v", s.Socket, err)
	}
	conn.Close()
	if err := s.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Stop(ctx); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
	select {
	case <-s.Exited():
	default:
		t.Fatal("child still running after Stop")
	}
	if _, err := net.DialTimeout("tcp", s.Addr, 200*time.Millisecond); err == nil {
		t.Fatal("child still listening after Stop")
	}
	// Persistence on: the append-only file lives in the data directory.
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if !strings.Contains(strings.Join(names, " "), "appendonly") {
		t.Fatalf("no append-only file in %s: %v", dir, names)
	}
}

// TestSortedSetsAsSkipLists: the child keeps every sorted set as a skip
// list (zset-max-listpack-entries 0), what ffrun's small, busy indexes
// are cheaper in; Config.ExtraArgs still have the last word.
func TestSortedSetsAsSkipLists(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, c := range []struct {
		extra []string
		want  string
	}{
		{nil, "0"},
		{[]string{"--zset-max-listpack-entries", "64"}, "64"},
	} {
		s, err := devserver.Start(ctx, devserver.Config{Dir: t.TempDir(), NoPersistence: true, SocketOnly: true, ExtraArgs: c.extra})
		if err != nil {
			t.Fatal(err)
		}
		got := configGet(t, s.Socket, "zset-max-listpack-entries")
		if err := s.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		if got != c.want {
			t.Fatalf("extra args %q: zset-max-listpack-entries = %q, want %q", c.extra, got, c.want)
		}
	}
}

// configGet asks the server on socket for the value of parameter name
// (CONFIG GET, in RESP2: a two-element array of bulk strings).
func configGet(t *testing.T, socket, name string) string {
	t.Helper()
	conn, err := net.Dial("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(5 * time.Second)); err != nil {
		t.Fatal(err)
	}
	cmd := "*3\r\n$6\r\nCONFIG\r\n$3\r\nGET\r\n$" + strconv.Itoa(len(name)) + "\r\n" + name + "\r\n"
	if _, err := conn.Write([]byte(cmd)); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(conn)
	var lines []string
	for len(lines) < 5 {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("CONFIG GET %s: %v (read %q)", name, err, lines)
		}
		lines = append(lines, strings.TrimRight(line, "\r\n"))
	}
	if lines[0] != "*2" || lines[2] != name {
		t.Fatalf("CONFIG GET %s answered %q", name, lines)
	}
	return lines[4]
}

// TestStopWithEndedContextSaysSo: a Stop whose ctx has ended kills the
// child without waiting, and its error says so, not that the child did
// not stop within StopTimeout.
func TestStopWithEndedContextSaysSo(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := devserver.Start(ctx, devserver.Config{Dir: t.TempDir(), NoPersistence: true})
	if err != nil {
		t.Fatal(err)
	}
	ended, end := context.WithCancel(ctx)
	end()
	err = s.Stop(ended)
	<-s.Exited()
	// nil only when the child exited on SIGTERM before Stop looked.
	if err != nil && (!errors.Is(err, context.Canceled) || strings.Contains(err.Error(), "within")) {
		t.Fatalf("Stop with its ctx ended = %v, want an error that wraps the ctx's and names no timeout", err)
	}
}

// TestLongDirNoSocket: a data directory too deep for a socket path gets
// none, and clients are sent to the TCP port.
func TestLongDirNoSocket(t *testing.T) {
	dir := filepath.Join(t.TempDir(), strings.Repeat("d", 100))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := devserver.Start(ctx, devserver.Config{Dir: dir, NoPersistence: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop(ctx)
	if s.Socket != "" || s.ClientAddr() != s.Addr {
		t.Fatalf("socket %q, client address %q; want none and %s", s.Socket, s.ClientAddr(), s.Addr)
	}
	conn, err := net.Dial("tcp", s.ClientAddr())
	if err != nil {
		t.Fatal(err)
	}
	conn.Close()
}

func TestStartFailsClearly(t *testing.T) {
	ctx := context.Background()
	_, err := devserver.Start(ctx, devserver.Config{Dir: t.TempDir(), Binary: filepath.Join(t.TempDir(), "no-such-server")})
	if err == nil || !strings.Contains(err.Error(), "no-such-server") {
		t.Fatalf("start with a missing binary: %v", err)
	}
	_, err = devserver.Start(ctx, devserver.Config{})
	if err == nil || !strings.Contains(err.Error(), "Dir is required") {
		t.Fatalf("start without dir: %v", err)
	}
}

// TestSecondStartOnSameDirFails: a data directory serves one child at a
// time; a second Start fails fast naming the directory and the holder, and
// the directory is free again once the first is stopped.
func TestSecondStartOnSameDirFails(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	first, err := devserver.Start(ctx, devserver.Config{Dir: dir, NoPersistence: true})
	if err != nil {
		t.Fatal(err)
	}
	defer first.Stop(ctx)
	start := time.Now()
	second, err := devserver.Start(ctx, devserver.Config{Dir: dir, NoPersistence: true})
	if err == nil {
		second.Stop(ctx)
		t.Fatal("second Start on the same data dir succeeded")
	}
	for _, want := range []string{dir, "in use", "pid " + strconv.Itoa(os.Getpid())} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("second Start took %s to fail; want fast", d)
	}
	// The first child is untouched: still answering, socket still there.
	conn, err := net.Dial("unix", first.Socket)
	if err != nil {
		t.Fatalf("first child after the refused start: %v", err)
	}
	conn.Close()
	if err := first.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	third, err := devserver.Start(ctx, devserver.Config{Dir: dir, NoPersistence: true})
	if err != nil {
		t.Fatalf("Start after Stop: %v", err)
	}
	if err := third.Stop(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestStartRefusesAForeignServerOnItsPort: Start reports a child started
// only when the server answering on the child's port is the child (by its
// process id): on a port another server holds, the child cannot bind and
// exits, and Start fails instead of returning a Server whose child is
// gone (with Config.Port; a free port taken so is tried again with
// another).
func TestStartRefusesAForeignServerOnItsPort(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	other, err := devserver.Start(ctx, devserver.Config{Dir: t.TempDir(), NoPersistence: true})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Stop(ctx)
	_, portS, _ := net.SplitHostPort(other.Addr)
	port, _ := strconv.Atoi(portS)
	s, err := devserver.Start(ctx, devserver.Config{Dir: t.TempDir(), Port: port, NoPersistence: true})
	if err == nil {
		defer s.Stop(ctx)
		<-s.Exited() // the child could not bind the port
		t.Fatalf("Start on a port another server holds returned a started server (%s) whose child exited", s.Addr)
	}
	if !strings.Contains(err.Error(), "taken by another server") {
		t.Errorf("Start on a port another server holds: %v; want it to say the port is taken", err)
	}
}

// TestSocketOnly: with SocketOnly the child opens no TCP port (nothing
// another local user could reach without a password), only its socket,
// mode 700; a data directory too deep for a socket path gets one in a
// private temporary directory, removed by Stop. CLI names the command
// that opens a client on it.
func TestSocketOnly(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, dir := range []string{t.TempDir(), filepath.Join(t.TempDir(), strings.Repeat("d", 100))} {
		s, err := devserver.Start(ctx, devserver.Config{Dir: dir, SocketOnly: true, NoPersistence: true})
		if err != nil {
			t.Fatal(err)
		}
		if s.Addr != "" || s.Socket == "" || s.ClientAddr() != "unix:"+s.Socket {
			t.Errorf("address %q, socket %q, client address %q: want no address and the socket", s.Addr, s.Socket, s.ClientAddr())
		}
		if got := do(t, s, "CONFIG", "GET", "port"); got != "port 0" {
			t.Errorf("CONFIG GET port: %q, want no TCP port", got)
		}
		if fi, err := os.Stat(s.Socket); err != nil {
			t.Error(err)
		} else if fi.Mode().Perm() != 0o700 {
			t.Errorf("socket %s: mode %v, want 0700", s.Socket, fi.Mode().Perm())
		}
		if want := " -s " + s.Socket; !strings.HasSuffix(s.CLI(), want) || !strings.HasSuffix(strings.Fields(s.CLI())[0], "-cli") {
			t.Errorf("CLI() = %q, want a valkey-cli or redis-cli command ending in %q", s.CLI(), want)
		}
		inData := filepath.Dir(s.Socket) == dir
		if inData != (len(dir) < 90) {
			t.Errorf("socket %s for data dir %s", s.Socket, dir)
		}
		if err := s.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Dir(s.Socket)); !inData && !os.IsNotExist(err) {
			t.Errorf("the socket's temporary directory is left after Stop (%v)", err)
		}
	}
	if _, err := devserver.Start(ctx, devserver.Config{Dir: t.TempDir(), SocketOnly: true, Port: 7777}); err == nil || !strings.Contains(err.Error(), "SocketOnly") {
		t.Errorf("Start with SocketOnly and a port: %v, want an error", err)
	}
}

// TestLogNamesWhereItListens: the started and stopped lines logged
// addr="" for a child on its socket alone (ffrun dev), and socket="" for
// one on a TCP port alone. Each names now where the child listens, and
// nothing it does not have.
func TestLogNamesWhereItListens(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, c := range []struct {
		cfg        devserver.Config
		has, hasNo string
	}{
		{devserver.Config{Dir: t.TempDir(), SocketOnly: true}, "socket=", "addr="},
		{devserver.Config{Dir: filepath.Join(t.TempDir(), strings.Repeat("d", 100))}, "addr=127.0.0.1:", "socket="},
	} {
		logs := &syncBuffer{}
		c.cfg.Logger, c.cfg.NoPersistence = slog.New(slog.NewTextHandler(logs, nil)), true
		s, err := devserver.Start(ctx, c.cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		for _, msg := range []string{`msg="dev valkey started"`, `msg="dev valkey stopped"`} {
			var line string
			for l := range strings.Lines(logs.String()) {
				if strings.Contains(l, msg) {
					line = l
				}
			}
			if !strings.Contains(line, " "+c.has) || strings.Contains(line, " "+c.hasNo) {
				t.Errorf("SocketOnly %v: the line %s is %q: want %s and no %s", c.cfg.SocketOnly, msg, line, c.has, c.hasNo)
			}
		}
	}
}
