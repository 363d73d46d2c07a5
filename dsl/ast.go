package dsl

import (
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/alecthomas/participle/v2/lexer"
)

// The AST is declared as participle grammar: each node records the
// position of its first token in Pos. Keywords are identifiers matched by
// value, so they are reserved only where the grammar expects them: a field,
// exec or type may be called "type", "input" or "lane".

// File is one parsed .ff file.
type File struct {
	Name  string  // file name given to Parse
	Decls []*Decl `parser:"@@*"`
}

// Decl is one top-level declaration. Exactly one field is set.
type Decl struct {
	Pos      lexer.Position
	Package  *PackageDecl  `parser:"  @@"`
	Type     *TypeDecl     `parser:"| @@"`
	Budget   *BudgetDecl   `parser:"| @@"`
	Quota    *QuotaDecl    `parser:"| @@"`
	Flow     *FlowDecl     `parser:"| @@"`
	Schedule *ScheduleDecl `parser:"| @@"`
	// Bad is set when the declaration has a syntax error; its fields may
	// then be incomplete and it must not be checked.
	Bad bool
}

// Ident is a name.
type Ident struct {
	Pos  lexer.Position
	Name string `parser:"@Ident"`
}

// Range returns the source range of the name.
func (i *Ident) Range() Range { return tokenRange(lexer.Token{Pos: i.Pos, Value: i.Name}) }

// PackageDecl is `package NAME`.
type PackageDecl struct {
	Pos  lexer.Position
	Name *Ident `parser:"'package' @@"`
}

// TypeDecl is `type NAME { field: T ... }`.
type TypeDecl struct {
	Pos    lexer.Position
	Name   *Ident   `parser:"'type' @@ '{'"`
	Fields []*Field `parser:"@@* '}'"`
}

// Field is `name: T` or `name?: T`, optionally followed by a comma.
type Field struct {
	Pos      lexer.Position
	Name     *Ident    `parser:"@@"`
	Optional bool      `parser:"@'?'?"`
	Type     *TypeExpr `parser:"':' @@ ','?"`
}

// TypeExpr is a type: `[T]`, `{string: T}` or a name.
type TypeExpr struct {
	Pos   lexer.Position
	List  *TypeExpr `parser:"  '[' @@"`
	LEnd  *RBracket `parser:"  @@"`
	Map   *MapType  `parser:"| '{' @@"`
	MEnd  *RBrace   `parser:"  @@"`
	Named *Ident    `parser:"| @@"`
}

// RBracket is a closing "]", kept for its position.
type RBracket struct {
	Pos lexer.Position
	V   string `parser:"@']'"`
}

// RBrace is a closing "}", kept for its position.
type RBrace struct {
	Pos lexer.Position
	V   string `parser:"@'}'"`
}

// MapType is the inside of `{K: V}`.
type MapType struct {
	Key   *Ident    `parser:"@@ ':'"`
	Value *TypeExpr `parser:"@@"`
}

// Range returns the source range of the type expression.
func (t *TypeExpr) Range() Range {
	r := Range{Start: toPos(t.Pos), End: toPos(t.Pos)}
	switch {
	case t.Named != nil:
		r.End = t.Named.Range().End
	case t.LEnd != nil:
		r.End = tokenRange(lexer.Token{Pos: t.LEnd.Pos, Value: "]"}).End
	case t.MEnd != nil:
		r.End = tokenRange(lexer.Token{Pos: t.MEnd.Pos, Value: "}"}).End
	}
	return r
}

// BudgetDecl is `budget NAME { ... }`.
type BudgetDecl struct {
	Pos   lexer.Position
	Name  *Ident        `parser:"'budget' @@ '{'"`
	Items []*BudgetItem `parser:"@@* '}'"`
}

// BudgetItem is one statement of a budget. Exactly one field is set.
type BudgetItem struct {
	Pos         lexer.Position
	Dimension   *Dimension   `parser:"  'dimension' @@"`
	Reset       *DurationLit `parser:"| 'reset' @@"`
	OnHardLimit *Ident       `parser:"| 'on_hard_limit' @@"`
	Scope       *Ident       `parser:"| 'scope' @@"`
}

// Keyword returns the keyword that starts the item.
func (b *BudgetItem) Keyword() string {
	switch {
	case b.Dimension != nil:
		return "dimension"
	case b.Reset != nil:
		return "reset"
	case b.OnHardLimit != nil:
		return "on_hard_limit"
	case b.Scope != nil:
		return "scope"
	}
	return ""
}

