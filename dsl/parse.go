// Package dsl parses the .ff workflow language: a hand-written lexer feeds
// a participle grammar whose AST keeps the position of every node. It also
// defines the diagnostics (errors and warnings with positions and stable
// codes) that every stage of the compiler reports, and lays source out as
// ffc fmt writes it (Format).
package dsl

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/alecthomas/participle/v2"
	"github.com/alecthomas/participle/v2/lexer"
)

// Source is one named input file held in memory.
type Source struct {
	Name string
	Data []byte
}

var (
	parserOnce sync.Once
	parser     *participle.Parser[File]
	parserErr  error
)

// grammar returns the participle parser, built once; a built parser is
// safe for concurrent use.
func grammar() (*participle.Parser[File], error) {
	parserOnce.Do(func() {
		parser, parserErr = participle.Build[File](
			participle.Lexer(definition{}),
			participle.UseLookahead(1),
		)
	})
	return parser, parserErr
}

// Grammar returns the grammar in participle's EBNF notation.
func Grammar() string {
	p, err := grammar()
	if err != nil {
		return "error: " + err.Error()
	}
	return p.String()
}

// topKeywords start top-level declarations.
var topKeywords = map[string]bool{"package": true, "type": true, "budget": true, "quota": true, "flow": true, "schedule": true}

// Keywords lists every keyword of the language.
var Keywords = []string{
	"all", "any", "attempts", "backoff", "budget", "concurrency", "cron", "deadline", "delay", "dimension",
	"exec", "flow", "hard", "input", "jitter", "join", "key", "kind", "lane", "max_delay",
	"namespace", "on", "on_hard_limit", "package", "per", "priority", "quota", "rate", "requires", "reset",
	"result", "retry", "schedule", "scope", "soft", "timeout", "timezone", "type",
}

// Parse parses one .ff file. It always returns a File holding every
// declaration it could read, together with all diagnostics found.
//
// A syntax error ends the declaration it occurs in; parsing resumes at the
// next top-level declaration (a top-level keyword or a name at nesting
// depth zero, the name only at the start of a line; or, at any depth, a
// top-level keyword at the start of a line followed by a name and "{" or
// "("), so each declaration reports at most one syntax error. A declaration with a syntax
// error is kept with Bad set.
func Parse(filename string, src []byte) (f *File, diags Diagnostics) {
	f = &File{Name: filename}
	defer func() {
		if r := recover(); r != nil {
			diags.Errorf(Range{Start: Position{File: filename, Line: 1, Col: 1}, End: Position{File: filename, Line: 1, Col: 1}},
				CodeSyntax, "internal error while parsing: %v", r)
		}
	}()
	p, err := grammar()
	if err != nil {
		diags.Errorf(Range{Start: Position{File: filename}}, CodeSyntax, "internal error: grammar: %v", err)
		return f, diags
	}
	toks := scan(filename, src, &diags)
	for _, chunk := range splitDecls(toks) {
		// The chunk's last token is the first of the next chunk: an EOF
		// token stands in for it while this chunk is parsed (and its syntax
		// errors reported), then the original is put back. A chunk whose
		// brackets nest too deeply is parsed only up to the bracket that
		// goes too deep, which is reported instead: the parser recurses
		// per level, and would exhaust the stack.
		end, cut := len(chunk)-1, false
		if i := tooDeep(chunk[:end]); i >= 0 {
			diags.Errorf(tokenRange(chunk[i]), CodeNesting, "brackets nest more than %d levels deep here; ffc reads at most %d", MaxNesting, MaxNesting)
			end, cut = i, true
		}
		last := chunk[end]
		chunk[end] = lexer.EOFToken(last.Pos)
		parseChunk(p, chunk[:end+1], f, &diags, cut)
		chunk[end] = last
	}
	checkPackageClauses(f, &diags)
	return f, diags
}

