// Package authlimit checks bearer tokens and slows down their guessing.
//
// A Token is compared with credentials in constant time, whatever either's
// length. A Limiter paces the comparisons per client address: while an
// address has failed fewer than Config.Free times in its window, its
// credentials are compared at once; past that the address is limited, and
// every request of it carrying credentials, right or wrong, waits its turn
// (one per Config.Interval) before they are compared, or is refused
// without their being compared when its turn is too far off. So no verdict
// on a guess comes faster than the limiter's pace, and a refusal says
// nothing of the credentials; a client sharing an address with a guesser
// waits its turn too, for as long as the address is limited.
package authlimit

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"net"
	"net/http"
	"net/netip"
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
	// Free is how many failures from one address within Window leave it
	// unlimited: its credentials are compared at once.
	Free int
	// Window is how long failures are counted from an address's first.
	Window time.Duration
	// Interval is the time between two comparisons of a limited
	// address's credentials.
	Interval time.Duration
	// MaxWait bounds the wait of one request: one whose turn is further
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

// Token is a secret credentials are compared with. It keeps the secret's
// SHA-256 digest and compares digests in constant time, so that the time
// of a comparison tells neither where the credentials differ nor the
// secret's length.
type Token struct{ sum [sha256.Size]byte }

// NewToken returns the Token of secret.
func NewToken(secret string) Token { return Token{sha256.Sum256([]byte(secret))} }

// Matches says whether got is the secret.
func (t Token) Matches(got string) bool {
	sum := sha256.Sum256([]byte(got))
	return subtle.ConstantTimeCompare(sum[:], t.sum[:]) == 1
}

// Verdict is the outcome of Limiter.Check.
type Verdict int

const (
	// Admitted: the credentials are right.
	Admitted Verdict = iota
	// Rejected: the credentials are wrong; the failure is counted.
	Rejected
	// Refused: the address is limited and its turn is more than MaxWait
	// off; the credentials were not compared.
	Refused
)

// Limiter counts failed authentications per address and paces the
// comparisons of limited addresses. Safe for concurrent use; a nil
// Limiter compares at once.
type Limiter struct {
	cfg   Config
	now   func() time.Time
	sleep func(context.Context, time.Duration) error

	mu sync.Mutex
	by map[string]*entry
}

type entry struct {
	start time.Time // of the window
	fails int       // within it
	next  time.Time // the earliest turn of the address's next comparison, once limited
}

// New returns a Limiter with cfg's limits.
func New(cfg Config) *Limiter {
	return &Limiter{cfg: cfg.withDefaults(), now: time.Now, sleep: sleep, by: map[string]*entry{}}
}

// Check compares got, the credentials of a request from addr, with want,
// when the limiter allows: at once while addr is not limited (under the
// limiter's lock, so that concurrent requests cannot all be compared
// before their failures are counted), else at the address's next turn,
// which the request waits for. A request whose turn is more than MaxWait
// off is Refused at once, its credentials not compared, with retry the
// time until that turn or until the address's window ends (it is free
// again then), whichever comes first. err is ctx's when ctx ends during
// the wait: nothing was compared.
func (l *Limiter) Check(ctx context.Context, addr string, want Token, got string) (v Verdict, retry time.Duration, err error) {
	if l == nil {
		return verdict(want.Matches(got)), 0, nil
	}
	addr = key(addr)
	now := l.now()
	l.mu.Lock()
	e := l.current(addr, now)
	if e == nil || e.fails < l.cfg.Free {
		ok := want.Matches(got)
		if !ok {
			l.failed(addr, e, now)
		}
		l.mu.Unlock()
		return verdict(ok), 0, nil
	}
	at := e.next
	if at.Before(now) {
		at = now
	}
	wait := at.Sub(now)
	if wait > l.cfg.MaxWait {
		l.mu.Unlock()
		// The address is free again when its window ends, if that comes
		// before the turn.
		return Refused, min(wait, e.start.Add(l.cfg.Window).Sub(now)), nil
	}
	e.next = at.Add(l.cfg.Interval)
	l.mu.Unlock()
	if err := l.sleep(ctx, wait); err != nil {
		return Refused, 0, err
	}
	if want.Matches(got) {
		return Admitted, 0, nil
	}
	now = l.now()
	l.mu.Lock()
	l.failed(addr, l.current(addr, now), now)
	l.mu.Unlock()
	return Rejected, 0, nil
}

func verdict(ok bool) Verdict {
	if ok {
		return Admitted
	}
	return Rejected
}

// current is the entry of addr's window, nil when it has none or its
// window ended. l.mu is held.
func (l *Limiter) current(addr string, now time.Time) *entry {
	e := l.by[addr]
	if e != nil && now.Sub(e.start) >= l.cfg.Window {
		return nil
	}
	return e
}

// failed counts a failure of addr, whose current entry is e (nil: a new
// window starts). l.mu is held.
func (l *Limiter) failed(addr string, e *entry, now time.Time) {
	if e == nil {
		if _, known := l.by[addr]; !known && len(l.by) >= l.cfg.Addresses {
			l.prune(now)
		}
		e = &entry{start: now}
		l.by[addr] = e
	}
	e.fails++
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

// sleep waits d, or until ctx ends (its error).
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// key is the address a client's failures are counted under: an IPv6
// address's /64 network, which one host or site is given whole (counted
// per address, it had 2^64 addresses each starting with free failures,
// and could flush the limiter's memory with Config.Addresses of them);
// any other address itself.
func key(addr string) string {
	a, err := netip.ParseAddr(addr)
	if err != nil || !a.Is6() || a.Is4In6() {
		return addr
	}
	p, err := a.WithZone("").Prefix(64)
	if err != nil {
		return addr
	}
	return p.String()
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
