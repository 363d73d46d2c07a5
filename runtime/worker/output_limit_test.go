package worker_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flowfabric/ff/compiler/plan"
	"github.com/flowfabric/ff/runtime/server"
	"github.com/flowfabric/ff/runtime/server/servertest"
	"github.com/flowfabric/ff/runtime/wire"
	"github.com/flowfabric/ff/runtime/worker"
)

// TestOutputAtTheLimit: handler outputs of OutputMaxBytes ("largest
// handler output the server accepts") are recorded, whatever characters
// they hold. An output holding <, > or & (HTML, a scraped page) was sent
// HTML-escaped (\u003c: six bytes for one) once the fast encoder fell
// back to encoding/json, so the server measured up to six times its size
// and refused the item (payload_too_large); the worker took that as a
// per-item rejection, left the lease to run out, and the task ran again,
// four times, until it failed reclaims_exhausted. An output over the
// limit only by its white space is sent compacted, as the server measures
// it, and recorded too.
func TestOutputAtTheLimit(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, fill, pad string }{
		{"plain", "x", ""},
		{"html", "<", ""}, // encoding/json sends it as \u003c: six bytes
		{"spaced", "x", "  "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			env := servertest.Start(t)
			out := json.RawMessage(tc.pad + `"` + strings.Repeat(tc.fill, worker.OutputMaxBytes-2) + `"` + tc.pad)
			reported := make(chan error, 8)
			var runs atomic.Int64
			w := newWorker(t, env, func(c *worker.Config) {
				c.Concurrency = 1
				c.LeaseTTL = time.Second
				c.OnReported = func(_ string, err error) { reported <- err }
			})
			if err := w.Handle("big", func(context.Context, *worker.Task) (json.RawMessage, error) {
				runs.Add(1)
				return out, nil
			}); err != nil {
				t.Fatal(err)
			}
			id := create(t, env, wire.CreateExecution{Kind: "big"})
			run(t, w)
			if err := <-reported; err != nil {
				t.Fatalf("OnReported = %v for an output of %d bytes (OutputMaxBytes %d)", err, len(out), worker.OutputMaxBytes)
			}
			r := waitResult(t, env, id)
			var got, want string
			_ = json.Unmarshal(r.Result, &got)
			_ = json.Unmarshal(out, &want)
			if r.State != "completed" || got != want {
				t.Errorf("%s (%s) after %d handler runs, result of %d bytes; want completed with the output",
					r.State, r.Error, runs.Load(), len(r.Result))
			}
		})
	}
}

// TestOutputRefusedAsTooLargeFailsTheAttempt: a completion the server
// refuses as too large (here a 413 for a server whose body limit is below
// the output, which the worker cannot know) fails its attempt for good,
// with the server's reason, retries or not: the same output would be
// refused again. The attempt used to be left running, to run again once
// its lease expired, four times, until the execution failed with
// reclaims_exhausted.
func TestOutputRefusedAsTooLargeFailsTheAttempt(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t, func(c *server.Config) { c.BodyLimit = 64 << 10 })
	var runs atomic.Int64
	w := newWorker(t, env, func(c *worker.Config) {
		c.Concurrency = 1
		c.LeaseTTL = time.Second
	})
	huge := json.RawMessage(`"` + strings.Repeat("x", 70_000) + `"`) // over 64 KiB, under OutputMaxBytes
	if err := w.Handle("huge", func(context.Context, *worker.Task) (json.RawMessage, error) {
		runs.Add(1)
		return huge, nil
	}); err != nil {
		t.Fatal(err)
	}
	id := create(t, env, wire.CreateExecution{Kind: "huge", Retry: &plan.Retry{Attempts: 3}})
	run(t, w)
	r := waitResult(t, env, id)
	if r.State != "failed" || !strings.Contains(r.Error, wire.CodePayloadTooLarge) || runs.Load() != 1 {
		t.Errorf("%s (%q) after %d handler runs; want failed after one, naming %s",
			r.State, r.Error, runs.Load(), wire.CodePayloadTooLarge)
	}
}
