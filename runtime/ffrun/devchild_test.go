package ffrun_test

import (
	"bufio"
	"context"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flowfabric/ff/runtime/devserver"
	"github.com/flowfabric/ff/runtime/ffrun"
	"github.com/flowfabric/ff/runtime/server"
)

// TestDevChildOnItsSocketOnly: the child of ffrun dev has no password, so
// it opens no TCP port another local user could reach: only its socket,
// which "dev valkey started" names with the command that opens a client
// on it.
func TestDevChildOnItsSocketOnly(t *testing.T) {
	r := start(t, []string{"dev", "--data", t.TempDir(), "--listen", "127.0.0.1:0"}, nil)
	network, address, err := server.ValkeyNetwork(r.valkey)
	if err != nil || network != "unix" {
		t.Fatalf("dev valkey address %q: want unix:PATH (%v)", r.valkey, err)
	}
	conn, err := net.DialTimeout(network, address, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := conn.Write([]byte("CONFIG GET port\r\n")); err != nil {
		t.Fatal(err)
	}
	rd := bufio.NewReader(conn)
	var reply []string
	for range 5 { // *2, $4, port, $N, N
		line, err := rd.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		reply = append(reply, strings.TrimSpace(line))
	}
	if reply[4] != "0" {
		t.Errorf("the dev child listens on TCP port %s: %q", reply[4], reply)
	}
	cli := regexp.MustCompile(`msg="dev valkey started".* cli="(\S+-cli) -s ([^"]+)"`).FindStringSubmatch(r.stderr.String())
	if cli == nil || cli[2] != address {
		t.Errorf("no valkey-cli command for the socket %s in the log:\n%s", address, r.stderr)
	}
}

// TestDevLoadTimeout: --valkey-load-timeout bounds how long the child
// may load its data at start (without it, a child making progress is
// waited for, whatever its size: runtime/devserver's tests).
func TestDevLoadTimeout(t *testing.T) {
	data := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	vk, err := devserver.Start(ctx, devserver.Config{Dir: data, SocketOnly: true, ExtraArgs: []string{"--enable-debug-command", "local"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, cmd := range []string{"DEBUG POPULATE 1000", "BGREWRITEAOF"} {
		send(t, vk.Socket, cmd)
	}
	for !strings.Contains(send(t, vk.Socket, "INFO persistence"), "aof_rewrite_in_progress:0") {
		time.Sleep(20 * time.Millisecond)
	}
	if err := vk.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	// The server, loading 1 ms a key: about a second.
	bin, err := devserver.FindBinary()
	if err != nil {
		t.Fatal(err)
	}
	slow := filepath.Join(t.TempDir(), "slow-server")
	script := "#!/bin/sh\nexec " + strconv.Quote(bin) + ` "$@" --key-load-delay 1000 --loading-process-events-interval-bytes 1024` + "\n"
	if err := os.WriteFile(slow, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	err = ffrun.Run(ctx, []string{"dev", "--data", data, "--listen", "127.0.0.1:0", "--valkey-bin", slow, "--valkey-load-timeout", "200ms"}, ffrun.Env{})
	if err == nil || !strings.Contains(err.Error(), "did not finish loading its data within 200ms") {
		t.Fatalf("ffrun dev --valkey-load-timeout 200ms on a data set that loads for a second: %v", err)
	}
}

// send sends an inline command to the server on socket and returns the
// first line of its reply, or the bulk string it answers.
func send(t *testing.T, socket, cmd string) string {
	t.Helper()
	conn, err := net.DialTimeout("unix", socket, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := conn.Write([]byte(cmd + "\r\n")); err != nil {
		t.Fatal(err)
	}
	rd := bufio.NewReader(conn)
	line, err := rd.ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	if strings.HasPrefix(line, "-") {
		t.Fatalf("%s: %s", cmd, line)
	}
	if n, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "$"))); strings.HasPrefix(line, "$") && err == nil {
		b := make([]byte, n)
		if _, err := io.ReadFull(rd, b); err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	return line
}
