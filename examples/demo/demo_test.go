package demo

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

// TestDemo runs the whole demo: ffrun dev with its own Valkey child, the
// example workers, both runs, and a clean stop.
func TestDemo(t *testing.T) {
	var stdout, stderr bytes.Buffer
	err := RunConfig(context.Background(), Config{Flows: "../flows", Delay: 10 * time.Millisecond, Timeout: 40 * time.Second}, &stdout, &stderr)
	if err != nil {
		t.Fatalf("demo: %v\nstdout:\n%s\nstderr:\n%s", err, &stdout, &stderr)
	}
	out := stdout.String()
	for _, want := range []string{
		"templates: ask, fulfil_order, nightly_etl, publish",
		"run succeeded (5 succeeded, 0 failed, 1 skipped, 0 cancelled)",
		`"url": "s3://raw/clip-42.h264.mp4"`,
		"-> completed",
		"run failed (4 succeeded, 1 failed, 2 skipped, 0 cancelled)",
		"run failed: result exec load ended skipped; transform failed: nightly_etl.transform: injected failure",
		"on-call notified: nightly_etl: transform failed: nightly_etl.transform: injected failure",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if stderr.Len() != 0 {
		t.Errorf("stderr on success:\n%s", &stderr)
	}
}

func TestDemoUsage(t *testing.T) {
	var out bytes.Buffer
	if code := Main([]string{"--nope"}, &out, &out); code != 2 {
		t.Fatalf("unknown flag: exit %d, want 2", code)
	}
	err := RunConfig(context.Background(), Config{Flows: "no/such/dir"}, &out, &out)
	if err == nil || !strings.Contains(err.Error(), "make demo") {
		t.Fatalf("missing flows directory: %v", err)
	}
}
