package ffrun_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flowfabric/ff/runtime/client"
	"github.com/flowfabric/ff/runtime/ffrun"
	"github.com/flowfabric/ff/runtime/internal/valkeytest"
	"github.com/flowfabric/ff/runtime/server"
	"github.com/flowfabric/ff/runtime/server/servertest"
	"github.com/flowfabric/ff/runtime/wire"
)

// runTask creates an execution, claims it, completes it and reads its
// result through the API of r.
func runTask(t *testing.T, ctx context.Context, r *running) {
	t.Helper()
	c, _ := client.New("http://" + r.api)
	if err := c.Ready(ctx); err != nil {
		t.Fatalf("ready: %v\n%s", err, r.stderr)
	}
	ex, _, err := c.CreateExecution(ctx, wire.CreateExecution{Kind: "tls", Input: json.RawMessage(`{"n":1}`)})
	if err != nil {
		t.Fatal(err)
	}
	tasks, err := c.Claim(ctx, wire.ClaimRequest{WorkerID: "w", Kinds: []string{"tls"}, WaitMs: 5000})
	if err != nil || len(tasks) != 1 || tasks[0].ExecutionID != ex.ID {
		t.Fatalf("claim: %+v, %v", tasks, err)
	}
	l := wire.Lease{ExecutionID: ex.ID, LeaseID: tasks[0].LeaseID, Epoch: tasks[0].Epoch}
	if _, err := c.CompleteOne(ctx, l, json.RawMessage(`{"done":true}`)); err != nil {
		t.Fatal(err)
	}
	res, err := c.ExecutionResult(ctx, ex.ID)
	if err != nil || res.State != "completed" || string(res.Result) != `{"done":true}` {
		t.Fatalf("result: %+v, %v", res, err)
	}
}

// failServe runs ffrun serve with args and env, which must fail well
// within its 20 s bound (at once, not after --valkey-wait), with an error
// that holds every string of want.
func failServe(t *testing.T, args []string, env map[string]string, want ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	stderr := &servertest.LogBuffer{}
	start := time.Now()
	err := ffrun.Run(ctx, append([]string{"serve", "--listen", "127.0.0.1:0"}, args...), ffrun.Env{
		Stderr: stderr,
		Getenv: func(k string) string { return env[k] },
	})
	took := time.Since(start)
	if err == nil {
		t.Fatalf("ffrun serve %v started", args)
	}
	t.Logf("after %s: %v", took.Round(time.Millisecond), err)
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q, want one mentioning %q", err, w)
		}
	}
	// A TLS handshake that never ends is bounded by the connect timeout.
	if took > server.ConnectTimeoutDefault+5*time.Second || ctx.Err() != nil {
		t.Errorf("failed after %s, want at once", took)
	}
	if strings.Contains(stderr.String(), "waiting for valkey") {
		t.Errorf("waited for an error that waiting cannot heal:\n%s", stderr)
	}
}

