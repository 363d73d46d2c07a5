package ffrun_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/flowfabric/ff/runtime/client"
	"github.com/flowfabric/ff/runtime/ffctl"
	"github.com/flowfabric/ff/runtime/ffrun"
	"github.com/flowfabric/ff/runtime/internal/valkeytest"
	"github.com/flowfabric/ff/runtime/wire"
	"github.com/flowfabric/ff/runtime/worker"
)

// TestServeAPIOverTLS: with --tls-cert and --tls-key the API answers
// HTTPS only; a client and a worker that trust its authority run a task
// end to end over HTTP/2 (what http.DefaultTransport negotiates), and a
// claim parked over HTTP/2 does not hold up the shutdown.
func TestServeAPIOverTLS(t *testing.T) {
	pki := valkeytest.NewPKI(t)
	addr := valkeytest.Start(t)
	r := start(t, []string{"serve", "--valkey", addr, "--listen", "127.0.0.1:0", "--key-prefix", "apitls",
		"--tls-cert", pki.ServerCertFile, "--tls-key", pki.ServerKeyFile}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: pki.ClientConfig(), ForceAttemptHTTP2: true}}
	c, err := client.New("https://"+r.api, client.WithHTTPClient(hc))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Ready(ctx); err != nil {
		t.Fatalf("ready over HTTPS: %v", err)
	}
	// scrape returns the metrics page, and fails the test unless it came
	// over HTTP/2.
	scrape := func() string {
		t.Helper()
		resp, err := hc.Get("https://" + r.api + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.ProtoMajor != 2 {
			t.Fatalf("the API answered over %s, want HTTP/2", resp.Proto)
		}
		return string(body)
	}
	scrape()
	x, _, err := c.CreateExecution(ctx, wire.CreateExecution{Kind: "k", Input: json.RawMessage(`"in"`)})
	if err != nil {
		t.Fatal(err)
	}
	// This worker trusts the authority through Config.TLS (the SDK's
	// default transport); the next one brings its own client.
	w, err := worker.New(worker.Config{URL: "https://" + r.api, TLS: pki.ClientConfig(), Name: "w", ClaimWait: time.Second, DrainTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Handle("k", func(_ context.Context, task *worker.Task) (json.RawMessage, error) { return task.Input(), nil }); err != nil {
		t.Fatal(err)
	}
	wctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(wctx) }()
	res, err := c.WaitResult(ctx, x.ID, 20*time.Millisecond)
	stop()
	if werr := <-done; werr != nil && !errors.Is(werr, context.Canceled) {
		t.Errorf("worker: %v", werr)
	}
	if err != nil || string(res.Result) != `"in"` {
		t.Fatalf("task over HTTPS: %+v, %v", res, err)
	}

	// A worker whose claim waits up to 30 s for work; the shutdown
	// releases it at once.
	idle, err := worker.New(worker.Config{URL: "https://" + r.api, HTTPClient: hc, Name: "idle", ClaimWait: 30 * time.Second, DrainTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := idle.Handle("other", func(context.Context, *worker.Task) (json.RawMessage, error) { return nil, nil }); err != nil {
		t.Fatal(err)
	}
	ictx, istop := context.WithCancel(ctx)
	defer istop()
	idone := make(chan error, 1)
	go func() { idone <- idle.Run(ictx) }()
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(scrape(), "\nff_claims_waiting 1\n"); {
		if time.Now().After(deadline) {
			t.Fatalf("no claim parked over HTTP/2:\n%s", scrape())
		}
		time.Sleep(20 * time.Millisecond)
	}

	// The client commands trust the authority named by FF_API_CA.
	var out, errb bytes.Buffer
	vars := map[string]string{"FF_SERVER": "https://" + r.api, "FF_API_CA": pki.CAFile}
	if code := ffctl.Main(ctx, "templates", []string{"--json"}, ffctl.Env{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb,
		Getenv: func(k string) string { return vars[k] }}); code != 0 {
		t.Errorf("ffrun templates with FF_API_CA = %d: %s", code, errb.String())
	}
	vars["FF_API_CA"] = pki.ServerKeyFile // no certificate in it
	errb.Reset()
	if code := ffctl.Main(ctx, "templates", nil, ffctl.Env{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb,
		Getenv: func(k string) string { return vars[k] }}); code != ffctl.ExitUsage || !strings.Contains(errb.String(), "no PEM certificate") {
		t.Errorf("ffrun templates with a key as FF_API_CA = %d: %s", code, errb.String())
	}

	// Plain HTTP to it is answered with a refusal; a client that does
	// not trust the authority fails the handshake.
	resp, err := http.Get("http://" + r.api + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "HTTPS") {
		t.Fatalf("plain HTTP to the HTTPS API: %d %s", resp.StatusCode, body)
	}
	if _, err := http.Get("https://" + r.api + "/healthz"); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("HTTPS without the authority: %v", err)
	}
	began := time.Now()
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(began); took > 5*time.Second {
		t.Errorf("the shutdown took %v with a claim parked over HTTP/2", took)
	}
	istop()
	if err := <-idone; err != nil && !errors.Is(err, context.Canceled) {
		t.Errorf("idle worker: %v", err)
	}
	if !strings.Contains(r.stderr.String(), "scheme=https") {
		t.Errorf("the serving line does not say https:\n%s", r.stderr.String())
	}
}

func TestAPITLSUsageErrors(t *testing.T) {
	pki := valkeytest.NewPKI(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--tls-cert", pki.ServerCertFile}, "--tls-cert and --tls-key go together"},
		{[]string{"--tls-key", pki.ServerKeyFile}, "--tls-cert and --tls-key go together"},
		{[]string{"--tls-cert", "/does/not/exist.pem", "--tls-key", pki.ServerKeyFile}, "exist.pem"},
		{[]string{"--tls-cert", pki.ServerCertFile, "--tls-key", pki.ClientKeyFile}, "private key does not match"},
	} {
		args := append([]string{"serve", "--valkey", "127.0.0.1:1", "--valkey-wait", "0"}, tc.args...)
		err := ffrun.Run(context.Background(), args, ffrun.Env{})
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "usage") {
			t.Errorf("%v: %v, want a usage error with %q", tc.args, err, tc.want)
		}
	}
}
