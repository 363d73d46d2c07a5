package ffrun_test

import (
	"bytes"
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flowfabric/ff/runtime/client"
	"github.com/flowfabric/ff/runtime/ffrun"
	"github.com/flowfabric/ff/runtime/internal/valkeytest"
	"github.com/flowfabric/ff/runtime/server"
	"github.com/flowfabric/ff/runtime/server/servertest"
	"github.com/flowfabric/ff/runtime/wire"
)

type running struct {
	api, valkey string
	stop        func() error
	stderr      *servertest.LogBuffer
}

// start runs ffrun with args until stop is called.
func start(t *testing.T, args []string, env map[string]string) *running {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	listening := make(chan [2]string, 1)
	stderr := &servertest.LogBuffer{}
	done := make(chan error, 1)
	go func() {
		done <- ffrun.Run(ctx, args, ffrun.Env{
			Stderr:   stderr,
			Getenv:   func(k string) string { return env[k] },
			OnListen: func(api, vk string) { listening <- [2]string{api, vk} },
		})
	}()
	r := &running{stderr: stderr}
	select {
	case a := <-listening:
		r.api, r.valkey = a[0], a[1]
	case err := <-done:
		cancel()
		t.Fatalf("ffrun %v exited at start: %v\n%s", args, err, stderr)
	case <-time.After(20 * time.Second):
		cancel()
		t.Fatalf("ffrun %v did not start\n%s", args, stderr)
	}
	var once sync.Once
	var err error
	r.stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case err = <-done:
			case <-time.After(20 * time.Second):
				err = errors.New("ffrun did not stop")
			}
		})
		return err
	}
	t.Cleanup(func() { _ = r.stop() })
	return r
}

func TestDevStartsServesAndStopsItsChild(t *testing.T) {
	data := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r := start(t, []string{"dev", "--data", data}, map[string]string{"FF_LISTEN": "127.0.0.1:0", "FF_API_TOKEN": "dev-token-0123456789"})
	c, err := client.New("http://"+r.api, client.WithToken("dev-token-0123456789"))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Ready(ctx); err != nil {
		t.Fatalf("ready: %v", err)
	}
	ex, _, err := c.CreateExecution(ctx, wire.CreateExecution{Kind: "k", IdempotencyKey: "persist-me"})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.stop(); err != nil {
		t.Fatalf("ffrun dev returned %v\n%s", err, r.stderr)
	}
	// ffrun talks to its child over the child's Unix socket.
	network, address, err := server.ValkeyNetwork(r.valkey)
	if err != nil || network != "unix" {
		t.Fatalf("dev valkey address %q: want unix:PATH (%v)", r.valkey, err)
	}
	if _, err := net.DialTimeout(network, address, 200*time.Millisecond); err == nil {
		t.Fatalf("the dev child at %s still listens after ffrun stopped", r.valkey)
	}
	if strings.Contains(r.stderr.String(), "ANYONE") {
		t.Fatal("warned about a missing token although one was set")
	}

	// A second run on the same data directory finds the execution again.
	r2 := start(t, []string{"dev", "--data", data, "--listen", "127.0.0.1:0"}, nil)
	c2, _ := client.New("http://" + r2.api)
	got, err := c2.GetExecution(ctx, ex.ID)
	if err != nil {
		t.Fatalf("after restart: %v\n%s", err, r2.stderr)
	}
	if got.ID != ex.ID || got.State != "waiting" {
		t.Fatalf("after restart: %+v", got)
	}
	if !strings.Contains(r2.stderr.String(), "ANYONE") {
		t.Errorf("no warning about the missing token:\n%s", r2.stderr)
	}
	// A third ffrun dev on the same data directory while r2 runs is
	// refused at once, and r2 keeps serving.
	var out bytes.Buffer
	if code := ffrun.Main([]string{"dev", "--data", data, "--listen", "127.0.0.1:0"}, nil, &out, &out); code != 1 ||
		!strings.Contains(out.String(), "is in use by another ffrun dev") {
		t.Fatalf("second ffrun dev on %s: exit %d\n%s", data, code, out.String())
	}
	if _, err := c2.GetExecution(ctx, ex.ID); err != nil {
		t.Fatalf("after a refused second dev: %v", err)
	}
	if err := r2.stop(); err != nil {
		t.Fatal(err)
	}
}

