package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestRunFlags(t *testing.T) {
	var stderr bytes.Buffer
	if code := run([]string{"-no-such-flag"}, &stderr); code != 2 || !strings.Contains(stderr.String(), "no-such-flag") {
		t.Fatalf("bad flag: code %d, stderr %q", code, stderr.String())
	}
	stderr.Reset()
	if code := run([]string{"-h"}, &stderr); code != 0 || !strings.Contains(stderr.String(), "-permanent") {
		t.Fatalf("-h: code %d, stderr %q", code, stderr.String())
	}
	stderr.Reset()
	if code := run([]string{"-concurrency", "-1", "-url", "http://127.0.0.1:1"}, &stderr); code != 1 || !strings.Contains(stderr.String(), "Concurrency") {
		t.Fatalf("invalid config: code %d, stderr %q", code, stderr.String())
	}
	// A fault on a name that is no exec would never fire: refused, with
	// the names there are.
	stderr.Reset()
	if code := run([]string{"-fail", "publish.transcode,publish.nope", "-hang", "etl.load", "-url", "http://127.0.0.1:1"}, &stderr); code != 2 ||
		!strings.Contains(stderr.String(), "no exec is named etl.load, publish.nope (there are: ask.") ||
		!strings.Contains(stderr.String(), "nightly_etl.load") {
		t.Fatalf("unknown exec names: code %d, stderr %q", code, stderr.String())
	}
}

func TestSet(t *testing.T) {
	if diff := cmp.Diff(map[string]bool{"a.b": true, "c.d": true}, set(" a.b, ,c.d")); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
}
