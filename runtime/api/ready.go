package api

import (
	"context"
	"sync"
	"time"
)

// readyFor is how long a readiness check's outcome answers /readyz: the
// route is open to anyone, and each check costs Valkey a PING and two
// FCALLs per primary, so a flood of probes costs one check a second.
const readyFor = time.Second

// readyTimeout bounds one readiness check.
const readyTimeout = 2 * time.Second

// readyCheck runs the service's readiness check for every /readyz request
// of the last readyFor at once: requests that come while a check runs wait
// for it, and those within readyFor of its end take its outcome.
type readyCheck struct {
	mu      sync.Mutex
	at      time.Time     // when the last check ended
	err     error         // its outcome
	running chan struct{} // closed when the check under way ends; nil when none
}

// check returns the outcome of a check that ended within readyFor, that
// of the one under way, or of a new one made with ready. A caller whose
// ctx ends first gets ctx's error; the check goes on for the others.
func (r *readyCheck) check(ctx context.Context, ready func(context.Context) error) error {
	r.mu.Lock()
	if r.running == nil && !r.at.IsZero() && time.Since(r.at) < readyFor {
		err := r.err
		r.mu.Unlock()
		return err
	}
	done := r.running
	if done == nil {
		done = make(chan struct{})
		r.running = done
		go func() {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), readyTimeout)
			defer cancel()
			err := ready(cctx)
			r.mu.Lock()
			r.at, r.err, r.running = time.Now(), err, nil
			r.mu.Unlock()
			close(done)
		}()
	}
	r.mu.Unlock()
	select {
	case <-done:
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.err
	case <-ctx.Done():
		return ctx.Err()
	}
}
