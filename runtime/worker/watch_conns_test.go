package worker_test

import (
	"context"
	"encoding/json"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flowfabric/ff/runtime/server/servertest"
	"github.com/flowfabric/ff/runtime/wire"
	"github.com/flowfabric/ff/runtime/worker"
)

// listenWrapped listens on a loopback port and passes each connection it
// accepts through wrap, which may record, count or replace it: the faulty
// or watched network of a test (servertest.StartOn serves on it).
func listenWrapped(t *testing.T, wrap func(net.Conn) net.Conn) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return wrappedListener{Listener: ln, wrap: wrap}
}

type wrappedListener struct {
	net.Listener
	wrap func(net.Conn) net.Conn
}

func (l wrappedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return l.wrap(c), nil
}

// A worker whose leases come one after another widens its lease watch
// each time (a new request naming its instance), and the server answers
// the request it replaces: the worker's connections are reused, where
// cancelling each replaced request closed its HTTP/1.1 connection (one
// new connection per restart).
func TestLeaseWatchRestartsKeepConnections(t *testing.T) {
	t.Parallel()
	var accepted atomic.Int64
	env := servertest.StartOn(t, listenWrapped(t, func(c net.Conn) net.Conn {
		accepted.Add(1)
		return c
	}))
	const tasks = 8
	started, release := make(chan string, tasks), make(chan struct{})
	env.RunWorker(t, worker.Config{Name: "widening", Concurrency: tasks, LeaseTTL: 30 * time.Minute, RenewInterval: 10 * time.Minute},
		map[string]worker.Handler{"hold": func(ctx context.Context, tk *worker.Task) (json.RawMessage, error) {
			started <- tk.ID()
			select {
			case <-release:
			case <-ctx.Done():
			}
			return nil, nil
		}})
	ctx := ctxT(t)
	for range tasks {
		if _, _, err := env.Client.CreateExecution(ctx, wire.CreateExecution{Kind: "hold"}); err != nil {
			t.Fatal(err)
		}
		<-started
		// The watch covers a lease held for 100 ms: by then a new request
		// replaced the one in flight.
		time.Sleep(250 * time.Millisecond)
	}
	got := accepted.Load()
	close(release)
	// The test's own client takes a connection, the worker one per request
	// it has in flight at once (a claim, the watch and its replacement);
	// each restart that closed its connection took one more.
	t.Logf("%d connections accepted", got)
	if got > tasks/2 {
		t.Fatalf("%d connections accepted for a worker whose watch restarted %d times, want at most %d", got, tasks-1, tasks/2)
	}
}
