package gen

import (
	"bytes"
	"fmt"
	"go/format"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flowfabric/ff/compiler"
	"github.com/flowfabric/ff/dsl"
)

// bigFlowSource returns a .ff package with one flow of n execs: a root
// fanning out to layers of 100 execs, each exec fed by the one above it
// and every tenth also waiting for its left neighbour's upstream.
func bigFlowSource(n int) []byte {
	const width = 100
	var b strings.Builder
	b.WriteString("package big\n\ntype Item {\n  id: string\n  n: int\n  tags: [string]\n  note?: string\n}\n\n")
	b.WriteString("flow big(Item) -> Item {\n")
	for i := range n {
		fmt.Fprintf(&b, "  exec e%d(Item) -> Item {", i)
		if i%10 == 9 && i >= width {
			fmt.Fprintf(&b, " input e%d", i-width)
		}
		if i%7 == 0 {
			b.WriteString(` requires ["cpu"] retry { attempts 3 backoff exponential delay 1s }`)
		}
		b.WriteString(" }\n")
	}
	for i := 1; i < n; i++ {
		switch {
		case i < width:
			fmt.Fprintf(&b, "  e0 -> e%d\n", i)
		case i%10 == 9:
			fmt.Fprintf(&b, "  e%d, e%d -> e%d\n", i-width, i-width-1, i)
		default:
			fmt.Fprintf(&b, "  e%d -> e%d\n", i-width, i)
		}
	}
	fmt.Fprintf(&b, "  result e%d\n}\n", n-1)
	return []byte(b.String())
}

// BenchmarkGenerate10k measures Generate alone on a compiled 10,000-exec
// flow.
func BenchmarkGenerate10k(b *testing.B) {
	pkg, diags := compiler.Compile([]dsl.Source{{Name: "big.ff", Data: bigFlowSource(10_000)}})
	if diags.HasErrors() {
		b.Fatalf("compile: %v", diags)
	}
	b.ResetTimer()
	for b.Loop() {
		out, err := Generate(pkg, Options{})
		if err != nil {
			b.Fatal(err)
		}
		b.SetBytes(int64(len(out)))
	}
}

// BenchmarkCompileAndGenerate10k measures what `ffc gen` does on a
// 10,000-exec flow, file reading and writing aside: compile, then
// generate.
func BenchmarkCompileAndGenerate10k(b *testing.B) {
	src := bigFlowSource(10_000)
	for b.Loop() {
		pkg, diags := compiler.Compile([]dsl.Source{{Name: "big.ff", Data: src}})
		if diags.HasErrors() {
			b.Fatalf("compile: %v", diags)
		}
		if _, err := Generate(pkg, Options{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBuildGenerated10k measures what a user of a 10,000-exec flow
// waits for after ffc gen: go build of the generated package. Each round
// writes it to a new directory inside this module, so the build cache
// cannot answer. Run it alone: it takes seconds and several hundred MB.
func BenchmarkBuildGenerated10k(b *testing.B) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		b.Fatal(err)
	}
	pkg, diags := compiler.Compile([]dsl.Source{{Name: "big.ff", Data: bigFlowSource(10_000)}})
	if diags.HasErrors() {
		b.Fatalf("compile: %v", diags)
	}
	src, err := Generate(pkg, Options{})
	if err != nil {
		b.Fatal(err)
	}
	// Build the dependencies first, outside the timed part.
	deps := exec.Command(goBin, "build", "./bind", "../runtime/client", "../runtime/worker", "../compiler/plan")
	if out, err := deps.CombinedOutput(); err != nil {
		b.Fatalf("building dependencies: %v\n%s", err, out)
	}
	for b.Loop() {
		b.StopTimer()
		dir, err := os.MkdirTemp("testdata", "bench-")
		if err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "big_ff.go"), src, 0o644); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		out, err := exec.Command(goBin, "build", "./"+filepath.ToSlash(dir)).CombinedOutput()
		b.StopTimer()
		os.RemoveAll(dir)
		if err != nil {
			b.Fatalf("go build: %v\n%s", err, out)
		}
		b.StartTimer()
	}
}

// TestBigFlowGenerates keeps the benchmark input honest (the source
// compiles without diagnostics and generates) and checks that the code
// for a large flow is gofmt'ed, deterministic and embeds the compiler's
// plan.
func TestBigFlowGenerates(t *testing.T) {
	pkg, diags := compiler.Compile([]dsl.Source{{Name: "big.ff", Data: bigFlowSource(1_000)}})
	if len(diags) > 0 {
		t.Fatalf("compile: %v", diags)
	}
	if got := len(pkg.Flows[0].Execs); got != 1_000 {
		t.Fatalf("%d execs, want 1000", got)
	}
	out, err := Generate(pkg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	formatted, err := format.Source(out)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(formatted, out) {
		t.Fatal("generated code for a large flow is not gofmt'ed")
	}
	again, err := Generate(pkg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again, out) {
		t.Fatal("second generation of a large flow differs")
	}
	checkEmbedded(t, pkg, out)
}