// TestServeValkeyTLS: ffrun serve reaches a TLS-only server with the
// authority given, by flag or by environment, and verifies the name
// given with --valkey-tls-server-name.
func TestServeValkeyTLS(t *testing.T) {
	s := valkeytest.StartTLS(t, valkeytest.TLSOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	t.Run("flags", func(t *testing.T) {
		r := start(t, []string{"serve", "--valkey", s.Addr, "--valkey-tls-ca", s.PKI.CAFile, "--listen", "127.0.0.1:0", "--key-prefix", "tlsflags"}, nil)
		runTask(t, ctx, r)
		if err := r.stop(); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("env", func(t *testing.T) {
		// The server's certificate names localhost as well as 127.0.0.1.
		r := start(t, []string{"serve", "--listen", "127.0.0.1:0"}, map[string]string{
			"FF_VALKEY_ADDR": s.Addr, "FF_VALKEY_TLS": "true", "FF_VALKEY_TLS_CA": s.PKI.CAFile,
			"FF_VALKEY_TLS_SERVER_NAME": "localhost", "FF_KEY_PREFIX": "tlsenv",
		})
		runTask(t, ctx, r)
		if err := r.stop(); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("wrong server name", func(t *testing.T) {
		failServe(t, []string{"--valkey", s.Addr, "--valkey-tls-ca", s.PKI.CAFile, "--valkey-tls-server-name", "valkey.example"}, nil,
			"failed to verify certificate", "valkey.example", "--valkey-tls-server-name")
	})
	t.Run("wrong authority", func(t *testing.T) {
		failServe(t, []string{"--valkey", s.Addr, "--valkey-tls-ca", valkeytest.NewPKI(t).CAFile}, nil,
			"failed to verify certificate", "unknown authority", "check --valkey-tls-ca")
	})
	t.Run("system authorities", func(t *testing.T) {
		failServe(t, []string{"--valkey", s.Addr, "--valkey-tls"}, nil, "failed to verify certificate")
	})
	t.Run("plain client", func(t *testing.T) {
		// The server closes a connection that does not start TLS.
		failServe(t, []string{"--valkey", s.Addr, "--valkey-wait", "0"}, nil, "set --valkey-tls")
	})
	t.Run("TLS to a plain server", func(t *testing.T) {
		addr := valkeytest.Start(t)
		failServe(t, []string{"--valkey", addr, "--valkey-tls"}, nil, "no TLS handshake")
	})
}

// TestServeValkeyMutualTLS: a server that requires client certificates
// takes ffrun's, and refuses ffrun without one, at once and saying what
// to set.
func TestServeValkeyMutualTLS(t *testing.T) {
	s := valkeytest.StartTLS(t, valkeytest.TLSOptions{ClientAuth: true})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r := start(t, []string{"serve", "--valkey", s.Addr, "--listen", "127.0.0.1:0"}, map[string]string{
		"FF_VALKEY_TLS_CA": s.PKI.CAFile, "FF_VALKEY_TLS_CERT": s.PKI.ClientCertFile, "FF_VALKEY_TLS_KEY": s.PKI.ClientKeyFile,
	})
	runTask(t, ctx, r)
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	failServe(t, []string{"--valkey", s.Addr, "--valkey-tls-ca", s.PKI.CAFile}, nil, "client certificate", "--valkey-tls-cert")
	// A certificate of another authority is refused too.
	other := valkeytest.NewPKI(t)
	failServe(t, []string{"--valkey", s.Addr, "--valkey-tls-ca", s.PKI.CAFile,
		"--valkey-tls-cert", other.ClientCertFile, "--valkey-tls-key", other.ClientKeyFile}, nil, "client certificate")
}

func TestValkeyTLSUsageErrors(t *testing.T) {
	pki := valkeytest.NewPKI(t)
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "not.pem")
	if err := os.WriteFile(notPEM, []byte("hello\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing.pem")
	other := valkeytest.NewPKI(t)
	// 127.0.0.1:1 would fail to dial: each is refused before.
	vk := []string{"serve", "--valkey", "127.0.0.1:1"}
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"TLS to a socket", []string{"serve", "--valkey", "unix:/tmp/v.sock", "--valkey-tls"}, nil, "--valkey unix:/tmp/v.sock is a Unix socket, which has no TLS"},
		{"CA to a socket in env", []string{"serve"}, map[string]string{"FF_VALKEY_ADDR": "unix:/tmp/v.sock", "FF_VALKEY_TLS_CA": pki.CAFile}, "is a Unix socket, which has no TLS"},
		{"TLS flag with dev", []string{"dev", "--valkey-tls"}, nil, "the --valkey flags are for ffrun serve"},
		{"TLS env with dev", []string{"dev"}, map[string]string{"FF_VALKEY_TLS_CA": pki.CAFile}, "FF_VALKEY_TLS_CA is set, but TLS to Valkey is for ffrun serve"},
		{"TLS on with dev", []string{"dev"}, map[string]string{"FF_VALKEY_TLS": "true"}, "FF_VALKEY_TLS is set, but TLS to Valkey is for ffrun serve"},
		{"cert without key", append(vk, "--valkey-tls-cert", pki.ClientCertFile), nil, "--valkey-tls-cert and --valkey-tls-key go together"},
		{"key without cert", append(vk, "--valkey-tls-key", pki.ClientKeyFile), nil, "--valkey-tls-cert and --valkey-tls-key go together"},
		{"missing CA", append(vk, "--valkey-tls-ca", missing), nil, "--valkey-tls-ca: open " + missing + ": no such file"},
		{"CA not PEM", append(vk, "--valkey-tls-ca", notPEM), nil, "--valkey-tls-ca " + notPEM + ": no PEM certificate"},
		{"missing cert", append(vk, "--valkey-tls-cert", missing, "--valkey-tls-key", pki.ClientKeyFile), nil, "--valkey-tls-cert: open " + missing},
		{"cert not PEM", append(vk, "--valkey-tls-cert", notPEM, "--valkey-tls-key", pki.ClientKeyFile), nil, "--valkey-tls-cert " + notPEM + ": no PEM certificate"},
		{"key is a certificate", append(vk, "--valkey-tls-cert", pki.ClientCertFile, "--valkey-tls-key", pki.ClientCertFile), nil, "--valkey-tls-key " + pki.ClientCertFile + ": no PEM private key"},
		{"missing key", append(vk, "--valkey-tls-cert", pki.ClientCertFile, "--valkey-tls-key", missing), nil, "--valkey-tls-key: open " + missing},
		{"key of another cert", append(vk, "--valkey-tls-cert", pki.ClientCertFile, "--valkey-tls-key", other.ClientKeyFile), nil, "--valkey-tls-key " + other.ClientKeyFile + " with --valkey-tls-cert " + pki.ClientCertFile + ": tls: private key does not match public key"},
		{"TLS env not a boolean", vk, map[string]string{"FF_VALKEY_TLS": "maybe"}, `FF_VALKEY_TLS="maybe": not a boolean`},
		{"negative wait", append(vk, "--valkey-wait", "-1s"), nil, "--valkey-wait -1s is negative"},
		{"wait env not a duration", vk, map[string]string{"FF_VALKEY_WAIT": "long"}, `FF_VALKEY_WAIT="long": not a duration`},
		{"wait with dev", []string{"dev", "--valkey-wait", "1s"}, nil, "the --valkey flags are for ffrun serve"},
		{"address with dev", []string{"dev", "--valkey", "127.0.0.1:6379"}, nil, "the --valkey flags are for ffrun serve"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ffrun.Run(context.Background(), tt.args, ffrun.Env{Getenv: func(k string) string { return tt.env[k] }})
			// A usage error (exit status 2) reads "usage: ...".
			if err == nil || !strings.HasPrefix(err.Error(), "usage: ") || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err %v, want a usage error mentioning %q", err, tt.want)
			}
		})
	}
}
