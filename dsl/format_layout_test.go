package dsl

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// A line that closes a bracket and opens another ("}, {" between the
// objects of a list, "], [" between lists) sits at the level of the line
// that opened what it closes, as gofmt lays out []T{{...}, {...}}; it was
// indented a level deeper, and the second element deeper than the first.
func TestFormatCloseThenOpen(t *testing.T) {
	for _, src := range []string{
		`schedule s {
  flow f
  cron "0 2 * * *"
  input {
    items: [{
      sku: "a"
    }, {
      sku: "b"
    }]
  }
}
`,
		`schedule s {
  flow f
  cron "0 2 * * *"
  input {
    deep: [[
      1
    ], [
      2
    ]]
  }
}
`,
	} {
		got := mustFormat(t, "s.ff", []byte(src))
		if d := cmp.Diff(src, string(got)); d != "" {
			t.Errorf("Format changed a file laid out as gofmt would (-want +got):\n%s", d)
		}
	}
}

// The repository's .ff files with random line breaks (LF, CR LF, a lone
// CR), tabs and line and block comments put between tokens: each
// variation that parses formats without an internal error, to a fixed
// point.
func TestFormatRandomBreaks(t *testing.T) {
	var files []string
	for _, pattern := range []string{"../examples/flows/*.ff", "../compiler/testdata/*.ff", "testdata/format/*.ff"} {
		m, _ := filepath.Glob(pattern)
		files = append(files, m...)
	}
	seps := []string{"\n", " /* c\n x */ ", " // é trailing\n", "\n\n\t", "/*k*/", "\r\n", "\r", " /* c\r x */ ", " // cr\r", " ", " ", " "}
	r := rand.New(rand.NewPCG(3, 4))
	parsed := 0
	for _, file := range files {
		src, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if _, d := Parse(file, src); d.HasErrors() {
			continue
		}
		var diags Diagnostics
		toks := scanComments(file, src, &diags)
		for range 100 {
			var b strings.Builder
			for i, tk := range toks[:len(toks)-1] { // without EOF
				if i > 0 {
					sep := seps[r.IntN(len(seps))]
					if strings.HasPrefix(toks[i-1].Value, "//") && !strings.ContainsAny(sep, "\r\n") {
						sep = "\n"
					}
					b.WriteString(sep)
				}
				b.WriteString(tk.Value)
			}
			in := []byte(b.String())
			if _, d := Parse(file, in); d.HasErrors() {
				continue
			}
			parsed++
			out, d := Format(file, in)
			if d.HasErrors() {
				t.Fatalf("%s: Format refuses a variation that parses: %v\n%q", file, d, in)
			}
			if again := mustFormat(t, file, out); !bytes.Equal(again, out) {
				t.Fatalf("%s: not a fixed point:\ninput %q\n%s", file, in, cmp.Diff(string(out), string(again)))
			}
		}
	}
	if parsed < 300 {
		t.Fatalf("only %d variations parsed", parsed)
	}
}
