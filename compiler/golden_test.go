package compiler

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flowfabric/ff/compiler/plan"
	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite golden files")

// TestGolden compiles each testdata/*.ff file on its own and compares the
// diagnostics, and the plan when there is no error, with NAME.golden.
func TestGolden(t *testing.T) {
	files, err := filepath.Glob("testdata/*.ff")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no golden inputs")
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			pkg, diags := CompileFiles(file)
			var b bytes.Buffer
			b.WriteString("-- diagnostics --\n")
			if err := diags.Format(&b); err != nil {
				t.Fatal(err)
			}
			if pkg != nil {
				b.WriteString("-- plan --\n")
				j, err := json.MarshalIndent(pkg, "", "  ")
				if err != nil {
					t.Fatal(err)
				}
				b.Write(j)
				b.WriteString("\n")
			}
			checkGolden(t, strings.TrimSuffix(file, ".ff")+".golden", b.Bytes())
		})
	}
}

// TestIssueExampleClean checks that the example of the language issue
// compiles without any diagnostic.
func TestIssueExampleClean(t *testing.T) {
	pkg, diags := CompileFiles("testdata/issue_example.ff")
	if len(diags) != 0 || pkg == nil {
		t.Fatalf("want no diagnostics, got:\n%v", diags)
	}
	// Compiling twice gives byte-identical plans.
	pkg2, _ := CompileFiles("testdata/issue_example.ff")
	a, _ := json.Marshal(pkg)
	b, _ := json.Marshal(pkg2)
	if !bytes.Equal(a, b) {
		t.Error("plans of two compilations differ")
	}
}

// TestPlansValidate checks that every plan the compiler produces from the
// clean inputs of this repository passes plan validation, as the runtime
// will run it on plans posted over HTTP.
func TestPlansValidate(t *testing.T) {
	inputs := [][]string{{"testdata/issue_example.ff"}, {"testdata/defaults.ff"}, {"../examples/flows"}}
	more, _ := filepath.Glob("../gen/testdata/*.ff")
	for _, m := range more {
		inputs = append(inputs, []string{m})
	}
	for _, in := range inputs {
		t.Run(strings.Join(in, ","), func(t *testing.T) {
			pkg, diags := CompileFiles(in...)
			if pkg == nil {
				t.Fatalf("compile: %v", diags)
			}
			if err := pkg.Validate(); err != nil {
				t.Errorf("plan does not validate:\n%v", err)
			}
			for i := range pkg.Flows {
				// A flow must survive a JSON round trip unchanged.
				j, err := json.Marshal(pkg.Flows[i])
				if err != nil {
					t.Fatal(err)
				}
				var back plan.Flow
				if err := json.Unmarshal(j, &back); err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(pkg.Flows[i], back); diff != "" {
					t.Errorf("flow %s changes in a JSON round trip (-want +got):\n%s", pkg.Flows[i].Name, diff)
				}
			}
		})
	}
}

// checkGolden compares got with the golden file, or rewrites the file
// with -update.
func checkGolden(t *testing.T, golden string, got []byte) {
	t.Helper()
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test -update)", err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("%s mismatch (-want +got):\n%s", golden, diff)
	}
}
