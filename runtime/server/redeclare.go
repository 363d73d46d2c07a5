package server

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// redeclareTimeout bounds one pass of redeclare.
const redeclareTimeout = time.Minute

// redeclare writes what Open declared (the templates' budgets and quotas,
// the declared schedules) again when the store loaded its library again:
// Valkey restarted without its data, and a schedule lost with it would
// silently never fire again. One pass at a time, in the background (the
// store's hook must not block); a trigger during a pass makes one more
// after it.
type redeclare struct {
	log *slog.Logger

	mu      sync.Mutex
	fn      func(context.Context) error // nil until Open has declared once
	ctx     context.Context
	cancel  context.CancelFunc
	running bool
	again   bool
	wg      sync.WaitGroup
}

func newRedeclare(log *slog.Logger) *redeclare {
	ctx, cancel := context.WithCancel(context.Background())
	return &redeclare{log: log, ctx: ctx, cancel: cancel}
}

// start sets what a pass does, once Open has done it the first time.
func (r *redeclare) start(fn func(context.Context) error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fn = fn
}

// trigger is store.Config.LibraryReloaded.
func (r *redeclare) trigger() {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case r.fn == nil || r.ctx.Err() != nil: // Open declares after; or closed
	case r.running:
		r.again = true
	default:
		r.running = true
		r.wg.Add(1)
		go r.loop()
	}
}

func (r *redeclare) loop() {
	defer r.wg.Done()
	for {
		err := r.pass()
		if err != nil {
			r.log.Error("writing the declared budgets, quotas and schedules again after the functions library was reloaded",
				slog.Any("error", err))
		} else {
			r.log.Warn("the functions library was reloaded (valkey lost its data?): declared budgets, quotas and schedules written again")
		}
		r.mu.Lock()
		if !r.again || r.ctx.Err() != nil {
			r.running = false
			r.mu.Unlock()
			return
		}
		r.again = false
		r.mu.Unlock()
	}
}

// pass writes the declarations once, asking again with a backoff while
// it fails (the reload comes right after Valkey returned: a connection
// broken by the restart may fail the first writes), for up to
// redeclareTimeout; it returns the last error.
func (r *redeclare) pass() error {
	ctx, cancel := context.WithTimeout(r.ctx, redeclareTimeout)
	defer cancel()
	for wait := 100 * time.Millisecond; ; wait = min(2*wait, 5*time.Second) {
		err := r.fn(ctx)
		if err == nil {
			return nil
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
	}
}

// stop ends a pass under way and waits for it.
func (r *redeclare) stop() {
	r.cancel()
	r.wg.Wait()
}
