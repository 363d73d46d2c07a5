package dsl

import (
	"os"
	"os/exec"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
)

// parseChildEnv names the file a child process of
// TestDeepNestingDoesNotCrash parses.
const parseChildEnv = "FF_TEST_PARSE_FILE"

// TestParseChild parses the file named by parseChildEnv with a goroutine
// stack of at most 64 MiB; it does nothing unless run as the child of
// TestDeepNestingDoesNotCrash.
func TestParseChild(t *testing.T) {
	name := os.Getenv(parseChildEnv)
	if name == "" {
		return
	}
	src, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	debug.SetMaxStack(64 << 20)
	_, diags := Parse(name, src)
	t.Logf("%d diagnostics", len(diags))
}

// TestDeepNestingDoesNotCrash: the parser recurses once per bracket level
// (participle's recursive descent), so it reads at most MaxNesting levels
// and reports deeper brackets (FF0108) instead of exhausting the stack,
// which would kill the process with "fatal error: stack overflow" (no
// recover can catch it). The parse runs in a child process whose stack is
// limited to 64 MiB, far more than MaxNesting levels take and far less
// than the 100,000 levels parsed here would.
func TestDeepNestingDoesNotCrash(t *testing.T) {
	const n = 100_000
	for _, c := range []struct{ name, src string }{
		{"schedule input", "flow f(json) { exec a(json) {} }\nschedule s { flow f cron \"@daily\" input " +
			strings.Repeat("[", n) + strings.Repeat("]", n) + " }\n"},
		{"list type", "type T { a: " + strings.Repeat("[", n) + "string" + strings.Repeat("]", n) + " }\n"},
		{"map type", "type T { a: " + strings.Repeat("{string: ", n) + "string" + strings.Repeat("}", n) + " }\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			file := t.TempDir() + "/deep.ff"
			if err := os.WriteFile(file, []byte(c.src), 0o644); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(os.Args[0], "-test.run=^TestParseChild$", "-test.count=1")
			cmd.Env = append(os.Environ(), parseChildEnv+"="+file)
			out, err := cmd.CombinedOutput()
			if err != nil {
				first, _, _ := strings.Cut(string(out), "\n")
				if i := strings.Index(string(out), "fatal error"); i >= 0 {
					first, _, _ = strings.Cut(string(out[i:]), "\n")
				}
				t.Errorf("parsing %d bytes of nested brackets crashed the process (%v): %s", len(c.src), err, first)
			}
		})
	}
}

// TestNestingBound: MaxNesting levels of brackets parse; one more is
// FF0108 at the bracket that goes too deep, the only diagnostic, and the
// declaration is kept as Bad (the compiler then leaves its uses alone).
func TestNestingBound(t *testing.T) {
	src := func(depth int) string {
		return "type T { a: " + strings.Repeat("[", depth-1) + "string" + strings.Repeat("]", depth-1) + " }\nflow f(T) { exec a(T) {} }\n"
	}
	f, diags := Parse("n.ff", []byte(src(MaxNesting)))
	if len(diags) > 0 {
		t.Fatalf("%d levels: %v", MaxNesting, diags)
	}
	if len(f.Decls) != 2 || f.Decls[0].Bad {
		t.Fatalf("%d levels: %d declarations, first bad: %v", MaxNesting, len(f.Decls), f.Decls[0].Bad)
	}
	f, diags = Parse("n.ff", []byte(src(MaxNesting+1)))
	want := "n.ff:1:" + strconv.Itoa(len("type T { a: ")+MaxNesting) + ": error: brackets nest more than 256 levels deep here; ffc reads at most 256 [FF0108]"
	if len(diags) != 1 || diags[0].String() != want {
		t.Fatalf("%d levels: got %v, want %s", MaxNesting+1, diags, want)
	}
	if len(f.Decls) != 2 || !f.Decls[0].Bad || f.Decls[0].Type == nil || f.Decls[0].Type.Name.Name != "T" || f.Decls[1].Bad {
		t.Errorf("%d levels: want type T kept as Bad and flow f intact, got %d declarations", MaxNesting+1, len(f.Decls))
	}
}