func TestServeAgainstDevChild(t *testing.T) {
	// ffrun serve against the Valkey of a running ffrun dev.
	dev := start(t, []string{"dev", "--data", t.TempDir(), "--listen", "127.0.0.1:0"}, nil)
	srv := start(t, []string{"serve", "--listen", "127.0.0.1:0"}, map[string]string{"FF_VALKEY_ADDR": dev.valkey})
	if srv.valkey != dev.valkey {
		t.Fatalf("serve uses %s, want %s", srv.valkey, dev.valkey)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	a, _ := client.New("http://" + dev.api)
	b, _ := client.New("http://" + srv.api)
	ex, _, err := a.CreateExecution(ctx, wire.CreateExecution{Kind: "k"})
	if err != nil {
		t.Fatal(err)
	}
	tasks, err := b.Claim(ctx, wire.ClaimRequest{WorkerID: "w", WaitMs: 2000})
	if err != nil || len(tasks) != 1 || tasks[0].ExecutionID != ex.ID {
		t.Fatalf("claim through the second process: %+v %v", tasks, err)
	}
	if err := srv.stop(); err != nil {
		t.Fatal(err)
	}
}

func TestUsageErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"no command", nil, nil, "missing command"},
		{"unknown command", []string{"frobnicate"}, nil, `unknown command "frobnicate"`},
		{"serve without valkey", []string{"serve"}, nil, "--valkey"},
		{"unknown flag", []string{"serve", "--valkey", "x:1", "--nope"}, nil, "nope"},
		{"bad env duration", []string{"serve", "--valkey", "x:1"}, map[string]string{"FF_LEASE": "forever"}, "FF_LEASE"},
		{"bad log level", []string{"serve", "--valkey", "x:1", "--log-level", "loud"}, nil, "log level"},
		{"extra args", []string{"dev", "extra"}, nil, "unexpected arguments"},
		// Refused before any connection: 127.0.0.1:1 would fail to dial.
		{"lease too short", []string{"serve", "--valkey", "127.0.0.1:1", "--lease", "10ms"}, nil, "--lease 10ms is outside"},
		{"lease too long in env", []string{"serve", "--valkey", "127.0.0.1:1"}, map[string]string{"FF_LEASE": "1000h"}, "--lease 1000h0m0s is outside"},
		{"negative body limit", []string{"serve", "--valkey", "127.0.0.1:1", "--body-limit", "-1"}, nil, "--body-limit -1 is outside"},
		{"body limit too large", []string{"dev", "--body-limit", "1000000000"}, nil, "--body-limit 1000000000 is outside"},
		{"valkey without port", []string{"serve", "--valkey", "localhost"}, nil, `--valkey "localhost": want host:port or unix:PATH`},
		{"valkey socket without path", []string{"serve"}, map[string]string{"FF_VALKEY_ADDR": "unix:"}, `--valkey "unix:": no socket path`},
		{"valkey without port number", []string{"serve", "--valkey", "127.0.0.1:"}, nil, "no port after the colon"},
		{"valkey URL", []string{"serve", "--valkey", "redis://127.0.0.1:6379"}, nil, "not a redis:// URL"},
		{"negative partitions", []string{"serve", "--valkey", "127.0.0.1:1", "--partitions", "-1"}, nil, "--partitions -1 is outside 0..16384"},
		{"too many partitions in env", []string{"dev"}, map[string]string{"FF_PARTITIONS": "20000"}, "--partitions 20000 is outside"},
		{"valkey user without password", []string{"serve", "--valkey", "127.0.0.1:1"}, map[string]string{"FF_VALKEY_USERNAME": "ff"}, "FF_VALKEY_USERNAME is set without FF_VALKEY_PASSWORD"},
		{"listen without colon", []string{"serve", "--valkey", "127.0.0.1:1", "--listen", "8080"}, nil, `--listen "8080": want [host]:port`},
		{"key prefix with braces", []string{"serve", "--valkey", "127.0.0.1:1", "--key-prefix", "a{b}"}, nil, `--key-prefix "a{b}" must not contain braces`},
		{"negative load timeout", []string{"dev", "--valkey-load-timeout", "-1s"}, nil, "--valkey-load-timeout -1s is negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stderr bytes.Buffer
			err := ffrun.Run(context.Background(), tt.args, ffrun.Env{Stderr: &stderr, Getenv: func(k string) string { return tt.env[k] }})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err %v, want one mentioning %q", err, tt.want)
			}
		})
	}
	var out bytes.Buffer
	if code := ffrun.Main([]string{"help"}, nil, &out, &out); code != 0 || !strings.Contains(out.String(), "ffrun dev") {
		t.Fatalf("help: exit %d, output %q", code, out.String())
	}
	out.Reset()
	if code := ffrun.Main([]string{"serve"}, nil, &out, &out); code != 2 {
		t.Fatalf("serve without valkey: exit %d, want 2 (%s)", code, out.String())
	}
	out.Reset()
	if code := ffrun.Main([]string{"serve", "--valkey", "127.0.0.1:1", "--lease", "10ms"}, nil, &out, &out); code != 2 {
		t.Fatalf("serve --lease 10ms: exit %d, want 2 (%s)", code, out.String())
	}
	out.Reset()
	if code := ffrun.Main([]string{"serve", "--valkey", "127.0.0.1:1", "--partitions", "-1"}, nil, &out, &out); code != 2 {
		t.Fatalf("serve --partitions -1: exit %d, want 2 (%s)", code, out.String())
	}
	out.Reset()
	if code := ffrun.Main([]string{"serve", "--valkey", "localhost"}, nil, &out, &out); code != 2 {
		t.Fatalf("serve --valkey localhost: exit %d, want 2 (%s)", code, out.String())
	}
	// A client command's exit status is ffrun's, said once.
	out.Reset()
	if code := ffrun.Main([]string{"get"}, nil, &out, &out); code != 2 || strings.Contains(out.String(), "exit status") ||
		strings.Count(out.String(), "ffrun get: usage: ") != 1 {
		t.Fatalf("get without a run: exit %d, want 2 (%s)", code, out.String())
	}
	out.Reset()
	if code := ffrun.Main([]string{"get", "0.x", "--server", "http://127.0.0.1:1"}, nil, &out, &out); code != 1 || strings.Contains(out.String(), "exit status") {
		t.Fatalf("get against no server: exit %d, want 1 (%s)", code, out.String())
	}
}

