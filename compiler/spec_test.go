package compiler

import (
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/flowfabric/ff/dsl"
	"github.com/google/go-cmp/cmp"
)

const specPath = "../spec/language.md"

// fence is one fenced block of the spec.
type fence struct {
	info string
	line int // line of the first line of the body
	body string
}

func readFences(t *testing.T) ([]fence, string) {
	t.Helper()
	data, err := os.ReadFile(specPath)
	if err != nil {
		t.Fatal(err)
	}
	var (
		out  []fence
		cur  *fence
		body []string
	)
	for i, line := range strings.Split(string(data), "\n") {
		switch {
		case cur == nil && strings.HasPrefix(line, "```"):
			cur = &fence{info: strings.TrimSpace(strings.TrimPrefix(line, "```")), line: i + 2}
			body = nil
		case cur != nil && line == "```":
			cur.body = strings.Join(body, "\n") + "\n"
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			body = append(body, line)
		}
	}
	if cur != nil {
		t.Fatalf("%s:%d: unclosed code fence", specPath, cur.line-1)
	}
	return out, string(data)
}

// TestSpecExamples compiles every ```ff block of spec/language.md as its
// own package. A block must produce exactly the diagnostics its inline
// `// ERROR` and `// WARNING` comments announce (none for most).
func TestSpecExamples(t *testing.T) {
	fences, _ := readFences(t)
	n := 0
	for _, f := range fences {
		if f.info != "ff" {
			continue
		}
		n++
		name := specPath
		t.Run(fmt.Sprintf("line%d", f.line), func(t *testing.T) {
			// Pad with blank lines so that diagnostics carry the line
			// numbers of the spec itself.
			src := strings.Repeat("\n", f.line-1) + f.body
			exps := parseExpectations(t, name, []byte(src))
			_, diags := Compile([]dsl.Source{{Name: name, Data: []byte(src)}})
			checkExpectations(t, diags, exps)
		})
	}
	if n < 5 {
		t.Errorf("found only %d ff examples in %s", n, specPath)
	}
}

// TestSpecGrammar checks that the spec's EBNF is the parser's grammar.
func TestSpecGrammar(t *testing.T) {
	fences, _ := readFences(t)
	for _, f := range fences {
		if f.info == "ebnf" {
			if diff := cmp.Diff(strings.TrimSpace(dsl.Grammar()), strings.TrimSpace(f.body)); diff != "" {
				t.Errorf("spec grammar differs from dsl.Grammar() (-parser +spec):\n%s", diff)
			}
			return
		}
	}
	t.Error("no ebnf block in the spec")
}

// TestSpecDiagnostics checks that the spec's diagnostic table lists
// exactly dsl.Codes, with the same severities and summaries.
func TestSpecDiagnostics(t *testing.T) {
	_, text := readFences(t)
	row := regexp.MustCompile(`(?m)^\| (FF\d{4}) \| (error|warning) \| (.*) \|$`)
	var got []string
	for _, m := range row.FindAllStringSubmatch(text, -1) {
		got = append(got, m[1]+" "+m[2]+" "+m[3])
	}
	var want []string
	for _, c := range dsl.Codes {
		want = append(want, string(c.Code)+" "+c.Severity.String()+" "+c.Summary)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("spec diagnostic table differs from dsl.Codes (-code +spec):\n%s", diff)
	}
}

// TestSpecKeywords checks the keyword list of the spec.
func TestSpecKeywords(t *testing.T) {
	_, text := readFences(t)
	i := strings.Index(text, "The keywords are `")
	if i < 0 {
		t.Fatal("no keyword list in the spec")
	}
	rest := text[i+len("The keywords are `"):]
	list := strings.Fields(rest[:strings.Index(rest, "`")])
	want := slices.Clone(dsl.Keywords)
	slices.Sort(want)
	if diff := cmp.Diff(want, list); diff != "" {
		t.Errorf("spec keywords differ (-code +spec):\n%s", diff)
	}
}
