package dsl

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/alecthomas/participle/v2/lexer"
)

// Position is a place in a source file. Line and Col are 1-based; Col
// counts bytes. Offset is the 0-based byte offset. The zero Position is
// "unknown".
type Position struct {
	File   string
	Line   int
	Col    int
	Offset int
}

// IsValid reports whether p denotes a real place in a file.
func (p Position) IsValid() bool { return p.Line > 0 }

// String formats p as "file:line:col", dropping unknown parts.
func (p Position) String() string {
	switch {
	case !p.IsValid() && p.File == "":
		return "-"
	case !p.IsValid():
		return p.File
	case p.File == "":
		return fmt.Sprintf("%d:%d", p.Line, p.Col)
	}
	return fmt.Sprintf("%s:%d:%d", p.File, p.Line, p.Col)
}

func (p Position) lexer() lexer.Position {
	return lexer.Position{Filename: p.File, Offset: p.Offset, Line: p.Line, Column: p.Col}
}

// Compare orders positions by file name, then offset: it returns -1, 0 or
// +1 as p comes before, at or after q.
func (p Position) Compare(q Position) int {
	if c := strings.Compare(p.File, q.File); c != 0 {
		return c
	}
	return cmp.Compare(p.Offset, q.Offset)
}

// Range is a half-open span of source text: End is just past its last byte.
type Range struct {
	Start Position
	End   Position
}

// Severity says whether a diagnostic stops compilation.
type Severity int

// Severities.
const (
	SeverityError Severity = iota
	SeverityWarning
)

// String returns "error" or "warning".
func (s Severity) String() string {
	if s == SeverityWarning {
		return "warning"
	}
	return "error"
}

// MarshalText encodes s as its name.
func (s Severity) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// Related is a secondary position attached to a diagnostic, such as the
// previous declaration of a duplicated name.
type Related struct {
	Range   Range
	Message string
}

// Diagnostic is one problem found in the source: an error or a warning with
// a stable code (see spec/language.md) and a message.
type Diagnostic struct {
	Range    Range
	Severity Severity
	Code     Code
	Message  string
	Related  []Related
}

// String formats d as "path:line:col: error: message [code]".
func (d Diagnostic) String() string {
	return fmt.Sprintf("%s: %s: %s [%s]", d.Range.Start, d.Severity, d.Message, d.Code)
}

// Diagnostics is a list of diagnostics. Use Sort before printing.
type Diagnostics []Diagnostic

// Errorf appends an error diagnostic.
func (ds *Diagnostics) Errorf(r Range, code Code, format string, args ...any) *Diagnostic {
	*ds = append(*ds, Diagnostic{Range: r, Severity: SeverityError, Code: code, Message: fmt.Sprintf(format, args...)})
	return &(*ds)[len(*ds)-1]
}

// Warnf appends a warning diagnostic.
func (ds *Diagnostics) Warnf(r Range, code Code, format string, args ...any) *Diagnostic {
	*ds = append(*ds, Diagnostic{Range: r, Severity: SeverityWarning, Code: code, Message: fmt.Sprintf(format, args...)})
	return &(*ds)[len(*ds)-1]
}

// With adds a related position to d and returns d.
func (d *Diagnostic) With(r Range, message string) *Diagnostic {
	d.Related = append(d.Related, Related{Range: r, Message: message})
	return d
}

// HasErrors reports whether any diagnostic is an error.
func (ds Diagnostics) HasErrors() bool {
	for _, d := range ds {
		if d.Severity == SeverityError {
			return true
		}
	}
	return false
}

// Count returns the number of errors and warnings.
func (ds Diagnostics) Count() (errors, warnings int) {
	for _, d := range ds {
		if d.Severity == SeverityError {
			errors++
		} else {
			warnings++
		}
	}
	return errors, warnings
}

// Sort orders ds by file, position, severity, code and message, then drops
// repeats: an identical diagnostic at the same place, and every syntax
// diagnostic (FF01xx) after the first one on the same line, since those
// usually cascade from one mistake.
func (ds *Diagnostics) Sort() {
	slices.SortStableFunc(*ds, func(a, b Diagnostic) int {
		if c := a.Range.Start.Compare(b.Range.Start); c != 0 {
			return c
		}
		if c := int(a.Severity) - int(b.Severity); c != 0 {
			return c
		}
		if c := strings.Compare(string(a.Code), string(b.Code)); c != 0 {
			return c
		}
		return strings.Compare(a.Message, b.Message)
	})
	out := (*ds)[:0]
	type lineKey struct {
		file string
		line int
	}
	syntaxLines := map[lineKey]bool{}
	for i, d := range *ds {
		if i > 0 {
			p := (*ds)[i-1]
			if p.Range == d.Range && p.Code == d.Code && p.Message == d.Message {
				continue
			}
		}
		if d.Code.IsSyntax() {
			k := lineKey{d.Range.Start.File, d.Range.Start.Line}
			if syntaxLines[k] {
				continue
			}
			syntaxLines[k] = true
		}
		out = append(out, d)
	}
	*ds = out
}

