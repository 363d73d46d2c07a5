package ffc

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// -w through a symbolic link formats the file it points to and leaves the
// link a link (a temporary file renamed over the link replaced it, and the
// target stayed unformatted); a hard link sees the change too, as the file
// is rewritten in place.
func TestFmtWriteThroughSymlink(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "real.ff")
	link := filepath.Join(dir, "link.ff")
	messy := "package a\nflow f() {\nresult x\n}\n"
	tidy := "package a\nflow f() {\n  result x\n}\n"
	if err := os.WriteFile(real, []byte(messy), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("real.ff", link); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if code := Run([]string{"fmt", "-w", link}, strings.NewReader(""), &stdout, &stderr); code != exitOK {
		t.Fatalf("ffc fmt -w: exit %d, stderr %s", code, &stderr)
	}
	info, err := os.Lstat(link)
	if err != nil {
		t.Fatal(err)
	}
	if info.Mode()&os.ModeSymlink == 0 {
		t.Errorf("link.ff is no longer a symbolic link (mode %v): -w replaced it with a regular file", info.Mode())
	}
	got, err := os.ReadFile(real)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != tidy {
		t.Errorf("real.ff (the link's target) = %q, want it formatted: %q", got, tidy)
	}
	// A hard link to a file formatted in place sees the change.
	if err := os.WriteFile(real, []byte(messy), 0o644); err != nil {
		t.Fatal(err)
	}
	hard := filepath.Join(dir, "hard.ff")
	if err := os.Link(real, hard); err != nil {
		t.Fatal(err)
	}
	if code := Run([]string{"fmt", "-w", real}, strings.NewReader(""), &stdout, &stderr); code != exitOK {
		t.Fatalf("ffc fmt -w real.ff: exit %d, stderr %s", code, &stderr)
	}
	if got, err := os.ReadFile(hard); err != nil || string(got) != tidy {
		t.Errorf("hard.ff, a hard link to real.ff, = %q, %v; want it formatted too", got, err)
	}
}

// A file named ./flows/x.ff on the command line (what a glob gives) gets
// the header a/flows/x.ff, which git apply takes (a/./flows/x.ff it
// refused).
func TestFmtDiffDotSlashPath(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	if err := os.MkdirAll("flows", 0o755); err != nil {
		t.Fatal(err)
	}
	messy := []byte("package a\nflow f() {\nresult x\n}\n")
	if err := os.WriteFile("flows/x.ff", messy, 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if code := Run([]string{"fmt", "-d", "./flows/x.ff"}, strings.NewReader(""), &stdout, &stderr); code != exitError {
		t.Fatalf("ffc fmt -d: exit %d, want 1; stderr %s", code, &stderr)
	}
	got, err := applyDiff(t, "flows/x.ff", messy, stdout.String())
	if err != nil {
		t.Fatalf("git apply refuses the -d output: %v\n%s", err, &stdout)
	}
	if want := "package a\nflow f() {\n  result x\n}\n"; string(got) != want {
		t.Fatalf("applied diff gives %q, want %q", got, want)
	}
}

// A path with a space ends with a tab in the diff's header, as git diff
// writes it, so that patch -p1 finds the file (it cut the name at the
// space).
func TestFmtDiffSpaceInPathPatch(t *testing.T) {
	if _, err := exec.LookPath("patch"); err != nil {
		t.Fatal("patch(1) is needed")
	}
	dir := t.TempDir()
	t.Chdir(dir)
	if err := os.MkdirAll("my flows", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile("my flows/x.ff", []byte("package a\nflow f() {\nresult x\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if code := Run([]string{"fmt", "-d", "my flows/x.ff"}, strings.NewReader(""), &stdout, &stderr); code != exitError {
		t.Fatalf("ffc fmt -d: exit %d, want 1; stderr %s", code, &stderr)
	}
	cmd := exec.Command("patch", "-p1", "--batch")
	cmd.Stdin = &stdout
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("patch -p1 refuses the -d output: %v\n%s", err, out)
	}
	got, err := os.ReadFile("my flows/x.ff")
	if err != nil {
		t.Fatal(err)
	}
	if want := "package a\nflow f() {\n  result x\n}\n"; string(got) != want {
		t.Fatalf("patched file = %q, want %q", got, want)
	}
}

// DIR/... formats every directory below DIR that holds .ff files, as the
// go tool's pattern does, leaving out testdata and directories whose names
// start with "." or "_"; a tree without .ff files is an error.
func TestFmtTree(t *testing.T) {
	dir := t.TempDir()
	messy := "package a\nflow f() {\nresult x\n}\n"
	for _, f := range []string{"top.ff", "a/b/deep.ff", "testdata/skip.ff", ".hidden/skip.ff", "_old/skip.ff", "a/.#lock.ff"} {
		path := filepath.Join(dir, f)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(messy), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var stdout, stderr bytes.Buffer
	if code := Run([]string{"fmt", "-l", dir + "/..."}, strings.NewReader(""), &stdout, &stderr); code != exitError {
		t.Fatalf("ffc fmt -l DIR/...: exit %d, want %d; stderr %s", code, exitError, &stderr)
	}
	want := filepath.Join(dir, "top.ff") + "\n" + filepath.Join(dir, "a", "b", "deep.ff") + "\n"
	if stdout.String() != want {
		t.Fatalf("ffc fmt -l DIR/... listed\n%s\nwant\n%s(stderr %s)", &stdout, want, &stderr)
	}
	stdout.Reset()
	if code := Run([]string{"fmt", "-l", filepath.Join(dir, "testdata") + "/..."}, strings.NewReader(""), &stdout, &stderr); code != exitError {
		t.Fatalf("ffc fmt -l testdata/...: exit %d, want %d (a tree named is walked, its own name is not checked)", code, exitError)
	}
	stderr.Reset()
	empty := t.TempDir()
	if code := Run([]string{"fmt", "-l", empty + "/..."}, strings.NewReader(""), &stdout, &stderr); code != exitError ||
		!strings.Contains(stderr.String(), "no .ff files") {
		t.Fatalf("ffc fmt -l EMPTY/...: exit %d, stderr %q; want an error saying there are no .ff files", code, &stderr)
	}
}
