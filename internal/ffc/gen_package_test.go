package ffc

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestGenPackageOfExistingGoFiles: with the .ff files next to the
// program that uses them (a directory "myapp" holding main.go, package
// main, and a //go:generate line), the Go files already in the output
// directory (other than the output itself and test files) decide the
// package: without -package or a clause, ffc gen uses theirs (main, not
// the directory's name, which would give a directory of two packages that
// go build refuses); when a clause or -package names another one, ffc gen
// refuses (exit 2) with a message naming both packages and -package, and
// writes nothing.
func TestGenPackageOfExistingGoFiles(t *testing.T) {
	for _, c := range []struct {
		name, ff string
		wantPkg  string // "" = must refuse
	}{
		{"no package clause", "type Msg { to: string }\nflow notify(Msg) { exec send(Msg) {} }\n", "main"},
		{"package clause differs", "package flows\ntype Msg { to: string }\nflow notify(Msg) { exec send(Msg) {} }\n", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "myapp")
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			mainGo := "package main\n\n//go:generate go tool ffc gen -o flows_ff.go .\n\nfunc main() {}\n"
			if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(mainGo), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "notes.ff"), []byte(c.ff), 0o644); err != nil {
				t.Fatal(err)
			}
			out := filepath.Join(dir, "flows_ff.go")
			var stdout, stderr bytes.Buffer
			code := Run([]string{"gen", "-o", out, dir}, strings.NewReader(""), &stdout, &stderr)
			src, readErr := os.ReadFile(out)
			gotPkg := ""
			if m := regexp.MustCompile(`(?m)^package (\w+)$`).FindSubmatch(src); readErr == nil && m != nil {
				gotPkg = string(m[1])
			}
			if c.wantPkg != "" {
				if code != exitOK || gotPkg != c.wantPkg {
					t.Errorf("ffc gen into a directory of package main: exit %d, generated package %q, stderr %q; want exit 0 and package %s (the package of main.go)",
						code, gotPkg, stderr.String(), c.wantPkg)
				}
				return
			}
			msg := stderr.String()
			if code != exitUsage || readErr == nil || !strings.Contains(msg, "main") || !strings.Contains(msg, "flows") || !strings.Contains(msg, "-package") {
				t.Errorf("ffc gen of package flows into a directory of package main: exit %d, wrote package %q, stderr %q; want exit 2, nothing written, and a message naming main, flows and -package",
					code, gotPkg, msg)
			}
		})
	}
}

// TestGenPackageFromGoGenerate: under go generate, run in the output
// directory, $GOPACKAGE names the package when no Go file there is built
// (the directive sits in an external test file: its "_test" is dropped).
func TestGenPackageFromGoGenerate(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "notes.ff"), []byte("flow ping() { exec a() {} }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	t.Setenv("GOPACKAGE", "myapp_test")
	var stdout, stderr bytes.Buffer
	if code := Run([]string{"gen", "-o", "flows_ff.go", "."}, strings.NewReader(""), &stdout, &stderr); code != exitOK {
		t.Fatalf("ffc gen: exit %d, stderr %q", code, stderr.String())
	}
	src, err := os.ReadFile(filepath.Join(dir, "flows_ff.go"))
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^package myapp$`).Match(src) {
		t.Errorf("ffc gen under go generate with GOPACKAGE=myapp_test wrote:\n%.200s\nwant package myapp", src)
	}
}
