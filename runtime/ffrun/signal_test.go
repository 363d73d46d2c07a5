package ffrun_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// TestSignalStopsDevChild runs ffrun dev as a real process, sends it
// SIGTERM, and checks that it exits cleanly and its Valkey child is gone.
func TestSignalStopsDevChild(t *testing.T) {
	cmd := exec.Command(os.Args[0], "dev", "--listen", "127.0.0.1:0", "--data", t.TempDir(), "--log-format", "json")
	cmd.Env = append(os.Environ(), "FFRUN_AS_MAIN=1")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
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
	childPid := 0
	deadline := time.After(20 * time.Second)
	for serving := false; !serving; {
		select {
		case m, ok := <-lines:
			if !ok {
				t.Fatal("ffrun exited before serving")
			}
			switch m["msg"] {
			case "dev valkey started":
				childPid = int(m["pid"].(float64))
			case "ffrun serving":
				serving = true
			}
		case <-deadline:
			t.Fatal("ffrun dev did not start")
		}
	}
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
	if err := syscall.Kill(childPid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("dev valkey (pid %d) still exists after ffrun stopped: %v", childPid, err)
	}
}
