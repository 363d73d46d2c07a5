package dsl

import (
	"bytes"
	"strings"
	"unicode/utf8"

	"github.com/alecthomas/participle/v2/lexer"
)

// Indent is one level of indentation in formatted source.
const Indent = "  "

// Format returns src laid out as `ffc fmt` writes .ff files. It keeps every
// token and comment, in order, and where the author broke lines; it sets
// the rest:
//
//   - each line is indented by Indent per level of brackets ({, [ and ()
//     opened on earlier lines and not yet closed (the brackets a line opens
//     count once, however many), a line that starts by closing brackets at
//     the level of the line that opened the outermost of them ("}, {"
//     between the objects of a list at the level of the line that opened
//     the first);
//   - one space between tokens of a line, none before , : ? ) ] and after
//     ( [, none before ( (a flow or exec header), none around the . of a
//     path, none inside empty braces {}; inside other braces on one line,
//     a space when the source had one ({ timeout 5s } and {string: int}
//     both stay); -> always has a space on each side;
//   - at most one blank line in a row, none at the start, and the file
//     ends with one line break; every line ends with LF (a line of src
//     ends at LF, CR LF or a lone CR); trailing white space and a byte
//     order mark are dropped.
//
// A comment's text is kept, lines included, but for the white space that
// ends its lines and their line breaks, written as LF. A file with
// syntax errors is not formatted: Format returns nil and the diagnostics.
// The result always scans to the same tokens and comments as src (Format
// checks it, and reports an internal error otherwise).
func Format(filename string, src []byte) ([]byte, Diagnostics) {
	_, diags := Parse(filename, src)
	if diags.HasErrors() {
		return nil, diags
	}
	toks := scanComments(filename, src, &diags)
	out := layout(src, toks)
	var again Diagnostics
	if i, ok := sameTokens(toks, scanComments(filename, out, &again)); !ok || again.HasErrors() {
		diags.Errorf(tokenRange(toks[min(i, len(toks)-1)]), CodeSyntax, "internal error: formatting would change the tokens here; the file is left as it is")
		return nil, diags
	}
	return out, diags
}

// layout prints toks (which end with EOF) as Format describes.
func layout(src []byte, toks []lexer.Token) []byte {
	var b bytes.Buffer
	b.Grow(len(src) + len(src)/8)
	// levels holds, for each bracket open, the indentation level of the
	// lines inside it.
	type open struct{ inner, outer int }
	var levels []open
	line := 0          // the indentation level of the current line
	var trailing []int // offsets of the line comments that end a line of code
	for i, t := range toks {
		if t.Type == lexer.EOF {
			break
		}
		if i == 0 || t.Pos.Line > endLine(toks[i-1]) {
			if i > 0 {
				b.WriteByte('\n')
				if t.Pos.Line > endLine(toks[i-1])+1 {
					b.WriteByte('\n') // blank lines: one
				}
			}
			// A line that starts by closing brackets is at the level of the
			// lines around them.
			closing := 0
			for j := i; j < len(toks) && toks[j].Pos.Line == t.Pos.Line && isCloser(toks[j]); j++ {
				closing++
			}
			line = 0
			switch n := len(levels) - closing; {
			case closing > 0:
				line = levels[n].outer
			case n > 0:
				line = levels[n-1].inner
			}
			b.WriteString(strings.Repeat(Indent, line))
		} else if spaced(toks[i-1], t) {
			b.WriteByte(' ')
		}
		if t.Type == tokComment && strings.HasPrefix(t.Value, "//") && i > 0 && t.Pos.Line == endLine(toks[i-1]) {
			trailing = append(trailing, b.Len())
		}
		b.WriteString(text(t))
		switch {
		case isOpener(t):
			levels = append(levels, open{line + 1, line})
		case isCloser(t) && len(levels) > 0:
			levels = levels[:len(levels)-1]
		}
	}
	b.WriteByte('\n')
	return alignComments(b.Bytes(), trailing)
}

