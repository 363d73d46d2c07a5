package server

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flowfabric/ff/runtime/internal/lifecycle"
	"github.com/flowfabric/ff/runtime/scheduler"
)

// Retry delays of the pub/sub subscriptions of runNotices and leaseWatch:
// doubled after each failure that follows no subscription, up to the
// maximum.
const (
	noticeRetryMin = 200 * time.Millisecond
	noticeRetryMax = 5 * time.Second
)

// keepSubscribed runs subscribe until ctx ends, subscribing again after
// each failure, and calls onReady whenever a subscription comes up (the
// first, and each one after a failure: messages published while none was
// up are lost, so what waits for them should look again). An outage is
// logged once at warn level (the retries while it lasts at debug level)
// and its end at info level, each message led by what ("run notices"),
// so that a Valkey away for minutes does not flood the log.
func keepSubscribed(ctx context.Context, log *slog.Logger, what string, subscribe scheduler.SubscribeFunc, onReady func(), deliver func(string)) {
	delay := noticeRetryMin
	var ready, down atomic.Bool // a subscription came up; an outage was logged
	up := func() {
		ready.Store(true)
		if down.CompareAndSwap(true, false) {
			log.InfoContext(ctx, what+": subscription restored")
		}
		onReady()
	}
	for ctx.Err() == nil {
		ready.Store(false)
		err := subscribe(ctx, up, deliver)
		if ctx.Err() != nil {
			return
		}
		if ready.Load() {
			delay = noticeRetryMin
		}
		if down.CompareAndSwap(false, true) {
			log.WarnContext(ctx, what+": subscription lost; retrying", slog.Any("error", err))
		} else {
			log.DebugContext(ctx, what+": subscription still down; retrying", slog.Any("error", err), slog.Duration("delay", delay))
		}
		select {
		case <-ctx.Done():
		case <-time.After(delay):
		}
		delay = min(delay*2, noticeRetryMax)
	}
}

// subscription keeps a pub/sub subscription up in the background between
// Start and Stop (keepSubscribed), for a component that fans a channel's
// messages out to requests waiting in this process (runNotices,
// leaseWatch): it has the Start/Stop shape of the other background
// components (lifecycle.Background), and closes Closed at Stop so that
// the waiting requests answer at once. It does not start again once
// stopped.
type subscription struct {
	log       *slog.Logger
	what      string // leads its log messages ("run notices")
	subscribe scheduler.SubscribeFunc
	onReady   func()       // every (re)subscription: messages may have been lost
	deliver   func(string) // each message

	mu      sync.Mutex
	stopped bool
	closed  chan struct{}
	bg      lifecycle.Background
}

func newSubscription(log *slog.Logger, what string, subscribe scheduler.SubscribeFunc, onReady func(), deliver func(string)) *subscription {
	return &subscription{log: log, what: what, subscribe: subscribe, onReady: onReady, deliver: deliver, closed: make(chan struct{})}
}

// Start subscribes in the background until Stop; safe to call twice, and
// does nothing after Stop.
func (s *subscription) Start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock() // held while starting: a Stop comes after, and sees it
	if s.stopped {
		return nil
	}
	err := s.bg.Start(ctx, func(ctx context.Context) {
		keepSubscribed(ctx, s.log, s.what, s.subscribe, s.onReady, s.deliver)
	})
	if err != nil {
		return fmt.Errorf("server: %s: %w", s.what, err)
	}
	return nil
}

// Stop closes Closed, ends the subscription and waits for it within ctx
// (its error when ctx ends first: with Valkey hung, the release of the
// subscription's connection waits for it). Safe to call twice, and at
// once: a Stop returns nil only once the subscription ended.
func (s *subscription) Stop(ctx context.Context) error {
	s.mu.Lock()
	if !s.stopped {
		s.stopped = true
		close(s.closed)
	}
	s.mu.Unlock()
	return s.bg.Stop(ctx)
}

// Closed is closed by Stop.
func (s *subscription) Closed() <-chan struct{} { return s.closed }
