package worker_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flowfabric/ff/runtime/server/servertest"
	"github.com/flowfabric/ff/runtime/worker"
)

// TestRunCancelCancelsRunningHandler: cancelling a flow run reaches the
// handler of its running member: its context ends with ErrCancelled at
// the next renew (LeaseTTL/3), the member is recorded cancelled, the log
// says it was cancelled (not that its lease was lost), and the worker's
// slot comes back (a second run on the one slot completes).
func TestRunCancelCancelsRunningHandler(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	started := make(chan struct{}, 1)
	cause := make(chan error, 1)
	var logs lockedLog
	w := newWorker(t, env, func(c *worker.Config) {
		c.Concurrency, c.LeaseTTL = 1, 600*time.Millisecond
		c.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	})
	f := chainOf(2)
	first := true
	if err := w.Handle("walk.a0", func(ctx context.Context, task *worker.Task) (json.RawMessage, error) {
		if first {
			first = false
			started <- struct{}{}
			<-ctx.Done()
			cause <- context.Cause(ctx)
			return nil, ctx.Err()
		}
		return json.RawMessage(`["a0"]`), nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := w.Handle("walk.a1", func(context.Context, *worker.Task) (json.RawMessage, error) {
		return json.RawMessage(`["a0","a1"]`), nil
	}); err != nil {
		t.Fatal(err)
	}
	run(t, w)
	ctx := ctxT(t)
	r, err := env.Client.StageFlow(ctx, f, []string{})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-started:
	case <-ctx.Done():
		t.Fatal("handler never started")
	}
	if _, err := r.Cancel(ctx, "user asked"); err != nil {
		t.Fatal(err)
	}
	select {
	case c := <-cause:
		if !errors.Is(c, worker.ErrCancelled) {
			t.Fatalf("handler context cause %v, want ErrCancelled", c)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the running member's handler context was not cancelled 5 s after its run was")
	}
	if l := logs.String(); !strings.Contains(l, "execution cancelled; cancelling handler") || strings.Contains(l, "lease lost") {
		t.Errorf("the worker's log of the cancel:\n%s", l)
	}
	run2, err := env.Client.StageFlow(ctx, f, []string{})
	if err != nil {
		t.Fatal(err)
	}
	out, err := run2.Result(ctx)
	if err != nil || string(out) != `["a0","a1"]` {
		t.Fatalf("second run on the same slot: %s %v", out, err)
	}
}

// lockedLog is a log destination shared by the worker's goroutines and
// the test.
type lockedLog struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
