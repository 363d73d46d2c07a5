package ffc

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

// TestSynopsesAgree: ffc help listed `fmt [-l] [-d] [-w] [FILE|DIR...]`,
// while ffc fmt -h and spec/language.md said `[FILE|DIR|DIR/...]` (and
// neither that it takes several). Each command's synopsis is now the same
// in ffc help, in its -h and in the spec, and fmt's says what it takes:
// any number of files, directories and DIR/... trees.
func TestSynopsesAgree(t *testing.T) {
	spec, err := os.ReadFile("../../spec/language.md")
	if err != nil {
		t.Fatal(err)
	}
	var help bytes.Buffer
	if code := Run([]string{"help"}, nil, &help, &help); code != exitOK {
		t.Fatalf("ffc help: exit %d", code)
	}
	for _, cmd := range []string{"check", "plan", "graph", "gen", "fmt"} {
		var out bytes.Buffer
		if code := Run([]string{cmd, "-h"}, nil, &out, &out); code != exitOK {
			t.Fatalf("ffc %s -h: exit %d", cmd, code)
		}
		first, _, _ := strings.Cut(out.String(), "\n")
		syn, ok := strings.CutPrefix(first, "usage: ")
		if !ok {
			t.Fatalf("ffc %s -h begins with %q, want usage: ffc %s ...", cmd, first, cmd)
		}
		if !strings.Contains(help.String(), "\n  "+syn+" ") && !strings.Contains(help.String(), "\n  "+syn+"\n") {
			t.Errorf("ffc help does not list the synopsis of ffc %s -h, %q:\n%s", cmd, syn, help.String())
		}
		if !bytes.Contains(spec, []byte("\n"+syn+" ")) && !bytes.Contains(spec, []byte("\n"+syn+"\n")) {
			t.Errorf("spec/language.md does not list the synopsis of ffc %s -h, %q", cmd, syn)
		}
	}
	if !strings.Contains(help.String(), "ffc fmt [-l] [-d] [-w] [FILE|DIR|DIR/...]...") {
		t.Errorf("ffc help does not say that fmt takes DIR/... and several paths:\n%s", help.String())
	}
}
