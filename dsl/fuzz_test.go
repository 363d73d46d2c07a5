package dsl

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/alecthomas/participle/v2/lexer"
)

// seeds holds one small input per construct of the language.
var seeds = []string{
	"",
	"package media",
	"// comment\n/* block\ncomment */ package p",
	"type T { a: string b?: int c: [float] d: {string: bool} e: bytes f: time g: duration h: json i: T }",
	"type T { a: string, b: int, }",
	"budget b { dimension d { hard 1_000 soft 10 } reset 24h on_hard_limit fail scope run }",
	"quota q { rate 120 per 1m concurrency 4 jitter 100ms key tenant.id }",
	"flow f(T) -> T { namespace \"n\" lane \"l\" priority 5 timeout 1h30m deadline 2h retry { attempts 3 backoff fixed delay 1s max_delay 1m jitter } requires [\"a\", \"b\",] budget b quota q exec a(T) -> T { kind \"k\" input x join any } a -> b, c -> d on failure result d }",
	"flow f() { exec a() { join 2 } a, b -> c on done }",
	"flow f() { exec lane() {} exec result() {} lane -> result result result }",
	"flow f( { }\ntype B { x: int }",
	"flow f() { a -> }",
	"schedule s { flow f cron \"0 2 * * *\" timezone \"Europe/Berlin\" input { a: \"{{fire_date-1}}\", \"b c\": [1, -2,] d: 30s e: { f: true g: null } } }",
	"schedule s { input [ { a: ] }\nflow f() {}",
	"\"unterminated",
	"/* unterminated",
	"type T { x: int } @ # $",
	"\xef\xbb\xbfpackage p",
	"\xef\xbb\xbf// old Mac line ends\rtype T {\r  a: string\r}\r\rflow f(T) {\r\n  exec a(T) { lane \"x\r\" }\r}",
	"\xff\xfe",
	"priority -5 -> 10x 1.5s 1__0",
}

func FuzzParse(f *testing.F) {
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	for _, pattern := range []string{"../compiler/testdata/*.ff", "../compiler/testdata/errors/*.ff"} {
		files, _ := filepath.Glob(pattern)
		for _, file := range files {
			if b, err := os.ReadFile(file); err == nil {
				f.Add(b)
			}
		}
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		file, diags := Parse("fuzz.ff", src)
		if file == nil {
			t.Fatal("Parse returned a nil file")
		}
		for _, d := range diags {
			if strings.HasPrefix(d.Message, "internal error") {
				t.Fatalf("internal error: %s", d)
			}
			CheckRange(t, src, d.Range)
			for _, r := range d.Related {
				CheckRange(t, src, r.Range)
			}
		}
		if !diags.HasErrors() {
			checkPositions(t, src, reflect.ValueOf(file))
		}
	})
}

// CheckRange fails t unless r lies within src with line and column
// numbers that agree with the offsets.
func CheckRange(t *testing.T, src []byte, r Range) {
	t.Helper()
	checkPos(t, src, r.Start)
	checkPos(t, src, r.End)
	if r.End.Offset < r.Start.Offset {
		t.Errorf("range %v ends before it starts", r)
	}
}

// checkPos fails t unless p lies within src at the line and column its
// offset gives: lines end at LF, CR LF or a lone CR, and a byte order mark
// at the start is not part of line 1.
func checkPos(t *testing.T, src []byte, p Position) {
	t.Helper()
	if p.Offset < 0 || p.Offset > len(src) {
		t.Fatalf("position %v offset %d outside the source (%d bytes)", p, p.Offset, len(src))
	}
	line, start := 1, 0
	if bytes.HasPrefix(src, []byte("\ufeff")) {
		start = 3
		if p.Offset < start {
			t.Fatalf("position %v: offset %d is inside the byte order mark", p, p.Offset)
		}
	}
	text := string(src)
	for i := start; i < p.Offset; {
		if n := lineBreakLen(text[i:]); n > 0 {
			if i+n > p.Offset {
				t.Fatalf("position %v: offset %d is inside a CR LF", p, p.Offset)
			}
			i += n
			line, start = line+1, i
			continue
		}
		i++
	}
	if col := p.Offset - start + 1; p.Line != line || p.Col != col {
		t.Fatalf("position %v: offset %d is at %d:%d", p, p.Offset, line, col)
	}
}

var positionType = reflect.TypeOf(lexer.Position{})

// checkPositions checks every lexer.Position in the AST under v.
func checkPositions(t *testing.T, src []byte, v reflect.Value) {
	t.Helper()
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			checkPositions(t, src, v.Elem())
		}
	case reflect.Slice:
		for i := range v.Len() {
			checkPositions(t, src, v.Index(i))
		}
	case reflect.Struct:
		if v.Type() == positionType {
			checkPos(t, src, toPos(v.Interface().(lexer.Position)))
			return
		}
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				checkPositions(t, src, v.Field(i))
			}
		}
	}
}
