package gen

import (
	"bytes"
	"flag"
	"go/format"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// testdataFlows returns the .ff files of testdata, sorted.
func testdataFlows(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "*.ff"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no .ff files in testdata")
	}
	return files
}

// TestGolden compiles each testdata/NAME.ff and compares the generated Go
// with testdata/NAME.go.golden, and checks that its embedded plans are
// the compiler's. Run with -update to rewrite the golden
// files after an intended change.
func TestGolden(t *testing.T) {
	for _, path := range testdataFlows(t) {
		name := strings.TrimSuffix(filepath.Base(path), ".ff")
		t.Run(name, func(t *testing.T) {
			pkg := compile(t, path)
			got, err := Generate(pkg, Options{})
			if err != nil {
				t.Fatal(err)
			}
			checkEmbedded(t, pkg, got)
			if formatted, err := format.Source(got); err != nil || !bytes.Equal(formatted, got) {
				t.Fatalf("generated code is not gofmt'ed (err %v):\n%s", err, cmp.Diff(string(formatted), string(got)))
			}
			golden := filepath.Join("testdata", name+".go.golden")
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test ./gen -update to create it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("generated code differs from %s (-want +got):\n%s", golden, cmp.Diff(string(want), string(got)))
			}
		})
	}
}
