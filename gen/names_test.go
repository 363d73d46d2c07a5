package gen

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/flowfabric/ff/compiler"
	"github.com/flowfabric/ff/dsl"
)

// nameCandidates are .ff names chosen to meet in Go: spellings of one
// name, initialisms, names without letters, the names generated for a
// flow called publish or a, and method names go vet checks.
var nameCandidates = []string{
	"a", "b", "A", "a_b", "aB", "AB", "ab", "id", "ID", "ids", "IDs", "_", "_1", "x1_2", "x_1_2", "x12",
	"publish", "Publish", "publish_run", "PublishRun", "publish_handlers", "publish_plan", "PublishPlanJSON",
	"stage_publish", "register_publish", "publish_b_upstream", "PublishAUpstream", "a_b_upstream", "AAUpstream",
	"marshal_json", "MarshalJSON", "write_to", "unwrap",
}

// TestCheckedNamesGenerate checks that the compiler and the generator
// agree on Go names: every package `ffc check` accepts generates, and
// the compiler reports (FF0211) the name clashes that would stop gen.
// Packages are drawn at random, from a fixed seed, out of nameCandidates.
func TestCheckedNamesGenerate(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	pick := func() string { return nameCandidates[r.IntN(len(nameCandidates))] }
	accepted, clashes := 0, 0
	for i := range 400 {
		var b strings.Builder
		b.WriteString("package p\n")
		for range 1 + r.IntN(3) {
			fmt.Fprintf(&b, "type %s {", pick())
			for range r.IntN(3) {
				fmt.Fprintf(&b, " %s: string", pick())
			}
			b.WriteString(" }\n")
		}
		for range 1 + r.IntN(2) {
			fmt.Fprintf(&b, "flow %s() {\n", pick())
			var execs []string
			for range 1 + r.IntN(3) {
				e := pick()
				execs = append(execs, e)
				fmt.Fprintf(&b, "  exec %s() -> string {}\n", e)
			}
			for j := 1; j < len(execs); j++ {
				fmt.Fprintf(&b, "  %s -> %s\n", execs[j-1], execs[j])
			}
			b.WriteString("}\n")
		}
		src := b.String()
		pkg, diags := compiler.Compile([]dsl.Source{{Name: fmt.Sprintf("case%d.ff", i), Data: []byte(src)}})
		if diags.HasErrors() {
			for _, d := range diags {
				if d.Code == dsl.CodeGoName {
					clashes++
					break
				}
			}
			continue
		}
		accepted++
		if _, err := Generate(pkg, Options{}); err != nil {
			t.Errorf("ffc check accepts this package, but Generate fails: %v\n%s", err, src)
		}
	}
	// Keep the test meaningful: both outcomes must occur often.
	if accepted < 50 || clashes < 50 {
		t.Errorf("%d packages accepted and %d with Go name clashes; want at least 50 of each", accepted, clashes)
	}
}
