package server

import (
	"context"
	"fmt"
	"time"

	"github.com/flowfabric/ff/runtime/internal/lifecycle"
)

// loop runs tick every interval in a goroutine of its own, from Start to
// Stop: the shape of the background parts of the server that are not
// scanners (the park log, the schedule runner), and the scanners'
// Start/Stop contract (lifecycle.Background): starting a running loop
// does nothing, Stop waits for a tick in progress within its context
// (its error when that ends first), and a Start or Stop after a Stop that
// returned before the tick ended waits for it, so that two ticks never
// run at once.
type loop struct {
	name     string // leads its errors ("park log")
	interval time.Duration
	tick     func(ctx context.Context)

	bg lifecycle.Background
}

func (l *loop) Start(ctx context.Context) error {
	if err := l.bg.Start(ctx, l.run); err != nil {
		return fmt.Errorf("server: %s: %w", l.name, err)
	}
	return nil
}

func (l *loop) Stop(ctx context.Context) error {
	if err := l.bg.Stop(ctx); err != nil {
		return fmt.Errorf("server: %s: stop: %w", l.name, err)
	}
	return nil
}

// run ticks every interval until ctx ends.
func (l *loop) run(ctx context.Context) {
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
}
