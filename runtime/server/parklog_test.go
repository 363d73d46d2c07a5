package server_test

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flowfabric/ff/runtime/client"
	"github.com/flowfabric/ff/runtime/server"
	"github.com/flowfabric/ff/runtime/server/servertest"
	"github.com/flowfabric/ff/runtime/wire"
)

// lockedBuffer is a log sink safe for the server's goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) count(s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Count(l.b.String(), s)
}

// spec/api.md, "Why is it not running?": ffrun logs `execution parked`
// once per parked execution and `execution no longer parked` when it
// leaves. The park log reads the first page (500) of blocked executions
// per namespace, while the unblock scanner reads the same index a share
// at a time with its cursor: with more than a page parked and nobody able
// to run them, the unblock passes must leave every entry in place, or
// executions rotate out of the page while still parked and the log says
// "no longer parked" (and "parked" again) for executions that never left.
func TestParkLogDoesNotFlapWhileStillParked(t *testing.T) {
	t.Parallel()
	var logs lockedBuffer
	env := servertest.Start(t, func(c *server.Config) {
		c.FlowPartitions = 1
		c.Scanners.Unblock = 50 * time.Millisecond
		c.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	})
	const parked = 700 // more than the park log's page (500)
	parkQuantum(t, env, parked)
	const series = `ff_executions{namespace="default",lane="default",state="blocked_route"}`
	before := scrape(t, env, "")[series]
	if before <= 500 {
		t.Fatalf("%v executions parked, want more than the park log's page (500)", before)
	}
	// Let the unblock scanner and the park log run for a while: nobody
	// can run quantum, so nothing leaves the blocked state.
	time.Sleep(2 * time.Second)
	if after := scrape(t, env, "")[series]; after != before {
		t.Fatalf("parked executions went from %v to %v", before, after)
	}
	if n := logs.count(`msg="execution no longer parked"`); n > 0 {
		t.Fatalf("%d \"execution no longer parked\" lines (and %d \"execution parked\" for %v parked executions), "+
			"though every execution is still parked", n, logs.count(`msg="execution parked"`), before)
	}
}

// spec/api.md, "Why is it not running?": `GET /v1/executions?state=blocked`
// lists the parked ones, and ListExecutions documents its pages as a live
// view in which executions "that move between indexes while paging may be
// missed or repeated". Parked executions that stay parked move between no
// indexes, and the unblock scanner, which looks at them every tick, does
// not reorder their index either: paging through them by position sees
// each exactly once.
func TestPagingParkedExecutionsSeesEachOnce(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t, func(c *server.Config) {
		c.FlowPartitions = 1
		c.Scanners.Unblock = 50 * time.Millisecond
	})
	ctx := ctxT(t)
	c := env.Client
	const parked = 400
	parkQuantum(t, env, parked)
	const series = `ff_executions{namespace="default",lane="default",state="blocked_route"}`
	if n := scrape(t, env, "")[series]; n != parked {
		t.Fatalf("%v executions parked, want %d", n, parked)
	}
	seen := map[string]int{}
	cursor := ""
	for {
		page, err := c.ListExecutions(ctx, client.ListOptions{State: "blocked", Limit: 50, Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		for _, ex := range page.Executions {
			seen[ex.ID]++
		}
		if cursor = page.NextCursor; cursor == "" {
			break
		}
		time.Sleep(150 * time.Millisecond) // an operator reading a page
	}
	repeated := 0
	for _, n := range seen {
		if n > 1 {
			repeated++
		}
	}
	if n := scrape(t, env, "")[series]; n != parked {
		t.Fatalf("%v executions parked after paging, want %d", n, parked)
	}
	if len(seen) != parked || repeated > 0 {
		t.Fatalf("paging through %d executions that stayed parked: saw %d distinct, %d of them more than once", parked, len(seen), repeated)
	}
}

// parkQuantum creates n executions requiring capability quantum, which the
// one connected worker (w1) lacks, and has that worker claim, which parks
// them (a claim parks up to max + 512 passed-over candidates).
func parkQuantum(t *testing.T, env *servertest.Env, n int) {
	t.Helper()
	ctx := ctxT(t)
	c := env.Client
	if _, err := c.Heartbeat(ctx, wire.WorkerHeartbeat{WorkerID: "w1", TTLMs: 120_000}); err != nil {
		t.Fatal(err)
	}
	reqs := make([]wire.CreateExecution, n)
	for i := range reqs {
		reqs[i] = wire.CreateExecution{Kind: "k", Requires: []string{"quantum"}}
	}
	if _, err := c.CreateExecutions(ctx, reqs); err != nil {
		t.Fatal(err)
	}
	if tasks, err := c.Claim(ctx, wire.ClaimRequest{WorkerID: "w1", Max: 100}); err != nil || len(tasks) != 0 {
		t.Fatalf("claim: %d tasks, %v", len(tasks), err)
	}
}
