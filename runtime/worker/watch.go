package worker

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/flowfabric/ff/runtime/client"
	"github.com/flowfabric/ff/runtime/wire"
)

// The lease watch (watchLoop).
const (
	// watchAfter is how long a lease is held before the watch covers it:
	// a lease held that long that the request in flight does not cover
	// restarts it (at most one restart per watchAfter, however fast slots
	// turn over), and an end of a younger lease is found when the next
	// request starts (the server reads the leases first). A worker whose
	// tasks all end sooner sends no watch at all.
	watchAfter = 100 * time.Millisecond
	// watchWait is the wait of one watch request.
	watchWait = 30 * time.Second
	// watchReplaced is how long a watch request that a new one replaced
	// may take to be answered before it is cancelled: the server answers
	// it at once when the new one reaches the same ffrun (the request
	// names the instance), so that its connection is kept (cancelling an
	// HTTP/1.1 request closes its connection: one per restart, up to ten
	// a second); behind a load balancer the new one may reach another.
	watchReplaced = time.Second
)

// watchAnswer is the answer to one watch request.
type watchAnswer struct {
	res   []wire.LeaseResult
	err   error
	leads map[string]*running // the leases the request covered, by execution
}

// watchLoop keeps one watch request (POST /v1/worker/watch) open while the
// worker holds leases, until done closes or ctx ends: the server answers
// as soon as one of them ends other than by this worker's report (a
// cancel, a revoke, its timeout, its expiry, a deadline), and the
// handler's context is cancelled then (ErrCancelled or ErrLeaseLost)
// instead of at the next renew. A lease joins the watch once held for
// watchAfter; the handler's own end drops it from the next request. A
// server without the route (404, 405: an older ffrun) leaves the worker
// to its renewals, logged once at debug level.
func (w *Worker) watchLoop(ctx context.Context, done <-chan struct{}) {
	var (
		reqs    sync.WaitGroup
		cancel  context.CancelFunc // of the request in flight; nil when none
		answers chan watchAnswer   // the request in flight's
		watched map[*running]bool  // what it covers
		timer   = time.NewTimer(time.Hour)
		armed   bool      // timer set for a look at the leases
		retryAt time.Time // after a failed request, none before
		delay   = retryDelayMin
	)
	timer.Stop()
	// Every request's context, replaced ones waiting to be answered too,
	// ends with the loop.
	lctx, lcancel := context.WithCancel(ctx)
	defer func() {
		timer.Stop()
		lcancel()
		reqs.Wait()
	}()
	// w.watchArmed mirrors armed for start, which kicks the loop only
	// when it is false: it is cleared before the look at the leases that
	// follows the timer (watchPlan, under w.mu), so that a lease start
	// added without a kick is in that look.
	arm := func(d time.Duration) {
		timer.Reset(d)
		armed = true
		w.watchArmed.Store(true)
	}
	for {
		look := false
		select {
		case <-done:
			return
		case <-ctx.Done():
			return
		case <-w.watchKick:
			// A new lease: old enough to watch in watchAfter. A look
			// already due comes before that and arms the timer again.
			if !armed {
				arm(watchAfter)
			}
		case <-timer.C:
			armed, look = false, true
			w.watchArmed.Store(false)
		case a := <-answers:
			cancel()
			cancel, answers, watched = nil, nil, nil
			if a.err != nil {
				// After the backoff's delay, or when the server said
				// (a 429 while the address is limited), if later.
				wait := max(delay, retryAfter(a.err))
				if !w.watchFailed(ctx, a.err, wait) {
					return
				}
				retryAt = time.Now().Add(wait)
				delay = min(delay*2, retryDelayMax)
				arm(time.Until(retryAt))
				continue
			}
			if w.watchEnded(a) {
				delay = retryDelayMin
			} else {
				// Leases answered that it could not settle would be
				// answered again at once: wait as after a failure.
				retryAt = time.Now().Add(delay)
				delay = min(delay*2, retryDelayMax)
			}
			look = true
		}
		if !look {
			continue
		}
		if wait := time.Until(retryAt); wait > 0 {
			if !armed {
				arm(wait)
			}
			continue
		}
		want, start, next := w.watchPlan(watched)
		if next > 0 && !armed {
			arm(next)
		}
		if !start {
			continue
		}
		if cancel != nil {
			// Replaced: its answer goes to a channel no longer read.
			time.AfterFunc(watchReplaced, cancel)
		}
		rctx, rcancel := context.WithTimeout(lctx, watchWait+requestSlack)
		cancel = rcancel
		answers = make(chan watchAnswer, 1)
		watched = make(map[*running]bool, len(want))
		req := wire.WatchRequest{WorkerID: w.cfg.Name, InstanceID: w.instance, WaitMs: watchWait.Milliseconds(),
			Leases: make([]wire.Lease, len(want))}
		leads := make(map[string]*running, len(want))
		for i, r := range want {
			watched[r] = true
			req.Leases[i] = r.lease
			leads[r.lease.ExecutionID] = r
		}
		out := answers
		reqs.Go(func() {
			res, err := w.c.WatchLeases(rctx, req)
			out <- watchAnswer{res: res, err: err, leads: leads}
		})
	}
}

