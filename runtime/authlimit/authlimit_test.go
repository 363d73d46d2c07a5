package authlimit

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"
)

// clock is a settable time for tests.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

// newTest returns a Limiter on a settable clock whose waits are recorded
// in *slept, not slept (the clock does not move: as requests arriving
// together).
func newTest(cfg Config) (l *Limiter, c *clock, slept *[]time.Duration) {
	c = &clock{t: time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)}
	l = New(cfg)
	l.now = c.now
	slept = new([]time.Duration)
	l.sleep = func(_ context.Context, d time.Duration) error {
		*slept = append(*slept, d)
		return nil
	}
	return l, c, slept
}

var secret = NewToken("the-right-token-0123")

// check calls l.Check for addr with got and fails t unless the verdict,
// retry and wait (the last recorded sleep; -1 = none) are the wanted ones.
func check(t *testing.T, l *Limiter, slept *[]time.Duration, what, addr, got string, want Verdict, retry, wait time.Duration) {
	t.Helper()
	n := len(*slept)
	v, r, err := l.Check(context.Background(), addr, secret, got)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	w := time.Duration(-1)
	if len(*slept) > n {
		w = (*slept)[len(*slept)-1]
	}
	if v != want || r != retry || w != wait {
		t.Fatalf("%s: verdict %d, retry %v, waited %v; want %d, %v, %v", what, v, r, w, want, retry, wait)
	}
}

// TestCheckPacesLimitedAddresses: the first Free failures of an address
// are judged at once; past them the address is limited and each request
// with credentials, the right ones included, waits its turn (one per
// Interval) before they are compared; one whose turn is more than MaxWait
// off is refused without comparing, right token or wrong; another address
// is not affected; the turns come as time passes; a new window starts
// free again.
func TestCheckPacesLimitedAddresses(t *testing.T) {
	l, c, slept := newTest(Config{Free: 3, Window: time.Minute, Interval: time.Second, MaxWait: 2 * time.Second})
	const right = "the-right-token-0123"
	check(t, l, slept, "right token", "a", right, Admitted, 0, -1)
	for i := range 3 {
		check(t, l, slept, fmt.Sprint("free failure ", i+1), "a", "guess", Rejected, 0, -1)
	}
	for i, wait := range []time.Duration{0, time.Second, 2 * time.Second} {
		check(t, l, slept, fmt.Sprint("limited failure ", i+1), "a", "guess", Rejected, 0, wait)
	}
	check(t, l, slept, "a guess 3 s off", "a", "guess", Refused, 3*time.Second, -1)
	check(t, l, slept, "the right token 3 s off", "a", right, Refused, 3*time.Second, -1)
	check(t, l, slept, "another address", "b", "guess", Rejected, 0, -1)
	// Time passes: the turns come; the right token waits its turn too.
	c.t = c.t.Add(10 * time.Second)
	check(t, l, slept, "the right token at its turn", "a", right, Admitted, 0, 0)
	check(t, l, slept, "a guess after it", "a", "guess", Rejected, 0, time.Second)
	c.t = c.t.Add(time.Minute)
	for i := range 3 {
		check(t, l, slept, fmt.Sprint("new window, failure ", i+1), "a", "guess", Rejected, 0, -1)
	}
}

// TestCheckRetryAtTheWindowsEnd: a refused request is told to try again
// when the address is free again, at the end of its window, when that
// comes before its turn (a client that waited for the turn, an Interval
// of an hour, would wait long after the limit was lifted).
func TestCheckRetryAtTheWindowsEnd(t *testing.T) {
	l, c, slept := newTest(Config{Free: 1, Window: 10 * time.Second, Interval: time.Hour, MaxWait: time.Millisecond})
	const right = "the-right-token-0123"
	check(t, l, slept, "the free failure", "a", "guess", Rejected, 0, -1)
	check(t, l, slept, "a failure at its turn", "a", "guess", Rejected, 0, 0)
	c.t = c.t.Add(4 * time.Second)
	check(t, l, slept, "the right token an hour off", "a", right, Refused, 6*time.Second, -1)
	c.t = c.t.Add(6 * time.Second)
	check(t, l, slept, "the right token after the window", "a", right, Admitted, 0, -1)
}

// TestCheckRightTokensLeaveNoTrace: the right credentials of an address
// that never failed are not remembered (they cannot crowd the guessers out
// of the bounded table).
func TestCheckRightTokensLeaveNoTrace(t *testing.T) {
	l, _, slept := newTest(Config{Addresses: 4})
	for i := range 100 {
		check(t, l, slept, "right token", fmt.Sprint(i), "the-right-token-0123", Admitted, 0, -1)
	}
	if n := len(l.by); n != 0 {
		t.Fatalf("%d addresses remembered after right tokens only", n)
	}
}

