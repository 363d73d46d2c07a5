package ffc

import (
	"bytes"
	"go/build"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestIgnoredByGoToolAgreesWithGoBuild: ignoredByGoTool says a file name
// is built for some systems only exactly when package go/build leaves it
// out of the build on one of them. go/build reads the _GOOS and _GOARCH
// suffixes in the part of the name before its first dot, so that
// flows_windows.ff.go is built on Windows only, and a _test after them
// does not hide them (flows_linux_test.ff.go, not a test file).
func TestIgnoredByGoToolAgreesWithGoBuild(t *testing.T) {
	dir := t.TempDir()
	names := []string{
		"flows_windows.ff.go", "flows_linux.gen.go", "flows_arm64.v2.go", "flows_linux_test.ff.go",
		"flows_windows_amd64.x.go", "flows_js_wasm.go", "a_b_plan9.go", "x_ios.a.b.go", "flows_linux.go",
		"flows.linux.go", "flows_ff.v2.go", "x_linuxish.go", "linux.go", "flows_test_ff.go", "flows_ff.go",
		"flows_test.ff.go", "x.y_linux.go",
	}
	var contexts []build.Context
	for _, goos := range []string{"linux", "windows", "darwin", "ios", "js", "android", "illumos", "solaris", "plan9", "aix"} {
		for _, goarch := range []string{"amd64", "arm64", "386", "wasm", "riscv64"} {
			ctx := build.Default
			ctx.GOOS, ctx.GOARCH = goos, goarch
			contexts = append(contexts, ctx)
		}
	}
	for _, name := range names {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("package p\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		leftOut := ""
		for _, ctx := range contexts {
			ok, err := ctx.MatchFile(dir, name)
			if err != nil {
				t.Fatal(err)
			}
			if !ok {
				leftOut = ctx.GOOS + "/" + ctx.GOARCH
				break
			}
		}
		why := ignoredByGoTool(name)
		if (why != "") != (leftOut != "") {
			t.Errorf("ignoredByGoTool(%s) = %q, but go/build leaves it out on %q (none: built everywhere)", name, why, leftOut)
		}
	}
}

// writeNotes writes a one-flow .ff file in a new temporary directory and
// returns the directory and the file's path.
func writeNotes(t *testing.T) (dir, ff string) {
	t.Helper()
	dir = t.TempDir()
	ff = filepath.Join(dir, "notes.ff")
	src := "package notes\ntype Msg { to: string }\nflow notify(Msg) { exec send(Msg) {} }\n"
	if err := os.WriteFile(ff, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir, ff
}

// run runs ffc with args and returns its exit status and stderr.
func run(args ...string) (int, string) {
	var stdout, stderr bytes.Buffer
	code := Run(args, strings.NewReader(""), &stdout, &stderr)
	return code, stderr.String()
}

// TestGenMissingOutputDirectory: ffc gen into a directory that does not
// exist says so, rather than naming the hidden temporary file it could
// not create.
func TestGenMissingOutputDirectory(t *testing.T) {
	dir, ff := writeNotes(t)
	out := filepath.Join(dir, "newdir", "x.go")
	code, stderr := run("gen", "-o", out, ff)
	want := "ffc gen: write " + out + ": the directory " + filepath.Join(dir, "newdir") + " does not exist (ffc gen does not create it)\n"
	if code != exitError || stderr != want {
		t.Errorf("exit %d, stderr %q; want exit 1 and %q", code, stderr, want)
	}
}

// TestGenKeepsOutputMode: ffc gen replaces the output with a file of the
// same permissions as the one it replaces; a new file is 0644.
func TestGenKeepsOutputMode(t *testing.T) {
	dir, ff := writeNotes(t)
	out := filepath.Join(dir, "flows_ff.go")
	if code, stderr := run("gen", "-o", out, ff); code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	mode := func() os.FileMode {
		info, err := os.Stat(out)
		if err != nil {
			t.Fatal(err)
		}
		return info.Mode().Perm()
	}
	if m := mode(); m != 0o644 {
		t.Errorf("new file: mode %v, want 0644", m)
	}
	for _, perm := range []os.FileMode{0o600, 0o444, 0o664} {
		if err := os.Chmod(out, perm); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(ff, append([]byte("// "+perm.String()+"\n"), "package notes\ntype Msg { to: string }\nflow notify(Msg) { exec send(Msg) {} }\n"...), 0o644); err != nil {
			t.Fatal(err)
		}
		if code, stderr := run("gen", "-o", out, ff); code != exitOK {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		if m := mode(); m != perm {
			t.Errorf("ffc gen over a file of mode %v left mode %v", perm, m)
		}
	}
}

// TestFlagsAfterFiles: a flag given after the files, which package flag
// takes for a file name, is a usage error (exit 2) that says flags go
// before the files, rather than "cannot read" a file named -package; a
// file whose name starts with "-" is still a file.
func TestFlagsAfterFiles(t *testing.T) {
	dir, ff := writeNotes(t)
	out := filepath.Join(dir, "flows_ff.go")
	for _, tt := range []struct {
		args []string
		flag string
	}{
		{[]string{"gen", "-o", out, ff, "-package", "x"}, "-package"},
		{[]string{"check", ff, "-json"}, "-json"},
		{[]string{"plan", ff, "-flow=notify"}, "-flow=notify"},
		{[]string{"graph", ff, "-format", "mermaid"}, "-format"},
		{[]string{"fmt", ff, "-l"}, "-l"},
	} {
		code, stderr := run(tt.args...)
		want := "ffc " + tt.args[0] + ": " + tt.flag + " after the files is not a file: flags go before the files\n"
		if code != exitUsage || !strings.HasPrefix(stderr, want) || strings.Contains(stderr, "cannot read") {
			t.Errorf("ffc %s: exit %d, stderr %q; want exit 2 starting %q", strings.Join(tt.args, " "), code, stderr, want)
		}
	}
	if _, err := os.Stat(out); err == nil {
		t.Errorf("ffc gen wrote %s", out)
	}
	// A file named like a flag is read.
	t.Chdir(dir)
	if err := os.Rename(ff, "-x.ff"); err != nil {
		t.Fatal(err)
	}
	if code, stderr := run("check", "--", "-x.ff"); code != exitOK {
		t.Errorf("ffc check -- -x.ff: exit %d: %s", code, stderr)
	}
}
