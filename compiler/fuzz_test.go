package compiler

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flowfabric/ff/dsl"
)

// FuzzCompile checks the whole front end on arbitrary input: no panic (no
// internal error), every diagnostic inside the source, and every plan it
// produces passes plan validation.
func FuzzCompile(f *testing.F) {
	for _, pattern := range []string{"testdata/*.ff", "testdata/errors/*.ff", "testdata/errors/*/*.ff"} {
		files, _ := filepath.Glob(pattern)
		for _, file := range files {
			if b, err := os.ReadFile(file); err == nil {
				f.Add(b)
			}
		}
	}
	f.Add([]byte("flow f() { exec a() {} exec b() { join any } a -> b on failure }"))
	f.Add([]byte("type T { k: string } quota q { concurrency 1 key k } flow f(T) { exec a(T) { quota q } }"))
	f.Fuzz(func(t *testing.T, src []byte) {
		pkg, diags := Compile([]dsl.Source{{Name: "fuzz.ff", Data: src}})
		for _, d := range diags {
			if strings.HasPrefix(d.Message, "internal ") {
				t.Fatalf("internal error: %s", d)
			}
			checkRange(t, src, d.Range)
			for _, r := range d.Related {
				checkRange(t, src, r.Range)
			}
		}
		if pkg == nil {
			if !diags.HasErrors() {
				t.Fatal("no plan and no error")
			}
			return
		}
		if err := pkg.Validate(); err != nil {
			t.Fatalf("compiled plan does not validate: %v\nsource:\n%s", err, src)
		}
	})
}

// checkRange fails t unless r lies within src at the lines and columns
// its offsets give: lines end at CR LF, LF or a lone CR, and a byte order
// mark at the start is not part of line 1.
func checkRange(t *testing.T, src []byte, r dsl.Range) {
	t.Helper()
	text := string(src)
	bom := 0
	if strings.HasPrefix(text, "\ufeff") {
		bom = len("\ufeff")
	}
	for _, p := range []dsl.Position{r.Start, r.End} {
		if p.Offset < bom || p.Offset > len(src) {
			t.Fatalf("position %v outside the source (%d bytes, %d of them a byte order mark)", p, len(src), bom)
		}
		line, start := 1, bom
		for _, m := range lineBreak.FindAllStringIndex(text[bom:p.Offset], -1) {
			line, start = line+1, bom+m[1]
		}
		if p.Offset > bom && p.Offset < len(src) && src[p.Offset-1] == '\r' && src[p.Offset] == '\n' {
			t.Fatalf("position %v: offset %d is inside a CR LF", p, p.Offset)
		}
		col := p.Offset - start + 1
		if p.Line != line || p.Col != col {
			t.Fatalf("position %v: offset %d is at %d:%d", p, p.Offset, line, col)
		}
	}
	if r.End.Offset < r.Start.Offset {
		t.Fatalf("range %v ends before it starts", r)
	}
}
