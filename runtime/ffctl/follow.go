package ffctl

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/flowfabric/ff/runtime/client"
	"github.com/flowfabric/ff/runtime/internal/timespan"
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
	// Stderr is where Follow says, once per outage, that it rides one
	// out: "ffrun unreachable, retrying..."; nil: it says nothing.
	Stderr io.Writer
}

// Follow prints every change of a member's state of run id, one line each
// with the time since Follow started, until the run ends (a member that
// began an attempt and left it between two reads shows it ran: "waiting
// -> active (attempt 1) -> completed"); it then prints
// the run's counts and returns the run as it ended. The first read shows
// every member as changed from staged, or, with o.Attach, in its state.
//
// A run of more members than one answer holds (1,000) is followed by its
// counts instead: a line whenever they change, and one per member that
// failed or expired (those cancelled are counted), each poll asking for
// one member only (the server reads the run's record, its order and its
// failures, not every member; a run staged before those were kept, every
// member's state). The run it returns then has no members.
//
// A read that fails for a cause that may pass (client.Passing: ffrun
// restarting, Valkey away) is made again, with a backoff, for up to
// client.WaitOutageMax, as Run.Wait does; other errors end Follow.
func Follow(ctx context.Context, w io.Writer, c *client.Client, id string, o FollowOptions) (*wire.FlowRun, error) {
	if o.Interval <= 0 {
		o.Interval = WatchInterval
	}
	start := time.Now()
	width := 0
	last := map[string]string{}
	limit := 0                   // the default page: every member of a run that fits one
	attempts := map[string]int{} // a member's attempts at the last read
	counts := ""
	down := client.Outage{Note: o.Stderr}
	for {
		r, next, err := c.GetRunPage(ctx, id, "", limit)
		if err != nil {
			if down.Failed(ctx, err, time.Time{}) == nil {
				continue
			}
			return nil, err
		}
		down.OK()
		if next != "" && limit == 0 {
			limit = 1
			fmt.Fprintf(w, "%s%6s  run of %d members: following its counts and failures\n", o.Indent, since(start), r.Total)
		}
		if limit == 0 {
			for _, x := range r.Execs {
				width = max(width, len(x.Name))
			}
			for _, x := range r.Execs {
				now := memberState(x)
				ran := x.Attempts > attempts[x.Name] // an attempt began since the last read
				attempts[x.Name] = x.Attempts
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
				if ran && x.State != "active" {
					// The attempt began and ended between two reads: say
					// that the member ran, not only where it ended.
					from += fmt.Sprintf(" -> active (attempt %d)", x.Attempts)
				}
				fmt.Fprintf(w, "%s%6s  %-*s  %s -> %s\n", o.Indent, since(start), width, x.Name, from, now)
			}
		} else {
			r.Execs, r.ExecsNextCursor = nil, ""
			for _, f := range r.Failures {
				if f.State == "cancelled" || last[f.Exec] != "" {
					continue
				}
				last[f.Exec] = f.State
				now := f.State
				if f.Error != "" {
					now += ": " + f.Error
				}
				fmt.Fprintf(w, "%s%6s  %s  %s\n", o.Indent, since(start), f.Exec, now)
			}
			if now := runCounts(r); now != counts && r.State == wire.RunRunning {
				counts = now
				fmt.Fprintf(w, "%s%6s  %d of %d done (%s)\n", o.Indent, since(start), r.Done, r.Total, now)
			}
		}
		if r.State != wire.RunRunning {
			fmt.Fprintf(w, "%s%6s  run %s (%s)\n", o.Indent, since(start), r.State, runCounts(r))
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

// runCounts is "<n> succeeded, <n> failed, <n> skipped, <n> cancelled".
func runCounts(r *wire.FlowRun) string {
	return fmt.Sprintf("%d succeeded, %d failed, %d skipped, %d cancelled", r.Succeeded, r.Failed, r.Skipped, r.Cancelled)
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

// since is the time since t for Follow's column of six, as every
// command writes a time span (timespan.Format).
func since(t time.Time) string { return timespan.Format(time.Since(t)) }
