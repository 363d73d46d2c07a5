package compiler

import (
	"os"
	"path/filepath"
	"testing"
)

// TestSameFileTwice: a file named twice (a.ff and ./a.ff, or a.ff and its
// absolute path) is read once, not compiled as two files whose every
// declaration is a duplicate.
func TestSameFileTwice(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "a.ff"), []byte("flow f() { exec a() {} }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	for _, paths := range [][]string{{"a.ff", "./a.ff"}, {"a.ff", filepath.Join(dir, "a.ff")}, {".", "a.ff"}} {
		srcs, diags := ReadSources(paths...)
		if diags.HasErrors() || len(srcs) != 1 {
			t.Errorf("%q: %d sources, %v", paths, len(srcs), diags)
		}
		if _, diags := CompileFiles(paths...); diags.HasErrors() {
			t.Errorf("%q: %v", paths, diags)
		}
	}
}

// TestHiddenFilesInDir: a directory stands for its *.ff files except
// those whose names start with "." or "_", which the go tool ignores too:
// an editor's lock file next to a file being edited (Emacs' .#x.ff, a
// dangling symbolic link) must not break `ffc check .` or go generate.
// Named explicitly, such a file is read.
func TestHiddenFilesInDir(t *testing.T) {
	dir := t.TempDir()
	write := func(name, src string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("x.ff", "flow f() { exec a() {} }\n")
	write("_draft.ff", "flow f() { exec a() {} }\n") // would be a duplicate
	write(".old.ff", "flow f( {\n")                  // would be a syntax error
	if err := os.Symlink("user@host.1234:1700000000", filepath.Join(dir, ".#x.ff")); err != nil {
		t.Fatal(err)
	}
	srcs, diags := ReadSources(dir)
	if diags.HasErrors() || len(srcs) != 1 || filepath.Base(srcs[0].Name) != "x.ff" {
		t.Errorf("ReadSources(dir): %d sources, %v", len(srcs), diags)
	}
	if _, diags := CompileFiles(dir); diags.HasErrors() {
		t.Errorf("%v", diags)
	}
	if srcs, diags := ReadSources(filepath.Join(dir, "_draft.ff")); diags.HasErrors() || len(srcs) != 1 {
		t.Errorf("_draft.ff named explicitly: %d sources, %v", len(srcs), diags)
	}
}
