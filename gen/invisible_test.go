package gen

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"strconv"
	"testing"
	"unicode"

	"github.com/flowfabric/ff/internal/goname"
)

// TestPlanLiteralEscapesInvisibleCharacters: a plan whose kinds and
// capabilities hold Unicode format characters (a zero-width space, a soft
// hyphen, a right-to-left override, a word joiner) or a control
// character (DEL), which a plan built by other means than ffc may, is
// embedded in an interpreted string literal that spells them with
// escapes: staticcheck's ST1018 rejects string literals holding them, in
// a file its user cannot edit. The literal's value is still the plan.
func TestPlanLiteralEscapesInvisibleCharacters(t *testing.T) {
	pkg := handPlan()
	fl := &pkg.Flows[0]
	fl.Execs[0].Kind = "media.probe\u200b"
	fl.Execs[1].Kind = "publish.\u202etranscode"
	fl.Execs[1].Requires = []string{"cuda\u2060", "gpu\u00ad", "x\x7f"}
	src, err := Generate(pkg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	f, err := parser.ParseFile(token.NewFileSet(), "gen_ff.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	ast.Inspect(f, func(n ast.Node) bool {
		lit, ok := n.(*ast.BasicLit)
		if !ok || lit.Kind != token.STRING {
			return true
		}
		// ST1018's test, without its exceptions for emoji.
		for _, r := range lit.Value {
			if unicode.Is(unicode.Cf, r) || unicode.IsControl(r) && r != '\n' && r != '\t' {
				t.Errorf("a string literal holds %U unescaped: %.80s...", r, lit.Value)
				break
			}
		}
		return true
	})
	want, err := json.MarshalIndent(fl, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	name := goname.ForFlow(fl.Name).PlanJSON
	for _, d := range f.Decls {
		gd, ok := d.(*ast.GenDecl)
		if !ok || gd.Tok != token.CONST {
			continue
		}
		spec := gd.Specs[0].(*ast.ValueSpec)
		if spec.Names[0].Name != name {
			continue
		}
		got, err := strconv.Unquote(spec.Values[0].(*ast.BasicLit).Value)
		if err != nil || got != string(want) {
			t.Errorf("%s holds %q (%v), want the plan %s", name, got, err, want)
		}
		return
	}
	t.Errorf("no constant %s in the generated code", name)
}
