package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/flowfabric/ff/runtime/internal/timespan"
)

// Backoff between the requests of a wait that rides out an outage:
// doubling from outageBackoffMin to outageBackoffMax, or an answer's
// APIError.RetryAfter when longer.
const (
	outageBackoffMin = 100 * time.Millisecond
	outageBackoffMax = 5 * time.Second
)

// Outage rides out a spell of failures that may pass (Passing: ffrun
// restarting, 5xx, 429, 408) for a caller that asks again and
// again for something, as Run.Wait does and ffrun's commands that wait
// do: Failed pauses with a backoff and says whether to ask again, for up
// to WaitOutageMax from the outage's first failure; OK ends the outage. The
// zero value is silent and ready to use; it is not safe for concurrent use.
type Outage struct {
	// Note, when set, gets "ffrun unreachable, retrying..." once per
	// outage.
	Note io.Writer

	since   time.Time // the first failure of the outage under way; zero: none
	backoff time.Duration
}

// OK records a success: an outage under way ended.
func (o *Outage) OK() { o.since, o.backoff = time.Time{}, 0 }

// Failed decides about err, the failure of a request: it returns nil after
// a pause when the request is worth another try (err may pass, the outage
// is not older than WaitOutageMax, and the pause ends before until when
// until is not zero), else err (wrapped to say so when the outage lasted
// too long). When ctx ends, before or during the pause, it returns err.
func (o *Outage) Failed(ctx context.Context, err error, until time.Time) error {
	if !Passing(err) || ctx.Err() != nil {
		return err
	}
	now := time.Now()
	if o.since.IsZero() {
		o.since, o.backoff = now, outageBackoffMin
		if o.Note != nil {
			fmt.Fprintln(o.Note, "ffrun unreachable, retrying...")
		}
	}
	if now.Sub(o.since) > WaitOutageMax {
		return fmt.Errorf("still failing after %s: %w", timespan.Format(WaitOutageMax), err)
	}
	pause := o.backoff
	if ae, ok := errors.AsType[*APIError](err); ok {
		pause = max(pause, ae.RetryAfter)
	}
	o.backoff = min(2*o.backoff, outageBackoffMax)
	if !until.IsZero() && now.Add(pause).After(until) {
		return err
	}
	t := time.NewTimer(pause)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return err
	case <-t.C:
	}
	return nil
}
