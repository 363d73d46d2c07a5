package gen

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/flowfabric/ff/compiler"
	"github.com/flowfabric/ff/compiler/plan"
	"github.com/flowfabric/ff/dsl"
)

// examplesDir is the directory of the example flows.
var examplesDir = filepath.Join("..", "examples", "flows")

// compile compiles the .ff files named by paths and fails the test on any
// error diagnostic.
func compile(t *testing.T, paths ...string) *plan.Package {
	t.Helper()
	pkg, diags := compiler.CompileFiles(paths...)
	if diags.HasErrors() {
		t.Fatalf("compiling %v:\n%v", paths, diags)
	}
	return pkg
}

// compiledBuildCases returns a build case for every testdata .ff file
// (issue 2's example among them), for every example flow file on its own,
// for the examples directory as a whole and for a 300-exec flow.
func compiledBuildCases(t *testing.T) []buildCase {
	var cases []buildCase
	for _, f := range testdataFlows(t) {
		name := strings.TrimSuffix(filepath.Base(f), ".ff")
		cases = append(cases, buildCase{dir: "testdata_" + name, pkg: compile(t, f)})
	}
	files, err := filepath.Glob(filepath.Join(examplesDir, "*.ff"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 4 {
		t.Fatalf("found %d example flows in %s, want at least 4", len(files), examplesDir)
	}
	slices.Sort(files)
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".ff")
		cases = append(cases, buildCase{dir: "example_" + name, pkg: compile(t, f)})
	}
	cases = append(cases, buildCase{dir: "examples_all", pkg: compile(t, examplesDir)})
	big, diags := compiler.Compile([]dsl.Source{{Name: "big.ff", Data: bigFlowSource(300)}})
	if diags.HasErrors() {
		t.Fatalf("compiling the big flow: %v", diags)
	}
	cases = append(cases, buildCase{dir: "big300", pkg: big})
	return cases
}