// Err returns ds as an error when it holds at least one error, else nil.
func (ds Diagnostics) Err() error {
	if !ds.HasErrors() {
		return nil
	}
	return ds
}

// Error formats every diagnostic, one per line.
func (ds Diagnostics) Error() string {
	var b strings.Builder
	_ = ds.Format(&b)
	return strings.TrimSuffix(b.String(), "\n")
}

// Format writes each diagnostic as "path:line:col: severity: message",
// followed by its related positions indented by a tab.
func (ds Diagnostics) Format(w io.Writer) error {
	for _, d := range ds {
		if _, err := fmt.Fprintf(w, "%s: %s: %s\n", d.Range.Start, d.Severity, d.Message); err != nil {
			return err
		}
		for _, r := range d.Related {
			if _, err := fmt.Fprintf(w, "\t%s: %s\n", r.Range.Start, r.Message); err != nil {
				return err
			}
		}
	}
	return nil
}

// DiagnosticsShownMax is how many diagnostics the commands (ffc, ffrun
// --flows) print as text before they only count the others
// (FormatCapped): about a screenful with their related positions, more
// than one edit usually gets wrong, while past it the rest mostly repeats
// one cause (a file that is not .ff text gives one error per line). The
// Go compiler stops at 10.
const DiagnosticsShownMax = 20

// FormatCapped writes the first limit diagnostics of ds as Format does,
// then, when it left some out, a line counting them:
// "<prog>: too many diagnostics: 3 more errors and 1 more warning not
// shown (<hint>)", hint saying how to see them all.
func (ds Diagnostics) FormatCapped(w io.Writer, limit int, prog, hint string) error {
	if len(ds) <= limit {
		return ds.Format(w)
	}
	if err := ds[:limit].Format(w); err != nil {
		return err
	}
	errs, warns := ds[limit:].Count()
	var more []string
	if errs > 0 {
		more = append(more, plural(errs, "more error"))
	}
	if warns > 0 {
		more = append(more, plural(warns, "more warning"))
	}
	_, err := fmt.Fprintf(w, "%s: too many diagnostics: %s not shown (%s)\n", prog, strings.Join(more, " and "), hint)
	return err
}

// plural returns "1 thing" or "n things".
func plural(n int, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	return fmt.Sprintf("%d %ss", n, thing)
}

// jsonPos, jsonRange and jsonDiag are the machine-readable form of a
// diagnostic, written by `ffc check -json`.
type jsonPos struct {
	Line   int `json:"line"`
	Col    int `json:"col"`
	Offset int `json:"offset"`
}

type jsonRange struct {
	Start jsonPos `json:"start"`
	End   jsonPos `json:"end"`
}

type jsonRelated struct {
	File    string    `json:"file"`
	Range   jsonRange `json:"range"`
	Message string    `json:"message"`
}

type jsonDiag struct {
	File     string        `json:"file"`
	Range    jsonRange     `json:"range"`
	Severity Severity      `json:"severity"`
	Code     Code          `json:"code"`
	Message  string        `json:"message"`
	Related  []jsonRelated `json:"related,omitempty"`
}

func toJSONRange(r Range) jsonRange {
	return jsonRange{
		Start: jsonPos{Line: r.Start.Line, Col: r.Start.Col, Offset: r.Start.Offset},
		End:   jsonPos{Line: r.End.Line, Col: r.End.Col, Offset: r.End.Offset},
	}
}

// MarshalJSON encodes d as {file, range{start{line,col,offset},end},
// severity, code, message, related}.
func (d Diagnostic) MarshalJSON() ([]byte, error) {
	j := jsonDiag{
		File:     d.Range.Start.File,
		Range:    toJSONRange(d.Range),
		Severity: d.Severity,
		Code:     d.Code,
		Message:  d.Message,
	}
	for _, r := range d.Related {
		j.Related = append(j.Related, jsonRelated{File: r.Range.Start.File, Range: toJSONRange(r.Range), Message: r.Message})
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // keep "->" readable
	if err := enc.Encode(j); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}
