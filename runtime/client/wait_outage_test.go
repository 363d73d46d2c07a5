package client_test

import (
	"context"
	"encoding/json"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flowfabric/ff/compiler/plan"
	"github.com/flowfabric/ff/runtime/client"
	"github.com/flowfabric/ff/runtime/devserver"
	"github.com/flowfabric/ff/runtime/server"
	"github.com/flowfabric/ff/runtime/server/servertest"
	"github.com/flowfabric/ff/runtime/wire"
)

// oneExec is a flow of one exec, kind "one.s".
func oneExec() *plan.Flow {
	return &plan.Flow{Schema: plan.SchemaVersion, Name: "one", Namespace: "default", Lane: "default", Result: "s",
		Execs: []plan.Exec{{Name: "s", Kind: "one.s", Lane: "default", Priority: plan.PriorityDefault, InputFrom: plan.InputNone,
			Join: plan.Join{Kind: plan.JoinAll}, Retry: plan.Retry{Attempts: 1, Backoff: plan.BackoffFixed}}}}
}

// Run.Wait rides out a Valkey restart (with its append-only file: nothing
// is lost) while it waits for a run: away for a second, the parked
// request rides it out; away for 7 s, longer than ffrun retries a read,
// ffrun answers 503 unavailable and Wait asks again with a backoff (it
// returned the 503, and Stage<Flow>(...).Result failed for a run that
// succeeded a moment later).
func TestRunWaitRidesOutValkeyRestart(t *testing.T) {
	for _, away := range []time.Duration{time.Second, 7 * time.Second} {
		t.Run(away.String(), func(t *testing.T) { runWaitAcrossValkeyRestart(t, away) })
	}
}

func runWaitAcrossValkeyRestart(t *testing.T, away time.Duration) {
	dir := t.TempDir()
	vk, err := devserver.Start(context.Background(), devserver.Config{Dir: dir}) // append-only file on
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = vk.Stop(context.Background())
		}
	})
	_, portS, _ := net.SplitHostPort(vk.Addr)
	port, _ := strconv.Atoi(portS)
	env := servertest.Start(t, func(c *server.Config) {
		c.ValkeyAddr, c.KeyPrefix = vk.Addr, "wait:"
		c.DisableScanners = true
		c.RunPoll = 200 * time.Millisecond
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	run, err := env.Client.StageFlow(ctx, oneExec(), nil)
	if err != nil {
		t.Fatal(err)
	}
	type answer struct {
		run *wire.FlowRun
		err error
		at  time.Time
	}
	waited := make(chan answer, 1)
	go func() {
		r, err := run.Wait(ctx)
		waited <- answer{r, err, time.Now()}
	}()
	time.Sleep(300 * time.Millisecond)

	if err := vk.Stop(context.Background()); err != nil { // SIGTERM: the append-only file is flushed
		t.Fatal(err)
	}
	stopped = true
	time.Sleep(away)
	vk2, err := devserver.Start(context.Background(), devserver.Config{Dir: dir, Port: port})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = vk2.Stop(context.Background()) })
	back := time.Now()

	// The run is intact: a worker claims and completes its exec.
	var task wire.Task
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		tasks, err := env.Client.Claim(ctx, wire.ClaimRequest{WorkerID: "w", Kinds: []string{"one.s"}, WaitMs: 1000})
		if err == nil && len(tasks) == 1 {
			task = tasks[0]
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no claim of the run's exec after the restart: %v", err)
		}
	}
	lease := wire.Lease{ExecutionID: task.ExecutionID, LeaseID: task.LeaseID, Epoch: task.Epoch}
	// As a worker does, the completion is sent again while it is answered
	// 503: the first command on a connection the restart broke fails
	// (EOF), and ffrun does not send a write again on its own.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		_, err := env.Client.CompleteOne(ctx, lease, json.RawMessage(`"ok"`))
		if err == nil {
			break
		}
		if !client.IsCode(err, wire.CodeUnavailable) || time.Now().After(deadline) {
			t.Fatal(err)
		}
	}
	a := <-waited
	if a.err != nil {
		t.Fatalf("Run.Wait returned %v (%s after Valkey came back) for a run that then succeeded", a.err, a.at.Sub(back).Round(time.Millisecond))
	}
	if a.run.State != wire.RunSucceeded {
		t.Fatalf("Run.Wait = %+v", a.run)
	}
}

// Run.Wait rides out an ffrun restart (a rolling deploy: SIGTERM, a new
// process on the same address a moment later, the run intact in Valkey):
// the connection refused meanwhile is asked again with a backoff (Wait
// returned it, and Stage<Flow>(...).Result failed for a run that then
// succeeded).
func TestRunWaitRidesOutFfrunRestart(t *testing.T) {
	a := servertest.Start(t, func(c *server.Config) { c.DisableScanners = true })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	run, err := a.Client.StageFlow(ctx, oneExec(), nil)
	if err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() {
		r, err := run.Wait(ctx)
		if err == nil && r.State != wire.RunSucceeded {
			t.Errorf("Run.Wait = %+v", r)
		}
		waited <- err
	}()
	time.Sleep(300 * time.Millisecond)
	if err := a.Stop(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)

	// The new process, on the same address.
	cfg := a.Config
	srv, err := server.Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", strings.TrimPrefix(a.URL, "http://"))
	if err != nil {
		srv.Close()
		t.Fatal(err)
	}
	sctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(sctx, ln) }()
	t.Cleanup(func() { stop(); <-served })

	tasks, err := a.Client.Claim(ctx, wire.ClaimRequest{WorkerID: "w", Kinds: []string{"one.s"}, WaitMs: 2000})
	if err != nil || len(tasks) != 1 {
		t.Fatalf("claim on the new process: %+v, %v", tasks, err)
	}
	task := tasks[0]
	lease := wire.Lease{ExecutionID: task.ExecutionID, LeaseID: task.LeaseID, Epoch: task.Epoch}
	if _, err := a.Client.CompleteOne(ctx, lease, json.RawMessage(`"ok"`)); err != nil {
		t.Fatal(err)
	}
	if err := <-waited; err != nil {
		t.Fatalf("Run.Wait across an ffrun restart returned %v for a run that then succeeded", err)
	}
}