// TestCheckConcurrentGuesses: guesses sent together from one address are
// judged no faster than one at a time: Free of them, then one per turn.
func TestCheckConcurrentGuesses(t *testing.T) {
	l, _, _ := newTest(Config{Free: 3, Interval: time.Hour, MaxWait: time.Millisecond})
	var mu sync.Mutex
	count := map[Verdict]int{}
	var wg sync.WaitGroup
	for range 64 {
		wg.Go(func() {
			v, _, err := l.Check(context.Background(), "a", secret, "guess")
			if err != nil {
				t.Error(err)
			}
			mu.Lock()
			count[v]++
			mu.Unlock()
		})
	}
	wg.Wait()
	if count[Rejected] != 4 || count[Refused] != 60 {
		t.Fatalf("64 guesses together: %d judged, %d refused; want 4 (3 free, 1 turn) and 60", count[Rejected], count[Refused])
	}
}

// TestCheckWaitEndsWithTheRequest: a request that goes away while it
// waits its turn is not judged.
func TestCheckWaitEndsWithTheRequest(t *testing.T) {
	l := New(Config{Free: 1, Interval: time.Hour, MaxWait: 2 * time.Hour})
	ctx := context.Background()
	l.Check(ctx, "a", secret, "guess")
	l.Check(ctx, "a", secret, "guess") // its turn now; the next an hour off
	ctx, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
	defer cancel()
	if v, _, err := l.Check(ctx, "a", secret, "the-right-token-0123"); !errors.Is(err, context.DeadlineExceeded) || v == Admitted {
		t.Fatalf("a request that went away while it waited: %d, %v", v, err)
	}
}

// TestCheckNilLimiter: without a limiter, credentials are compared at once.
func TestCheckNilLimiter(t *testing.T) {
	var l *Limiter
	for got, want := range map[string]Verdict{"the-right-token-0123": Admitted, "guess": Rejected, "": Rejected} {
		if v, _, err := l.Check(context.Background(), "a", secret, got); v != want || err != nil {
			t.Errorf("%q: %d, %v; want %d", got, v, err, want)
		}
	}
}

// TestTokenMatches: only the secret itself matches; prefixes, extensions
// and other cases do not.
func TestTokenMatches(t *testing.T) {
	for got, want := range map[string]bool{
		"the-right-token-0123": true, "the-right-token-012": false, "the-right-token-01234": false,
		"THE-RIGHT-TOKEN-0123": false, "": false,
	} {
		if secret.Matches(got) != want {
			t.Errorf("Matches(%q) = %v", got, !want)
		}
	}
}

// TestAddressesBounded: past Addresses, addresses whose window ended are
// forgotten, then all of them.
func TestAddressesBounded(t *testing.T) {
	l, c, _ := newTest(Config{Free: 1, Addresses: 4})
	ctx := context.Background()
	for i := range 4 {
		l.Check(ctx, fmt.Sprint(i), secret, "guess")
	}
	c.t = c.t.Add(2 * WindowDefault)
	l.Check(ctx, "new", secret, "guess")
	if n := len(l.by); n != 1 {
		t.Fatalf("%d addresses remembered after the windows ended; want 1", n)
	}
	for i := range 10 {
		l.Check(ctx, fmt.Sprint("x", i), secret, "guess")
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

// TestIPv6CountedPerNetwork: an IPv6 client's failures are counted for
// its /64 network, which one host or site is given whole: guesses spread
// over its 2^64 addresses are limited as those of one address are, while
// another /64 and IPv4 addresses keep their own counts.
func TestIPv6CountedPerNetwork(t *testing.T) {
	l, _, slept := newTest(Config{Free: 3, Interval: time.Second, MaxWait: 2 * time.Second})
	for i, addr := range []string{"2001:db8:1:2::1", "2001:db8:1:2::2", "2001:db8:1:2:ffff::9"} {
		check(t, l, slept, fmt.Sprint("free failure ", i+1), addr, "guess", Rejected, 0, -1)
	}
	check(t, l, slept, "a fourth address of the /64", "2001:db8:1:2:abcd::1", "guess", Rejected, 0, 0)
	check(t, l, slept, "another /64", "2001:db8:1:3::1", "guess", Rejected, 0, -1)
	check(t, l, slept, "an IPv4 address", "192.0.2.7", "guess", Rejected, 0, -1)
	check(t, l, slept, "an IPv4-mapped address", "::ffff:192.0.2.8", "guess", Rejected, 0, -1)
	check(t, l, slept, "a zoned link-local address", "fe80::1%eth0", "guess", Rejected, 0, -1)
}