// alignComments pads the line comments that end lines of code (at offsets
// at, ascending, of out) so that those of consecutive lines start in one
// column: one space after the longest code of the lines (in characters).
func alignComments(out []byte, at []int) []byte {
	if len(at) == 0 {
		return out
	}
	var lines []lineCut
	start, k := 0, 0
	for start < len(out) {
		end := start + bytes.IndexByte(out[start:], '\n')
		c := -1
		for k < len(at) && at[k] < end {
			c = at[k]
			k++
		}
		lines = append(lines, lineCut{start, c})
		start = end + 1
	}
	var b bytes.Buffer
	b.Grow(len(out) + 8*len(at))
	for i := 0; i < len(lines); {
		if lines[i].comment < 0 {
			b.Write(out[lines[i].start:lineEnd(out, lines, i)])
			i++
			continue
		}
		j, width := i, 0
		for ; j < len(lines) && lines[j].comment >= 0; j++ {
			width = max(width, utf8.RuneCount(bytes.TrimRight(out[lines[j].start:lines[j].comment], " ")))
		}
		for ; i < j; i++ {
			code := bytes.TrimRight(out[lines[i].start:lines[i].comment], " ")
			b.Write(code)
			b.WriteString(strings.Repeat(" ", width-utf8.RuneCount(code)+1))
			b.Write(out[lines[i].comment:lineEnd(out, lines, i)])
		}
	}
	return b.Bytes()
}

// lineCut is where a line of formatted source starts, and its trailing
// line comment (-1: none).
type lineCut struct{ start, comment int }

// lineEnd is the end of line i of out (after its line break).
func lineEnd(out []byte, lines []lineCut, i int) int {
	if i+1 < len(lines) {
		return lines[i+1].start
	}
	return len(out)
}

// spaced reports whether one space separates tokens a and b of one line.
func spaced(a, b lexer.Token) bool {
	had := a.Pos.Offset+len(a.Value) < b.Pos.Offset // white space between them in src
	switch {
	case b.Type == tokComment:
		return true
	case a.Type == tokComment:
		return had
	case a.Value == "->" || b.Value == "->":
		return true
	case b.Type == tokPunct && strings.Contains(",:?)]", b.Value):
		return false
	case a.Type == tokPunct && (a.Value == "(" || a.Value == "["):
		return false
	case b.Value == "(" && b.Type == tokPunct:
		return false
	case a.Value == "." && a.Type == tokPunct && b.Type == tokIdent,
		b.Value == "." && b.Type == tokPunct && a.Type == tokIdent:
		return false
	case a.Value == "{" && b.Value == "}":
		return false
	case a.Value == "{" || b.Value == "}":
		return had
	}
	return true
}

func isOpener(t lexer.Token) bool {
	return t.Type == tokPunct && (t.Value == "{" || t.Value == "[" || t.Value == "(")
}

func isCloser(t lexer.Token) bool {
	return t.Type == tokPunct && (t.Value == "}" || t.Value == "]" || t.Value == ")")
}

// text is what layout prints of t: a comment without the trailing white
// space of its lines, its lines ended by LF (not CR LF or a lone CR), any
// other token as is.
func text(t lexer.Token) string {
	if t.Type != tokComment {
		return t.Value
	}
	if strings.HasPrefix(t.Value, "//") {
		return strings.TrimRight(t.Value, " \t\f")
	}
	lines := splitLines(t.Value)
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " \t\f")
	}
	return strings.Join(lines, "\n")
}

// splitLines splits s at its line breaks (LF, CR LF or a lone CR), which
// it drops.
func splitLines(s string) []string {
	var lines []string
	start := 0
	for i := 0; i < len(s); {
		if n := lineBreakLen(s[i:]); n > 0 {
			lines = append(lines, s[start:i])
			i += n
			start = i
			continue
		}
		i++
	}
	return append(lines, s[start:])
}

// endLine is the line a token ends on (a block comment may span lines).
func endLine(t lexer.Token) int { return t.Pos.Line + len(splitLines(t.Value)) - 1 }

// sameTokens reports whether a and b hold the same tokens (type and text,
// comments as layout prints them), and else the index in a of the first that differs.
func sameTokens(a, b []lexer.Token) (int, bool) {
	for i := range min(len(a), len(b)) {
		if a[i].Type != b[i].Type || text(a[i]) != text(b[i]) {
			return i, false
		}
	}
	return min(len(a), len(b)), len(a) == len(b)
}
