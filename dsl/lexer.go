package dsl

import (
	"bytes"
	"fmt"
	"io"
	"strconv"
	"unicode/utf8"

	"github.com/alecthomas/participle/v2/lexer"
)

// Token types produced by the lexer. Keywords are identifiers: the grammar
// matches them by value, so a keyword may also be used as a name.
const (
	tokIdent lexer.TokenType = iota + 1
	tokInt
	tokDuration
	tokString
	tokPunct
	// tokComment is a comment, kept only by scanComments (for Format): the
	// parser never sees one.
	tokComment
)

// tokenSymbols names the token types for the grammar.
var tokenSymbols = map[string]lexer.TokenType{
	"EOF":      lexer.EOF,
	"Ident":    tokIdent,
	"Int":      tokInt,
	"Duration": tokDuration,
	"String":   tokString,
	"Punct":    tokPunct,
}

// scan splits src into tokens, skipping white space and comments. It never
// fails: problems are appended to diags and scanning goes on. The last
// token is always EOF.
func scan(filename string, src []byte, diags *Diagnostics) []lexer.Token {
	return scanSource(filename, src, diags, false)
}

// scanComments is scan keeping the comments, as tokComment tokens.
func scanComments(filename string, src []byte, diags *Diagnostics) []lexer.Token {
	return scanSource(filename, src, diags, true)
}

func scanSource(filename string, src []byte, diags *Diagnostics, comments bool) []lexer.Token {
	s := scanner{file: filename, src: src, text: string(src), line: 1, col: 1, diags: diags, comments: comments}
	s.toks = make([]lexer.Token, 0, len(src)/6+8)
	if bytes.HasPrefix(src, bom) {
		// Not part of line 1: its columns start after it, as editors show
		// them. Offsets still count its bytes.
		s.off = len(bom)
	}
	return s.run()
}

type scanner struct {
	file  string
	src   []byte
	text  string // src as one string: token values are substrings of it
	off   int
	line  int
	col   int
	toks  []lexer.Token
	diags *Diagnostics
	// comments makes comments tokens (tokComment) instead of white space.
	comments bool
}

func (s *scanner) pos() lexer.Position {
	return lexer.Position{Filename: s.file, Offset: s.off, Line: s.line, Column: s.col}
}

// bom is the UTF-8 byte order mark, skipped at the start of a file.
var bom = []byte{0xEF, 0xBB, 0xBF}

// advance moves past n bytes, none of which may end a line.
func (s *scanner) advance(n int) {
	s.off += n
	s.col += n
}

// lineEnd returns the length of the line break at s.off, 0 when there is
// none (lineBreakLen).
func (s *scanner) lineEnd() int {
	return lineBreakLen(s.text[s.off:])
}

// lineBreakLen returns the length of the line break b starts with: 2 for
// CR LF, 1 for LF or a lone CR (old Mac files; editors start a line there
// too), 0 when b starts with none. Positions count lines by these breaks,
// and a line comment or a string ends at one.
func lineBreakLen(b string) int {
	switch {
	case len(b) == 0:
		return 0
	case b[0] == '\n':
		return 1
	case b[0] == '\r' && len(b) > 1 && b[1] == '\n':
		return 2
	case b[0] == '\r':
		return 1
	}
	return 0
}

// newline moves past the line break of n bytes at s.off.
func (s *scanner) newline(n int) {
	s.off += n
	s.line++
	s.col = 1
}

func (s *scanner) peek(i int) byte {
	if s.off+i < len(s.src) {
		return s.src[s.off+i]
	}
	return 0
}

func (s *scanner) emit(t lexer.TokenType, start lexer.Position) {
	s.toks = append(s.toks, lexer.Token{Type: t, Value: s.text[start.Offset:s.off], Pos: start})
}

func (s *scanner) errorf(start lexer.Position, code Code, format string, args ...any) {
	s.diags.Errorf(Range{Start: toPos(start), End: toPos(s.pos())}, code, format, args...)
}

