package scanner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/flowfabric/ff/runtime/internal/lifecycle"
	"github.com/flowfabric/ff/runtime/store"
)

// Shared limits.
const (
	// CatchUpInterval is the pause before the next tick when a tick left
	// due work behind (or the scanner's interval, when that is shorter).
	CatchUpInterval = 20 * time.Millisecond
	// IntervalMin bounds every interval from below.
	IntervalMin = 10 * time.Millisecond
	// LimitDefault is the default number of executions one store call
	// handles on one partition.
	LimitDefault = 100
)

// changeWarnEveryDefault is how often at most a failing scanner warns that
// its failure's cause changed.
const changeWarnEveryDefault = time.Minute

// causesWarnedMax is how many causes at most a failing scanner warns about
// in one outage: causes that differ in a way cause does not see (an id, a
// host name) must not warn once a minute for as long as the outage lasts.
const causesWarnedMax = 4

// Log attribute keys.
const (
	attrScanner     = "scanner"
	attrPartition   = "partition"
	attrProcessed   = "processed"
	attrError       = "error"
	attrFailedParts = "failed_calls"
)

// Observer is told of every tick a running scanner makes: the scanner's
// name (lease_expiry, delayed, ...), how many executions (or other items)
// it transitioned, and the tick's error. It is called from the scanner's
// goroutine and must not block.
type Observer func(scanner string, processed int, err error)

// step is one bounded store call on one partition.
type step func(ctx context.Context, partition int) (store.ScanResult, error)

// runner is the loop every scanner shares.
type runner struct {
	name     string
	interval time.Duration
	store    *store.Store
	step     step
	prepare  func(ctx context.Context) error // optional: once per tick, before the steps
	parts    func() int                      // partitions per tick; nil = the flow partitions
	rotate   bool                            // each tick starts at the partition after the last tick's first
	first    int                             // the partition the last tick started at (rotate)
	observe  Observer                        // optional: told of every background tick
	// kick, when it holds a value, makes the loop tick at once (Kick);
	// worked, when set, is called after a background tick that processed
	// something (how one scanner hurries another).
	kick   chan struct{}
	worked func()
	// changeWarnEvery bounds how often a failing scanner warns that the
	// failure's cause changed (changeWarnEveryDefault; tests set it lower).
	changeWarnEvery time.Duration
	log             *slog.Logger

	// bg runs loop from Start to Stop, one loop at a time.
	bg lifecycle.Background
}

func newRunner(name string, s *store.Store, interval time.Duration, log *slog.Logger, fn step) *runner {
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return &runner{name: name, interval: interval, store: s, step: fn, log: log.With(attrScanner, name),
		changeWarnEvery: changeWarnEveryDefault, kick: make(chan struct{}, 1)}
}

// Kick makes a running scanner tick now rather than at the end of its
// interval (once, however many kicks come before that tick). It never
// blocks.
func (r *runner) Kick() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// checkCommon validates the fields every scanner config has.
func checkCommon(name string, s *store.Store, interval time.Duration, limit int) error {
	if s == nil {
		return fmt.Errorf("scanner: %s: Config.Store is required", name)
	}
	if interval < IntervalMin {
		return fmt.Errorf("scanner: %s: Config.Interval = %s, want at least %s", name, interval, IntervalMin)
	}
	if limit < 1 || limit > store.ScanLimitMax {
		return fmt.Errorf("scanner: %s: Config.Limit = %d, want 1..%d", name, limit, store.ScanLimitMax)
	}
	return nil
}

// Start runs the scanner in the background until Stop. Only ctx's values
// are kept: its end does not stop the scanner (a server stops its
// scanners after the requests in flight, which may need them, ended).
// Starting a running scanner does nothing. After a Stop that returned
// before the scanner's tick in progress ended (its ctx ended first),
// Start waits for that tick to end, within ctx, so that two loops of one
// scanner never tick at once: when ctx ends first, it returns ctx's error
// and the scanner stays stopped.
func (r *runner) Start(ctx context.Context) error {
	if err := r.bg.Start(ctx, r.loop); err != nil {
		return fmt.Errorf("scanner: %s: %w", r.name, err)
	}
	return nil
}

// Stop stops the scanner and waits for its current tick to end, or for ctx.
// Stopping a stopped scanner does nothing, unless the last Stop returned
// before the tick ended: then it waits for that tick again.
func (r *runner) Stop(ctx context.Context) error {
	if err := r.bg.Stop(ctx); err != nil {
		return fmt.Errorf("scanner: %s: stop: %w", r.name, err)
	}
	return nil
}

