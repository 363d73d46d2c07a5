package scanner

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flowfabric/ff/runtime/internal/valkeytest"
	"github.com/flowfabric/ff/runtime/store"
	"github.com/valkey-io/valkey-go"
)

// lockedBuffer is a log destination shared by the scanner goroutine and
// the test.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) lines(substr string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, line := range strings.Split(l.b.String(), "\n") {
		if strings.Contains(line, substr) {
			out = append(out, line)
		}
	}
	return out
}

// tickWatch is a lease expiry scanner on store s ticking as fast as it may,
// with its log and counts of its failed and successful ticks.
type tickWatch struct {
	t                 *testing.T
	sc                *LeaseExpiry
	logs              lockedBuffer
	failed, succeeded atomic.Int64
}

// watchTicks starts a tickWatch on s, stopped when t ends.
func watchTicks(t *testing.T, s *store.Store) *tickWatch {
	t.Helper()
	w := &tickWatch{t: t}
	sc, err := NewLeaseExpiry(LeaseExpiryConfig{Store: s, Interval: IntervalMin,
		Logger: slog.New(slog.NewTextHandler(&w.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	sc.changeWarnEvery = 0
	sc.observe = func(_ string, _ int, err error) {
		if err != nil {
			w.failed.Add(1)
		} else {
			w.succeeded.Add(1)
		}
	}
	w.sc = sc
	if err := sc.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sc.Stop(context.Background()) })
	return w
}

// waitFor waits until n more ticks than now are counted in c.
func (w *tickWatch) waitFor(what string, c *atomic.Int64, n int64) {
	w.t.Helper()
	atLeast := c.Load() + n
	for deadline := time.Now().Add(20 * time.Second); c.Load() < atLeast; {
		if time.Now().After(deadline) {
			w.t.Fatalf("waited 20s for %d %s ticks, saw %d", atLeast, what, c.Load())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// stop stops the scanner and returns its warnings.
func (w *tickWatch) stop() []string {
	w.t.Helper()
	if err := w.sc.Stop(context.Background()); err != nil {
		w.t.Fatal(err)
	}
	return w.logs.lines("level=WARN")
}

// ownUserServer starts a server on which user "sc" (password "pw") may do
// everything until the test changes its permissions with the returned
// function, and a store of that user.
func ownUserServer(t *testing.T) (*store.Store, func(args ...string)) {
	t.Helper()
	srv, err := valkeytest.Launch()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	admin := valkeytest.Client(t, srv.Addr)
	ctx := context.Background()
	do := func(args ...string) {
		t.Helper()
		if err := admin.Do(ctx, admin.B().Arbitrary(args...).Build()).Error(); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
	}
	do("ACL", "SETUSER", "sc", "on", ">pw", "~*", "&*", "+@all")
	c, err := valkey.NewClient(valkey.ClientOption{InitAddress: []string{srv.Addr}, Username: "sc", Password: "pw", DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	s, err := store.Open(ctx, store.Config{Client: c, FlowPartitions: 4})
	if err != nil {
		t.Fatal(err)
	}
	return s, do
}

// While every tick fails, a scanner warns once (naming one partition's
// error and how many calls failed), logs the repeats at debug level, and
// says when ticks succeed again. The failure is real: the server refuses
// FCALL to the store's user (ACL), then allows it again.
func TestScannerWarnsOncePerOutage(t *testing.T) {
	t.Parallel()
	s, do := ownUserServer(t)
	w := watchTicks(t, s)
	w.waitFor("successful", &w.succeeded, 1)
	do("ACL", "SETUSER", "sc", "-fcall")
	w.waitFor("failed", &w.failed, 5)
	do("ACL", "SETUSER", "sc", "+fcall")
	w.waitFor("successful", &w.succeeded, 1)
	warns := w.stop()

	// The first failed tick may have begun before the ACL change (its
	// first calls succeeded): 1 to 4 of its 4 calls failed.
	if len(warns) != 1 || !strings.Contains(warns[0], "scanner tick failed") ||
		!regexp.MustCompile(`failed_calls=[1-4]\b`).MatchString(warns[0]) || !strings.Contains(warns[0], "NOPERM") {
		t.Errorf("want one warning naming the error and its failed calls, got %d:\n%s", len(warns), strings.Join(warns, "\n"))
	}
	if debug := w.logs.lines("level=DEBUG msg=\"scanner tick failed\""); int64(len(debug)) < w.failed.Load()-1 {
		t.Errorf("%d failed ticks, %d debug lines for the repeats", w.failed.Load(), len(debug))
	}
	if back := w.logs.lines("scanner ticks succeed again"); len(back) != 1 {
		t.Errorf("want one line saying ticks succeed again, got %d", len(back))
	}
}

// A scanner that keeps failing warns again when the cause changes (here:
// FCALL refused, then the library gone and FUNCTION LOAD refused), not
// only at the start of the outage; the same cause again is not repeated.
func TestScannerWarnsWhenTheCauseChanges(t *testing.T) {
	t.Parallel()
	s, do := ownUserServer(t)
	w := watchTicks(t, s)
	w.waitFor("successful", &w.succeeded, 1)
	do("ACL", "SETUSER", "sc", "-fcall")
	w.waitFor("failed", &w.failed, 3)
	do("ACL", "SETUSER", "sc", "+fcall", "-function")
	do("FUNCTION", "FLUSH") // the store's calls find no function and cannot load it
	w.waitFor("failed", &w.failed, 3)
	do("ACL", "SETUSER", "sc", "+function")
	w.waitFor("successful", &w.succeeded, 1)
	warns := w.stop()
	if len(warns) != 2 || !strings.Contains(warns[0], "scanner tick failed") || !strings.Contains(warns[0], "'fcall'") ||
		!strings.Contains(warns[1], "fails differently now") || !strings.Contains(warns[1], "FUNCTION LOAD") {
		t.Errorf("want a warning for each cause, got %d:\n%s", len(warns), strings.Join(warns, "\n"))
	}
}

// A failing scanner warns again for a new cause, but not for the same
// failure on a new connection (another local port after each redial), not
// again for a cause it already warned about when causes alternate, and
// not for more than causesWarnedMax causes in one outage.
func TestScannerCauseWarningsAreBounded(t *testing.T) {
	t.Parallel()
	var logs lockedBuffer
	var ticks atomic.Int64
	const last = 40
	ended := make(chan struct{})
	timeout := func(port int) error {
		return &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded,
			Source: &net.TCPAddr{IP: net.IPv4(10, 0, 0, 5), Port: port}, Addr: &net.TCPAddr{IP: net.IPv4(10, 0, 0, 9), Port: 6379}}
	}
	s, err := store.Open(context.Background(), store.Config{Client: valkeytest.Client(t, valkeytest.Start(t))})
	if err != nil {
		t.Fatal(err)
	}
	r := newRunner("probe", s, time.Millisecond, slog.New(slog.NewTextHandler(&logs, nil)),
		func(context.Context, int) (store.ScanResult, error) {
			n := int(ticks.Add(1))
			switch {
			case n > last: // the tick after the first success: that one was logged
				if n == last+2 {
					close(ended)
				}
				return store.ScanResult{}, nil
			case n <= 10: // one failure, a new connection each time
				return store.ScanResult{}, timeout(40000 + n)
			case n <= 20: // two causes alternating
				if n%2 == 0 {
					return store.ScanResult{}, errors.New("NOPERM this user has no permissions to run the 'fcall' command")
				}
				return store.ScanResult{}, timeout(40000 + n)
			}
			// A new cause every tick.
			return store.ScanResult{}, fmt.Errorf("library %c is gone", 'a'+rune(n))
		})
	r.parts = func() int { return 1 }
	r.changeWarnEvery = 0
	ctx := context.Background()
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ended:
	case <-time.After(20 * time.Second):
		t.Fatalf("waited 20s for %d ticks, saw %d", last, ticks.Load())
	}
	if err := r.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	warns := logs.lines("level=WARN")
	if len(warns) != causesWarnedMax || !strings.Contains(warns[0], "i/o timeout") || !strings.Contains(warns[1], "NOPERM") ||
		!strings.Contains(warns[2], "library") || !strings.Contains(warns[3], "library") {
		t.Errorf("want %d warnings (the timeout, NOPERM, two missing libraries), got %d:\n%s", causesWarnedMax, len(warns), strings.Join(warns, "\n"))
	}
	if back := logs.lines("scanner ticks succeed again"); len(back) != 1 {
		t.Errorf("want one 'succeed again', got %d", len(back))
	}
}