// Range returns the range of the item's keyword.
func (b *BudgetItem) Range() Range { return keywordRange(b.Pos, b.Keyword()) }

// Dimension is `dimension NAME { hard N soft N }`.
type Dimension struct {
	Pos    lexer.Position
	Name   *Ident   `parser:"@@ '{'"`
	Limits []*Limit `parser:"@@* '}'"`
}

// Limit is `hard N` or `soft N`.
type Limit struct {
	Pos   lexer.Position
	Kind  string  `parser:"@('hard' | 'soft')"`
	Value *IntLit `parser:"@@"`
}

// Range returns the range of the limit's keyword.
func (l *Limit) Range() Range { return keywordRange(l.Pos, l.Kind) }

// QuotaDecl is `quota NAME { ... }`.
type QuotaDecl struct {
	Pos   lexer.Position
	Name  *Ident       `parser:"'quota' @@ '{'"`
	Items []*QuotaItem `parser:"@@* '}'"`
}

// QuotaItem is one statement of a quota. Exactly one field is set.
type QuotaItem struct {
	Pos         lexer.Position
	Rate        *Rate        `parser:"  'rate' @@"`
	Concurrency *IntLit      `parser:"| 'concurrency' @@"`
	Jitter      *DurationLit `parser:"| 'jitter' @@"`
	Key         *Path        `parser:"| 'key' @@"`
}

// Keyword returns the keyword that starts the item.
func (q *QuotaItem) Keyword() string {
	switch {
	case q.Rate != nil:
		return "rate"
	case q.Concurrency != nil:
		return "concurrency"
	case q.Jitter != nil:
		return "jitter"
	case q.Key != nil:
		return "key"
	}
	return ""
}

// Range returns the range of the item's keyword.
func (q *QuotaItem) Range() Range { return keywordRange(q.Pos, q.Keyword()) }

// Rate is `N per DURATION`.
type Rate struct {
	Count  *IntLit      `parser:"@@ 'per'"`
	Window *DurationLit `parser:"@@"`
}

// Path is a dotted field path such as `tenant.id`.
type Path struct {
	Pos   lexer.Position
	Parts []*Ident `parser:"@@ ('.' @@)*"`
}

// Range returns the source range of the path.
func (p *Path) Range() Range {
	return Range{Start: p.Parts[0].Range().Start, End: p.Parts[len(p.Parts)-1].Range().End}
}

// ScheduleDecl is `schedule NAME { ... }`: runs of a flow at the fire
// times of a cron expression.
type ScheduleDecl struct {
	Pos   lexer.Position
	Name  *Ident          `parser:"'schedule' @@ '{'"`
	Items []*ScheduleItem `parser:"@@* '}'"`
}

// ScheduleItem is one statement of a schedule. Exactly one field is set.
type ScheduleItem struct {
	Pos      lexer.Position
	Flow     *Ident     `parser:"  'flow' @@"`
	Cron     *StringLit `parser:"| 'cron' @@"`
	Timezone *StringLit `parser:"| 'timezone' @@"`
	Input    *Value     `parser:"| 'input' @@"`
}

// Keyword returns the keyword that starts the item.
func (s *ScheduleItem) Keyword() string {
	switch {
	case s.Flow != nil:
		return "flow"
	case s.Cron != nil:
		return "cron"
	case s.Timezone != nil:
		return "timezone"
	case s.Input != nil:
		return "input"
	}
	return ""
}

// Range returns the range of the item's keyword.
func (s *ScheduleItem) Range() Range { return keywordRange(s.Pos, s.Keyword()) }

// Value is a JSON-like literal: an object, a list, a string, an integer,
// a duration, or a word (true, false or null; the compiler refuses
// others). Exactly one field is set.
type Value struct {
	Pos      lexer.Position
	Object   *ObjectLit   `parser:"  @@"`
	List     *ListLit     `parser:"| @@"`
	String   *StringLit   `parser:"| @@"`
	Int      *IntLit      `parser:"| @@"`
	Duration *DurationLit `parser:"| @@"`
	Word     *Ident       `parser:"| @@"`
}