func (r *runner) loop(ctx context.Context) {
	r.log.DebugContext(ctx, "scanner started")
	// Start at a random point of the first interval so that several ffrun
	// processes do not tick in step.
	wait := time.Duration(rand.Int64N(int64(r.interval)))
	failing := false    // the last tick failed: an outage already warned about
	var warned []string // the causes warned about in this outage
	var warnedAt time.Time
	for {
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-timer.C:
		case <-r.kick:
			timer.Stop()
		}
		processed, more, err := r.tick(ctx)
		if processed > 0 && r.worked != nil {
			r.worked()
		}
		if ctx.Err() != nil {
			return
		}
		switch {
		case err != nil && !failing:
			// Once per outage: a scanner ticks every second or faster, and
			// every partition fails alike while Valkey is away.
			n, first := firstError(err)
			r.log.WarnContext(ctx, "scanner tick failed; repeats are logged at debug level until a tick succeeds",
				attrError, first, attrFailedParts, n)
			failing, warned, warnedAt = true, []string{cause(first)}, time.Now()
		case err != nil && len(warned) < causesWarnedMax && !slices.Contains(warned, cause(firstErrorOnly(err))) &&
			time.Since(warnedAt) >= r.changeWarnEvery:
			// Another cause in the same outage (the server came back with
			// other permissions, say): worth a warning of its own, but not
			// every tick when the causes alternate, nor again for a cause
			// already warned about.
			n, first := firstError(err)
			r.log.WarnContext(ctx, "scanner tick fails differently now; repeats are logged at debug level until a tick succeeds",
				attrError, first, attrFailedParts, n)
			warned, warnedAt = append(warned, cause(first)), time.Now()
		case err != nil:
			r.log.DebugContext(ctx, "scanner tick failed", attrError, err)
		case failing:
			r.log.InfoContext(ctx, "scanner ticks succeed again")
			failing = false
		}
		if r.observe != nil {
			r.observe(r.name, processed, err)
		}
		wait = r.next(more)
	}
}

// next returns the pause before the next tick: the interval, or when the
// last tick left due work behind, CatchUpInterval, never more than the
// interval.
func (r *runner) next(more bool) time.Duration {
	if more {
		return min(CatchUpInterval, r.interval)
	}
	return r.interval
}

// firstErrorOnly is the first error of a tick (firstError).
func firstErrorOnly(err error) error {
	_, first := firstError(err)
	return first
}

// cause is the text of a tick's error without the partition it names, so
// that the same failure on every partition reads as one cause, and with
// every run of digits read as one '#', so that the same failure on another
// connection (read tcp 10.0.0.5:41234->…: i/o timeout, with a new local
// port after each redial) does too.
func cause(err error) string {
	text := err.Error()
	if inner := errors.Unwrap(err); inner != nil && strings.HasPrefix(text, "partition ") {
		text = inner.Error()
	}
	var b strings.Builder
	digit := false
	for _, c := range text {
		if c >= '0' && c <= '9' {
			if !digit {
				b.WriteByte('#')
			}
			digit = true
			continue
		}
		digit = false
		b.WriteRune(c)
	}
	return b.String()
}

// firstError returns how many errors a tick joined (one per failed call)
// and the first of them.
func firstError(err error) (int, error) {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		if errs := j.Unwrap(); len(errs) > 0 {
			return len(errs), errs[0]
		}
	}
	return 1, err
}

// tick makes one store call per partition. It keeps going after a failed
// partition and returns every partition's error, joined.
func (r *runner) tick(ctx context.Context) (processed int, more bool, err error) {
	var errs []error
	if r.prepare != nil {
		// A failed preparation is reported; the steps run with what was
		// prepared.
		if err := r.prepare(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	n := r.store.FlowPartitions()
	if r.parts != nil {
		n = r.parts()
	}
	start := 0
	if r.rotate && n > 0 {
		r.first = (r.first + 1) % n
		start = r.first
	}
	for i := range n {
		if ctx.Err() != nil {
			return processed, more, ctx.Err()
		}
		p := (start + i) % n
		res, e := r.step(ctx, p)
		if e != nil {
			errs = append(errs, fmt.Errorf("partition %d: %w", p, e))
			continue
		}
		if res.Processed > 0 {
			r.log.DebugContext(ctx, "scanner step", attrPartition, p, attrProcessed, res.Processed)
		}
		processed += res.Processed
		more = more || res.More
	}
	return processed, more, errors.Join(errs...)
}

// RunOnce makes one pass over every partition now and returns how many
// executions it transitioned and whether due work was left behind.
func (r *runner) RunOnce(ctx context.Context) (processed int, more bool, err error) {
	return r.tick(ctx)
}
