package dsl

import (
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

// parseDiags parses src as t.ff and returns its diagnostics as
// "pos: severity: message" lines, related positions indented.
func parseDiags(src string) []string {
	_, diags := Parse("t.ff", []byte(src))
	var got []string
	for _, d := range diags {
		got = append(got, d.Range.Start.String()+": "+d.Severity.String()+": "+d.Message)
		for _, r := range d.Related {
			got = append(got, "\t"+r.Range.Start.String()+": "+r.Message)
		}
	}
	return got
}

// TestPositionsOnMultiByteLines: columns count bytes (spec:
// "columns count bytes"), also after multi-byte characters on the line,
// for the diagnostics of this change: a bad escape, a byte that is not
// UTF-8, an unclosed declaration placed after its last token, and a
// character that cannot start a token.
func TestPositionsOnMultiByteLines(t *testing.T) {
	tests := []struct {
		src  string
		want []string
	}{
		// " at 17, 日 18-20, 本 21-23, \ at 24.
		{"flow f() { lane \"日本\\q\" }\n", []string{
			`t.ff:1:24: error: invalid escape sequence \q in string literal: write \\ for a backslash; the escapes are \a \b \f \n \r \t \v \\ \" \x \u \U and octal`,
		}},
		// A multi-byte character after the backslash is the sequence shown.
		{"flow f() { lane \"é\\é\" }\n", []string{
			`t.ff:1:20: error: invalid escape sequence \é in string literal: write \\ for a backslash; the escapes are \a \b \f \n \r \t \v \\ \" \x \u \U and octal`,
		}},
		// " at 17, é 18-19, the bad byte at 20.
		{"flow f() { lane \"é\xff\" }\n", []string{
			`t.ff:1:20: error: invalid UTF-8 byte 0xff in string literal: .ff files are UTF-8 text`,
		}},
		// The last token ends at byte 20: the diagnostic is at 21.
		{"flow f() {\n  namespace \"日本\"\n", []string{
			`t.ff:2:21: error: syntax error: flow body is not closed: add "}"`,
			`	t.ff:1:10: "{" opened here`,
		}},
		// " at 17, 日本 18-23, " at 24, § at 26.
		{"flow f() { lane \"日本\" § }\n", []string{
			`t.ff:1:26: error: invalid character '§'`,
		}},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, parseDiags(tt.src)); diff != "" {
			t.Errorf("%q (-want +got):\n%s", tt.src, diff)
		}
	}
}

// TestEscapeOfBadByteMessageIsUTF8: a backslash followed by a byte
// that is not UTF-8 is reported as that byte, where it stands (FF0102),
// with a message that is itself valid UTF-8 (messages are printed and
// encoded as JSON); the literal is not Valid.
func TestEscapeOfBadByteMessageIsUTF8(t *testing.T) {
	src := "flow f() { lane \"a\\\xff\" }\n"
	got := parseDiags(src)
	want := []string{"t.ff:1:20: error: invalid UTF-8 byte 0xff in string literal: .ff files are UTF-8 text"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("%q (-want +got):\n%s", src, diff)
	}
	for _, m := range got {
		if !utf8.ValidString(m) {
			t.Errorf("diagnostic %q is not valid UTF-8", m)
		}
	}
	var diags Diagnostics
	toks := scan("t.ff", []byte(`"a\`+"\xff"+`"`), &diags)
	if len(toks) != 2 || (&StringLit{Raw: toks[0].Value}).Valid() {
		t.Errorf("tokens %v: want one string, not Valid", toks)
	}
	if len(diags) != 1 || diags[0].Code != CodeBadChar {
		t.Errorf("diagnostics %v, want one FF0102", diags)
	}
}

// TestPositionsAfterBOMAndLineEnds: a byte order mark at the start of a
// file is not part of line 1 (its columns start after it; offsets still
// count its bytes), and CR LF, LF and a lone CR (old Mac files) each end
// a line, also the line of a // comment, so file:line:col is where an
// editor shows the place.
func TestPositionsAfterBOMAndLineEnds(t *testing.T) {
	const bad = `invalid escape sequence \q in string literal: write \\ for a backslash; the escapes are \a \b \f \n \r \t \v \\ \" \x \u \U and octal`
	const bom = "\ufeff"
	tests := []struct {
		name string
		src  string
		want []string
	}{
		{"bom", bom + "flow f() { lane \"a\\q\" }\n", []string{"t.ff:1:19: error: " + bad}},
		{"bom then lines", bom + "flow f() {\n  lane \"a\\q\"\n}\n", []string{"t.ff:2:10: error: " + bad}},
		{"crlf", "flow f() {\r\n  lane \"a\\q\"\r\n}\r\n", []string{"t.ff:2:10: error: " + bad}},
		{"lone cr", "flow f() {\r  lane \"a\\q\"\r}\r", []string{"t.ff:2:10: error: " + bad}},
		{"lone cr ends a line comment", "// c\rflow f() {\r  lane \"a\\q\" // d\r}\r", []string{"t.ff:3:10: error: " + bad}},
		{"lone cr in a block comment", "/* a\rb\r\nc\n*/ flow f() { lane \"a\\q\" }", []string{"t.ff:4:22: error: " + bad}},
		{"bom and lone cr", bom + "// c\r\rflow f() { lane \"a\\q\" }", []string{"t.ff:3:19: error: " + bad}},
		// A string does not go past the end of its line, whichever ends it.
		{"lone cr ends a string", "flow f() { lane \"ab\r}\r", []string{
			`t.ff:1:17: error: string literal is not terminated: add a closing "`,
		}},
		// The line ends at the CR, not at an escape of it.
		{"backslash before cr", "flow f() { lane \"ab\\\r\n}\r\n", []string{
			`t.ff:1:17: error: string literal is not terminated: add a closing "`,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, parseDiags(tt.src)); diff != "" {
				t.Errorf("%q (-want +got):\n%s", tt.src, diff)
			}
			_, diags := Parse("t.ff", []byte(tt.src))
			for _, d := range diags {
				CheckRange(t, []byte(tt.src), d.Range)
			}
		})
	}
}

// TestOffsetsCountTheBOM: offsets are byte offsets into the file, BOM
// included, while columns start after it.
func TestOffsetsCountTheBOM(t *testing.T) {
	_, diags := Parse("t.ff", []byte("\ufeff§"))
	if len(diags) != 1 {
		t.Fatalf("diagnostics %v, want one", diags)
	}
	want := Range{Start: Position{File: "t.ff", Line: 1, Col: 1, Offset: 3}, End: Position{File: "t.ff", Line: 1, Col: 3, Offset: 5}}
	if diff := cmp.Diff(want, diags[0].Range); diff != "" {
		t.Errorf("range (-want +got):\n%s", diff)
	}
}