// checkPackageClauses reports each package clause of f that is not its
// first declaration (comments may come before it): a second clause, or
// one after another declaration. Such a clause is marked Bad, so that it
// is not used. A clause with a syntax error of its own is reported for
// that only.
func checkPackageClauses(f *File, diags *Diagnostics) {
	var first, clause *Decl // the first declaration, the first clause
	for _, d := range f.Decls {
		if d.Package == nil {
			if first == nil {
				first = d
			}
			continue
		}
		switch {
		case d.Bad:
		case clause != nil:
			diags.Errorf(keywordRange(d.Pos, "package"), CodeSyntax,
				"syntax error: second package clause: a file has at most one, before its declarations").
				With(keywordRange(clause.Pos, "package"), "first package clause here")
			d.Bad = true
		case first != nil:
			diags.Errorf(keywordRange(d.Pos, "package"), CodeSyntax,
				"syntax error: package clause after a declaration: write %q first in the file", "package "+d.Package.Name.Name).
				With(keywordRange(first.Pos, declKeyword(first)), "first declaration here")
			d.Bad = true
		}
		if clause == nil {
			clause = d
		}
		if first == nil {
			first = d
		}
	}
}

// declKeyword returns the keyword that starts d, or "" when a syntax
// error left none of its fields set.
func declKeyword(d *Decl) string {
	switch {
	case d.Package != nil:
		return "package"
	case d.Type != nil:
		return "type"
	case d.Budget != nil:
		return "budget"
	case d.Quota != nil:
		return "quota"
	case d.Flow != nil:
		return "flow"
	case d.Schedule != nil:
		return "schedule"
	}
	return ""
}

// MaxNesting bounds how deep brackets ("{", "(" and "[") nest in one
// declaration: deeper ones are an error (FF0108).
const MaxNesting = 256

// tooDeep returns the index of the first opening bracket of toks that
// nests deeper than MaxNesting, or -1.
func tooDeep(toks []lexer.Token) int {
	depth := 0
	for i, t := range toks {
		if t.Type != tokPunct {
			continue
		}
		switch t.Value {
		case "{", "(", "[":
			if depth++; depth > MaxNesting {
				return i
			}
		case "}", ")", "]":
			depth = max(0, depth-1)
		}
	}
	return -1
}

// parseChunk parses the declarations of one chunk, which ends in an EOF
// token, into f. When cut is true the chunk was cut short at an error
// already reported: its declarations are kept as Bad, and the syntax
// error the cut causes is not reported (a declaration reports at most
// one).
func parseChunk(p *participle.Parser[File], chunk []lexer.Token, f *File, diags *Diagnostics, cut bool) {
	peek, err := lexer.Upgrade(&sliceLexer{toks: chunk})
	if err != nil {
		diags.Errorf(tokenRange(chunk[0]), CodeSyntax, "internal error: %v", err)
		return
	}
	part, err := p.ParseFromLexer(peek)
	if part != nil {
		for _, d := range part.Decls {
			if d != nil {
				if err != nil || cut {
					d.Bad = true
				}
				f.Decls = append(f.Decls, d)
			}
		}
	}
	if err != nil && !cut {
		*diags = append(*diags, syntaxDiagnostic(p, err, chunk))
	}
}

// splitDecls cuts the token stream into top-level declarations. Each chunk
// shares toks and includes one token past its end (the first token of the
// next chunk, or EOF) for the parser to use as its end.
func splitDecls(toks []lexer.Token) [][]lexer.Token {
	var chunks [][]lexer.Token
	start, depth := 0, 0
	for i := 0; i < len(toks)-1; i++ {
		t := toks[i]
		// The token right after a declaration's keyword is its name, even
		// when that name is itself a keyword (`type type { ... }`).
		isName := i == start+1 && topKeywords[toks[start].Value]
		// A name right after "->" is an output type, wherever it is
		// written (`flow f(T) ->` and T on the next line).
		isType := i > 0 && toks[i-1].Type == tokPunct && toks[i-1].Value == "->"
		if t.Type == tokIdent && i > start && !isName && (topKeywords[t.Value] && startsDecl(toks, i, depth) || depth == 0 && t.Pos.Column == 1 && !isType) {
			chunks = append(chunks, toks[start:i+1])
			start, depth = i, 0
		}
		if t.Type == tokPunct {
			switch t.Value {
			case "{", "(", "[":
				depth++
			case "}", ")", "]":
				if depth > 0 {
					depth--
				}
			}
		}
	}
	if start < len(toks)-1 || len(chunks) == 0 {
		chunks = append(chunks, toks[start:])
	}
	return chunks
}

