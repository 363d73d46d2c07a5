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

func checkRange(t *testing.T, src []byte, r dsl.Range) {
	t.Helper()
	for _, p := range []dsl.Position{r.Start, r.End} {
		if p.Offset < 0 || p.Offset > len(src) {
			t.Fatalf("position %v outside the source (%d bytes)", p, len(src))
		}
		line := 1 + strings.Count(string(src[:p.Offset]), "\n")
		col := p.Offset - strings.LastIndex(string(src[:p.Offset]), "\n")
		if p.Line != line || p.Col != col {
			t.Fatalf("position %v: offset %d is at %d:%d", p, p.Offset, line, col)
		}
	}
	if r.End.Offset < r.Start.Offset {
		t.Fatalf("range %v ends before it starts", r)
	}
}
