package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flowfabric/ff/internal/ffc"
)

// writeFlow writes a one-flow .ff file in a new temporary directory and
// returns the directory and the file's path.
func writeFlow(t *testing.T) (dir, src string) {
	t.Helper()
	dir = t.TempDir()
	src = filepath.Join(dir, "f.ff")
	if err := os.WriteFile(src, []byte("flow f() { exec a() {} }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir, src
}

// TestGenPackageFromKeywordDir: without a package clause or -package, the
// package is named after the output directory; when what that gives is a
// Go keyword or the blank identifier (sdk/go/, type/, _/), ffc gen stops
// with a usage error (exit 2) that names the output and says to pass
// -package, rather than a bare "not a valid Go package name".
func TestGenPackageFromKeywordDir(t *testing.T) {
	dir, src := writeFlow(t)
	for _, sub := range []string{"go", "type", "_"} {
		out := filepath.Join(dir, sub, "flows_ff.go")
		if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
			t.Fatal(err)
		}
		var stdout, stderr bytes.Buffer
		code := ffc.Run([]string{"gen", "-o", out, src}, nil, &stdout, &stderr)
		msg := stderr.String()
		if code != 2 || !strings.Contains(msg, "-package") || !strings.Contains(msg, out) || !strings.Contains(msg, `"`+sub+`"`) {
			t.Errorf("ffc gen -o %s/flows_ff.go: exit %d: %s", sub, code, strings.TrimSpace(msg))
		}
		if _, err := os.Stat(out); err == nil {
			t.Errorf("ffc gen -o %s/flows_ff.go wrote the file", sub)
		}
		// With -package the same output is fine.
		stderr.Reset()
		if code := ffc.Run([]string{"gen", "-package", "sdk", "-o", out, src}, nil, &stdout, &stderr); code != 0 {
			t.Errorf("ffc gen -package sdk -o %s/flows_ff.go: exit %d: %s", sub, code, strings.TrimSpace(stderr.String()))
		}
	}
}

// TestGenBadPackageFlagExit: an invalid -package is a bad command line
// (exit 2), reported before any file is compiled.
func TestGenBadPackageFlagExit(t *testing.T) {
	dir, _ := writeFlow(t)
	missing := filepath.Join(dir, "missing.ff") // never read
	for _, name := range []string{"1abc", "func", "_", "a-b"} {
		var stdout, stderr bytes.Buffer
		code := ffc.Run([]string{"gen", "-package", name, "-o", filepath.Join(dir, "x.go"), missing}, nil, &stdout, &stderr)
		if code != 2 || !strings.Contains(stderr.String(), "-package") || strings.Contains(stderr.String(), "missing.ff") {
			t.Errorf("ffc gen -package %s: exit %d, want 2: %s", name, code, strings.TrimSpace(stderr.String()))
		}
	}
}

// TestGenOutputNameIgnoredByGoTool: -o must name a file the go tool
// builds into the package on every system; other names are a bad command
// line (exit 2) and nothing is written: a test file, names starting with
// "_" or ".", and names whose part before the first dot ends in _GOOS,
// _GOARCH or _GOOS_GOARCH (flows_windows.ff.go is built on Windows only).
func TestGenOutputNameIgnoredByGoTool(t *testing.T) {
	dir, src := writeFlow(t)
	for _, c := range []struct {
		name string
		code int
	}{
		{"flows_test.go", 2},
		{"flows_js.go", 2},
		{"flows_linux.go", 2},
		{"flows_amd64.go", 2},
		{"flows_windows_amd64.go", 2},
		{"flows_windows_amd64_test.go", 2},
		{"flows_windows.ff.go", 2},
		{"flows_linux.gen.go", 2},
		{"flows_arm64.v2.go", 2},
		{"flows_linux_test.ff.go", 2},
		{"flows.linux.go", 0},
		{"flows_ff.v2.go", 0},
		{"_flows.go", 2},
		{".flows.go", 2},
		{"flows_ff.go", 0},
		{"linux.go", 0},
		{"flows_linuxish.go", 0},
		{"flows_test_ff.go", 0},
	} {
		var stdout, stderr bytes.Buffer
		out := filepath.Join(dir, c.name)
		code := ffc.Run([]string{"gen", "-package", "p", "-o", out, src}, nil, &stdout, &stderr)
		if code != c.code {
			t.Errorf("ffc gen -o %s: exit %d, want %d: %s", c.name, code, c.code, strings.TrimSpace(stderr.String()))
		}
		if _, err := os.Stat(out); (err == nil) != (c.code == 0) {
			t.Errorf("ffc gen -o %s: file written: %v, want %v", c.name, err == nil, c.code == 0)
		}
	}
}