// TestDevServesFlowTemplates: ffrun dev --flows DIR serves the flows of DIR
// by name.
func TestDevServesFlowTemplates(t *testing.T) {
	// FF_VALKEY_TLS=false, as an environment file shared with serve may
	// hold, is no TLS option for dev to refuse.
	r := start(t, []string{"dev", "--data", t.TempDir(), "--listen", "127.0.0.1:0", "--flows", "../../examples/flows"},
		map[string]string{"FF_VALKEY_TLS": "false"})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, _ := client.New("http://" + r.api)
	list, err := c.Templates(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tp := range list {
		names = append(names, tp.Name)
	}
	if strings.Join(names, ",") != "ask,fulfil_order,nightly_etl,publish" {
		t.Fatalf("templates %v", names)
	}
	// A bad input is refused before anything is written.
	_, err = c.StageTemplate(ctx, "publish", map[string]any{"id": 1})
	if !client.IsCode(err, wire.CodeValidation) || !strings.Contains(err.Error(), "input.id") {
		t.Fatalf("bad input: %v", err)
	}
	// The client commands reach it; one that fails is an exit status.
	var out, errb bytes.Buffer
	cli := ffrun.Env{Stdout: &out, Stderr: &errb, Getenv: func(k string) string { return map[string]string{"FF_SERVER": "http://" + r.api}[k] }}
	if err := ffrun.Run(ctx, []string{"templates"}, cli); err != nil || !strings.Contains(out.String(), "nightly_etl") {
		t.Fatalf("ffrun templates = %v, %q %q", err, out.String(), errb.String())
	}
	if err := ffrun.Run(ctx, []string{"get", "0.nope"}, cli); err == nil || err.Error() != "exit status 1" || !strings.Contains(errb.String(), "ffrun get: ") {
		t.Fatalf("ffrun get of an unknown run = %v, %q", err, errb.String())
	}
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
}

// TestServeWithValkeyPassword: ffrun serve reads the Valkey password (and
// ACL user) from the environment, and a refusal says which variable to set.
func TestServeWithValkeyPassword(t *testing.T) {
	addr := valkeytest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	admin := valkeytest.Client(t, addr)
	for _, cmd := range [][]string{
		{"ACL", "SETUSER", "ffuser", "on", ">userpw", "~*", "&*", "+@all"},
		{"CONFIG", "SET", "requirepass", "s3cretpw"},
	} {
		if err := admin.Do(ctx, admin.B().Arbitrary(cmd...).Build()).Error(); err != nil {
			t.Fatalf("%v: %v", cmd, err)
		}
	}
	refused := []struct {
		name string
		env  map[string]string
		want string
	}{
		{"no password", nil, "set FF_VALKEY_PASSWORD"},
		{"wrong password", map[string]string{"FF_VALKEY_PASSWORD": "nope"}, "check FF_VALKEY_PASSWORD"},
		{"wrong user", map[string]string{"FF_VALKEY_USERNAME": "nobody", "FF_VALKEY_PASSWORD": "userpw"}, "check FF_VALKEY_PASSWORD and FF_VALKEY_USERNAME"},
	}
	for _, tt := range refused {
		t.Run(tt.name, func(t *testing.T) {
			err := ffrun.Run(ctx, []string{"serve", "--valkey", addr, "--listen", "127.0.0.1:0"},
				ffrun.Env{Getenv: func(k string) string { return tt.env[k] }})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err %v, want one mentioning %q", err, tt.want)
			}
			if strings.Contains(err.Error(), "userpw") {
				t.Fatalf("the error shows the password: %v", err)
			}
		})
	}
	for _, env := range []map[string]string{
		{"FF_VALKEY_PASSWORD": "s3cretpw"},
		{"FF_VALKEY_USERNAME": "ffuser", "FF_VALKEY_PASSWORD": "userpw"},
	} {
		r := start(t, []string{"serve", "--valkey", addr, "--listen", "127.0.0.1:0", "--key-prefix", "pw" + env["FF_VALKEY_USERNAME"]}, env)
		c, _ := client.New("http://" + r.api)
		if err := c.Ready(ctx); err != nil {
			t.Fatalf("ready with %v: %v\n%s", env, err, r.stderr)
		}
		if _, _, err := c.CreateExecution(ctx, wire.CreateExecution{Kind: "k"}); err != nil {
			t.Fatalf("create with %v: %v", env, err)
		}
		if err := r.stop(); err != nil {
			t.Fatal(err)
		}
		for _, line := range []string{`msg="ffrun starting" command=serve version=`, `msg="ffrun stopped"`} {
			if !strings.Contains(r.stderr.String(), line) {
				t.Errorf("no %s in the log:\n%s", line, r.stderr)
			}
		}
	}
}

