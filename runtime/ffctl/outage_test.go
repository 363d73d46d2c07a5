package ffctl_test

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flowfabric/ff/runtime/wire"
)

// flakyProxy forwards TCP connections to a server and can be taken down
// (listener closed, open connections cut: what a client sees while ffrun
// dev is restarted) and brought back on the same address.
type flakyProxy struct {
	t        *testing.T
	addr     string
	target   string
	mu       sync.Mutex
	ln       net.Listener
	conns    []net.Conn
	accepted chan struct{}
}

func newFlakyProxy(t *testing.T, target string) *flakyProxy {
	p := &flakyProxy{t: t, target: target, accepted: make(chan struct{}, 64)}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.addr = ln.Addr().String()
	p.serve(ln)
	t.Cleanup(p.down)
	return p
}

func (p *flakyProxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", p.target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, s)
			p.mu.Unlock()
			select {
			case p.accepted <- struct{}{}:
			default:
			}
			go func() { _, _ = io.Copy(s, c); s.Close() }()
			go func() { _, _ = io.Copy(c, s); c.Close() }()
		}
	}()
}

// down closes the listener and cuts every open connection.
func (p *flakyProxy) down() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// up listens again on the same address.
func (p *flakyProxy) up() {
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		p.t.Fatal(err)
	}
	p.serve(ln)
}

// restartDuring runs the client command args against e's server through
// a proxy, cuts the proxy for a second once the command has connected (an
// ffrun dev restart), then completes both members of the run of greet
// that the test staged and returns the command's outcome.
func restartDuring(t *testing.T, e *env, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	u, err := url.Parse(e.srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	p := newFlakyProxy(t, u.Host)
	done := make(chan result, 1)
	go func() {
		done <- runWith(t, map[string]string{"FF_SERVER": "http://" + p.addr, "FF_API_TOKEN": e.token}, "", args[0], args[1:]...)
	}()
	select {
	case <-p.accepted: // a request is in flight
	case <-ctx.Done():
		t.Fatalf("ffrun %s never connected", strings.Join(args, " "))
	}
	time.Sleep(100 * time.Millisecond)
	p.down()
	time.Sleep(time.Second)
	p.up()
	// The run ends after the outage: both members complete.
	for _, out := range []string{`{"who":"hello ada"}`, `{"who":"HELLO ADA"}`} {
		tasks, err := e.srv.Client.Claim(ctx, wire.ClaimRequest{WorkerID: "w", WaitMs: 2000})
		if err != nil || len(tasks) != 1 {
			t.Fatalf("claim: %+v %v", tasks, err)
		}
		l := wire.Lease{ExecutionID: tasks[0].ExecutionID, LeaseID: tasks[0].LeaseID, Epoch: tasks[0].Epoch}
		if _, err := e.srv.Client.CompleteOne(ctx, l, json.RawMessage(out)); err != nil {
			t.Fatal(err)
		}
	}
	return <-done
}

// TestResultWaitRidesOutRestart: `ffrun result RUN --wait 30s` (and
// watch, start --watch, replay --watch) stopped with exit 1 ("cannot
// reach ffrun at …") at the first failed request when the server was
// restarted meanwhile, the everyday move with ffrun dev, although the run
// went on; the Go client's Run.Wait rides such an outage out
// (client.WaitOutageMax). The commands that wait now do too, saying so
// once on stderr, and print the result once the run ends; here the
// server's address is unreachable for one second in a 30 s wait.
func TestResultWaitRidesOutRestart(t *testing.T) {
	t.Parallel()
	e := start(t, false)
	run, err := e.srv.Client.StageTemplate(context.Background(), "greet", name{"ada"})
	if err != nil {
		t.Fatal(err)
	}
	r := restartDuring(t, e, "result", run.ID, "--wait", "30s")
	if r.code != 0 || !strings.Contains(r.stdout, "HELLO ADA") || strings.Count(r.stderr, "ffrun unreachable, retrying...\n") != 1 {
		t.Errorf("ffrun result --wait 30s across a 1 s outage = exit %d, stdout %q, stderr %q; want exit 0, the run's result and one note of the outage",
			r.code, r.stdout, strings.TrimSpace(r.stderr))
	}
}

// TestWatchRidesOutRestart: ffrun watch follows a run across a restart
// of the server as ffrun result --wait does.
func TestWatchRidesOutRestart(t *testing.T) {
	t.Parallel()
	e := start(t, false)
	run, err := e.srv.Client.StageTemplate(context.Background(), "greet", name{"ada"})
	if err != nil {
		t.Fatal(err)
	}
	r := restartDuring(t, e, "watch", run.ID)
	if r.code != 0 || !strings.Contains(r.stdout, "run succeeded") || !strings.Contains(r.stdout, "HELLO ADA") ||
		strings.Count(r.stderr, "ffrun unreachable, retrying...\n") != 1 {
		t.Errorf("ffrun watch across a 1 s outage = exit %d, stdout %q, stderr %q; want exit 0, the run followed to its result and one note of the outage",
			r.code, r.stdout, strings.TrimSpace(r.stderr))
	}
}
