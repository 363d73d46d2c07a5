package dsl

import "strings"

// Code is the stable identifier of a kind of diagnostic, such as "FF0101".
// Codes never change meaning; spec/language.md lists every one.
type Code string

// IsSyntax reports whether c is a lexical or syntax code (FF01xx).
func (c Code) IsSyntax() bool { return strings.HasPrefix(string(c), "FF01") }

// Diagnostic codes. FF00xx: input files; FF01xx: lexical and syntax; FF02xx: names and
// declarations; FF03xx: types and data flow; FF04xx: the flow graph;
// FF05xx: values and limits; FF09xx: warnings.
const (
	CodeIO             Code = "FF0001"
	CodeSyntax         Code = "FF0101"
	CodeBadChar        Code = "FF0102"
	CodeUnterminated   Code = "FF0103"
	CodeBadString      Code = "FF0104"
	CodeBadInt         Code = "FF0105"
	CodeBadDuration    Code = "FF0106"
	CodeBadName        Code = "FF0107"
	CodeNesting        Code = "FF0108"
	CodeDuplicate      Code = "FF0201"
	CodeUnknownType    Code = "FF0202"
	CodeUnknownBudget  Code = "FF0203"
	CodeUnknownQuota   Code = "FF0204"
	CodeUnknownExec    Code = "FF0205"
	CodePackage        Code = "FF0206"
	CodeReserved       Code = "FF0207"
	CodeDupSetting     Code = "FF0208"
	CodeMisplaced      Code = "FF0209"
	CodeDupKind        Code = "FF0210"
	CodeGoName         Code = "FF0211"
	CodeUnknownFlow    Code = "FF0212"
	CodeMissingItem    Code = "FF0213"
	CodeMapKey         Code = "FF0301"
	CodeRecursiveType  Code = "FF0302"
	CodeEdgeType       Code = "FF0303"
	CodeRootType       Code = "FF0304"
	CodeResultType     Code = "FF0305"
	CodeQuotaKey       Code = "FF0306"
	CodeInputNoType    Code = "FF0307"
	CodeInputNotOK     Code = "FF0308"
	CodeInputJoin      Code = "FF0309"
	CodeScheduleInput  Code = "FF0310"
	CodeTypeDepth      Code = "FF0311"
	CodeCycle          Code = "FF0401"
	CodeNotUpstream    Code = "FF0402"
	CodeMissingInput   Code = "FF0403"
	CodeJoin           Code = "FF0404"
	CodeResult         Code = "FF0405"
	CodeDupEdge        Code = "FF0406"
	CodeEmptyFlow      Code = "FF0407"
	CodeCapability     Code = "FF0501"
	CodeCapabilities   Code = "FF0502"
	CodePriority       Code = "FF0503"
	CodeBadValue       Code = "FF0504"
	CodeRetry          Code = "FF0505"
	CodeDurationRange  Code = "FF0506"
	CodeEmptyString    Code = "FF0507"
	CodeBudgetLimits   Code = "FF0508"
	CodeQuotaLimits    Code = "FF0509"
	CodeTooManyExecs   Code = "FF0510"
	CodeCron           Code = "FF0511"
	CodeTimezone       Code = "FF0512"
	CodePlanSize       Code = "FF0513"
	CodeUnreachable    Code = "FF0901"
	CodeSharedKind     Code = "FF0902"
	CodeUnusedUpstream Code = "FF0903"
	CodePlaceholder    Code = "FF0904"
)

// CodeInfo describes one diagnostic code.
type CodeInfo struct {
	Code     Code
	Severity Severity
	Summary  string
}