// Durations the scanners or the server would refuse, or ignore, and an API
// token no request could carry or too short not to be guessed are usage
// errors before anything starts
// (here Valkey is unreachable: the refusal must not wait for it).
func TestServeRefusesBadSettings(t *testing.T) {
	for _, c := range []struct {
		args  []string
		token string
		want  string
	}{
		{args: []string{"--retention", "-1s"}, want: "--retention"},
		{args: []string{"--scan-delayed", "-5s"}, want: "--scan-delayed"},
		{args: []string{"--scan-retention", "1ns"}, want: "--scan-retention"},
		{args: []string{"--shutdown-timeout", "-1s"}, want: "--shutdown-timeout"},
		{token: "s3cret\n", want: "FF_API_TOKEN: the API token starts or ends with white space"},
		{token: "s3\x01cret", want: "FF_API_TOKEN: the API token holds a control character"},
		{token: "fifteen-bytes-a", want: "FF_API_TOKEN: the API token is 15 bytes long: it must be at least 16"},
	} {
		t.Setenv("FF_API_TOKEN", c.token)
		var out bytes.Buffer
		args := append([]string{"serve", "--valkey", "127.0.0.1:1", "--valkey-wait", "0"}, c.args...)
		if code := ffrun.Main(args, nil, &out, &out); code != 2 || !strings.Contains(out.String(), c.want) {
			t.Errorf("ffrun serve %q with FF_API_TOKEN=%q: exit %d, output %q; want exit 2 saying %q", c.args, c.token, code, out.String(), c.want)
		}
	}
}

