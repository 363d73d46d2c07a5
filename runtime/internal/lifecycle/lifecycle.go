// Package lifecycle is the Start/Stop shape the background parts of the
// runtime share (the scanners, the scheduler's loops, the server's
// subscriptions, park log and schedule runner): a function run in a
// goroutine of its own from Start to Stop, never two runs at once, and a
// Stop that returns nil only once the run ended.
package lifecycle

import (
	"context"
	"fmt"
	"sync"
)

// Background runs one function in the background at a time, from Start
// to Stop. The zero value is ready to use; it is safe for concurrent use.
type Background struct {
	mu sync.Mutex
	// cancel is set from Start to Stop. done is the last run's, closed
	// when the run returned, and kept after Stop: a Stop or a Start after
	// a Stop that did not see the end (its ctx ended first) waits for it.
	cancel context.CancelFunc
	done   chan struct{}
}

// Start runs fn in a goroutine of its own with a context that ends at
// Stop. Only ctx's values are kept: its end does not end the run.
// Starting a running Background does nothing. After a Stop that returned
// before the last run ended, Start waits for that run, within ctx, so
// that two runs never overlap: when ctx ends first, it returns an error
// wrapping ctx's (the callers prefix it with their name) and starts
// nothing.
func (b *Background) Start(ctx context.Context, fn func(ctx context.Context)) error {
	for {
		b.mu.Lock()
		if b.cancel != nil {
			b.mu.Unlock()
			return nil
		}
		if last := b.done; last != nil && !isClosed(last) {
			b.mu.Unlock()
			select {
			case <-last:
				continue // and look again: another Start may have come first
			case <-ctx.Done():
				if isClosed(last) {
					continue
				}
				return fmt.Errorf("start: the last run has not ended: %w", ctx.Err())
			}
		}
		rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		done := make(chan struct{})
		b.cancel, b.done = cancel, done
		b.mu.Unlock()
		go func() {
			defer close(done)
			fn(rctx)
		}()
		return nil
	}
}

// Stop ends the run's context and waits for the run to return, or for
// ctx: then it returns ctx's error (unwrapped), and the run ends later on
// its own. Stopping a stopped Background does nothing, unless its last
// run has not returned yet: then Stop waits for it again. So a Stop that
// returns nil, one of several at once too, returns after the run ended;
// a Stop with a ctx that has already ended ends the run without waiting.
func (b *Background) Stop(ctx context.Context) error {
	b.mu.Lock()
	cancel, done := b.cancel, b.done
	b.cancel = nil
	b.mu.Unlock()
	if done == nil {
		return nil
	}
	if cancel != nil {
		cancel()
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		if isClosed(done) {
			return nil
		}
		return ctx.Err()
	}
}

// isClosed reports whether ch is closed.
func isClosed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
