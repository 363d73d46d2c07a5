package server_test

import (
	"encoding/json"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flowfabric/ff/runtime/internal/valkeytest"
	"github.com/flowfabric/ff/runtime/server"
	"github.com/flowfabric/ff/runtime/server/servertest"
	"github.com/flowfabric/ff/runtime/wire"
)

// TestBatchItemOutageLogsOncePerBatch: with one node of a Valkey Cluster
// down, a batch of completions is answered item by item: those on the
// nodes that answer are recorded, those on the node that is down answer
// 503 unavailable. The failed items are logged in one line for the batch
// (how many, the first error), at warn level as the first of an outage
// (the next batches of the outage at debug level: package outage); never
// a line per item, nor at error level.
func TestBatchItemOutageLogsOncePerBatch(t *testing.T) {
	t.Parallel()
	addrs := valkeytest.StartCluster(t, 2)
	logs := &logBuffer{t: t}
	env := servertest.Start(t, func(c *server.Config) {
		c.ValkeyAddr, c.KeyPrefix = addrs[0], "batchitems:"
		c.DisableScanners = true
		c.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	ctx := ctxT(t)
	// Idempotency keys spread the executions over the partitions, so
	// over both nodes (without, a batch goes to one partition).
	const n = 40
	creates := make([]wire.CreateExecution, n)
	for i := range creates {
		creates[i] = wire.CreateExecution{Kind: "k", IdempotencyKey: "item-" + strconv.Itoa(i)}
	}
	if _, err := env.Client.CreateExecutions(ctx, creates); err != nil {
		t.Fatal(err)
	}
	var leases []wire.Lease
	for len(leases) < n {
		tasks, err := env.Client.Claim(ctx, wire.ClaimRequest{WorkerID: "w", Max: n - len(leases), WaitMs: 1000})
		if err != nil {
			t.Fatal(err)
		}
		for _, tk := range tasks {
			leases = append(leases, leaseOf(tk))
		}
	}
	// The second node goes away.
	conn, err := net.DialTimeout("tcp", addrs[1], time.Second)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = conn.Write([]byte("SHUTDOWN NOSAVE\r\n"))
	_, _ = conn.Read(make([]byte, 64)) // the connection closes as the node exits
	conn.Close()

	complete := func(leases []wire.Lease) (failed []wire.Lease) {
		t.Helper()
		cs := make([]wire.Completion, len(leases))
		for i, l := range leases {
			cs[i] = wire.Completion{Lease: l, Output: json.RawMessage(`1`)}
		}
		res, err := env.Client.Complete(ctx, wire.CompleteRequest{WorkerID: "w", Completions: cs})
		if err != nil {
			t.Fatalf("complete: %v", err)
		}
		for i, r := range res {
			switch {
			case r.OK:
			case r.Error != nil && r.Error.Code == wire.CodeUnavailable:
				failed = append(failed, leases[i])
			default:
				t.Fatalf("completion %d: %+v", i, r)
			}
		}
		return failed
	}
	mark := len(logs.String())
	failed := complete(leases)
	if len(failed) == 0 || len(failed) == n {
		t.Fatalf("%d of %d completions failed with a node down: want some on each node", len(failed), n)
	}
	var warn, debug, other int
	for line := range strings.Lines(logs.String()[mark:]) {
		if !strings.Contains(line, `msg="finish: `) && !strings.Contains(line, `msg="finish failed"`) {
			continue
		}
		switch {
		case strings.Contains(line, "level=WARN") && strings.Contains(line, "items="):
			warn++
		case strings.Contains(line, "level=DEBUG") && strings.Contains(line, "items="):
			debug++
		default:
			other++
		}
	}
	if warn != 1 || debug != 0 || other != 0 {
		t.Errorf("%d failed items of a batch logged in %d lines at warn level, %d at debug level and %d others; want one warn line",
			len(failed), warn, debug, other)
	}
}
