package ffrun_test

import (
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/flowfabric/ff/runtime/devserver"
)

// TestDevShutdownBoundsItsChildStop: --shutdown-timeout bounds the whole
// shutdown of ffrun dev, the stop of its Valkey child included. Here the
// child hangs (stopped with SIGSTOP: it does not act on the SIGTERM that
// asks it to stop) and the bound is 2 s: the child is killed when the
// bound runs out (its stop's context ended), not after the child's own
// 10 s stop timeout, which came after the bound and so stretched the
// shutdown past it.
func TestDevShutdownBoundsItsChildStop(t *testing.T) {
	cmd, lines := startProcess(t, "dev", "--listen", "127.0.0.1:0", "--data", t.TempDir(), "--shutdown-timeout", "2s")
	childPid, _ := awaitLog(t, lines, "dev valkey started")["pid"].(float64)
	awaitLog(t, lines, "ffrun serving")
	if childPid == 0 {
		t.Fatal("no pid logged for the dev valkey")
	}
	pid := int(childPid)
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	signalled := time.Now()
	var stopErr string
	for m := range lines { // until ffrun closes stderr
		if m["msg"] == "stop dev valkey" {
			stopErr, _ = m["error"].(string)
		}
	}
	took := time.Since(signalled)
	_ = cmd.Wait()
	if !strings.Contains(stopErr, "context deadline exceeded") {
		t.Errorf(`"stop dev valkey" logged error %q; want the child killed when the shutdown's bound ran out (its stop's context ended)`, stopErr)
	}
	if took >= devserver.StopTimeoutDefault {
		t.Errorf("ffrun dev took %s to stop with a hung child and --shutdown-timeout 2s; the bound is 2 s and a second", took.Round(time.Millisecond))
	}
}
