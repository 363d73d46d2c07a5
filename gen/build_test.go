package gen

import (
	"encoding/json"
	"fmt"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flowfabric/ff/compiler"
	"github.com/flowfabric/ff/compiler/plan"
	"github.com/flowfabric/ff/dsl"
	"github.com/flowfabric/ff/internal/goname"
)

// modulePath is the module this package belongs to; the build directory
// lives inside it so that imports of the runtime packages resolve.
const modulePath = "github.com/flowfabric/ff"

// buildCase is one package of generated code that must compile.
type buildCase struct {
	dir string        // directory name under the build root
	pkg *plan.Package // the plan to generate from
}

// clashNames are the names the generated code once imported its packages
// under (plan, client, json, ...), which a user's own file in the package
// may well declare at package level.
var clashNames = []string{"bind", "client", "context", "errors", "fmt", "json", "plan", "time", "worker"}

// userClashFile is a user's file of package pkg that declares every name
// of clashNames at package level, in each kind of declaration. Go refuses
// a name declared in both a file's block (an import) and the package
// block, so the package builds only if the generated file imports none of
// its packages under these names.
func userClashFile(pkg string) []byte {
	return []byte("package " + pkg + `

// A user's own declarations next to the generated file.

type plan struct{}

func worker() {}

const context = "ctx"

var client, bind = plan{}, worker

var (
	json   = []byte("{}")
	errors []error
	fmt    = context
	time   = 0
)
`)
}

// checkClashNames fails when src, generated code, imports a package whose
// own name clashNames leaves out: userClashFile would not cover it.
func checkClashNames(t *testing.T, what string, src []byte) {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "gen_ff.go", src, parser.ImportsOnly)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	for _, imp := range f.Imports {
		p, err := strconv.Unquote(imp.Path.Value)
		if err != nil {
			t.Fatal(err)
		}
		if name := path.Base(p); !slices.Contains(clashNames, name) {
			t.Errorf("%s: the generated code imports %s, whose name %q clashNames leaves out", what, p, name)
		}
	}
}

// TestGeneratedCodeBuilds writes the code generated for every testdata
// .ff file (issue 2's example among them), every example flow file on its
// own, the examples directory as a whole, a 300-exec flow, execs named
// like methods go vet checks in other shapes (vetAcceptedSource) and two
// hand-built plans into packages of a directory inside this module, each
// next to a user's file that declares the names of the packages generated
// code imports (userClashFile), then runs go build and go vet on them and
// go test on a package that imports
// them all. Its tests check that each <Flow>Plan() returns exactly the
// plan it was generated from, and drive the RegisterPublish and
// StagePublish of issue 2's example through fakes
// (testdata/harness/publish_test.go).
func TestGeneratedCodeBuilds(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to build generated code: %v", err)
	}
	// A plan with a backquote or Unicode format characters in it is
	// embedded as an interpreted string literal rather than a raw one.
	odd := handPlan()
	odd.Flows[0].Execs[0].Kind = "media.`probe`"
	odd.Flows[0].Execs[1].Requires = append(odd.Flows[0].Execs[1].Requires, "gpu\u00ad\u202e")
	// Execs named like methods go vet checks in other shapes only.
	vetNames, diags := compiler.Compile([]dsl.Source{{Name: "vetnames.ff", Data: []byte(vetAcceptedSource)}})
	if diags.HasErrors() {
		t.Fatalf("compiling vetAcceptedSource: %v", diags)
	}
	cases := append([]buildCase{{dir: "handplan", pkg: handPlan()}, {dir: "oddstrings", pkg: odd}, {dir: "vetnames", pkg: vetNames}}, compiledBuildCases(t)...)

	root, err := os.MkdirTemp("testdata", "build-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	importPath := func(dir string) string { return path.Join(modulePath, "gen", filepath.ToSlash(root), dir) }

	var check strings.Builder
	check.WriteString("package check\n\nimport (\n\t\"encoding/json\"\n\t\"testing\"\n\n\t\"github.com/google/go-cmp/cmp\"\n\n\t\"github.com/flowfabric/ff/compiler/plan\"\n")
	var table strings.Builder
	for i, c := range cases {
		dir := filepath.Join(root, c.dir)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		src, err := Generate(c.pkg, Options{})
		if err != nil {
			t.Fatalf("%s: Generate: %v", c.dir, err)
		}
		write(t, filepath.Join(dir, "gen_ff.go"), src)
		checkClashNames(t, c.dir, src)
		write(t, filepath.Join(dir, "user.go"), userClashFile(c.pkg.Package))
		fmt.Fprintf(&check, "\tp%d %q\n", i, importPath(c.dir))
		for _, fl := range c.pkg.Flows {
			// The plan as the compiler (or handPlan) built it, in the
			// compact encoding, not the generated constant.
			want, err := json.Marshal(fl)
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&table, "\t\t{%q, p%d.%s, %s},\n", c.dir+"."+fl.Name, i, goname.ForFlow(fl.Name).Plan, strconv.Quote(string(want)))
		}
	}
	check.WriteString(`)

// TestPlans checks that each generated <Flow>Plan() returns exactly the
// plan it was generated from, decoded from the compiler's JSON.
func TestPlans(t *testing.T) {
	for _, c := range []struct {
		name string
		plan func() (*plan.Flow, error)
		want string
	}{
`)
	check.WriteString(table.String())
	check.WriteString(`	} {
		got, err := c.plan()
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		var want plan.Flow
		if err := json.Unmarshal([]byte(c.want), &want); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(&want, got); diff != "" {
			t.Errorf("%s: embedded plan differs (-want +got):\n%s", c.name, diff)
		}
	}
}
`)
	checkDir := filepath.Join(root, "check")
	if err := os.MkdirAll(checkDir, 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(checkDir, "roundtrip_test.go"), []byte(check.String()))
	harness, err := os.ReadFile(filepath.Join("testdata", "harness", "publish_test.go"))
	if err != nil {
		t.Fatal(err)
	}
	harness = []byte(strings.ReplaceAll(string(harness), "MEDIA_IMPORT_PATH", importPath("testdata_issue2")))
	write(t, filepath.Join(checkDir, "publish_test.go"), harness)

	// One test binary only: linking is the slow part.
	for _, args := range [][]string{{"build", "./..."}, {"vet", "./..."}, {"test", "-count=1", "./check"}} {
		start := time.Now()
		cmd := exec.Command(goBin, args...)
		cmd.Dir = root
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go %s in %s: %v\n%s", strings.Join(args, " "), root, err, out)
		}
		t.Logf("go %s (%v):\n%s", strings.Join(args, " "), time.Since(start).Round(time.Millisecond), out)
	}
}

func write(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
