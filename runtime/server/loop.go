package server

import (
	"context"
	"time"
)

// loop runs tick every interval in a goroutine of its own, from Start to
// Stop: the shape of the background parts of the server that are not
// scanners (the park log, the schedule runner). Stop waits for a tick in
// progress, within its context (its error when that ends first).
type loop struct {
	interval time.Duration
	tick     func(ctx context.Context)

	cancel context.CancelFunc
	done   chan struct{}
}

func (l *loop) Start(ctx context.Context) error {
	ctx, l.cancel = context.WithCancel(context.WithoutCancel(ctx))
	l.done = make(chan struct{})
	go func() {
		defer close(l.done)
		t := time.NewTicker(l.interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			l.tick(ctx)
		}
	}()
	return nil
}

func (l *loop) Stop(ctx context.Context) error {
	if l.cancel == nil {
		return nil
	}
	l.cancel()
	select {
	case <-l.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