// watchPlan returns the held leases whose handlers still run (at most
// wire.BatchMax: a worker holds at most Concurrency) and, given what the
// request in flight covers (watched; nil when none), whether a request
// for them should start, because one held for watchAfter is not covered,
// and, when some not covered are younger, in how long the first of them
// is old enough.
func (w *Worker) watchPlan(watched map[*running]bool) (want []*running, start bool, next time.Duration) {
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, r := range w.active {
		if r.lost.Load() || r.done.Load() {
			continue
		}
		if len(want) < wire.BatchMax {
			want = append(want, r)
		}
		if watched[r] {
			continue
		}
		if age := now.Sub(r.since); age >= watchAfter {
			start = true
		} else if d := watchAfter - age; next == 0 || d < next {
			next = d
		}
	}
	return want, start, next
}

// watchEnded cancels the handlers of the leases a watch answered ended:
// with ErrCancelled for a cancel, ErrLeaseLost otherwise. An answer about
// a lease whose handler returned meanwhile, or that this worker no longer
// holds, changes nothing. It reports false when an item carried an error
// it does not know (the server could not read that lease): the next
// request, which would cover it again, should wait.
func (w *Worker) watchEnded(a watchAnswer) (settled bool) {
	settled = true
	for _, rr := range a.res {
		r := a.leads[rr.ExecutionID]
		if rr.OK || r == nil || r.done.Load() {
			continue
		}
		w.mu.Lock()
		held := w.active[rr.ExecutionID] == r
		w.mu.Unlock()
		if !held {
			continue
		}
		switch code := codeOf(rr.Error); code {
		case wire.CodeCancelled:
			w.lose(r, ErrCancelled)
		case wire.CodeStaleLease, wire.CodeNotFound:
			w.lose(r, ErrLeaseLost)
		default:
			settled = false
			w.log.Debug("lease watch: an item the server could not read", slog.String(attrExecution, rr.ExecutionID),
				slog.String(attrCode, code), slog.String("message", msgOf(rr.Error)))
		}
	}
	return settled
}

// watchFailed logs a failed watch request and reports whether to try
// again (after delay, the larger of the backoff's and the server's
// Retry-After). A server without the route (404, 405) or that
// refuses the request (400) turns the watch off: renewals alone tell the
// worker that a lease ended, as before the route existed.
func (w *Worker) watchFailed(ctx context.Context, err error, delay time.Duration) bool {
	if ctx.Err() != nil || errors.Is(err, context.Canceled) {
		return ctx.Err() == nil
	}
	var ae *client.APIError
	if errors.As(err, &ae) {
		switch ae.Status {
		case http.StatusNotFound, http.StatusMethodNotAllowed:
			w.log.DebugContext(ctx, "the server has no lease watch (an older ffrun): a lease that ends is noticed at the next renew",
				slog.Any(attrError, err))
			return false
		case http.StatusBadRequest:
			w.log.WarnContext(ctx, "the server refused the lease watch: a lease that ends is noticed at the next renew",
				slog.Any(attrError, err))
			return false
		}
	}
	w.log.DebugContext(ctx, "lease watch failed; retrying", slog.Any(attrError, err), slog.Duration("delay", delay))
	return true
}
