package ffrun_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/flowfabric/ff/runtime/client"
	"github.com/flowfabric/ff/runtime/ffrun"
	"github.com/flowfabric/ff/runtime/internal/valkeytest"
	"github.com/flowfabric/ff/runtime/server/servertest"
	"github.com/flowfabric/ff/runtime/wire"
)

// background runs ffrun with args until ctx ends; the returned channels
// give the API address once it listens and Run's error once it returns.
func background(ctx context.Context, args []string, env map[string]string, stderr *servertest.LogBuffer) (listening <-chan string, done <-chan error) {
	l := make(chan string, 1)
	d := make(chan error, 1)
	go func() {
		d <- ffrun.Run(ctx, args, ffrun.Env{
			Stderr:   stderr,
			Getenv:   func(k string) string { return env[k] },
			OnListen: func(api, _ string) { l <- api },
		})
	}()
	return l, d
}

// waitLog waits until the log holds s, failing t if done delivers first or
// nothing comes within 20 s.
func waitLog(t *testing.T, stderr *servertest.LogBuffer, s string, done <-chan error) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(stderr.String(), s) {
		select {
		case err := <-done:
			t.Fatalf("ffrun returned %v before logging %q\n%s", err, s, stderr)
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %q in the log within 20s\n%s", s, stderr)
		}
	}
}

// TestServeWaitsForValkey: ffrun serve started before its Valkey waits
// for it, says so once, and serves once it is there.
func TestServeWaitsForValkey(t *testing.T) {
	port := valkeytest.FreePort(t)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	stderr := &servertest.LogBuffer{}
	listening, done := background(ctx, []string{"serve", "--valkey", addr, "--listen", "127.0.0.1:0", "--valkey-wait", "1m"}, nil, stderr)
	waitLog(t, stderr, `msg="waiting for valkey" valkey=`+addr, done)
	if !strings.Contains(stderr.String(), "connection refused") {
		t.Errorf("the warning does not give the error:\n%s", stderr)
	}
	valkeytest.StartOnPort(t, port)
	var api string
	select {
	case api = <-listening:
	case err := <-done:
		t.Fatalf("ffrun returned %v\n%s", err, stderr)
	case <-ctx.Done():
		t.Fatalf("ffrun did not start once Valkey was up\n%s", stderr)
	}
	c, _ := client.New("http://" + api)
	if err := c.Ready(ctx); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.CreateExecution(ctx, wire.CreateExecution{Kind: "k"}); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("ffrun returned %v\n%s", err, stderr)
	}
	log := stderr.String()
	if n := strings.Count(log, "waiting for valkey"); n != 1 {
		t.Errorf("%d warnings of the wait, want 1 (a second one comes after 10s at the earliest):\n%s", n, log)
	}
	if !strings.Contains(log, `msg="valkey reached"`) {
		t.Errorf("no line says Valkey was reached:\n%s", log)
	}
}

// TestServeValkeyWaitEnds: with nothing listening, ffrun serve fails after
// --valkey-wait with the last error; with 0 at once. (A signal stops the
// wait, cleanly: TestStopWhileWaitingForValkeyIsClean.)
func TestServeValkeyWaitEnds(t *testing.T) {
	addr := fmt.Sprintf("127.0.0.1:%d", valkeytest.FreePort(t))
	for _, tt := range []struct {
		wait     string
		min, max time.Duration
		want     string
	}{
		{"1500ms", 1500 * time.Millisecond, 12 * time.Second, "after waiting 1.5s"},
		{"0", 0, 5 * time.Second, "connection refused"},
	} {
		t.Run("wait "+tt.wait, func(t *testing.T) {
			stderr := &servertest.LogBuffer{}
			start := time.Now()
			err := ffrun.Run(context.Background(), []string{"serve", "--valkey", addr, "--listen", "127.0.0.1:0", "--valkey-wait", tt.wait},
				ffrun.Env{Stderr: stderr})
			took := time.Since(start)
			if err == nil || !strings.Contains(err.Error(), "connection refused") || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err %v, want one mentioning connection refused and %q", err, tt.want)
			}
			if took < tt.min || took > tt.max {
				t.Fatalf("failed after %s, want %s..%s", took, tt.min, tt.max)
			}
			if waited := strings.Contains(stderr.String(), "waiting for valkey"); waited != (tt.min > 0) {
				t.Fatalf("warned of a wait: %v, want %v\n%s", waited, tt.min > 0, stderr)
			}
		})
	}
	t.Run("name that does not resolve", func(t *testing.T) {
		// .invalid never resolves (RFC 6761): waited for, as a name
		// may appear once its service does.
		stderr := &servertest.LogBuffer{}
		err := ffrun.Run(context.Background(), []string{"serve", "--valkey", "valkey.invalid:6379", "--listen", "127.0.0.1:0", "--valkey-wait", "300ms"},
			ffrun.Env{Stderr: stderr})
		if err == nil || !strings.Contains(err.Error(), "lookup valkey.invalid") || !strings.Contains(err.Error(), "after waiting 300ms") {
			t.Fatalf("err %v, want the failed lookup after the wait", err)
		}
		if !strings.Contains(stderr.String(), "waiting for valkey") {
			t.Fatalf("did not wait:\n%s", stderr)
		}
	})
}