// startsDecl reports whether the top-level keyword at toks[i] starts a new
// declaration (so does any name at the start of a line at depth zero): a
// keyword always at depth zero; inside an unclosed block only when it
// is first on its line and followed by a name and an opening brace or
// parenthesis, which no statement inside a block looks like.
func startsDecl(toks []lexer.Token, i, depth int) bool {
	if depth == 0 {
		// Not where a type is written: `-> schedule {` names a type.
		if i > 0 && toks[i-1].Type == tokPunct {
			switch toks[i-1].Value {
			case "->", ":", "(", "[", ",":
				return false
			}
		}
		return true
	}
	if toks[i].Pos.Column != 1 || i+2 >= len(toks) {
		return false
	}
	return toks[i+1].Type == tokIdent && toks[i+2].Type == tokPunct && (toks[i+2].Value == "{" || toks[i+2].Value == "(")
}

func withEOF(toks []lexer.Token, at lexer.Position) []lexer.Token {
	out := make([]lexer.Token, len(toks), len(toks)+1)
	copy(out, toks)
	return append(out, lexer.EOFToken(at))
}

// syntaxDiagnostic converts a participle error into a diagnostic. When the
// parser stopped at the start of a statement inside a block (it then only
// says that it expected the closing brace), the statement is parsed again
// on its own to find the real problem, and the message lists what the
// block accepts.
func syntaxDiagnostic(p *participle.Parser[File], err error, chunk []lexer.Token) Diagnostic {
	var perr participle.Error
	if !errors.As(err, &perr) {
		return Diagnostic{Range: tokenRange(chunk[0]), Code: CodeSyntax, Message: "syntax error: " + err.Error()}
	}
	tok, idx := tokenAt(chunk, perr.Position())
	if tok.Type == lexer.EOF && idx > 0 {
		// Report a missing end right after the last token, not at the
		// start of whatever follows.
		tok.Pos = tokenRange(chunk[idx-1]).End.lexer()
	}
	if d, ok := missingOutputType(chunk, idx); ok {
		return d
	}
	if tok.Type == tokPunct && strings.Contains("})]", tok.Value) && len(openBrackets(chunk, idx)) == 0 {
		return Diagnostic{Range: tokenRange(tok), Code: CodeSyntax,
			Message: fmt.Sprintf("syntax error: unexpected %q: there is no %q open for it to close", tok.Value, map[string]string{"}": "{", ")": "(", "]": "["}[tok.Value])}
	}
	expected := expectedOf(perr.Message())
	if tok.Type == lexer.EOF {
		if d, ok := unclosedDiagnostic(chunk, idx, tok, expected); ok {
			return d
		}
	}
	blk := blockAt(chunk, idx)
	if expected == `"}"` && blk.reparse != nil {
		reparse := blk.reparse
		if blk.kind == "flow body" {
			if prod, ok := flowStatements[tok.Value]; ok {
				reparse = prod
			} else if kw := closestKeyword(tok.Value); kw != "" && tok.Type == tokIdent && !isKeyword(tok.Value) &&
				idx+1 < len(chunk) && chunk[idx+1].Value != "," && chunk[idx+1].Value != "->" {
				return Diagnostic{Range: tokenRange(tok), Code: CodeSyntax,
					Message: fmt.Sprintf("syntax error: unknown statement %q in flow body (did you mean %q?)", tok.Value, kw)}
			}
		}
		if err2 := reparse(p, chunk[idx:]); err2 != nil {
			var perr2 participle.Error
			if errors.As(err2, &perr2) && perr2.Position().Offset > tok.Pos.Offset {
				tok2, idx2 := tokenAt(chunk, perr2.Position())
				exp2 := expectedOf(perr2.Message())
				// The statement stopped again at the start of a
				// statement of a block inside it (the first member of a
				// schedule's input object): that statement on its own
				// says what is wrong.
				for depth := 0; exp2 == `"}"` && depth < 8; depth++ {
					inner := blockAt(chunk, idx2)
					if inner.reparse == nil {
						break
					}
					err3 := inner.reparse(p, chunk[idx2:])
					var perr3 participle.Error
					if !errors.As(err3, &perr3) || perr3.Position().Offset <= tok2.Pos.Offset {
						break
					}
					tok2, idx2 = tokenAt(chunk, perr3.Position())
					exp2 = expectedOf(perr3.Message())
				}
				return finishSyntax(tok2, idx2, chunk, exp2, "")
			}
		}
		d := syntaxMessage(tok, idx, chunk, blk.accepts+` or "}"`, blk.kind)
		if tok.Value == "exec" && blk.kind == "exec body" {
			d.Message += ` (is the "}" that closes the exec before it missing?)`
		}
		return d
	}
	if idx == 0 {
		return syntaxMessage(tok, idx, chunk, "a declaration (package, type, budget, quota, flow or schedule)", "")
	}
	if !strings.HasPrefix(perr.Message(), "unexpected token") {
		return Diagnostic{Range: tokenRange(tok), Code: CodeSyntax, Message: "syntax error: " + perr.Message()}
	}
	return finishSyntax(tok, idx, chunk, expected, "")
}

