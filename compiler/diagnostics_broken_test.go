package compiler

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/flowfabric/ff/dsl"
)

// TestDiagnosticsOfBrokenFiles compiles each testdata/broken/*.ff file on its own
// (common mistakes a newcomer makes: misspelt names and keywords, unclosed
// blocks, bad escapes, bytes that are not UTF-8, a "->" without a type, ...)
// and compares what `ffc check` would print with NAME.golden (-update
// rewrites them). Every file but the empty one must fail, and every
// diagnostic must point inside its file: a line that exists and a column
// at most one past the line's end.
func TestDiagnosticsOfBrokenFiles(t *testing.T) {
	files, err := filepath.Glob("testdata/broken/*.ff")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 15 {
		t.Fatalf("%d inputs in testdata/broken, want at least 15", len(files))
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			src, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			pkg, diags := CompileFiles(file)
			if len(src) > 0 && !diags.HasErrors() {
				t.Errorf("no error for a broken file")
			}
			if diags.HasErrors() != (pkg == nil) {
				t.Errorf("errors: %v, plan: %v; want a plan exactly when there is no error", diags.HasErrors(), pkg != nil)
			}
			lines := sourceLines(src)
			for _, d := range diags {
				checkInside(t, d.Range.Start, lines, d.Message)
				for _, r := range d.Related {
					checkInside(t, r.Range.Start, lines, r.Message)
				}
			}
			var b bytes.Buffer
			if err := diags.Format(&b); err != nil {
				t.Fatal(err)
			}
			checkGolden(t, strings.TrimSuffix(file, ".ff")+".golden", b.Bytes())
		})
	}
}

// lineBreak is a line break of a .ff file: CR LF, LF or a lone CR.
var lineBreak = regexp.MustCompile(`\r\n|\n|\r`)

// sourceLines splits src into lines as positions count them: at each line
// break, and without a byte order mark at the start.
func sourceLines(src []byte) []string {
	return lineBreak.Split(string(bytes.TrimPrefix(src, []byte("\ufeff"))), -1)
}

// checkInside fails when p is not a position of the file split into lines.
func checkInside(t *testing.T, p dsl.Position, lines []string, what string) {
	t.Helper()
	if p.Line < 1 || p.Line > len(lines) {
		t.Errorf("%q: line %d outside 1..%d", what, p.Line, len(lines))
		return
	}
	if n := len(lines[p.Line-1]); p.Col < 1 || p.Col > n+1 {
		t.Errorf("%q: column %d outside 1..%d of line %d", what, p.Col, n+1, p.Line)
	}
}

// diagLine is the shape of a printed diagnostic, `path:line:col: severity:
// message`, and relatedLine that of a related position under it.
var (
	diagLine    = regexp.MustCompile(`^testdata/broken/[0-9a-z_]+\.ff:(\d+):(\d+): (error|warning): \S`)
	relatedLine = regexp.MustCompile(`^\ttestdata/broken/[0-9a-z_]+\.ff:(\d+):(\d+): \S`)
)

// TestBrokenFilesGoldenShape checks that every golden file holds only
// lines of the form `file:line:col: error: message`, each maybe followed
// by indented related positions, so that editors and CI can parse them.
func TestBrokenFilesGoldenShape(t *testing.T) {
	goldens, err := filepath.Glob("testdata/broken/*.golden")
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range goldens {
		data, err := os.ReadFile(g)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
			if line == "" && len(data) == 0 {
				continue
			}
			re := diagLine
			if strings.HasPrefix(line, "\t") {
				re = relatedLine
			}
			m := re.FindStringSubmatch(line)
			if m == nil {
				t.Errorf("%s:%d: %q is not path:line:col: severity: message", g, i+1, line)
				continue
			}
			if n, _ := strconv.Atoi(m[1]); n < 1 {
				t.Errorf("%s:%d: line %d", g, i+1, n)
			}
		}
	}
}
