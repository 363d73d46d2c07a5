package compiler

import (
	"fmt"
	"strings"
	"testing"

	"github.com/flowfabric/ff/compiler/plan"
	"github.com/flowfabric/ff/dsl"
)

// bigFlow generates a flow of n execs: a root fanning out to chains of
// 100 execs, whose ends fan in to a sink (join any), with settings on
// every exec and a failure branch on every tenth one.
func bigFlow(n int) []byte {
	var b strings.Builder
	b.WriteString("type Item { id: string, n: int, tags: [string] }\n")
	b.WriteString("quota q { concurrency 10 key id }\n")
	b.WriteString("flow big(Item) -> Item {\n  retry { attempts 3 backoff exponential delay 1s }\n")
	b.WriteString("  exec root(Item) -> Item {}\n  exec sink() { join any }\n")
	const chain = 100
	var ends []string
	for i := 0; len(ends)*chain+2 < n; i++ {
		prev := "root"
		for j := 0; j < chain && 2+i*chain+j < n; j++ {
			name := fmt.Sprintf("e%03d_%03d", i, j)
			fmt.Fprintf(&b, "  exec %s(Item) -> Item { lane \"l%d\" priority %d timeout 30s requires [\"cap%d\"] quota q }\n", name, i%7, j%1000, j%5)
			fmt.Fprintf(&b, "  %s -> %s\n", prev, name)
			prev = name
		}
		ends = append(ends, prev)
	}
	fmt.Fprintf(&b, "  %s -> sink on done\n  result root\n}\n", strings.Join(ends, ", "))
	return []byte(b.String())
}

// countExecs checks that src compiles without any diagnostic to a flow of
// want execs.
func countExecs(tb testing.TB, src []byte, want int) {
	pkg, diags := Compile([]dsl.Source{{Name: "big.ff", Data: src}})
	if pkg == nil || len(diags) > 0 {
		tb.Fatalf("compile: %v", diags)
	}
	if got := len(pkg.Flows[0].Execs); got != want {
		tb.Fatalf("%d execs, want %d", got, want)
	}
}

// BenchmarkCheck10k measures parsing and checking a 10,000-exec flow
// (what `ffc check` does).
func BenchmarkCheck10k(b *testing.B) {
	src := bigFlow(plan.MaxExecs)
	countExecs(b, src, plan.MaxExecs)
	b.SetBytes(int64(len(src)))
	b.ResetTimer()
	for b.Loop() {
		_, diags := Compile([]dsl.Source{{Name: "big.ff", Data: src}})
		if diags.HasErrors() {
			b.Fatal(diags)
		}
	}
}

// BenchmarkPlan10k measures compiling a 10,000-exec flow to its plan and
// validating the plan (what `ffc plan` and ffrun's staging do).
func BenchmarkPlan10k(b *testing.B) {
	src := bigFlow(plan.MaxExecs)
	b.SetBytes(int64(len(src)))
	b.ResetTimer()
	for b.Loop() {
		pkg, _ := Compile([]dsl.Source{{Name: "big.ff", Data: src}})
		if err := pkg.Flows[0].Validate(); err != nil {
			b.Fatal(err)
		}
	}
}

// TestBigFlow keeps the generator honest in plain `go test`.
func TestBigFlow(t *testing.T) {
	countExecs(t, bigFlow(plan.MaxExecs), plan.MaxExecs)
}

// wideFlow generates a flow of n execs between a root and a sink, with one
// fan-out statement and one fan-in statement: it catches checks that are
// quadratic in the width of an edge statement or in an exec's upstreams.
func wideFlow(n int) []byte {
	var b strings.Builder
	b.WriteString("flow wide(int) {\n  exec root(int) -> int {}\n  exec sink() { join 1 }\n")
	names := make([]string, n)
	for i := range n {
		names[i] = fmt.Sprintf("w%05d", i)
		fmt.Fprintf(&b, "  exec %s(int) -> int {}\n", names[i])
	}
	fmt.Fprintf(&b, "  root -> %s\n  %s -> sink on done\n}\n", strings.Join(names, ", "), strings.Join(names, ", "))
	return []byte(b.String())
}

// BenchmarkCheck10kWide measures a 9,998-wide fan-out and fan-in.
func BenchmarkCheck10kWide(b *testing.B) {
	src := wideFlow(plan.MaxExecs - 2) // with root and sink: MaxExecs
	b.SetBytes(int64(len(src)))
	for b.Loop() {
		pkg, diags := Compile([]dsl.Source{{Name: "wide.ff", Data: src}})
		if pkg == nil {
			b.Fatal(diags)
		}
	}
}
