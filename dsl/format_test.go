package dsl

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// TestFormatGolden formats testdata/format/NAME.ff and compares it with
// NAME.golden (-update rewrites them). A golden file is formatted already:
// formatting it again changes nothing.
func TestFormatGolden(t *testing.T) {
	files, err := filepath.Glob("testdata/format/*.ff")
	if err != nil || len(files) == 0 {
		t.Fatalf("no inputs: %v", err)
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			src, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			got := mustFormat(t, file, src)
			golden := strings.TrimSuffix(file, ".ff") + ".golden"
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(string(want), string(got)); d != "" {
				t.Fatalf("Format(%s) (-want +got):\n%s", file, d)
			}
			if again := mustFormat(t, golden, got); !bytes.Equal(again, got) {
				t.Fatalf("formatting the output again changed it:\n%s", cmp.Diff(string(got), string(again)))
			}
		})
	}
}

// Every .ff file of the repository that parses formats to a fixed point
// that parses, with its tokens and comments kept (Format checks those).
func TestFormatRepositoryFiles(t *testing.T) {
	var files []string
	for _, pattern := range []string{"../examples/flows/*.ff", "../compiler/testdata/*.ff", "../compiler/testdata/*/*.ff", "../gen/testdata/*.ff", "testdata/format/*.ff"} {
		m, err := filepath.Glob(pattern)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	formatted := 0
	for _, file := range files {
		src, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if _, diags := Parse(file, src); diags.HasErrors() {
			if out, fd := Format(file, src); out != nil || !fd.HasErrors() {
				t.Errorf("%s: Format of a file with syntax errors = %q, %v; want nil and the errors", file, out, fd)
			}
			continue
		}
		out := mustFormat(t, file, src)
		if again := mustFormat(t, file, out); !bytes.Equal(again, out) {
			t.Errorf("%s: not a fixed point:\n%s", file, cmp.Diff(string(out), string(again)))
		}
		formatted++
	}
	if formatted < 10 {
		t.Fatalf("only %d files formatted", formatted)
	}
}

// The examples are formatted: what ffc fmt -l would say of them.
func TestFormatExamplesFormatted(t *testing.T) {
	files, _ := filepath.Glob("../examples/flows/*.ff")
	if len(files) == 0 {
		t.Fatal("no examples")
	}
	for _, file := range files {
		src, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if out := mustFormat(t, file, src); !bytes.Equal(out, src) {
			t.Errorf("%s is not formatted (ffc fmt -w):\n%s", file, cmp.Diff(string(src), string(out)))
		}
	}
}

func TestFormatRefusesErrors(t *testing.T) {
	for _, src := range []string{
		"flow f( {",
		"type T { a: string } @",
		"\"unterminated",
		"/* unterminated",
	} {
		out, diags := Format("bad.ff", []byte(src))
		if out != nil || !diags.HasErrors() {
			t.Errorf("Format(%q) = %q, %v; want nil and errors", src, out, diags)
		}
		for _, d := range diags {
			if strings.Contains(d.Message, "internal error") {
				t.Errorf("Format(%q): %s", src, d)
			}
		}
	}
}

func TestFormatEmpty(t *testing.T) {
	for _, src := range []string{"", "\n\n", "  \t\r\n"} {
		if out := mustFormat(t, "empty.ff", []byte(src)); string(out) != "\n" {
			t.Errorf("Format(%q) = %q, want a line break", src, out)
		}
	}
}

// FuzzFormat: a file that parses formats without an internal error (the
// tokens and comments kept), to a file that parses and that formats to
// itself.
func FuzzFormat(f *testing.F) {
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	for _, pattern := range []string{"testdata/format/*.ff", "../examples/flows/*.ff", "../compiler/testdata/*.ff"} {
		files, _ := filepath.Glob(pattern)
		for _, file := range files {
			if b, err := os.ReadFile(file); err == nil {
				f.Add(b)
			}
		}
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		out, diags := Format("fuzz.ff", src)
		for _, d := range diags {
			if strings.Contains(d.Message, "internal error") {
				t.Fatalf("%s\ninput: %q", d, src)
			}
		}
		if out == nil {
			if !diags.HasErrors() {
				t.Fatalf("Format returned nothing without an error for %q", src)
			}
			return
		}
		again, d2 := Format("fuzz.ff", out)
		if d2.HasErrors() {
			t.Fatalf("the output does not parse: %v\ninput: %q\noutput: %q", d2, src, out)
		}
		if !bytes.Equal(again, out) {
			t.Fatalf("not a fixed point:\ninput: %q\n%s", src, cmp.Diff(string(out), string(again)))
		}
	})
}

func mustFormat(t *testing.T, name string, src []byte) []byte {
	t.Helper()
	out, diags := Format(name, src)
	if diags.HasErrors() {
		t.Fatalf("Format(%s): %v", name, diags)
	}
	return out
}

// TestFormatLineEnds: a lone CR ends a line as LF and CR LF do (old Mac
// files), in code and in comments; formatting writes LF line ends and
// drops a byte order mark.
func TestFormatLineEnds(t *testing.T) {
	const want = "// c\ntype T {\n  a: string /* x\n   y */\n  b: int\n}\n"
	for _, src := range []string{
		"// c\ntype T {\n  a: string /* x\n   y */\n  b: int\n}\n",
		"// c\rtype T {\r  a: string /* x\r   y */\r  b: int\r}\r",
		"// c\r\ntype T {\r\n  a: string /* x\r\n   y */\r\n  b: int\r\n}\r\n",
		"\ufeff// c  \rtype T {\r\n  a: string /* x \r   y */\n  b: int\r}",
	} {
		got := mustFormat(t, "e.ff", []byte(src))
		if d := cmp.Diff(want, string(got)); d != "" {
			t.Errorf("Format(%q) (-want +got):\n%s", src, d)
		}
	}
}