// unclosedDiagnostic reports a declaration that ends (at the end of the
// file or where the next declaration starts) inside brackets it opened:
// "type body is not closed: add \"}\"", at the end of its last token,
// with the opening bracket as a related position. It does not apply when
// the parser expected something other than the closing bracket (`type T
// { id: ` wants a type first), nor when nothing is open.
func unclosedDiagnostic(chunk []lexer.Token, idx int, at lexer.Token, expected string) (Diagnostic, bool) {
	open := openBrackets(chunk, idx)
	if len(open) == 0 {
		return Diagnostic{}, false
	}
	o := chunk[open[len(open)-1]]
	closer := map[string]string{"{": "}", "(": ")", "[": "]"}[o.Value]
	if expected != "" && !strings.Contains(expected, `"`+closer+`"`) {
		return Diagnostic{}, false
	}
	what := fmt.Sprintf("%q", o.Value)
	if o.Value == "{" {
		k := blockAt(chunk, open[len(open)-1]+1).kind
		switch {
		case k == blocks["input"].kind: // an object of a schedule's input, at any depth
			what = k
		case isMapBrace(chunk, open[len(open)-1]):
			what = "map type"
		case k != "":
			what = k
		}
	}
	d := Diagnostic{Range: Range{Start: toPos(at.Pos), End: toPos(at.Pos)}, Code: CodeSyntax,
		Message: fmt.Sprintf("syntax error: %s is not closed: add %q", what, closer)}
	d.With(tokenRange(o), fmt.Sprintf("%q opened here", o.Value))
	return d, true
}

// missingOutputType reports a flow or exec header whose "->" is followed
// by the body's "{" instead of a type (`exec a(T) -> { }`): the parser
// reads that "{" as the start of a map type and stops at what follows,
// which says nothing of the real mistake. It applies when the error is
// at the "->" or within the three tokens after it, and the token after
// the "{" is "}" or a word that starts a statement of a body.
func missingOutputType(chunk []lexer.Token, idx int) (Diagnostic, bool) {
	for j := max(1, idx-3); j <= idx && j+2 < len(chunk); j++ {
		arrow, brace, next := chunk[j], chunk[j+1], chunk[j+2]
		if arrow.Value != "->" || chunk[j-1].Value != ")" || brace.Value != "{" || brace.Type != tokPunct {
			continue
		}
		if next.Value == "}" && next.Type == tokPunct || next.Type == tokIdent && (flowStatements[next.Value] != nil || next.Value == "exec") {
			return Diagnostic{Range: tokenRange(arrow), Code: CodeSyntax,
				Message: `syntax error: "->" is not followed by a type: write "-> T {" for an output of type T, or leave "->" out for none`}, true
		}
	}
	return Diagnostic{}, false
}

// openBrackets returns the indices of the brackets of chunk still open
// before chunk[idx], innermost last.
func openBrackets(chunk []lexer.Token, idx int) []int {
	var open []int
	for i := 0; i < idx && i < len(chunk); i++ {
		if chunk[i].Type != tokPunct {
			continue
		}
		switch chunk[i].Value {
		case "{", "(", "[":
			open = append(open, i)
		case "}", ")", "]":
			if len(open) > 0 {
				open = open[:len(open)-1]
			}
		}
	}
	return open
}

// isMapBrace reports whether the "{" at chunk[i] opens a map type, as
// blockAt decides it.
func isMapBrace(chunk []lexer.Token, i int) bool {
	return i > 0 && chunk[i-1].Type == tokPunct && strings.Contains(":->([{", chunk[i-1].Value)
}

