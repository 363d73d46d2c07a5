// Package authlimit slows down the guessing of a bearer token: failed
// authentications from one client address are answered at once up to a
// number per window, then one per interval (each further failure waits
// its turn), and refused at once when its turn is too far off. Right
// credentials are never delayed or refused, so a client failing behind the
// same proxy as others slows only the failing requests.
package authlimit

import (
	"context"
	"net"
	"net/http"
	"sync"
	"time"
)

// Defaults of Config's zero fields.
const (
	FreeDefault      = 10
	WindowDefault    = time.Minute
	IntervalDefault  = time.Second
	MaxWaitDefault   = 10 * time.Second
	AddressesDefault = 10_000
)

// Config sets a Limiter's limits; zero fields take the defaults.
type Config struct {
	// Free is how many failures from one address within Window are
	// answered at once.
	Free int
	// Window is how long failures are counted from an address's first.
	Window time.Duration
	// Interval is the time between two answers to failures of one
	// address past Free.
	Interval time.Duration
	// MaxWait bounds the wait of one failure: one whose turn is further
	// off is refused at once (the caller answers 429).
	MaxWait time.Duration
	// Addresses bounds the addresses remembered.
	Addresses int
}

func (c Config) withDefaults() Config {
	if c.Free <= 0 {
		c.Free = FreeDefault
	}
	if c.Window <= 0 {
		c.Window = WindowDefault
	}
	if c.Interval <= 0 {
		c.Interval = IntervalDefault
	}
	if c.MaxWait <= 0 {
		c.MaxWait = MaxWaitDefault
	}
	if c.Addresses <= 0 {
		c.Addresses = AddressesDefault
	}
	return c
}

// Limiter counts failed authentications per address. Safe for concurrent
// use.
type Limiter struct {
	cfg Config
	now func() time.Time

	mu sync.Mutex
	by map[string]*entry
}

type entry struct {
	start time.Time // of the window
	fails int       // within it
	next  time.Time // the earliest answer of the next failure past Free
}

// New returns a Limiter with cfg's limits.
func New(cfg Config) *Limiter {
	return &Limiter{cfg: cfg.withDefaults(), now: time.Now, by: map[string]*entry{}}
}

// Failed records a failed authentication from addr and says how long to
// wait before answering it, or ok false when it is to be refused at once
// (its turn is more than MaxWait off); retry is then when to try again.
func (l *Limiter) Failed(addr string) (wait time.Duration, ok bool) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.by[addr]
	if e == nil || now.Sub(e.start) >= l.cfg.Window {
		if e == nil && len(l.by) >= l.cfg.Addresses {
			l.prune(now)
		}
		e = &entry{start: now}
		l.by[addr] = e
	}
	e.fails++
	if e.fails <= l.cfg.Free {
		return 0, true
	}
	at := e.next
	if at.Before(now) {
		at = now
	}
	if wait = at.Sub(now); wait > l.cfg.MaxWait {
		return wait, false
	}
	e.next = at.Add(l.cfg.Interval)
	return wait, true
}

// prune drops the addresses whose window ended and whose turns are past;
// when none is, every address (an attack from more addresses than the
// bound: each starts again with its free failures).
func (l *Limiter) prune(now time.Time) {
	for a, e := range l.by {
		if now.Sub(e.start) >= l.cfg.Window && !e.next.After(now) {
			delete(l.by, a)
		}
	}
	if len(l.by) >= l.cfg.Addresses {
		clear(l.by)
	}
}

// Sleep waits d, or until ctx ends.
func Sleep(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// Addr is the client address of r: the host of its connection's remote
// address. Forwarding headers are not read: a client could name any
// address in them, and each would start with free failures.
func Addr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}
