package flows

import (
	"bytes"
	"flag"
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/flowfabric/ff/compiler"
	"github.com/flowfabric/ff/gen"
)

var update = flag.Bool("update", false, "rewrite flows_ff.go from the .ff files")

// TestGeneratedCodeIsFresh checks that flows_ff.go is exactly what ffc gen
// writes for the .ff files of this directory (as `go generate` would), so
// a change to a flow cannot be committed without regenerating.
func TestGeneratedCodeIsFresh(t *testing.T) {
	pkg, diags := compiler.CompileFiles(".")
	if diags.HasErrors() {
		t.Fatalf("compiling the example flows:\n%v", diags)
	}
	if _, warnings := diags.Count(); warnings > 0 {
		t.Errorf("the example flows have warnings:\n%v", diags)
	}
	want, err := gen.Generate(pkg, gen.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile("flows_ff.go", want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile("flows_ff.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("flows_ff.go is stale: run `go generate ./examples/flows` (-committed +regenerated):\n%s", cmp.Diff(string(got), string(want)))
	}
}