// finishSyntax handles an arrow without a name after it, then formats the
// message.
func finishSyntax(tok lexer.Token, idx int, chunk []lexer.Token, expected, block string) Diagnostic {
	if tok.Value == "->" && expected == `"->"` && idx+1 < len(chunk) {
		next := chunk[idx+1]
		return Diagnostic{Range: tokenRange(next), Code: CodeSyntax,
			Message: fmt.Sprintf("syntax error: unexpected %s after \"->\", expected a name", describe(next))}
	}
	if idx > 0 && chunk[idx-1].Value == "on" && chunk[idx-1].Type == tokIdent {
		return Diagnostic{Range: tokenRange(tok), Code: CodeSyntax,
			Message: fmt.Sprintf("syntax error: unexpected %s after \"on\", expected success, failure or done", describe(tok))}
	}
	if idx > 0 && expected == `"{"` {
		if prev := chunk[idx-1]; prev.Type == tokIdent && prev.Value == "retry" {
			return Diagnostic{Range: tokenRange(tok), Code: CodeSyntax,
				Message: fmt.Sprintf(`syntax error: unexpected %s after "retry", expected "{": a retry policy is a block, e.g. retry { attempts 3 }`, describe(tok))}
		}
		if name, ok := execHeaderBefore(chunk, idx); ok {
			end := tokenRange(chunk[idx-1]).End
			return Diagnostic{Range: Range{Start: end, End: end}, Code: CodeSyntax,
				Message: fmt.Sprintf(`syntax error: exec %q has no body: add "{}" after its declaration (its settings go inside)`, name)}
		}
	}
	return syntaxMessage(tok, idx, chunk, expected, block)
}

// execHeaderBefore reports whether chunk[idx] directly follows the header
// of an exec (`exec NAME(...)`, with its output type if any), and returns
// the exec's name: going back over balanced brackets (a map or list
// type), the nearest statement is an exec, not another declaration.
func execHeaderBefore(chunk []lexer.Token, idx int) (string, bool) {
	depth := 0
	for j := idx - 1; j >= 0; j-- {
		t := chunk[j]
		switch {
		case t.Type == tokPunct && strings.Contains("})]", t.Value):
			depth++
		case t.Type == tokPunct && strings.Contains("{([", t.Value):
			if depth--; depth < 0 {
				return "", false // inside a block: the header is done
			}
		case depth > 0 || t.Type != tokIdent:
		case t.Value == "exec" && j+2 < idx && chunk[j+1].Type == tokIdent && chunk[j+2].Value == "(":
			return chunk[j+1].Value, true
		case t.Value == "flow" || t.Value == "type" || t.Value == "budget" || t.Value == "quota" || t.Value == "schedule":
			return "", false
		}
	}
	return "", false
}

// syntaxMessage builds "syntax error: unexpected X in BLOCK, expected Y",
// adding a suggestion when X (or the name before it) looks like a
// misspelt keyword.
func syntaxMessage(tok lexer.Token, idx int, chunk []lexer.Token, expected, block string) Diagnostic {
	var b strings.Builder
	fmt.Fprintf(&b, "syntax error: unexpected %s", describe(tok))
	if block != "" {
		fmt.Fprintf(&b, " in %s", block)
	}
	if expected != "" {
		fmt.Fprintf(&b, ", expected %s", expected)
	}
	kind := blockAt(chunk, idx).kind
	inType := kind == "type body" || kind == "input object" // field names are free
	switch {
	case tok.Type == tokIdent && !isKeyword(tok.Value) && !inType && (block != "" || idx == 0):
		if kw := closestKeyword(tok.Value); kw != "" {
			fmt.Fprintf(&b, " (did you mean %q?)", kw)
		}
	case idx > 0 && chunk[idx-1].Type == tokIdent && !isKeyword(chunk[idx-1].Value) && !inType && stmtStart(chunk, idx-1):
		if kw := closestKeyword(chunk[idx-1].Value); kw != "" {
			fmt.Fprintf(&b, " (did you mean %q instead of %q?)", kw, chunk[idx-1].Value)
		}
	}
	return Diagnostic{Range: tokenRange(tok), Code: CodeSyntax, Message: b.String()}
}

// stmtStart reports whether chunk[i] looks like the first token of a
// statement: first on its line, or right after a brace.
func stmtStart(chunk []lexer.Token, i int) bool {
	if i <= 0 {
		return i == 0
	}
	prev := chunk[i-1]
	return prev.Pos.Line != chunk[i].Pos.Line || prev.Type == tokPunct && (prev.Value == "{" || prev.Value == "}")
}