func (s *scanner) run() []lexer.Token {
	for s.off < len(s.src) {
		c := s.src[s.off]
		start := s.pos()
		switch {
		case c == '\n' || c == '\r':
			s.newline(s.lineEnd())
		case c == ' ' || c == '\t' || c == '\f':
			s.advance(1)
		case c == '/' && s.peek(1) == '/':
			for s.off < len(s.src) && s.lineEnd() == 0 {
				s.advance(1)
			}
			if s.comments {
				s.emit(tokComment, start)
			}
		case c == '/' && s.peek(1) == '*':
			s.blockComment(start)
			if s.comments {
				s.emit(tokComment, start)
			}
		case isLetter(c):
			for s.off < len(s.src) && (isLetter(s.src[s.off]) || isDigit(s.src[s.off])) {
				s.advance(1)
			}
			s.emit(tokIdent, start)
		case isDigit(c) || (c == '-' && isDigit(s.peek(1))):
			s.number(start)
		case c == '-' && s.peek(1) == '>':
			s.advance(2)
			s.emit(tokPunct, start)
		case c == '"':
			s.str(start)
		case c == '=' && s.peek(1) == '>':
			s.advance(2)
			s.errorf(start, CodeBadChar, "invalid token \"=>\": an edge is written \"->\"")
			s.emit(tokPunct, start)
			s.toks[len(s.toks)-1].Value = "->" // parse on as if it were right
		case isPunct(c):
			s.advance(1)
			s.emit(tokPunct, start)
		default:
			r, size := utf8.DecodeRune(s.src[s.off:])
			s.advance(size)
			if r == utf8.RuneError && size == 1 {
				s.errorf(start, CodeBadChar, "invalid UTF-8 byte 0x%02x", c)
			} else {
				s.errorf(start, CodeBadChar, "invalid character %s", strconv.QuoteRune(r))
			}
		}
	}
	s.toks = append(s.toks, lexer.EOFToken(s.pos()))
	return s.toks
}

func (s *scanner) blockComment(start lexer.Position) {
	s.advance(2)
	for s.off < len(s.src) {
		if s.src[s.off] == '*' && s.peek(1) == '/' {
			s.advance(2)
			return
		}
		if n := s.lineEnd(); n > 0 {
			s.newline(n)
		} else {
			s.advance(1)
		}
	}
	s.diags.Errorf(Range{Start: toPos(start), End: toPos(lexer.Position{Filename: s.file, Offset: start.Offset + 2, Line: start.Line, Column: start.Column + 2})},
		CodeUnterminated, "block comment is not terminated: add */")
}

// number scans an integer ("-12", "10_000") or a duration ("30s", "1h30m").
// Any letters or dots that follow the digits belong to the token, so that a
// malformed literal is reported whole by the checker.
func (s *scanner) number(start lexer.Position) {
	if s.src[s.off] == '-' {
		s.advance(1)
	}
	dur := false
	for s.off < len(s.src) {
		c := s.src[s.off]
		switch {
		case isDigit(c) || c == '_':
		case isLetter(c):
			dur = true
		case c == '.' && isDigit(s.peek(1)):
		default:
			if dur {
				s.emit(tokDuration, start)
			} else {
				s.emit(tokInt, start)
			}
			return
		}
		s.advance(1)
	}
	if dur {
		s.emit(tokDuration, start)
	} else {
		s.emit(tokInt, start)
	}
}

// str scans a string literal. Each escape sequence and each byte that is
// not UTF-8 is checked where it stands, so that a diagnostic points at it
// rather than at the opening quote.
func (s *scanner) str(start lexer.Position) {
	s.advance(1)
	for s.off < len(s.src) {
		c := s.src[s.off]
		switch {
		case c == '"':
			s.advance(1)
			s.emit(tokString, start)
			return
		case c == '\\' && s.off+1 < len(s.src) && s.src[s.off+1] != '\n' && s.src[s.off+1] != '\r':
			s.escape()
		case c == '\n' || c == '\r':
			s.unterminated(start)
			return
		case c >= utf8.RuneSelf:
			at := s.pos()
			r, size := utf8.DecodeRune(s.src[s.off:])
			s.advance(size)
			if r == utf8.RuneError && size == 1 {
				s.errorf(at, CodeBadChar, "invalid UTF-8 byte 0x%02x in string literal: .ff files are UTF-8 text", c)
			}
		default:
			s.advance(1)
		}
	}
	s.unterminated(start)
}

