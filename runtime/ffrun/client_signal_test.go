package ffrun_test

import (
	"bufio"
	"context"
	"errors"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/flowfabric/ff/compiler/plan"
	"github.com/flowfabric/ff/runtime/ffctl"
	"github.com/flowfabric/ff/runtime/server"
	"github.com/flowfabric/ff/runtime/server/servertest"
)

// TestClientCommandSignalExitStatus runs `ffrun watch` as a real process
// on a run that stays running and stops it with each signal: a shell
// reports a command a signal stopped as 128 + the signal's number, and a
// script tells ctrl-C (SIGINT, 130) from a supervisor's stop (SIGTERM,
// 143). Both exited 130: the context of Main ended without saying which
// signal ended it.
func TestClientCommandSignalExitStatus(t *testing.T) {
	env := servertest.Start(t, func(c *server.Config) { c.DisableScanners = true })
	flow := &plan.Flow{Schema: plan.SchemaVersion, Name: "held", Namespace: "default", Lane: "default", Result: "s",
		Execs: []plan.Exec{{Name: "s", Kind: "held.s", Lane: "default", Priority: plan.PriorityDefault, InputFrom: plan.InputNone,
			Join: plan.Join{Kind: plan.JoinAll}, Retry: plan.Retry{Attempts: 1, Backoff: plan.BackoffFixed}}}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	run, err := env.Client.StageFlow(ctx, flow, nil) // no worker: it stays running
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		sig  syscall.Signal
		want int
	}{{syscall.SIGINT, ffctl.ExitInterrupted}, {syscall.SIGTERM, ffctl.ExitTerminated}} {
		cmd := exec.Command(os.Args[0], "watch", run.ID, "--server", env.URL)
		cmd.Env = append(os.Environ(), "FFRUN_AS_MAIN=1", "FF_API_TOKEN="+env.Config.Token)
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill() })
		// Once it printed the members, it has its signal handlers.
		if !bufio.NewScanner(stdout).Scan() {
			t.Fatalf("ffrun watch printed nothing")
		}
		if err := cmd.Process.Signal(c.sig); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		select {
		case err = <-exited:
		case <-ctx.Done():
			t.Fatalf("ffrun watch still runs after %v", c.sig)
		}
		code := 0
		if ee, ok := errors.AsType[*exec.ExitError](err); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		if code != c.want {
			t.Errorf("ffrun watch stopped by %v: exit %d, want %d", c.sig, code, c.want)
		}
	}
}
