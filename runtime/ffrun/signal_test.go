package ffrun_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/flowfabric/ff/runtime/internal/valkeytest"
)

// startProcess runs this test binary as ffrun with args (adding
// --log-format json) in a process of its own, killed when the test ends,
// and returns it and its log lines, decoded; the channel closes when the
// process closes its stderr.
func startProcess(t *testing.T, args ...string) (*exec.Cmd, <-chan map[string]any) {
	t.Helper()
	cmd := exec.Command(os.Args[0], append(args, "--log-format", "json")...)
	cmd.Env = append(os.Environ(), "FFRUN_AS_MAIN=1")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	lines := make(chan map[string]any, 64)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			var m map[string]any
			if json.Unmarshal(sc.Bytes(), &m) == nil {
				lines <- m
			}
		}
		close(lines)
	}()
	return cmd, lines
}

// awaitLog returns the first line of lines whose message is msg, passing
// over the others; it fails after 20 s or when the process ended.
func awaitLog(t *testing.T, lines <-chan map[string]any, msg string) map[string]any {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		select {
		case m, ok := <-lines:
			if !ok {
				t.Fatalf("ffrun exited before logging %q", msg)
			}
			if m["msg"] == msg {
				return m
			}
		case <-deadline:
			t.Fatalf("ffrun did not log %q", msg)
		}
	}
}

// TestSignalStopsDevChild runs ffrun dev as a real process, sends it
// SIGTERM, and checks that it exits cleanly and its Valkey child is gone.
func TestSignalStopsDevChild(t *testing.T) {
	cmd, lines := startProcess(t, "dev", "--listen", "127.0.0.1:0", "--data", t.TempDir())
	childPid, _ := awaitLog(t, lines, "dev valkey started")["pid"].(float64)
	awaitLog(t, lines, "ffrun serving")
	if childPid == 0 {
		t.Fatal("no pid logged for the dev valkey")
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	stopped := false
	for m := range lines { // until ffrun closes stderr
		stopped = stopped || m["msg"] == "dev valkey stopped"
	}
	if !stopped {
		t.Error(`ffrun did not log "dev valkey stopped"`)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("ffrun after SIGTERM: %v", err)
	}
	if err := syscall.Kill(int(childPid), 0); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("dev valkey (pid %d) still exists after ffrun stopped: %v", int(childPid), err)
	}
}

// TestSecondSignalKills: a shutdown waiting for an in-flight request (here
// a body that never finishes, with a long --shutdown-timeout) ends at once
// on a second signal.
func TestSecondSignalKills(t *testing.T) {
	addr := valkeytest.Start(t)
	cmd, lines := startProcess(t, "serve", "--valkey", addr, "--listen", "127.0.0.1:0", "--shutdown-timeout", "1m")
	listen, _ := awaitLog(t, lines, "ffrun serving")["listen"].(string)
	conn, err := net.Dial("tcp", listen)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// Half a body: the create handler waits for the rest.
	if _, err := fmt.Fprintf(conn, "POST /v1/executions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"kind\":"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond) // let the request reach the handler
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	awaitLog(t, lines, "ffrun shutting down")
	time.Sleep(200 * time.Millisecond) // the first signal's handling is undone
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGTERM {
			t.Fatalf("after a second SIGTERM: %v, want death by SIGTERM", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("ffrun still runs 10 s after a second SIGTERM")
	}
}

// TestDevChildCrashExitsNonZero: when the Valkey child of ffrun dev dies on
// its own (the OOM killer, say), ffrun stops, and exits with status 1: no
// clean shutdown, which a supervisor that restarts on failure, or a
// script, must see.
func TestDevChildCrashExitsNonZero(t *testing.T) {
	cmd, lines := startProcess(t, "dev", "--listen", "127.0.0.1:0", "--data", t.TempDir())
	childPid, _ := awaitLog(t, lines, "dev valkey started")["pid"].(float64)
	awaitLog(t, lines, "ffrun serving")
	if childPid == 0 {
		t.Fatal("no pid logged for the dev valkey")
	}
	if err := syscall.Kill(int(childPid), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	awaitLog(t, lines, "dev valkey exited unexpectedly; stopping")
	for range lines { // until ffrun closes stderr
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 {
			t.Fatalf("ffrun dev after its Valkey child was killed: %v; want exit status 1", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("ffrun dev still runs 20 s after its Valkey child was killed")
	}
}