// TestServeValkeyWaitRefusedPassword: a refused password is not waited
// for, however long the wait.
func TestServeValkeyWaitRefusedPassword(t *testing.T) {
	addr := valkeytest.Start(t)
	admin := valkeytest.Client(t, addr)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := admin.Do(ctx, admin.B().ConfigSet().ParameterValue().ParameterValue("requirepass", "s3cretpw").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	failServe(t, []string{"--valkey", addr, "--valkey-wait", "60s"}, map[string]string{"FF_VALKEY_PASSWORD": "nope"}, "WRONGPASS", "check FF_VALKEY_PASSWORD")
}

// TestHealthzAnswersWhileWaitingForValkey: while ffrun serve waits for
// Valkey (--valkey-wait), its API port answers instead of holding
// connections nobody reads: /healthz 200 (the process is alive), every
// other route 503 unavailable with Retry-After, as a client retries.
func TestHealthzAnswersWhileWaitingForValkey(t *testing.T) {
	vkAddr := fmt.Sprintf("127.0.0.1:%d", valkeytest.FreePort(t)) // nothing listens
	api := fmt.Sprintf("127.0.0.1:%d", valkeytest.FreePort(t))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	stderr := &servertest.LogBuffer{}
	_, done := background(ctx, []string{"serve", "--valkey", vkAddr, "--listen", api, "--valkey-wait", "1m"}, nil, stderr)
	waitLog(t, stderr, `msg="waiting for valkey"`, done)
	hc := &http.Client{Timeout: 3 * time.Second}
	res, err := hc.Get("http://" + api + "/healthz")
	if err != nil {
		t.Fatalf("GET /healthz while ffrun waits for Valkey: %v; want an answer", err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Errorf("GET /healthz while ffrun waits for Valkey: %d, want 200", res.StatusCode)
	}
	res, err = hc.Get("http://" + api + "/v1/executions")
	if err != nil {
		t.Fatalf("GET /v1/executions while ffrun waits for Valkey: %v; want an answer", err)
	}
	defer res.Body.Close()
	var env wire.ErrorEnvelope
	if err := json.NewDecoder(res.Body).Decode(&env); err != nil || res.StatusCode != http.StatusServiceUnavailable ||
		env.Error.Code != wire.CodeUnavailable || res.Header.Get("Retry-After") == "" {
		t.Errorf("GET /v1/executions while ffrun waits for Valkey: %d %+v (%v), Retry-After %q; want 503 %s with Retry-After",
			res.StatusCode, env, err, res.Header.Get("Retry-After"), wire.CodeUnavailable)
	}
}

// TestStopWhileWaitingForValkeyIsClean: a stop (SIGINT, SIGTERM: ctx ends)
// while ffrun serve waits for its Valkey is a clean shutdown, said at info
// level: Run returns nil (exit status 0), not an error (exit 1, a failed
// unit to systemd).
func TestStopWhileWaitingForValkeyIsClean(t *testing.T) {
	vkAddr := fmt.Sprintf("127.0.0.1:%d", valkeytest.FreePort(t)) // nothing listens
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	stopCtx, stop := context.WithCancel(ctx)
	stderr := &servertest.LogBuffer{}
	_, done := background(stopCtx, []string{"serve", "--valkey", vkAddr, "--listen", "127.0.0.1:0", "--valkey-wait", "1m"}, nil, stderr)
	waitLog(t, stderr, `msg="waiting for valkey"`, done)
	stop() // the signal
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("ffrun serve stopped while waiting for Valkey returned %v; want nil (exit status 0)", err)
		}
		if !strings.Contains(stderr.String(), `level=INFO msg="stopped while waiting for valkey"`) {
			t.Errorf("no info line about the stop:\n%s", stderr)
		}
	case <-ctx.Done():
		t.Fatal("ffrun serve did not stop")
	}
}

// TestStopWhileValkeyHangsAtStartIsPrompt: ffrun serve starts against a
// Valkey that takes the connection and never answers (a hung host, a
// partition). A stop meanwhile ends the start at once ("SIGINT/SIGTERM
// ends the wait at once, a clean stop"), not once the attempt in progress
// has waited out its connection timeout (10 s).
func TestStopWhileValkeyHangsAtStartIsPrompt(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	accepted := servertest.Silent(t, ln)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	stopCtx, stop := context.WithCancel(ctx)
	stderr := &servertest.LogBuffer{}
	_, done := background(stopCtx, []string{"serve", "--valkey", ln.Addr().String(), "--listen", "127.0.0.1:0", "--valkey-wait", "1m"}, nil, stderr)
	select {
	case <-accepted: // the first attempt is connected, waiting for an answer
	case err := <-done:
		t.Fatalf("ffrun returned %v before connecting to Valkey\n%s", err, stderr)
	case <-ctx.Done():
		t.Fatalf("ffrun never connected to Valkey\n%s", stderr)
	}
	start := time.Now()
	stop() // the signal
	// Generous for a loaded machine, and half the connection timeout.
	const bound = 5 * time.Second
	select {
	case err := <-done:
		took := time.Since(start)
		if err != nil {
			t.Errorf("ffrun serve stopped while Valkey hangs at start returned %v; want nil (exit status 0)", err)
		}
		if took > bound {
			t.Errorf("ffrun serve returned %s after the stop while Valkey hangs at start; want at most %s\n%s",
				took.Round(100*time.Millisecond), bound, stderr)
		}
		if !strings.Contains(stderr.String(), `level=INFO msg="stopped while waiting for valkey"`) {
			t.Errorf("no info line about the stop:\n%s", stderr)
		}
	case <-ctx.Done():
		t.Fatalf("ffrun serve did not stop\n%s", stderr)
	}
}