// Codes lists every diagnostic code with its severity and a one-line
// summary, in code order. spec/language.md documents the same table and a
// test keeps the two in step.
var Codes = []CodeInfo{
	{CodeIO, SeverityError, "a file or directory that cannot be read, or a directory without .ff files"},
	{CodeSyntax, SeverityError, "syntax error: the parser met a token it did not expect (the message says what it expected), or a package clause that is not the first declaration of its file"},
	{CodeBadChar, SeverityError, "a character that cannot start any token, or a byte that is not UTF-8 outside a comment"},
	{CodeUnterminated, SeverityError, "a string or block comment that is not closed"},
	{CodeBadString, SeverityError, "a string literal with an invalid escape sequence"},
	{CodeBadInt, SeverityError, "an invalid integer: misplaced `_`, a fraction, or out of range"},
	{CodeBadDuration, SeverityError, "an invalid duration: missing or unknown unit, fraction, negative or too large"},
	{CodeBadName, SeverityError, "a name that is too long: over 128 bytes; a budget, quota or dimension name, a schedule's name or the name of the flow it runs over 64 bytes"},
	{CodeNesting, SeverityError, "brackets nested more than 256 levels deep in one declaration"},
	{CodeDuplicate, SeverityError, "a name declared twice in the same scope (both places are shown)"},
	{CodeUnknownType, SeverityError, "a type name that is neither built in nor declared"},
	{CodeUnknownBudget, SeverityError, "a budget name that is not declared"},
	{CodeUnknownQuota, SeverityError, "a quota name that is not declared"},
	{CodeUnknownExec, SeverityError, "an exec name that is not declared in the flow"},
	{CodePackage, SeverityError, "files of one package name different packages"},
	{CodeReserved, SeverityError, "a declaration uses the name of a built-in type"},
	{CodeDupSetting, SeverityError, "a setting given twice in one block"},
	{CodeMisplaced, SeverityError, "a setting used where it has no meaning (e.g. `kind` in a flow body)"},
	{CodeDupKind, SeverityError, "two execs of one flow share a handler kind"},
	{CodeGoName, SeverityError, "two names that become one Go identifier in generated code (both places are shown), a name that gives no Go identifier, or an exec whose handler method would have a name go vet reserves (MarshalJSON, ReadByte, ...)"},
	{CodeUnknownFlow, SeverityError, "a schedule names a flow that is not declared"},
	{CodeMissingItem, SeverityError, "a schedule without `flow` or `cron`"},
	{CodeMapKey, SeverityError, "a map type whose key is not `string`"},
	{CodeRecursiveType, SeverityError, "a type that contains itself through required fields"},
	{CodeEdgeType, SeverityError, "an exec's input type differs from the output type of the upstream that feeds it"},
	{CodeRootType, SeverityError, "a root exec's input type differs from the flow's input type"},
	{CodeResultType, SeverityError, "the result exec's output type differs from the flow's output type"},
	{CodeQuotaKey, SeverityError, "a keyed quota whose key is not a string or int field of the exec's input, or whose key path (128 bytes) or reference (256 bytes) is too long"},
	{CodeInputNoType, SeverityError, "`input` on an exec that declares no input type"},
	{CodeInputNotOK, SeverityError, "an exec takes its input over an `on failure` or `on done` edge, where no output is guaranteed"},
	{CodeInputJoin, SeverityError, "an exec with `join any` or `join N` can start before the upstream feeding its input has succeeded"},
	{CodeScheduleInput, SeverityError, "a schedule's input that does not fit its flow's input type (an unknown or missing field, a wrong type, a key given twice, a word other than true, false or null), or that is missing for a flow that takes an input or given to one that takes none"},
	{CodeTypeDepth, SeverityError, "a type that nests more than 32 lists and maps, or a flow's input type whose every value nests more than 64 levels through required fields"},
	{CodeCycle, SeverityError, "the edges of a flow form a cycle (the cycle is printed)"},
	{CodeNotUpstream, SeverityError, "`input` names an exec that is not an upstream of this exec"},
	{CodeMissingInput, SeverityError, "an exec with an input type and several upstreams does not say which one feeds it"},
	{CodeJoin, SeverityError, "a join count below 1 or above the number of upstreams, or a join on a root exec"},
	{CodeResult, SeverityError, "the flow's result cannot be determined, or `result` is used without an output type"},
	{CodeDupEdge, SeverityError, "the same edge (from, to) is declared twice"},
	{CodeEmptyFlow, SeverityError, "a flow without execs"},
	{CodeCapability, SeverityError, "an invalid capability token (empty, comma, whitespace, control or Unicode format character)"},
	{CodeCapabilities, SeverityError, "too many capability tokens, or too long when joined"},
	{CodePriority, SeverityError, "a priority outside the allowed range"},
	{CodeBadValue, SeverityError, "a keyword setting with a value it does not accept (backoff, on_hard_limit, scope, on)"},
	{CodeRetry, SeverityError, "a retry policy out of range (attempts, or max_delay below delay)"},
	{CodeDurationRange, SeverityError, "a duration that must be positive is zero, or a duration of a setting is longer than 366 days"},
	{CodeEmptyString, SeverityError, "a lane or namespace that is empty, longer than 64 bytes or holds a character other than ASCII letters, digits, `_`, `-`, `.` and `/`; a kind that is empty, longer than 128 bytes, not valid UTF-8, or holds white space, a control character, a Unicode format character or a comma"},
	{CodeBudgetLimits, SeverityError, "budget limits that make no sense: a negative limit, soft above hard, no dimension or more than 32"},
	{CodeQuotaLimits, SeverityError, "quota limits that make no sense: zero rate or concurrency, or neither"},
	{CodeTooManyExecs, SeverityError, "a flow with more execs than a run can stage (10,000), or a package with more schedules than ffrun keeps (1,000)"},
	{CodeCron, SeverityError, "a schedule's cron expression that does not parse"},
	{CodeTimezone, SeverityError, "a schedule's time zone that is not an IANA name, or \"Local\""},
	{CodePlanSize, SeverityError, "a flow whose plan is too large for ffrun to stage (over 15 MiB as `ffc plan -flow` prints it)"},
	{CodeUnreachable, SeverityWarning, "an exec that can never run because its edges demand contradictory outcomes"},
	{CodeSharedKind, SeverityWarning, "two flows of the package use the same handler kind"},
	{CodeUnusedUpstream, SeverityWarning, "a flow input that no exec receives"},
	{CodePlaceholder, SeverityWarning, "a string of a schedule's input holding {{...}} that is not a placeholder (passed as written)"},
}