// flowStatements reparse a flow-body statement that starts with a keyword.
var flowStatements = map[string]func(*participle.Parser[File], []lexer.Token) error{
	"exec": reparseAs[ExecDecl], "result": reparseAs[FlowItem],
	"namespace": reparseAs[Setting], "lane": reparseAs[Setting], "kind": reparseAs[Setting],
	"priority": reparseAs[Setting], "timeout": reparseAs[Setting], "deadline": reparseAs[Setting],
	"retry": reparseAs[Setting], "requires": reparseAs[Setting], "budget": reparseAs[Setting],
	"quota": reparseAs[Setting], "input": reparseAs[Setting], "join": reparseAs[Setting],
}

// expectedOf extracts and simplifies the "(expected ...)" part of a
// participle message.
func expectedOf(msg string) string {
	i := strings.Index(msg, "(expected ")
	if i < 0 || !strings.HasSuffix(msg, ")") {
		return ""
	}
	return simplifyExpected(msg[i+len("(expected ") : len(msg)-1])
}

// block describes the kind of block a token is in.
type block struct {
	kind    string // e.g. "flow body"; "" when unknown
	accepts string // what may start a statement, as a list that `or "}"` ends
	reparse func(p *participle.Parser[File], toks []lexer.Token) error
}

var blocks = map[string]block{
	"type":      {"type body", "a field (name: type)", reparseAs[Field]},
	"budget":    {"budget body", "dimension, reset, on_hard_limit, scope", reparseAs[BudgetItem]},
	"dimension": {"dimension body", "hard, soft", reparseAs[Limit]},
	"quota":     {"quota body", "rate, concurrency, jitter, key", reparseAs[QuotaItem]},
	"flow":      {"flow body", "exec, an edge (a -> b), result, a setting (namespace, lane, priority, timeout, deadline, retry, requires, budget, quota)", reparseAs[FlowItem]},
	"exec":      {"exec body", "a setting (kind, lane, priority, timeout, deadline, retry, requires, budget, quota, input, join)", reparseAs[Setting]},
	"retry":     {"retry block", "attempts, backoff, delay, max_delay, jitter", reparseAs[RetryItem]},
	"schedule":  {"schedule body", "flow, cron, timezone, input", reparseAs[ScheduleItem]},
	"input":     {"input object", "a field (name: value)", reparseAs[Member]},
}

// declKeywords are followed by a declaration's name.
var declKeywords = map[string]bool{
	"package": true, "type": true, "budget": true, "quota": true, "flow": true, "schedule": true,
	"exec": true, "dimension": true,
}

// reparseAs parses toks as one P and returns the error, if any.
func reparseAs[P any](p *participle.Parser[File], toks []lexer.Token) error {
	pp, err := participle.ParserForProduction[P](p)
	if err != nil {
		return nil
	}
	peek, err := lexer.Upgrade(&sliceLexer{toks: withEOF(toks[:len(toks)-1], toks[len(toks)-1].Pos)})
	if err != nil {
		return nil
	}
	_, err = pp.ParseFromLexer(peek, participle.AllowTrailing(true))
	return err
}

// blockAt finds the innermost block enclosing chunk[idx] by replaying the
// brackets before it. A "{" right after ":", "->", "(", "[" or "{" opens a
// map type; any other "{" opens a block of the last block keyword seen.
func blockAt(chunk []lexer.Token, idx int) block {
	var stack []string
	last := ""
	for i := 0; i < idx && i < len(chunk); i++ {
		t := chunk[i]
		switch {
		case t.Type == tokIdent:
			// A block keyword, unless it is a declaration's name (`exec
			// input()`); `input` opens a block only as `input {`.
			_, ok := blocks[t.Value]
			named := i > 0 && chunk[i-1].Type == tokIdent && declKeywords[chunk[i-1].Value]
			if ok && !named && (t.Value != "input" || i+1 < len(chunk) && chunk[i+1].Value == "{") {
				last = t.Value
			}
		case t.Type != tokPunct:
		case t.Value == "{":
			kind := last
			if i > 0 && chunk[i-1].Type == tokPunct && strings.Contains(":->([{", chunk[i-1].Value) {
				kind = "map"
				if slices.Contains(stack, "input") || slices.Contains(stack, "input[") {
					kind = "input" // an object inside a schedule's input, not a map type
				}
			}
			stack = append(stack, kind)
		case t.Value == "[" && i > 0 && chunk[i-1].Type == tokIdent && chunk[i-1].Value == "input":
			stack = append(stack, "input[") // a list as a schedule's input
		case t.Value == "(" || t.Value == "[":
			stack = append(stack, t.Value)
		case t.Value == "}" || t.Value == ")" || t.Value == "]":
			if len(stack) > 0 {
				stack = stack[:len(stack)-1]
			}
		}
	}
	if len(stack) == 0 {
		return block{}
	}
	return blocks[stack[len(stack)-1]]
}

