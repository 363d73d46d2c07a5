package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/flowfabric/ff/examples/flows"
	"github.com/flowfabric/ff/runtime/server/servertest"
	"github.com/flowfabric/ff/runtime/worker"
)

func TestMain(m *testing.M) {
	code := m.Run()
	servertest.StopShared()
	os.Exit(code)
}

// TestStage runs the command against a real ffrun with the example
// workers: runs of every flow that succeed (exit 0, typed result), one
// that fails (exit 1, the run's error) and an unknown flow.
func TestStage(t *testing.T) {
	env := servertest.Start(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- flows.RunWorkers(ctx, worker.Config{URL: env.URL, Name: "stage-test", ClaimWait: time.Second, DrainTimeout: time.Second}, flows.NewDemo(flows.Faults{}))
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("workers: %v", err)
		}
	}()
	for _, tt := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"-flow", "publish"}, 0, `"url": "s3://raw/clip-7.h264.mp4"`},
		{[]string{"-flow", "ask"}, 0, `"question_id": "q-7"`},
		{[]string{"-flow", "fulfil_order"}, 0, `"order_id": "o-7"`},
		{[]string{"-flow", "nightly_etl", "-source", "corrupt-feed"}, 1, "failed: result exec load ended skipped; validate failed"},
		{[]string{"-flow", "nope"}, 1, `unknown flow "nope"`},
	} {
		var out bytes.Buffer
		code := run(append([]string{"-url", env.URL, "-timeout", "20s"}, tt.args...), &out, &out)
		if code != tt.code || !strings.Contains(out.String(), tt.want) {
			t.Errorf("%v: exit %d, output:\n%s\nwant exit %d and %q", tt.args, code, &out, tt.code, tt.want)
		}
	}
}
