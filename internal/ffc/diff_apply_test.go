package ffc

import (
	"bytes"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flowfabric/ff/dsl"
)

// applyDiff applies the unified diff d to a copy of src named name in a
// temporary directory with `git apply`, and returns the result.
func applyDiff(t *testing.T, name string, src []byte, d string) ([]byte, error) {
	t.Helper()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), src, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("git", "apply", "-")
	cmd.Dir = dir
	cmd.Stdin = strings.NewReader(d)
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, &applyError{err: err, out: string(out)}
	}
	got, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	return got, nil
}

type applyError struct {
	err error
	out string
}

func (e *applyError) Error() string { return e.err.Error() + ": " + e.out }

// mess makes a random variation of a formatted .ff file that formats back
// to it: indentation, spacing, blank lines, CRLF, a missing final newline.
func mess(r *rand.Rand, src string, final bool) string {
	lines := strings.Split(strings.TrimSuffix(src, "\n"), "\n")
	var b strings.Builder
	for i, l := range lines {
		switch r.IntN(6) {
		case 0:
			l = strings.Repeat("\t", r.IntN(3)) + strings.TrimLeft(l, " ")
		case 1:
			l += strings.Repeat(" ", r.IntN(3)+1)
		case 2:
			b.WriteString("\n\n")
		}
		b.WriteString(l)
		if i < len(lines)-1 || final {
			if r.IntN(8) == 0 {
				b.WriteString("\r")
			}
			b.WriteString("\n")
		}
	}
	return b.String()
}

// For many random variations of the example flows (tabs, trailing blanks,
// blank lines, CRLF lines, with and without a final line break), the -d
// diff applied with git apply gives exactly the formatted file.
func TestDiffApplies(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatal("git is needed to apply the diffs")
	}
	files, _ := filepath.Glob("../../examples/flows/*.ff")
	if len(files) == 0 {
		t.Fatal("no example flows")
	}
	r := rand.New(rand.NewPCG(1, 2))
	fails := 0
	for _, file := range files {
		src, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		tidy, diags := dsl.Format(file, src)
		if diags.HasErrors() {
			t.Fatalf("%s: %v", file, diags)
		}
		for n := range 40 {
			messy := []byte(mess(r, string(tidy), n%4 != 0)) // every fourth without its final line break
			out, diags := dsl.Format("x.ff", messy)
			if diags.HasErrors() {
				t.Fatalf("%s variation %d: %v", file, n, diags)
			}
			if bytes.Equal(out, messy) {
				continue
			}
			got, err := applyDiff(t, "x.ff", messy, unifiedDiff("x.ff", messy, out))
			if err != nil || !bytes.Equal(got, out) {
				fails++
				if fails <= 3 {
					t.Errorf("%s variation %d: applying the -d diff: err %v; got == formatted: %v (last bytes %q, want %q)",
						file, n, err, bytes.Equal(got, out), tail(got), tail(out))
				}
			}
		}
	}
	if fails > 0 {
		t.Errorf("%d variations: the diff does not turn the file into its formatted form", fails)
	}
}

func tail(b []byte) []byte { return b[max(len(b)-12, 0):] }

// A file whose only fault is its missing final line break gets a diff that
// says so ("\ No newline at end of file") and that git apply takes (the
// diff had a header and no hunk).
func TestDiffMissingFinalNewline(t *testing.T) {
	for _, src := range []string{
		"package a\n\nflow f() {\n  result x\n}",
		"package a\n\nflow f() {\nresult x\n}",
		"\n\n\n", // formats to "\n": splitLines makes it no line at all
		"",       // formats to "\n" too
	} {
		out, diags := dsl.Format("a.ff", []byte(src))
		if diags.HasErrors() {
			t.Fatal(diags)
		}
		d := unifiedDiff("a.ff", []byte(src), out)
		got, err := applyDiff(t, "a.ff", []byte(src), d)
		if err != nil {
			t.Errorf("%q: git apply: %v\n%s", src, err, d)
			continue
		}
		if !bytes.Equal(got, out) {
			t.Errorf("%q: the applied diff gives %q, want %q\n%s", src, got, out, d)
		}
	}
}
