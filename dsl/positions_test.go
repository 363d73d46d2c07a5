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
