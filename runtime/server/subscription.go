package server

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

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
