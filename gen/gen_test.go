package gen

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/format"
	"go/parser"
	"go/token"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/flowfabric/ff/compiler/plan"
	"github.com/flowfabric/ff/gen/bind"
	"github.com/flowfabric/ff/internal/goname"
)

func TestGenerateDeterministicAndFormatted(t *testing.T) {
	first, err := Generate(handPlan(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		again, err := Generate(handPlan(), Options{})
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(first, again) {
			t.Fatalf("second generation differs:\n%s", cmp.Diff(string(first), string(again)))
		}
	}
	if !strings.HasPrefix(string(first), "// "+Header+"\n") {
		t.Fatalf("output does not start with the generated-code header:\n%.200s", first)
	}
	formatted, err := format.Source(first)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(formatted, first) {
		t.Fatalf("output is not gofmt'ed:\n%s", cmp.Diff(string(formatted), string(first)))
	}
}

func TestGenerateOrderIndependent(t *testing.T) {
	// Slices given out of order produce the same file.
	a := handPlan()
	a.Types = append(a.Types, plan.Type{Name: "Aardvark", Fields: []plan.Field{{Name: "x", Type: plan.TypeRef{Kind: plan.KindInt}}}})
	b := handPlan()
	b.Types = append([]plan.Type{{Name: "Aardvark", Fields: []plan.Field{{Name: "x", Type: plan.TypeRef{Kind: plan.KindInt}}}}}, b.Types...)
	ga, err := Generate(a, Options{})
	if err != nil {
		t.Fatal(err)
	}
	gb, err := Generate(b, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(ga), string(gb)); diff != "" {
		t.Fatalf("order of plan slices changes the output (-a +b):\n%s", diff)
	}
}

func TestPackageName(t *testing.T) {
	p := handPlan()
	out, err := Generate(p, Options{Package: "override"})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(out, []byte("\npackage override\n")) {
		t.Fatalf("Options.Package not used:\n%.200s", out)
	}
	p.Package = ""
	if _, err := Generate(p, Options{}); err == nil || !strings.Contains(err.Error(), "no Go package name") {
		t.Fatalf("no package name: err = %v", err)
	}
	if _, err := Generate(handPlan(), Options{Package: "not-a-name"}); err == nil || !strings.Contains(err.Error(), "not a valid Go package name") {
		t.Fatalf("bad package name: err = %v", err)
	}
	bad := handPlan()
	bad.Schema = 99
	if _, err := Generate(bad, Options{}); err == nil || !strings.Contains(err.Error(), "schema version 99") {
		t.Fatalf("bad schema: err = %v", err)
	}
}

// TestGenerateErrors checks that plans which cannot become valid Go are
// reported with a clear message instead of producing code.
func TestGenerateErrors(t *testing.T) {
	str := plan.TypeRef{Kind: plan.KindString}
	for _, tt := range []struct {
		name   string
		change func(p *plan.Package)
		want   []string // substrings of the error
	}{
		{
			name: "two types, one Go name",
			change: func(p *plan.Package) {
				p.Types = append(p.Types, plan.Type{Name: "clip"})
			},
			want: []string{`type "Clip" and type "clip" both become the Go identifier Clip`},
		},
		{
			name: "two fields, one Go name",
			change: func(p *plan.Package) {
				p.Types[0].Fields = append(p.Types[0].Fields, plan.Field{Name: "ID", Type: str})
			},
			want: []string{`type "Clip": field "id" and field "ID" both become the Go identifier ID`},
		},
		{
			name: "type collides with generated identifier",
			change: func(p *plan.Package) {
				p.Types = append(p.Types, plan.Type{Name: "PublishRun"})
			},
			want: []string{`type "PublishRun" and the generated PublishRun of flow "publish"`},
		},
		{
			name: "type collides with the plan constant",
			change: func(p *plan.Package) {
				p.Types = append(p.Types, plan.Type{Name: "PublishPlanJSON"})
			},
			want: []string{`type "PublishPlanJSON" and the generated PublishPlanJSON of flow "publish"`},
		},
		{
			name: "type collides with upstream struct",
			change: func(p *plan.Package) {
				p.Types = append(p.Types, plan.Type{Name: "PublishTranscodeUpstream"})
			},
			want: []string{`type "PublishTranscodeUpstream" and the generated PublishTranscodeUpstream of exec "transcode"`},
		},
		{
			name: "two flows, one Go name",
			change: func(p *plan.Package) {
				f := p.Flows[0]
				f.Name = "Publish"
				p.Flows = append(p.Flows, f)
			},
			want: []string{`the generated PublishPlan of flow "Publish" and the generated PublishPlan of flow "publish"`},
		},
		{
			name: "two execs, one method",
			change: func(p *plan.Package) {
				e := p.Flows[0].Execs[4]
				e.Name, e.Kind = "Alert", "publish.Alert"
				p.Flows[0].Execs = append(p.Flows[0].Execs, e)
			},
			want: []string{`flow "publish": exec "alert" and exec "Alert" both become the Go identifier Alert`},
		},
		{
			name: "two execs, one kind",
			change: func(p *plan.Package) {
				p.Flows[0].Execs[5].Kind = "publish.alert"
			},
			want: []string{`execs "alert" and "cleanup" share the kind "publish.alert"`},
		},
		{
			name: "name without letters",
			change: func(p *plan.Package) {
				p.Types[0].Fields = append(p.Types[0].Fields, plan.Field{Name: "__", Type: str})
			},
			want: []string{`field "__": cannot form an exported Go identifier`},
		},
		{
			name: "unknown type",
			change: func(p *plan.Package) {
				p.Types[0].Fields = append(p.Types[0].Fields, plan.Field{Name: "owner", Type: plan.TypeRef{Kind: plan.KindNamed, Name: "User"}})
			},
			want: []string{`type "Clip": field "owner": unknown type "User"`},
		},
		{
			name: "unknown kind",
			change: func(p *plan.Package) {
				p.Flows[0].Execs[0].Output = &plan.TypeRef{Kind: "decimal"}
			},
			want: []string{`flow "publish": exec "probe": output: unknown type kind "decimal"`},
		},
		{
			name: "list without element",
			change: func(p *plan.Package) {
				p.Types[0].Fields[3].Type.Elem = nil
			},
			want: []string{`field "tags": list element: missing type`},
		},
		{
			name: "recursive type",
			change: func(p *plan.Package) {
				p.Types = append(p.Types,
					plan.Type{Name: "A", Fields: []plan.Field{{Name: "b", Type: plan.TypeRef{Kind: plan.KindNamed, Name: "B"}}}},
					plan.Type{Name: "B", Fields: []plan.Field{{Name: "a", Type: plan.TypeRef{Kind: plan.KindNamed, Name: "A"}}}})
			},
			want: []string{`type "A" contains itself (A -> B -> A)`},
		},
		{
			name: "unknown upstream",
			change: func(p *plan.Package) {
				p.Flows[0].Execs[1].Upstreams = []string{"ghost"}
			},
			want: []string{`exec "transcode": unknown upstream "ghost"`},
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := handPlan()
			tt.change(p)
			out, err := Generate(p, Options{})
			if err == nil {
				t.Fatalf("Generate succeeded, want an error; output:\n%.300s", out)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\ndoes not contain %q", err, w)
				}
			}
		})
	}
}

