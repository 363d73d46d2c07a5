package authlimit

import (
	"fmt"
	"net/http"
	"testing"
	"time"
)

// clock is a settable time for tests.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func newTest(cfg Config) (*Limiter, *clock) {
	c := &clock{t: time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)}
	l := New(cfg)
	l.now = c.now
	return l, c
}

// TestFailedSpacesFailuresPastFree: the first Free failures of an address
// are answered at once; the next ones one per Interval, each waiting its
// turn; one whose turn is more than MaxWait off is refused; another
// address is not affected; a new window starts free again.
func TestFailedSpacesFailuresPastFree(t *testing.T) {
	l, c := newTest(Config{Free: 3, Window: time.Minute, Interval: time.Second, MaxWait: 2 * time.Second})
	for i := range 3 {
		if wait, ok := l.Failed("a"); wait != 0 || !ok {
			t.Fatalf("failure %d: wait %v, ok %v; want at once", i+1, wait, ok)
		}
	}
	for i, want := range []time.Duration{0, time.Second, 2 * time.Second} {
		if wait, ok := l.Failed("a"); wait != want || !ok {
			t.Fatalf("failure %d past free: wait %v, ok %v; want %v", i+1, wait, ok, want)
		}
	}
	if wait, ok := l.Failed("a"); ok || wait != 3*time.Second {
		t.Fatalf("a failure 3 s off: wait %v, ok %v; want refused", wait, ok)
	}
	if wait, ok := l.Failed("b"); wait != 0 || !ok {
		t.Fatalf("another address: wait %v, ok %v", wait, ok)
	}
	// Time passes: the turns come; the window ends.
	c.t = c.t.Add(10 * time.Second)
	if wait, ok := l.Failed("a"); wait != 0 || !ok {
		t.Fatalf("after the turns passed: wait %v, ok %v", wait, ok)
	}
	c.t = c.t.Add(time.Minute)
	for i := range 3 {
		if wait, ok := l.Failed("a"); wait != 0 || !ok {
			t.Fatalf("new window, failure %d: wait %v, ok %v", i+1, wait, ok)
		}
	}
}

// TestAddressesBounded: past Addresses, addresses whose window ended are
// forgotten, then all of them.
func TestAddressesBounded(t *testing.T) {
	l, c := newTest(Config{Free: 1, Addresses: 4})
	for i := range 4 {
		l.Failed(fmt.Sprint(i))
	}
	c.t = c.t.Add(2 * WindowDefault)
	l.Failed("new")
	if n := len(l.by); n != 1 {
		t.Fatalf("%d addresses remembered after the windows ended; want 1", n)
	}
	for i := range 10 {
		l.Failed(fmt.Sprint("x", i))
	}
	if n := len(l.by); n > 4 {
		t.Fatalf("%d addresses remembered; the bound is 4", n)
	}
}

func TestAddr(t *testing.T) {
	for remote, want := range map[string]string{"10.0.0.7:5123": "10.0.0.7", "[::1]:80": "::1", "@": "@"} {
		r := &http.Request{RemoteAddr: remote, Header: http.Header{"X-Forwarded-For": {"1.2.3.4"}}}
		if got := Addr(r); got != want {
			t.Errorf("Addr(%q) = %q, want %q", remote, got, want)
		}
	}
}