// Range returns the source range of the value: its token, or the opening
// bracket of an object or list.
func (v *Value) Range() Range {
	switch {
	case v.String != nil:
		return v.String.Range()
	case v.Int != nil:
		return v.Int.Range()
	case v.Duration != nil:
		return v.Duration.Range()
	case v.Word != nil:
		return v.Word.Range()
	}
	return keywordRange(v.Pos, "{")
}

// ObjectLit is `{ name: value ... }`; keys are names or strings, and a
// comma may follow each member.
type ObjectLit struct {
	Pos     lexer.Position
	Members []*Member `parser:"'{' @@* '}'"`
}

// Member is one `key: value` of an object, optionally followed by a comma.
type Member struct {
	Pos    lexer.Position
	Name   *Ident     `parser:"( @@"`
	Quoted *StringLit `parser:"| @@ )"`
	Value  *Value     `parser:"':' @@ ','?"`
}

// Key returns the member's key.
func (m *Member) Key() string {
	if m.Name != nil {
		return m.Name.Name
	}
	return m.Quoted.Value()
}

// KeyRange returns the source range of the member's key.
func (m *Member) KeyRange() Range {
	if m.Name != nil {
		return m.Name.Range()
	}
	return m.Quoted.Range()
}

// ListLit is `[v, v]`; a trailing comma is allowed.
type ListLit struct {
	Pos   lexer.Position
	Items []*Value `parser:"'[' (@@ (',' @@)* ','?)? ']'"`
}

// FlowDecl is `flow NAME(IN) -> OUT { ... }`.
type FlowDecl struct {
	Pos    lexer.Position
	Name   *Ident      `parser:"'flow' @@ '('"`
	Input  *TypeExpr   `parser:"@@? ')'"`
	Output *TypeExpr   `parser:"('->' @@)?"`
	Items  []*FlowItem `parser:"'{' @@* '}'"`
}

// FlowItem is one statement of a flow body. Exactly one field is set.
type FlowItem struct {
	Pos     lexer.Position
	Exec    *ExecDecl `parser:"  @@"`
	Result  *Ident    `parser:"| 'result' @@"`
	Edge    *Edge     `parser:"| @@"`
	Setting *Setting  `parser:"| @@"`
}

// ExecDecl is `exec NAME(IN) -> OUT { settings }`; the body may be empty.
type ExecDecl struct {
	Pos    lexer.Position
	Name   *Ident    `parser:"'exec' @@ '('"`
	Input  *TypeExpr `parser:"@@? ')'"`
	Output *TypeExpr `parser:"('->' @@)?"`
	Body   *Body     `parser:"@@"`
}

// Body is `{ settings }`.
type Body struct {
	Pos      lexer.Position
	Settings []*Setting `parser:"'{' @@* '}'"`
}

// Setting is one `keyword value` statement of a flow or exec. Exactly one
// field is set; which ones are allowed where is checked by the compiler.
// The alternatives are ordered by how often they are used, since each one
// tried costs the parser a branch.
type Setting struct {
	Pos       lexer.Position
	Lane      *StringLit   `parser:"  'lane' @@"`
	Priority  *IntLit      `parser:"| 'priority' @@"`
	Timeout   *DurationLit `parser:"| 'timeout' @@"`
	Retry     *RetryBlock  `parser:"| 'retry' @@"`
	Requires  *StringList  `parser:"| 'requires' @@"`
	Kind      *StringLit   `parser:"| 'kind' @@"`
	Quotas    []*Ident     `parser:"| 'quota' @@ (',' @@)*"`
	Budgets   []*Ident     `parser:"| 'budget' @@ (',' @@)*"`
	Input     *Ident       `parser:"| 'input' @@"`
	Join      *Join        `parser:"| 'join' @@"`
	Deadline  *DurationLit `parser:"| 'deadline' @@"`
	Namespace *StringLit   `parser:"| 'namespace' @@"`
}

// Keyword returns the keyword that starts the setting.
func (s *Setting) Keyword() string {
	switch {
	case s.Namespace != nil:
		return "namespace"
	case s.Lane != nil:
		return "lane"
	case s.Kind != nil:
		return "kind"
	case s.Priority != nil:
		return "priority"
	case s.Timeout != nil:
		return "timeout"
	case s.Deadline != nil:
		return "deadline"
	case s.Retry != nil:
		return "retry"
	case s.Requires != nil:
		return "requires"
	case s.Budgets != nil:
		return "budget"
	case s.Quotas != nil:
		return "quota"
	case s.Input != nil:
		return "input"
	case s.Join != nil:
		return "join"
	}
	return ""
}

