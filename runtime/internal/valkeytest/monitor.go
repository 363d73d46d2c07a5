package valkeytest

import (
	"bufio"
	"context"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valkey-io/valkey-go"
)

// Monitor is a MONITOR connection to a server: it records every command
// the server runs, those run inside functions and scripts included (their
// lines read `[0 lua]`), for a test to check what a call did rather than
// only what it answered.
type Monitor struct {
	t     testing.TB
	conn  net.Conn
	c     valkey.Client
	mu    sync.Mutex
	lines []string
	done  chan struct{}
	seq   atomic.Int64
}

// StartMonitor opens a MONITOR connection to the server at addr (a dedicated
// one from Start: MONITOR slows a server down for every client) and records
// what it runs until the test ends. c talks to the same server (Mark uses
// it).
func StartMonitor(t testing.TB, addr string, c valkey.Client) *Monitor {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatalf("valkeytest: monitor %s: %v", addr, err)
	}
	r := bufio.NewReader(conn)
	if _, err := conn.Write([]byte("*1\r\n$7\r\nMONITOR\r\n")); err != nil {
		conn.Close()
		t.Fatalf("valkeytest: MONITOR: %v", err)
	}
	if line, err := r.ReadString('\n'); err != nil || strings.TrimSpace(line) != "+OK" {
		conn.Close()
		t.Fatalf("valkeytest: MONITOR answered %q, %v", line, err)
	}
	m := &Monitor{t: t, conn: conn, c: c, done: make(chan struct{})}
	go func() {
		defer close(m.done)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			if s, ok := strings.CutPrefix(strings.TrimRight(line, "\r\n"), "+"); ok {
				m.mu.Lock()
				m.lines = append(m.lines, s)
				m.mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() {
		conn.Close()
		<-m.done
	})
	return m
}

// Mark runs ECHO with a fresh marker through the monitor's client and waits
// until the monitor recorded it, so every command the server ran before is
// recorded too. It returns the marker's index in Lines.
func (m *Monitor) Mark() int {
	m.t.Helper()
	marker := "valkeytest-mark-" + strconv.FormatInt(m.seq.Add(1), 10)
	if err := m.c.Do(context.Background(), m.c.B().Echo().Message(marker).Build()).Error(); err != nil {
		m.t.Fatalf("valkeytest: ECHO %s: %v", marker, err)
	}
	want := `"ECHO" "` + marker + `"`
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		m.mu.Lock()
		for i := len(m.lines) - 1; i >= 0; i-- {
			if strings.HasSuffix(m.lines[i], want) {
				m.mu.Unlock()
				return i
			}
		}
		m.mu.Unlock()
	}
	m.t.Fatalf("valkeytest: the monitor never saw %s", marker)
	return 0
}

// Between returns the commands run from inside functions and scripts (the
// `[0 lua]` lines) between two marks, without their timestamps: each is
// the command and its arguments, quoted, as MONITOR prints them.
func (m *Monitor) Between(from, to int) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for _, l := range m.lines[from+1 : to] {
		if _, cmd, ok := strings.Cut(l, " lua] "); ok {
			out = append(out, cmd)
		}
	}
	return out
}

// Lines returns every command recorded between two marks, those of clients
// and those run inside functions alike, as MONITOR prints them without
// the timestamp: `[db client] "COMMAND" "arg" …`.
func (m *Monitor) Lines(from, to int) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]string, 0, to-from-1)
	for _, l := range m.lines[from+1 : to] {
		if _, rest, ok := strings.Cut(l, " "); ok {
			out = append(out, rest)
		}
	}
	return out
}
