package devserver_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/flowfabric/ff/runtime/devserver"
)

// slowLoadArgs make a child load its data slowly: 1 ms per key, and
// answering (-LOADING) every KiB read, the least the server accepts.
var slowLoadArgs = []string{"--key-load-delay", "1000", "--loading-process-events-interval-bytes", "1024"}

// populate fills dir, as ffrun dev's child leaves it, with an append-only
// file of keys (DEBUG POPULATE, written to the file by a rewrite) and
// stops the server.
func populate(t *testing.T, dir string, keys int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := devserver.Start(ctx, devserver.Config{Dir: dir, ExtraArgs: []string{"--enable-debug-command", "local"}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop(ctx)
	do(t, s, "DEBUG", "POPULATE", strconv.Itoa(keys))
	do(t, s, "BGREWRITEAOF")
	for {
		info := do(t, s, "INFO", "persistence")
		if strings.Contains(info, "aof_rewrite_in_progress:0") && strings.Contains(info, "aof_rewrite_scheduled:0") {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the append-only file rewrite did not end:\n%s", info)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := s.Stop(ctx); err != nil {
		t.Fatal(err)
	}
}

// do sends one command to s over its socket and returns the reply
// (reply), failing t on an error reply.
func do(t *testing.T, s *devserver.Server, args ...string) string {
	t.Helper()
	network, addr := "unix", s.Socket
	if addr == "" {
		network, addr = "tcp", s.Addr
	}
	conn, err := net.DialTimeout(network, addr, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	var b bytes.Buffer
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := conn.Write(b.Bytes()); err != nil {
		t.Fatal(err)
	}
	return reply(t, bufio.NewReader(conn), args)
}

// reply reads a reply to args: a status, an integer, a bulk string or an
// array of those (its elements joined by spaces).
func reply(t *testing.T, r *bufio.Reader, args []string) string {
	t.Helper()
	line, err := r.ReadString('\n')
	if err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	line = strings.TrimSuffix(line, "\r\n")
	switch line[0] {
	case '+', ':':
		return line[1:]
	case '$':
		n, _ := strconv.Atoi(line[1:])
		body := make([]byte, n+2)
		if _, err := io.ReadFull(r, body); err != nil {
			t.Fatal(err)
		}
		return string(body[:n])
	case '*':
		n, _ := strconv.Atoi(line[1:])
		elems := make([]string, n)
		for i := range elems {
			elems[i] = reply(t, r, args)
		}
		return strings.Join(elems, " ")
	}
	t.Fatalf("%v: %s", args, line)
	return ""
}

// TestStartWaitsForALoadingChild: a child that loads a dataset for longer
// than StartTimeout, answering LOADING and loading more between two
// looks, is waited for until it has loaded it all, not killed mid-load.
func TestStartWaitsForALoadingChild(t *testing.T) {
	t.Parallel()
	const keys = 1500 // 1.5 s at 1 ms a key
	dir := t.TempDir()
	populate(t, dir, keys)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	logs := &syncBuffer{}
	s, err := devserver.Start(ctx, devserver.Config{
		Dir: dir, StartTimeout: 300 * time.Millisecond, ExtraArgs: slowLoadArgs,
		Logger: slog.New(slog.NewTextHandler(logs, nil)),
	})
	if err != nil {
		t.Fatalf("start on a dataset that loads for longer than StartTimeout: %v", err)
	}
	defer s.Stop(ctx)
	if got := do(t, s, "DBSIZE"); got != strconv.Itoa(keys) {
		t.Errorf("DBSIZE %s once started, want %d", got, keys)
	}
	if !strings.Contains(logs.String(), `msg="dev valkey loading its data"`) {
		t.Errorf("no line about the load in the log:\n%s", logs)
	}
}

// TestStartGivesUpOnAStalledLoad: a child that stops making progress
// while it loads (here stopped with SIGSTOP) fails the start once
// StartTimeout passes without progress, and one that loads longer than
// LoadTimeout fails it at LoadTimeout, each saying why.
func TestStartGivesUpOnAStalledLoad(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	populate(t, dir, 3000) // 3 s at 1 ms a key
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	logs := &syncBuffer{}
	pidRE := regexp.MustCompile(`msg="dev valkey loading its data".* pid=(\d+)`)
	stopped := make(chan error, 1)
	go func() {
		for ctx.Err() == nil {
			if m := pidRE.FindStringSubmatch(logs.String()); m != nil {
				pid, _ := strconv.Atoi(m[1])
				stopped <- syscall.Kill(pid, syscall.SIGSTOP)
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	_, err := devserver.Start(ctx, devserver.Config{
		Dir: dir, StartTimeout: 500 * time.Millisecond, StopTimeout: 200 * time.Millisecond, ExtraArgs: slowLoadArgs,
		Logger: slog.New(slog.NewTextHandler(logs, nil)),
	})
	if err == nil || !strings.Contains(err.Error(), "stopped making progress") {
		t.Fatalf("start on a child that stalls while loading: %v, want it to say the load stopped making progress\n%s", err, logs)
	}
	if err := <-stopped; err != nil {
		t.Fatalf("SIGSTOP: %v", err)
	}

	_, err = devserver.Start(ctx, devserver.Config{
		Dir: dir, StartTimeout: time.Second, LoadTimeout: 500 * time.Millisecond, ExtraArgs: slowLoadArgs,
	})
	if err == nil || !strings.Contains(err.Error(), "did not finish loading its data within 500ms") {
		t.Fatalf("start with a LoadTimeout shorter than the load: %v, want it to say so", err)
	}
}

// syncBuffer is a bytes.Buffer safe for a logger and a reader at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
