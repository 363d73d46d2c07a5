package compiler

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/flowfabric/ff/dsl"
)

// An expectation is written in a .ff comment on the line a diagnostic
// starts at: `// ERROR FF0201 "regexp"` or `// WARNING FF0901 "regexp"`;
// several may follow one another on a line. A prefix "@-N " or "@+N " moves
// the expectation N lines up or down, for lines that cannot hold a comment.
var expectRE = regexp.MustCompile(`(?:@([+-]\d+) )?(ERROR|WARNING) (FF\d{4}) "((?:[^"\\]|\\.)*)"`)

type expectation struct {
	file     string
	line     int
	severity dsl.Severity
	code     dsl.Code
	re       *regexp.Regexp
	matched  bool
}

func (e *expectation) String() string {
	return fmt.Sprintf("%s:%d: %s %s %q", e.file, e.line, e.severity, e.code, e.re)
}

// parseExpectations reads the expectations in the comments of src.
func parseExpectations(t *testing.T, name string, src []byte) []*expectation {
	t.Helper()
	var out []*expectation
	for i, line := range strings.Split(string(src), "\n") {
		c := strings.Index(line, "//")
		if c < 0 {
			continue
		}
		for _, m := range expectRE.FindAllStringSubmatch(line[c:], -1) {
			pat := strings.ReplaceAll(m[4], `\"`, `"`)
			re, err := regexp.Compile(pat)
			if err != nil {
				t.Fatalf("%s:%d: bad expectation regexp %q: %v", name, i+1, pat, err)
			}
			sev := dsl.SeverityError
			if m[2] == "WARNING" {
				sev = dsl.SeverityWarning
			}
			line := i + 1
			if m[1] != "" {
				off, _ := strconv.Atoi(m[1])
				line += off
			}
			out = append(out, &expectation{file: name, line: line, severity: sev, code: dsl.Code(m[3]), re: re})
		}
	}
	return out
}

// checkExpectations matches diagnostics against expectations both ways:
// every diagnostic must be expected, and every expectation must be met.
func checkExpectations(t *testing.T, diags dsl.Diagnostics, exps []*expectation) {
	t.Helper()
	for _, d := range diags {
		found := false
		for _, e := range exps {
			if !e.matched && e.file == d.Range.Start.File && e.line == d.Range.Start.Line &&
				e.severity == d.Severity && e.code == d.Code && e.re.MatchString(d.Message) {
				e.matched, found = true, true
				break
			}
		}
		if !found {
			t.Errorf("unexpected diagnostic: %s", d)
		}
	}
	for _, e := range exps {
		if !e.matched {
			t.Errorf("missing diagnostic: %s", e)
		}
	}
}

// checkSource compiles src as one file named name and checks its
// diagnostics against its inline expectations, both ways.
func checkSource(t *testing.T, name, src string) {
	t.Helper()
	exps := parseExpectations(t, name, []byte(src))
	_, diags := Compile([]dsl.Source{{Name: name, Data: []byte(src)}})
	checkExpectations(t, diags, exps)
}