// TestRecursionThroughOptionalOrList checks that recursion broken by a
// pointer (optional field) or a slice is accepted.
func TestRecursionThroughOptionalOrList(t *testing.T) {
	p := handPlan()
	node := plan.TypeRef{Kind: plan.KindNamed, Name: "Node"}
	p.Types = append(p.Types, plan.Type{Name: "Node", Fields: []plan.Field{
		{Name: "next", Type: node, Optional: true},
		{Name: "children", Type: plan.TypeRef{Kind: plan.KindList, Elem: &node}},
	}})
	out, err := Generate(p, Options{})
	if err != nil {
		t.Fatal(err)
	}
	// Compare with runs of spaces collapsed: gofmt aligns the columns.
	flat := strings.Join(strings.Fields(string(out)), " ")
	for _, want := range []string{"Next *Node `json:\"next,omitempty\"`", "Children []Node `json:\"children\"`"} {
		if !strings.Contains(flat, want) {
			t.Errorf("output lacks %q", want)
		}
	}
}

func TestCollisionListIsCapped(t *testing.T) {
	p := handPlan()
	for i := range 30 {
		p.Types = append(p.Types, plan.Type{Name: fmt.Sprintf("t%d", i)}, plan.Type{Name: fmt.Sprintf("T%d", i)})
	}
	_, err := Generate(p, Options{})
	if err == nil {
		t.Fatal("no error")
	}
	if n := strings.Count(err.Error(), "both become"); n != maxReported {
		t.Errorf("%d collisions listed, want %d", n, maxReported)
	}
	if !strings.HasSuffix(err.Error(), "and 10 more") {
		t.Errorf("error does not count the rest: %q", err)
	}
}

