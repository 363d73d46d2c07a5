package ffctl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/flowfabric/ff/runtime/client"
)

// Backoff between the requests of a command that rides out an outage:
// doubling from outageBackoffMin to outageBackoffMax, as Run.Wait does.
const (
	outageBackoffMin = 100 * time.Millisecond
	outageBackoffMax = 5 * time.Second
)

// outage rides out a spell of failures that may pass (client.Passing:
// ffrun restarting, 502/503/504, 429) for the commands that wait for a
// run, as the client's Run.Wait does: it says so once per outage on note
// and keeps asking for up to client.WaitOutageMax. The zero value is
// silent and ready to use.
type outage struct {
	note    io.Writer // "ffrun unreachable, retrying..." once per outage; nil: silent
	since   time.Time // the first failure of the outage under way; zero: none
	backoff time.Duration
}

// ok records a success: an outage under way ended.
func (o *outage) ok() { o.since, o.backoff = time.Time{}, 0 }

// failed decides about err, the failure of a request: it returns nil after
// a pause when the request is worth another try (err may pass, the outage
// is not older than client.WaitOutageMax and the pause ends before until,
// when until is not zero), else err.
func (o *outage) failed(ctx context.Context, err error, until time.Time) error {
	if !client.Passing(err) || ctx.Err() != nil {
		return err
	}
	now := time.Now()
	if o.since.IsZero() {
		o.since, o.backoff = now, outageBackoffMin
		if o.note != nil {
			fmt.Fprintln(o.note, "ffrun unreachable, retrying...")
		}
	}
	if now.Sub(o.since) > client.WaitOutageMax {
		return fmt.Errorf("still failing after %s: %w", client.WaitOutageMax, err)
	}
	pause := o.backoff
	if ae, ok := errors.AsType[*client.APIError](err); ok {
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
