package ffc

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// genSource is a package for the ffc gen tests.
const genSource = "package notes\ntype Msg { to: string }\nflow notify(Msg) { exec send(Msg) {} }\n"

// runGenTo runs ffc gen -o out on the .ff file src and fails t unless it
// exits 0.
func runGenTo(t *testing.T, out, src string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	if code := Run([]string{"gen", "-o", out, src}, strings.NewReader(""), &stdout, &stderr); code != exitOK {
		t.Fatalf("ffc gen -o %s: exit %d, stderr %s", out, code, &stderr)
	}
}

// TestGenWritesThroughSymlink: when -o names a symbolic link (relative or
// absolute, to a link, to a file not written yet, or relative in a linked
// directory), ffc gen replaces the
// file at the end of the links, atomically, and leaves each link a link
// (it once renamed its temporary file over the link); no temporary file
// is left in either directory.
func TestGenWritesThroughSymlink(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "notes.ff")
	if err := os.WriteFile(src, []byte(genSource), 0o644); err != nil {
		t.Fatal(err)
	}
	want := filepath.Join(dir, "want.go")
	runGenTo(t, want, src)
	wantCode, err := os.ReadFile(want)
	if err != nil {
		t.Fatal(err)
	}
	for _, dirName := range []string{"out", "gen", "gen/sub"} {
		if err := os.Mkdir(filepath.Join(dir, dirName), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name   string
		links  map[string]string // link (under dir) -> what it points to
		out    string            // the link given to -o
		target string            // the file written (under dir)
		exists bool              // target exists before
	}{
		{"relative, other directory", map[string]string{"out/a_ff.go": "../gen/a.go"}, "out/a_ff.go", "gen/a.go", true},
		{"absolute", map[string]string{"out/b_ff.go": filepath.Join(dir, "gen/b.go")}, "out/b_ff.go", "gen/b.go", true},
		{"link to a link", map[string]string{"out/c_ff.go": "c2_ff.go", "out/c2_ff.go": "../gen/c.go"}, "out/c_ff.go", "gen/c.go", true},
		{"dangling", map[string]string{"out/d_ff.go": "../gen/d.go"}, "out/d_ff.go", "gen/d.go", false},
		// ".." from the directory the link is really in, gen/sub.
		{"in a linked directory", map[string]string{"lnk": "gen/sub", "gen/sub/e_ff.go": "../e.go"}, "lnk/e_ff.go", "gen/e.go", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			target := filepath.Join(dir, tt.target)
			if tt.exists {
				if err := os.WriteFile(target, []byte("package notes\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			for link, to := range tt.links {
				if err := os.Symlink(to, filepath.Join(dir, link)); err != nil {
					t.Fatal(err)
				}
			}
			runGenTo(t, filepath.Join(dir, tt.out), src)
			for link, to := range tt.links {
				got, err := os.Readlink(filepath.Join(dir, link))
				if err != nil {
					t.Errorf("%s is no longer a symbolic link: %v", link, err)
				} else if got != to {
					t.Errorf("%s points to %s, want %s", link, got, to)
				}
			}
			code, err := os.ReadFile(target)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(code, wantCode) {
				t.Errorf("%s (the links' target) does not hold the generated code:\n%s", tt.target, code)
			}
		})
	}
	for _, d := range []string{"out", "gen"} {
		tmp, _ := filepath.Glob(filepath.Join(dir, d, ".*.tmp"))
		if len(tmp) > 0 {
			t.Errorf("temporary files left: %v", tmp)
		}
	}
}

// TestGenSymlinkLoop: a loop of links is an error, and nothing is written.
func TestGenSymlinkLoop(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "notes.ff")
	if err := os.WriteFile(src, []byte(genSource), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "loop_ff.go")
	if err := os.Symlink("loop_ff.go", out); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	code := Run([]string{"gen", "-o", out, src}, strings.NewReader(""), &stdout, &stderr)
	if code != exitError || !strings.Contains(stderr.String(), "more than 40 symbolic links to follow") {
		t.Errorf("ffc gen -o LOOP: exit %d, stderr %q; want 1 and too many links", code, &stderr)
	}
	if to, err := os.Readlink(out); err != nil || to != "loop_ff.go" {
		t.Errorf("the link is now %q, %v", to, err)
	}
}