// A start that cannot listen (the port taken) fails before it writes what
// --flows declares: no schedule, budget or quota of the examples is left
// behind by a refused start.
func TestServeBusyPortWritesNothing(t *testing.T) {
	addr := valkeytest.Shared(t)
	prefix := valkeytest.Prefix(t)
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err = ffrun.Run(ctx, []string{"serve", "--valkey", addr, "--key-prefix", prefix, "--listen", busy.Addr().String(), "--flows", "../../examples/flows"},
		ffrun.Env{Getenv: func(string) string { return "" }})
	if err == nil || !strings.Contains(err.Error(), "listen on") {
		t.Fatalf("serve on a busy port = %v, want a listen error", err)
	}
	vk := valkeytest.Client(t, addr)
	keys, err := vk.Do(ctx, vk.B().Keys().Pattern(prefix+"*").Build()).AsStrSlice()
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 0 {
		t.Fatalf("a start refused for its port left %d keys: %v", len(keys), keys)
	}
}

// TestDevBusyPortStartsNoChild: ffrun dev takes its API port before it
// starts its Valkey child, as serve takes it before it writes anything: a
// second ffrun dev on a taken port fails (exit 1, "listen on") without
// starting a child or creating its files.
func TestDevBusyPortStartsNoChild(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	var out bytes.Buffer
	code := ffrun.Main([]string{"dev", "--data", t.TempDir(), "--listen", busy.Addr().String()}, nil, &out, &out)
	if code != 1 || !strings.Contains(out.String(), "listen on") {
		t.Fatalf("ffrun dev on a busy port: exit %d\n%s", code, out.String())
	}
	if strings.Contains(out.String(), "dev valkey started") {
		t.Errorf("ffrun dev started its Valkey child before finding its API port taken:\n%s", out.String())
	}
}

// TestListenPortOutOfRangeIsUsage: a --listen port that is no port (out of
// 0..65535) is a usage error (exit 2) found before anything starts, as a
// --valkey port is.
func TestListenPortOutOfRangeIsUsage(t *testing.T) {
	for _, args := range [][]string{
		{"serve", "--valkey", "127.0.0.1:1", "--valkey-wait", "0", "--listen", "127.0.0.1:99999"},
		{"dev", "--data", t.TempDir(), "--listen", ":-1"},
	} {
		var out bytes.Buffer
		if code := ffrun.Main(args, nil, &out, &out); code != 2 || !strings.Contains(out.String(), "--listen") ||
			strings.Contains(out.String(), "dev valkey started") {
			t.Errorf("ffrun %q: exit %d, want 2 (usage) before anything starts\n%s", args, code, out.String())
		}
	}
}