// escape scans the escape sequence at s.off (a backslash followed by
// anything but a line break) and reports it when Go's rules refuse it.
func (s *scanner) escape() {
	at := s.pos()
	rest := s.text[s.off:]
	if _, _, tail, err := strconv.UnquoteChar(rest, '"'); err == nil {
		s.advance(len(rest) - len(tail))
		return
	}
	r, size := utf8.DecodeRuneInString(rest[1:])
	if r == utf8.RuneError && size == 1 {
		// A byte that is not UTF-8: str reports it where it stands (the
		// message would otherwise hold it raw).
		s.advance(1)
		return
	}
	seq := rest[:1+size]
	var hint string
	switch c := rest[1]; {
	case c == 'x':
		hint = `\x takes 2 hex digits`
	case c == 'u':
		hint = `\u takes 4 hex digits of a valid code point`
	case c == 'U':
		hint = `\U takes 8 hex digits of a valid code point`
	case '0' <= c && c <= '7':
		hint = `an octal escape is 3 digits, at most \377`
	default:
		hint = `write \\ for a backslash; the escapes are \a \b \f \n \r \t \v \\ \" \x \u \U and octal`
	}
	s.advance(len(seq))
	s.errorf(at, CodeBadString, "invalid escape sequence %s in string literal: %s", seq, hint)
}

func (s *scanner) unterminated(start lexer.Position) {
	s.errorf(start, CodeUnterminated, "string literal is not terminated: add a closing \"")
	// Emit the string anyway so that parsing can go on.
	s.emit(tokString, start)
}

func isLetter(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c == '_' }
func isDigit(c byte) bool  { return '0' <= c && c <= '9' }

func isPunct(c byte) bool {
	switch c {
	case '{', '}', '(', ')', '[', ']', ',', ':', '?', '.':
		return true
	}
	return false
}

// toPos converts a participle position.
func toPos(p lexer.Position) Position {
	return Position{File: p.Filename, Line: p.Line, Col: p.Column, Offset: p.Offset}
}

// tokenRange is the range covered by one token.
func tokenRange(t lexer.Token) Range {
	end := t.Pos
	end.Offset += len(t.Value)
	end.Column += len(t.Value)
	return Range{Start: toPos(t.Pos), End: toPos(end)}
}

// describe names a token for a syntax error.
func describe(t lexer.Token) string {
	switch t.Type {
	case lexer.EOF:
		return "end of file"
	case tokString:
		return "string " + t.Value
	case tokInt:
		return "integer " + t.Value
	case tokDuration:
		return "duration " + t.Value
	}
	return fmt.Sprintf("%q", t.Value)
}

// sliceLexer replays scanned tokens to participle.
type sliceLexer struct {
	toks []lexer.Token
	i    int
}

func (l *sliceLexer) Next() (lexer.Token, error) {
	t := l.toks[l.i]
	if l.i < len(l.toks)-1 {
		l.i++
	}
	return t, nil
}

// definition is the participle lexer definition; parsing feeds tokens
// through sliceLexer instead of calling Lex.
type definition struct{}

func (definition) Symbols() map[string]lexer.TokenType { return tokenSymbols }

func (definition) Lex(filename string, r io.Reader) (lexer.Lexer, error) {
	src, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("dsl: read %s: %w", filename, err)
	}
	var diags Diagnostics
	return &sliceLexer{toks: scan(filename, src, &diags)}, nil
}

// ToPosition converts a position recorded in the AST.
func ToPosition(p lexer.Position) Position { return toPos(p) }
