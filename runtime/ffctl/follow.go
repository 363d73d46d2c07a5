package ffctl

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/flowfabric/ff/runtime/client"
	"github.com/flowfabric/ff/runtime/wire"
)

// FollowOptions tune Follow.
type FollowOptions struct {
	Interval time.Duration // between reads of the run; 0 = WatchInterval
	Indent   string        // before every line
	// Attach is for a run that may have changed before Follow: the first
	// read prints each member's state as found ("<exec>  completed"), not
	// as a change from staged.
	Attach bool
}

// Follow prints every change of a member's state of run id, one line each
// with the time since Follow started, until the run ends; it then prints
// the run's counts and returns the run as it ended. The first read shows
// every member as changed from staged, or, with o.Attach, in its state.
func Follow(ctx context.Context, w io.Writer, c *client.Client, id string, o FollowOptions) (*wire.FlowRun, error) {
	if o.Interval <= 0 {
		o.Interval = WatchInterval
	}
	start := time.Now()
	width := 0
	last := map[string]string{}
	for {
		r, err := c.GetRun(ctx, id)
		if err != nil {
			return nil, err
		}
		for _, x := range r.Execs {
			width = max(width, len(x.Name))
		}
		for _, x := range r.Execs {
			now := memberState(x)
			if last[x.Name] == now {
				continue
			}
			from := last[x.Name]
			last[x.Name] = now
			if from == "" && o.Attach {
				fmt.Fprintf(w, "%s%6s  %-*s  %s\n", o.Indent, since(start), width, x.Name, now)
				continue
			}
			if from == "" {
				from = "staged"
			}
			fmt.Fprintf(w, "%s%6s  %-*s  %s -> %s\n", o.Indent, since(start), width, x.Name, from, now)
		}
		if r.State != wire.RunRunning {
			fmt.Fprintf(w, "%s%6s  run %s (%d succeeded, %d failed, %d skipped, %d cancelled)\n",
				o.Indent, since(start), r.State, r.Succeeded, r.Failed, r.Skipped, r.Cancelled)
			return r, nil
		}
		t := time.NewTimer(o.Interval)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
	}
}

// memberState is the state of a member as Follow shows it.
func memberState(x wire.FlowExec) string {
	switch x.State {
	case "active":
		return fmt.Sprintf("active (attempt %d)", x.Attempts)
	case "failed":
		return "failed: " + x.Error
	case "blocked":
		return "blocked: " + x.Blocked
	}
	return x.State
}

func since(t time.Time) string {
	return fmt.Sprintf("%dms", time.Since(t).Milliseconds())
}