// Range returns the range of the setting's keyword.
func (s *Setting) Range() Range { return keywordRange(s.Pos, s.Keyword()) }

// keywordRange is the range of keyword kw starting at pos.
func keywordRange(pos lexer.Position, kw string) Range {
	return tokenRange(lexer.Token{Pos: pos, Value: kw})
}

// RetryBlock is `retry { attempts N backoff B delay D max_delay D jitter }`.
type RetryBlock struct {
	Pos   lexer.Position
	Items []*RetryItem `parser:"'{' @@* '}'"`
}

// RetryItem is one statement of a retry block. Exactly one field is set.
type RetryItem struct {
	Pos      lexer.Position
	Attempts *IntLit      `parser:"  'attempts' @@"`
	Backoff  *Ident       `parser:"| 'backoff' @@"`
	Delay    *DurationLit `parser:"| 'delay' @@"`
	MaxDelay *DurationLit `parser:"| 'max_delay' @@"`
	Jitter   bool         `parser:"| @'jitter'"`
}

// Keyword returns the keyword that starts the item.
func (r *RetryItem) Keyword() string {
	switch {
	case r.Attempts != nil:
		return "attempts"
	case r.Backoff != nil:
		return "backoff"
	case r.Delay != nil:
		return "delay"
	case r.MaxDelay != nil:
		return "max_delay"
	}
	return "jitter"
}

// Range returns the range of the item's keyword.
func (r *RetryItem) Range() Range { return keywordRange(r.Pos, r.Keyword()) }

// StringList is `["a", "b"]`; a trailing comma is allowed.
type StringList struct {
	Pos   lexer.Position
	Items []*StringLit `parser:"'[' (@@ (',' @@)* ','?)? ']'"`
}

// Join is `all`, `any` or a count.
type Join struct {
	Pos   lexer.Position
	Mode  *Ident  `parser:"  @@"`
	Count *IntLit `parser:"| @@"`
}

// Edge is `a, b -> c, d [-> e ...] [on success|failure|done]`. The
// condition applies to every arrow of the statement.
type Edge struct {
	Pos  lexer.Position
	From *NameList   `parser:"@@"`
	To   []*NameList `parser:"('->' @@)+"`
	On   *Ident      `parser:"('on' @@)?"`
}

// NameList is `a, b, c`.
type NameList struct {
	Pos   lexer.Position
	Names []*Ident `parser:"@@ (',' @@)*"`
}

// IntLit is an integer literal as written, such as `10_000`.
type IntLit struct {
	Pos  lexer.Position
	Text string `parser:"@Int"`
}

// Range returns the source range of the literal.
func (l *IntLit) Range() Range { return tokenRange(lexer.Token{Pos: l.Pos, Value: l.Text}) }

// DurationLit is a duration literal as written, such as `1h30m`. An integer
// is accepted by the grammar so that a missing unit gets a clear message.
type DurationLit struct {
	Pos  lexer.Position
	Text string `parser:"@(Duration | Int)"`
}

// Range returns the source range of the literal.
func (l *DurationLit) Range() Range { return tokenRange(lexer.Token{Pos: l.Pos, Value: l.Text}) }

// StringLit is a string literal with its quotes.
type StringLit struct {
	Pos lexer.Position
	Raw string `parser:"@String"`
}

// Range returns the source range of the literal.
func (l *StringLit) Range() Range { return tokenRange(lexer.Token{Pos: l.Pos, Value: l.Raw}) }

// Valid reports whether the literal is well formed: closed, with valid
// escape sequences and UTF-8 text. Parse has reported an invalid one, so
// checks of its value would only repeat that error.
func (l *StringLit) Valid() bool {
	_, err := strconv.Unquote(l.Raw)
	return err == nil && utf8.ValidString(l.Raw)
}

// Value returns the unquoted string. An invalid literal, already reported
// by Parse, yields its text without the quotes.
func (l *StringLit) Value() string {
	if v, err := strconv.Unquote(l.Raw); err == nil {
		return v
	}
	v := strings.TrimPrefix(l.Raw, `"`)
	if len(v) > 0 && v[len(v)-1] == '"' {
		v = v[:len(v)-1]
	}
	return v
}
