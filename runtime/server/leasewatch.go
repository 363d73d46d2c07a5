package server

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flowfabric/ff/runtime/scheduler"
	"github.com/flowfabric/ff/runtime/store"
	"github.com/flowfabric/ff/runtime/wire"
)

// leaseWatch keeps the lease watches of workers (POST /v1/worker/watch)
// waiting in this process and wakes them on the store's lease-end notices
// (store.LeasesChannel, "<execution id>:<epoch>:<why>"), which every ffrun
// process receives, whichever of them ended the lease. A woken watch reads
// the leases a notice named (store.CheckLeases) and answers those found
// ended. Start and Stop are its subscription's.
type leaseWatch struct {
	*subscription
	log *slog.Logger

	waiting atomic.Int64 // watches past their first read, waiting (ff_lease_watches_waiting)

	mu         sync.Mutex
	byExec     map[store.ExecutionID]map[*leaseWaiter]int64 // the epoch each waiter holds
	byInstance map[string]*leaseWaiter                      // the latest watch of each worker instance that named itself
}

// leaseWaiter is one watch request: its leases by execution, and what
// the notices since its last look named (guarded by leaseWatch.mu).
type leaseWaiter struct {
	ch       chan struct{} // signalled when hit, all or replaced was set
	instance string        // the worker instance, if it said
	index    map[store.ExecutionID]int
	hit      map[int]struct{} // positions of leases a notice named
	all      bool             // look at every lease: notices may have been lost
	replaced bool             // a later watch of its instance came: answer at once
}

func newLeaseWatch(subscribe scheduler.SubscribeFunc, log *slog.Logger) *leaseWatch {
	lw := &leaseWatch{log: log, byExec: map[store.ExecutionID]map[*leaseWaiter]int64{}, byInstance: map[string]*leaseWaiter{}}
	lw.subscription = newSubscription(log, "lease notices", subscribe, lw.wakeAll, lw.deliver)
	return lw
}

// add registers a waiter for leases (one per execution) of a worker
// instance ("": unnamed); a waiter the instance had is replaced: it
// answers at once, so that its request ends with an answer (its
// connection kept) rather than by its worker cancelling it.
func (lw *leaseWatch) add(instance string, leases []store.Lease) *leaseWaiter {
	w := &leaseWaiter{ch: make(chan struct{}, 1), instance: instance, index: make(map[store.ExecutionID]int, len(leases))}
	lw.mu.Lock()
	defer lw.mu.Unlock()
	if instance != "" {
		if old := lw.byInstance[instance]; old != nil {
			old.replaced = true
			signal(old.ch)
		}
		lw.byInstance[instance] = w
	}
	for i, l := range leases {
		w.index[l.ExecutionID] = i
		m := lw.byExec[l.ExecutionID]
		if m == nil {
			m = map[*leaseWaiter]int64{}
			lw.byExec[l.ExecutionID] = m
		}
		m[w] = l.Epoch
	}
	return w
}

// remove unregisters w.
func (lw *leaseWatch) remove(w *leaseWaiter) {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	if w.instance != "" && lw.byInstance[w.instance] == w {
		delete(lw.byInstance, w.instance)
	}
	for id := range w.index {
		m := lw.byExec[id]
		delete(m, w)
		if len(m) == 0 {
			delete(lw.byExec, id)
		}
	}
}

// take returns what the notices since w's last look named: every lease
// (all), or the positions of some; neither after a signal whose news an
// earlier look took. replaced says a later watch of w's instance came.
func (lw *leaseWatch) take(w *leaseWaiter) (hit []int, all, replaced bool) {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	if w.replaced {
		return nil, false, true
	}
	if w.all {
		w.all, w.hit = false, nil
		return nil, true, false
	}
	for i := range w.hit {
		hit = append(hit, i)
	}
	w.hit = nil
	return hit, false, false
}

// deliver passes on a lease-end notice to the waiters holding that lease,
// or a later one of its execution (a later epoch also means theirs ended:
// its notice was lost).
func (lw *leaseWatch) deliver(msg string) {
	e, err := store.ParseLeaseEnd(msg)
	if err != nil {
		lw.log.Debug("lease notices: ignored a malformed notice", slog.Any("error", err))
		return
	}
	lw.mu.Lock()
	defer lw.mu.Unlock()
	for w, epoch := range lw.byExec[e.ExecutionID] {
		if epoch > e.Epoch {
			continue // an earlier attempt's
		}
		if w.hit == nil {
			w.hit = map[int]struct{}{}
		}
		w.hit[w.index[e.ExecutionID]] = struct{}{}
		signal(w.ch)
	}
}

// wakeAll makes every waiter look at all its leases again: after a
// (re)subscription, notices sent while unsubscribed may have been lost.
func (lw *leaseWatch) wakeAll() {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	for _, m := range lw.byExec {
		for w := range m {
			w.all = true
			signal(w.ch)
		}
	}
}

// WatchLeases implements api.LeaseWatcher. The watch is registered before
// the leases are first read, so that an end between that read and the
// wait is not missed (the store publishes a lease's end in the call that
// ends it), and one before it is found by the read.
func (s *service) WatchLeases(ctx context.Context, instance string, leases []wire.Lease, wait time.Duration) ([]wire.LeaseResult, error) {
	sl := make([]store.Lease, len(leases))
	for i, l := range leases {
		sl[i] = storeLease(l)
	}
	w := s.watch.add(instance, sl)
	defer s.watch.remove(w)
	ended, err := s.endedLeases(ctx, leases, sl, nil)
	if err != nil || len(ended) > 0 || wait <= 0 {
		return ended, err
	}
	s.watch.waiting.Add(1)
	defer s.watch.waiting.Add(-1)
	t := time.NewTimer(wait)
	defer t.Stop()
	for {
		select {
		case <-w.ch:
		case <-t.C:
			return nil, nil
		case <-s.watch.Closed():
			return nil, nil
		case <-ctx.Done():
			return nil, mapError(ctx.Err())
		}
		hit, all, replaced := s.watch.take(w)
		if replaced {
			return nil, nil
		}
		if !all && len(hit) == 0 {
			continue // news an earlier look took
		}
		if all {
			hit = nil
		}
		ended, err := s.endedLeases(ctx, leases, sl, hit)
		if err != nil || len(ended) > 0 {
			return ended, err
		}
	}
}

// endedLeases reads the leases at positions which (nil: all) of sl, the
// store form of leases, and returns the results of those that ended, as a
// renew would report them.
func (s *service) endedLeases(ctx context.Context, leases []wire.Lease, sl []store.Lease, which []int) ([]wire.LeaseResult, error) {
	read := sl
	if which != nil {
		read = make([]store.Lease, len(which))
		for j, i := range which {
			read[j] = sl[i]
		}
	}
	errs, err := s.st.CheckLeases(ctx, read)
	if err != nil {
		return nil, mapError(err)
	}
	var out []wire.LeaseResult
	failed := batchLog{op: "watch"}
	for j, e := range errs {
		if e == nil {
			continue
		}
		i := j
		if which != nil {
			i = which[j]
		}
		id := leases[i].ExecutionID
		out = append(out, wire.LeaseResult{ExecutionID: id, Error: leaseItemError(&failed, id, i, e)})
	}
	s.logBatch(ctx, &failed, len(errs))
	return out, nil
}
