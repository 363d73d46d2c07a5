package ffctl_test

import (
	"bytes"
	"context"
	"net"
	"testing"

	"github.com/flowfabric/ff/runtime/ffctl"
)

// "--" given as a flag's value (--reason -- RUN --json: the flag package
// takes it as the value, as getopt does) is not the end of the flags: a
// flag after it is still a flag.
func TestDashDashAsFlagValue(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens: a request is refused (exit 1), usage is 2
	var stderr bytes.Buffer
	code := ffctl.Main(context.Background(), "cancel", []string{"--reason", "--", "run1", "--json", "--server", "http://" + addr},
		ffctl.Env{Stderr: &stderr})
	if code == ffctl.ExitUsage {
		t.Fatalf("cancel --reason -- RUN --json = usage error, want the request made: %s", stderr.String())
	}
}

// After --, every argument is an operand: the second, spelled as a flag,
// too (a usage error here: get takes one).
func TestDashDashTwoOperands(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	var stderr bytes.Buffer
	code := ffctl.Main(context.Background(), "get", []string{"--server", "http://" + addr, "--", "run1", "--json"}, ffctl.Env{Stderr: &stderr})
	if code != ffctl.ExitUsage || !bytes.Contains(stderr.Bytes(), []byte("got 2 operand(s): run1 --json")) {
		t.Fatalf("get -- RUN --json = %d %q, want a usage error naming both operands", code, stderr.String())
	}
}