// TestOddStringsStayFormatted checks that strings a raw string literal
// cannot or should not hold (a backquote, a byte order mark, control
// characters JSON does not escape, Unicode format characters) still give
// gofmt'ed code whose embedded plan decodes to the plan it was generated
// from, and that the plan is embedded as a raw string literal when it can
// be.
func TestOddStringsStayFormatted(t *testing.T) {
	for _, tt := range []struct {
		name string
		kind string
		raw  bool // whether the plan is embedded as a raw string literal
	}{
		{"plain", "media.probe", true},
		{"backquote", "k\"\\`\n\t€\x00%v", false},
		{"byte order mark", "k\ufeff", false},
		{"control characters", "k\r\x01", true}, // JSON escapes them
		{"delete", "k\x7f", false},              // JSON does not escape DEL
		{"format characters", "k\u200b\u202e", false},
		{"html", "<a&b>", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := handPlan()
			p.Flows[0].Execs[0].Kind = tt.kind
			p.Flows[0].Execs[1].Lane = "l a n e"
			p.Flows[0].Execs[1].Requires = []string{"x,y", "ü"}
			out, err := Generate(p, Options{})
			if err != nil {
				t.Fatal(err)
			}
			formatted, err := format.Source(out)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(formatted, out) {
				t.Fatalf("not gofmt'ed:\n%s", cmp.Diff(string(formatted), string(out)))
			}
			if raw := bytes.Contains(out, []byte("const PublishPlanJSON = `")); raw != tt.raw {
				t.Errorf("plan embedded as a raw string: %v, want %v", raw, tt.raw)
			}
			checkEmbedded(t, p, out)
		})
	}
}

// embeddedPlans parses src, generated Go, and decodes the plan of every
// <Flow>PlanJSON constant with bind.DecodePlan, as the generated
// <Flow>Plan does, keyed by flow name.
func embeddedPlans(t *testing.T, src []byte) map[string]*plan.Flow {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "gen.go", src, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*plan.Flow{}
	for _, d := range f.Decls {
		gd, ok := d.(*ast.GenDecl)
		if !ok || gd.Tok != token.CONST {
			continue
		}
		for _, spec := range gd.Specs {
			vs := spec.(*ast.ValueSpec)
			if len(vs.Names) != 1 || !strings.HasSuffix(vs.Names[0].Name, "PlanJSON") {
				continue
			}
			lit, ok := vs.Values[0].(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				t.Fatalf("%s is not a string literal", vs.Names[0].Name)
			}
			text, err := strconv.Unquote(lit.Value)
			if err != nil {
				t.Fatalf("%s: %v", vs.Names[0].Name, err)
			}
			var head struct{ Name string }
			if err := json.Unmarshal([]byte(text), &head); err != nil {
				t.Fatalf("%s: %v", vs.Names[0].Name, err)
			}
			fl, err := bind.DecodePlan(head.Name, text)
			if err != nil {
				t.Fatal(err)
			}
			if want := goname.ForFlow(head.Name).PlanJSON; vs.Names[0].Name != want {
				t.Errorf("plan of flow %q is in constant %s, want %s", head.Name, vs.Names[0].Name, want)
			}
			out[head.Name] = fl
		}
	}
	return out
}

// checkEmbedded checks that the plans embedded in src, generated from pkg,
// decode to exactly pkg's flows. Empty and nil slices are equal: the JSON
// encoding omits both.
func checkEmbedded(t *testing.T, pkg *plan.Package, src []byte) {
	t.Helper()
	got := embeddedPlans(t, src)
	if len(got) != len(pkg.Flows) {
		t.Errorf("%d embedded plans, want %d", len(got), len(pkg.Flows))
	}
	for i := range pkg.Flows {
		want := &pkg.Flows[i]
		if diff := cmp.Diff(want, got[want.Name], cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("embedded plan of flow %q differs (-want +got):\n%s", want.Name, diff)
		}
	}
}