// tokenAt returns the token of chunk at pos, or the nearest one after it.
func tokenAt(chunk []lexer.Token, pos lexer.Position) (lexer.Token, int) {
	for i, t := range chunk {
		if t.Pos.Offset >= pos.Offset {
			return t, i
		}
	}
	return chunk[len(chunk)-1], len(chunk) - 1
}

// productionWords describes grammar productions in messages.
var productionWords = map[string]string{
	"Ident": "a name", "IntLit": "an integer", "DurationLit": "a duration", "StringLit": "a string",
	"StringList": `a list ["..."]`, "TypeExpr": "a type", "Field": "a field", "Body": `"{"`,
	"RetryBlock": `"{"`, "Join": "all, any or a count", "Path": "a field name", "NameList": "a name",
	"Dimension": "a name", "Rate": "an integer", "<ident>": "a name", "<int>": "an integer",
	"<duration>": "a duration", "<string>": "a string", "RBracket": `"]"`, "RBrace": `"}"`,
	"MapType": "a name", "Limit": "hard or soft", "Value": "a value", "ObjectLit": `"{"`, "ListLit": `"["`,
	"Member": "a field (name: value)",
}

// simplifyExpected turns participle's EBNF of what it expected next into a
// short phrase: the first element of the sequence, and the one after it
// when the first is optional.
func simplifyExpected(s string) string {
	terms := ebnfTerms(s)
	var out []string
	for _, t := range terms {
		optional := strings.HasSuffix(t, "?") || strings.HasSuffix(t, "*")
		t = strings.TrimRight(t, "?*+")
		t = strings.TrimSuffix(strings.TrimPrefix(t, "("), ")")
		if ts := ebnfTerms(t); len(ts) > 1 && !strings.Contains(t, "|") {
			t = ts[0]
		}
		if w, ok := productionWords[t]; ok {
			t = w
		}
		out = append(out, t)
		if !optional || len(out) == 3 {
			break
		}
	}
	if len(out) == 0 {
		return ""
	}
	if len(out) == 1 {
		return out[0]
	}
	return strings.Join(out[:len(out)-1], ", ") + " or " + out[len(out)-1]
}

// ebnfTerms splits an EBNF sequence at top-level spaces.
func ebnfTerms(s string) []string {
	var terms []string
	depth, start := 0, 0
	inQuote := false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"':
			inQuote = !inQuote
		case inQuote:
		case c == '(':
			depth++
		case c == ')':
			depth--
		case c == ' ' && depth == 0:
			if i > start {
				terms = append(terms, s[start:i])
			}
			start = i + 1
		}
	}
	if start < len(s) {
		terms = append(terms, s[start:])
	}
	return terms
}

func isKeyword(s string) bool {
	for _, k := range Keywords {
		if k == s {
			return true
		}
	}
	return false
}

// closestKeyword returns the keyword s is likely a misspelling of, or "".
func closestKeyword(s string) string { return Suggest(s, Keywords) }

// EditDistance is the edit distance between a and b in bytes: the
// Levenshtein distance, where swapping two adjacent bytes (`exce` for
// `exec`) also counts as one edit (optimal string alignment).
func EditDistance(a, b string) int {
	if len(a) < len(b) {
		a, b = b, a
	}
	older := make([]int, len(b)+1) // row i-2
	prev := make([]int, len(b)+1)  // row i-1
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], older[j-2]+1)
			}
		}
		older, prev, cur = prev, cur, older
	}
	return prev[len(b)]
}

// Suggest returns the candidate closest to name when it is close enough to
// be a likely misspelling: an edit distance (ignoring case: `String` for
// `string`) of at most 2 and at most a third of the name's length. Ties go
// to the alphabetically first candidate. It returns "" when nothing is
// close.
func Suggest(name string, candidates []string) string {
	limit := min(2, len(name)/3)
	best, bestD := "", limit+1
	lower := strings.ToLower(name)
	for _, c := range candidates {
		if c == name {
			continue
		}
		d := EditDistance(lower, strings.ToLower(c))
		if d < bestD || (d == bestD && c < best) {
			best, bestD = c, d
		}
	}
	return best
}
