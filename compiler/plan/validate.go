package plan

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// CheckCapability reports why tok is not a valid capability token: tokens
// are non-empty, valid UTF-8, and contain no comma, white space, control
// character or Unicode format character (FormatProblem).
func CheckCapability(tok string) error {
	if tok == "" {
		return errors.New("capability must not be empty")
	}
	if !utf8.ValidString(tok) {
		return fmt.Errorf("capability %q is not valid UTF-8", tok)
	}
	for _, r := range tok {
		switch {
		case r == ',':
			return fmt.Errorf("capability %q contains a comma", tok)
		case unicode.IsSpace(r):
			return fmt.Errorf("capability %q contains white space", tok)
		case unicode.IsControl(r):
			return fmt.Errorf("capability %q contains a control character", tok)
		}
	}
	if p := FormatProblem(tok); p != "" {
		return fmt.Errorf("capability %q %s", tok, p)
	}
	return nil
}

// FormatProblem says why s, a kind or a capability, may not hold the
// Unicode format character (category Cf) it holds, or returns "". Such
// characters are invisible (zero-width spaces and joiners, the soft
// hyphen, a byte order mark) or reorder the text around them
// (bidirectional overrides and isolates): two kinds or capabilities that
// differ only by one look the same in every listing, and a worker that
// advertises the one seen would never match the other.
func FormatProblem(s string) string {
	for _, r := range s {
		if unicode.Is(unicode.Cf, r) {
			return fmt.Sprintf("contains the invisible Unicode format character %U: zero-width and bidirectional characters make different names look the same", r)
		}
	}
	return ""
}

// ValidateCapabilities checks a set of capability tokens, required by an
// exec or advertised by a worker: every token valid, at most
// MaxCapabilities of them and at most MaxCapabilityBytes bytes when joined
// with commas.
func ValidateCapabilities(tokens []string) error {
	if len(tokens) > MaxCapabilities {
		return fmt.Errorf("%d capabilities: at most %d are allowed", len(tokens), MaxCapabilities)
	}
	n := 0
	for i, t := range tokens {
		if err := CheckCapability(t); err != nil {
			return fmt.Errorf("capability %d: %w", i, err)
		}
		if i > 0 {
			n++
		}
		n += len(t)
	}
	if n > MaxCapabilityBytes {
		return fmt.Errorf("capabilities are %d bytes when joined: at most %d are allowed", n, MaxCapabilityBytes)
	}
	return nil
}

// MaxNameLen bounds flow, exec, type, field, budget and quota names;
// MaxNameLen bounds names of flows, execs, types, fields, budgets and
// quotas; MaxLaneLen namespaces and lanes; MaxKindLen kinds (the limits
// ffrun stages: runtime/store checks the same).
const (
	MaxNameLen = 128
	MaxLaneLen = 64
	MaxKindLen = 128
	// MaxScheduleNameLen bounds schedule names and the flow names
	// schedules name (the names ffrun keeps schedules and their templates
	// by).
	MaxScheduleNameLen = 64
	// MaxSchedules bounds the schedules of a deployment, MaxPayloadBytes a
	// run's input (with a schedule's placeholders filled in): what ffrun
	// accepts (runtime/store takes both from here).
	MaxSchedules    = 1000
	MaxPayloadBytes = 1 << 20
	// MaxInputDepth bounds how deep the typed levels of a run's input nest
	// (records, lists and maps of its flow's input type: runtime/flowinput
	// checks it); a value of type json may nest deeper.
	MaxInputDepth = 64
	// MaxResourceNameLen bounds budget, quota and dimension names,
	// MaxDimensions the dimensions of a budget, MaxQuotaKeyLen a quota's
	// key path, and MaxQuotaRefLen the reference a member keeps of a keyed
	// quota whose key value is read from an upstream's output when it is
	// claimed ("<namespace>/<quota>?<key path>"): what runtime/store takes
	// (checkResourceName, MaxBudgetDimensions, the quota key check and
	// MaxTagBytes).
	MaxResourceNameLen = 64
	MaxDimensions      = 32
	MaxQuotaKeyLen     = 128
	MaxQuotaRefLen     = 256
	// MaxTypeDepth bounds the lists and maps a type reference nests
	// ([[string]] nests 2).
	MaxTypeDepth = 32
	// maxProblems caps the problems Validate lists.
	maxProblems = 20
)

// problems collects validation errors with their paths.
type problems struct {
	errs []error
}

func (p *problems) addf(path, format string, args ...any) {
	if len(p.errs) == maxProblems {
		p.errs = append(p.errs, errors.New("too many problems; stopping"))
	}
	if len(p.errs) > maxProblems {
		return
	}
	p.errs = append(p.errs, fmt.Errorf("%s: %s", path, fmt.Sprintf(format, args...)))
}

func (p *problems) err() error { return errors.Join(p.errs...) }

// ValidateName reports why s is not a valid name: an ASCII letter or "_"
// followed by letters, digits and "_", at most MaxNameLen bytes.
func ValidateName(s string) error {
	if s == "" {
		return errors.New("name must not be empty")
	}
	if len(s) > MaxNameLen {
		return fmt.Errorf("name is longer than %d bytes", MaxNameLen)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || i > 0 && '0' <= c && c <= '9') {
			return fmt.Errorf("name %q has an invalid character at byte %d", s, i)
		}
	}
	return nil
}

// ValidateLabel reports why s is not a valid namespace or lane:
// 1..MaxLaneLen bytes of ASCII
// letters, digits, '_', '-', '.' and '/', the names ffrun stages (they
// are parts of keys and wake-up messages).
func ValidateLabel(s string) error {
	if p := LabelProblem(s); p != "" {
		return errors.New(p)
	}
	return nil
}

// LabelProblem is ValidateLabel without an allocation when s is valid:
// why s is not a valid namespace or lane, or "".
func LabelProblem(s string) string {
	if s == "" {
		return "must not be empty"
	}
	if len(s) > MaxLaneLen {
		return fmt.Sprintf("%q is longer than %d bytes", s, MaxLaneLen)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-' || c == '.' || c == '/') {
			return fmt.Sprintf("%q: only letters, digits, '_', '-', '.' and '/' are allowed", s)
		}
	}
	return ""
}

// ValidateKind reports why s is not a valid kind: 1..MaxKindLen bytes of
// valid UTF-8 without white space, control characters or commas (claims
// send kinds comma-separated), nor Unicode format characters
// (FormatProblem).
func ValidateKind(s string) error {
	if s == "" {
		return errors.New("must not be empty")
	}
	if len(s) > MaxKindLen {
		return fmt.Errorf("%q is longer than %d bytes", s, MaxKindLen)
	}
	if !utf8.ValidString(s) {
		return fmt.Errorf("%q is not valid UTF-8", s)
	}
	for _, r := range s {
		if unicode.IsSpace(r) || unicode.IsControl(r) || r == ',' {
			return fmt.Errorf("%q contains white space, a control character or a comma", s)
		}
	}
	if p := FormatProblem(s); p != "" {
		return fmt.Errorf("%q %s", s, p)
	}
	return nil
}

// Validate checks a package: its schema version, every flow, and that
// every schedule has a name and a cron expression and names a flow of the
// package (the API checks the rest when the schedule is registered).
func (p *Package) Validate() error {
	var ps problems
	if p.Schema != SchemaVersion {
		ps.addf("schema", "unsupported schema version %d (want %d)", p.Schema, SchemaVersion)
	}
	for i := range p.Flows {
		if err := p.Flows[i].Validate(); err != nil {
			ps.errs = append(ps.errs, fmt.Errorf("flows[%d]: %w", i, err))
		}
	}
	flows := make(map[string]bool, len(p.Flows))
	for _, f := range p.Flows {
		flows[f.Name] = true
	}
	for i, s := range p.Schedules {
		path := fmt.Sprintf("schedules[%d]", i)
		if err := ValidateName(s.Name); err != nil {
			ps.addf(path+".name", "%v", err)
		} else if len(s.Name) > MaxScheduleNameLen {
			ps.addf(path+".name", "is %d bytes long; the limit is %d", len(s.Name), MaxScheduleNameLen)
		}
		if !flows[s.Flow] {
			ps.addf(path+".flow", "no flow %q in the package", s.Flow)
		}
		if s.Cron == "" {
			ps.addf(path+".cron", "is empty")
		}
	}
	return ps.err()
}

// Validate checks the structure of a flow plan received from an untrusted
// source, such as a plan posted over HTTP: schema version, names, types
// (at most MaxTypeDepth deep), execs (at most MaxExecs), edges (known
// execs, no duplicates, no cycle), joins, input sources (from a success
// edge, and guaranteed by the join: see UnsureInputs), capabilities,
// priorities, retry policies, durations (at most MaxDurationMs), the
// limits of budgets and quotas ffrun's store applies, and that every
// referenced type, budget and quota is included. Each problem names its
// path, e.g. "execs[3].join.n"; all problems are joined (at most 20).
func (f *Flow) Validate() error {
	var ps problems
	v := flowValidator{f: f, ps: &ps}
	v.run()
	return ps.err()
}

type flowValidator struct {
	f       *Flow
	ps      *problems
	types   map[string]*Type
	execs   map[string]int
	budgets map[string]bool
	quotas  map[string]*Quota
}

func (v *flowValidator) run() {
	f, ps := v.f, v.ps
	if f.Schema != SchemaVersion {
		ps.addf("schema", "unsupported schema version %d (want %d)", f.Schema, SchemaVersion)
	}
	if err := ValidateName(f.Name); err != nil {
		ps.addf("name", "%v", err)
	}
	if err := ValidateLabel(f.Namespace); err != nil {
		ps.addf("namespace", "%v", err)
	}
	if err := ValidateLabel(f.Lane); err != nil {
		ps.addf("lane", "%v", err)
	}
	v.checkTypes()
	v.checkResources()
	v.typeRef("input", f.Input)
	v.typeRef("output", f.Output)
	for i, b := range f.Budgets {
		if !v.budgets[b] {
			ps.addf(fmt.Sprintf("budgets[%d]", i), "budget %q is not in budget_defs", b)
		}
	}
	v.checkExecs()
	v.checkEdges()
	if f.Result != "" {
		if i, ok := v.execs[f.Result]; !ok {
			ps.addf("result", "unknown exec %q", f.Result)
		} else if !SameType(f.Execs[i].Output, f.Output) {
			ps.addf("result", "exec %q returns %s but the flow returns %s", f.Result, TypeString(f.Execs[i].Output), TypeString(f.Output))
		}
	} else if f.Output != nil {
		ps.addf("result", "flow has an output type but no result exec")
	}
}

func (v *flowValidator) checkTypes() {
	v.types = map[string]*Type{}
	for i := range v.f.Types {
		t := &v.f.Types[i]
		path := fmt.Sprintf("types[%d]", i)
		if err := ValidateName(t.Name); err != nil {
			v.ps.addf(path+".name", "%v", err)
		}
		if _, dup := v.types[t.Name]; dup {
			v.ps.addf(path+".name", "duplicate type %q", t.Name)
		}
		v.types[t.Name] = t
	}
	for i := range v.f.Types {
		t := &v.f.Types[i]
		seen := map[string]bool{}
		for j, fl := range t.Fields {
			path := fmt.Sprintf("types[%d].fields[%d]", i, j)
			if err := ValidateName(fl.Name); err != nil {
				v.ps.addf(path+".name", "%v", err)
			}
			if seen[fl.Name] {
				v.ps.addf(path+".name", "duplicate field %q", fl.Name)
			}
			seen[fl.Name] = true
			v.typeRef(path+".type", &fl.Type)
		}
	}
}

// typeRef checks a type reference; nil is allowed (no value).
func (v *flowValidator) typeRef(path string, t *TypeRef) {
	for depth := 0; t != nil; depth++ {
		if depth > MaxTypeDepth {
			v.ps.addf(path, "type nests too deeply")
			return
		}
		switch t.Kind {
		case KindString, KindInt, KindFloat, KindBool, KindBytes, KindTime, KindDuration, KindJSON:
			if t.Elem != nil || t.Name != "" {
				v.ps.addf(path, "scalar type %s must have no elem or name", t.Kind)
			}
			return
		case KindList, KindMap:
			if t.Elem == nil {
				v.ps.addf(path, "%s type needs elem", t.Kind)
				return
			}
			t = t.Elem
			path += ".elem"
		case KindNamed:
			if _, ok := v.types[t.Name]; !ok {
				v.ps.addf(path, "named type %q is not in types", t.Name)
			}
			return
		default:
			v.ps.addf(path, "unknown type kind %q", t.Kind)
			return
		}
	}
}

func (v *flowValidator) checkResources() {
	v.budgets = map[string]bool{}
	for i, b := range v.f.BudgetDefs {
		path := fmt.Sprintf("budget_defs[%d]", i)
		if err := ValidateName(b.Name); err != nil {
			v.ps.addf(path+".name", "%v", err)
		} else if len(b.Name) > MaxResourceNameLen {
			v.ps.addf(path+".name", "budget name is longer than %d bytes", MaxResourceNameLen)
		}
		if v.budgets[b.Name] {
			v.ps.addf(path+".name", "duplicate budget %q", b.Name)
		}
		v.budgets[b.Name] = true
		if len(b.Dimensions) == 0 {
			v.ps.addf(path+".dimensions", "budget has no dimension")
		}
		if len(b.Dimensions) > MaxDimensions {
			v.ps.addf(path+".dimensions", "%d dimensions: at most %d are allowed", len(b.Dimensions), MaxDimensions)
		}
		dims := map[string]bool{}
		for j, d := range b.Dimensions {
			dp := fmt.Sprintf("%s.dimensions[%d]", path, j)
			if err := ValidateName(d.Name); err != nil {
				v.ps.addf(dp+".name", "%v", err)
			} else if len(d.Name) > MaxResourceNameLen {
				v.ps.addf(dp+".name", "dimension name is longer than %d bytes", MaxResourceNameLen)
			}
			if dims[d.Name] {
				v.ps.addf(dp+".name", "duplicate dimension %q", d.Name)
			}
			dims[d.Name] = true
			if d.Hard < 0 || d.Soft < 0 {
				v.ps.addf(dp, "limits must not be negative")
			}
			if d.Hard > 0 && d.Soft > d.Hard {
				v.ps.addf(dp+".soft", "soft limit %d is above hard limit %d", d.Soft, d.Hard)
			}
		}
		v.duration(path+".reset_ms", b.ResetMs)
		if b.OnHardLimit != OnHardLimitBlock && b.OnHardLimit != OnHardLimitFail {
			v.ps.addf(path+".on_hard_limit", "must be %q or %q, not %q", OnHardLimitBlock, OnHardLimitFail, b.OnHardLimit)
		}
		if b.Scope != ScopeShared && b.Scope != ScopeRun {
			v.ps.addf(path+".scope", "must be %q or %q, not %q", ScopeShared, ScopeRun, b.Scope)
		}
	}
	v.quotas = map[string]*Quota{}
	for i := range v.f.QuotaDefs {
		q := &v.f.QuotaDefs[i]
		path := fmt.Sprintf("quota_defs[%d]", i)
		if err := ValidateName(q.Name); err != nil {
			v.ps.addf(path+".name", "%v", err)
		} else if len(q.Name) > MaxResourceNameLen {
			v.ps.addf(path+".name", "quota name is longer than %d bytes", MaxResourceNameLen)
		}
		if _, dup := v.quotas[q.Name]; dup {
			v.ps.addf(path+".name", "duplicate quota %q", q.Name)
		}
		v.quotas[q.Name] = q
		if q.Rate < 0 || q.Concurrency < 0 {
			v.ps.addf(path, "limits must not be negative")
		}
		v.duration(path+".window_ms", q.WindowMs)
		v.duration(path+".jitter_ms", q.JitterMs)
		if q.Rate > 0 && q.WindowMs <= 0 {
			v.ps.addf(path+".window_ms", "a rate needs a window longer than zero")
		}
		if q.Rate == 0 && q.Concurrency == 0 {
			v.ps.addf(path, "quota limits nothing: set rate or concurrency")
		}
		if len(q.Key) > MaxQuotaKeyLen {
			v.ps.addf(path+".key", "key path is longer than %d bytes", MaxQuotaKeyLen)
		}
		if q.Key != "" {
			for _, part := range strings.Split(q.Key, ".") {
				if err := ValidateName(part); err != nil {
					v.ps.addf(path+".key", "invalid key path %q: %v", q.Key, err)
					break
				}
			}
		}
	}
}

func (v *flowValidator) checkExecs() {
	f := v.f
	v.execs = map[string]int{}
	if len(f.Execs) == 0 {
		v.ps.addf("execs", "flow has no exec")
	}
	if len(f.Execs) > MaxExecs {
		v.ps.addf("execs", "%d execs: at most %d are allowed", len(f.Execs), MaxExecs)
	}
	for i, x := range f.Execs {
		path := fmt.Sprintf("execs[%d]", i)
		if err := ValidateName(x.Name); err != nil {
			v.ps.addf(path+".name", "%v", err)
		}
		if _, dup := v.execs[x.Name]; dup {
			v.ps.addf(path+".name", "duplicate exec %q", x.Name)
		}
		v.execs[x.Name] = i
	}
	kinds := map[string]bool{}
	for i, x := range f.Execs {
		path := fmt.Sprintf("execs[%d]", i)
		if err := ValidateKind(x.Kind); err != nil {
			v.ps.addf(path+".kind", "%v", err)
		}
		if kinds[x.Kind] {
			v.ps.addf(path+".kind", "duplicate kind %q", x.Kind)
		}
		kinds[x.Kind] = true
		if err := ValidateLabel(x.Lane); err != nil {
			v.ps.addf(path+".lane", "%v", err)
		}
		if x.Priority < PriorityMin || x.Priority > PriorityMax {
			v.ps.addf(path+".priority", "%d is out of range [%d, %d]", x.Priority, PriorityMin, PriorityMax)
		}
		v.typeRef(path+".input", x.Input)
		v.typeRef(path+".output", x.Output)
		if err := ValidateCapabilities(x.Requires); err != nil {
			v.ps.addf(path+".requires", "%v", err)
		}
		seen := map[string]bool{}
		for _, c := range x.Requires {
			if seen[c] {
				v.ps.addf(path+".requires", "duplicate capability %q", c)
			}
			seen[c] = true
		}
		for j, b := range x.Budgets {
			if !v.budgets[b] {
				v.ps.addf(fmt.Sprintf("%s.budgets[%d]", path, j), "budget %q is not in budget_defs", b)
			}
		}
		for j, q := range x.Quotas {
			qd, ok := v.quotas[q]
			if !ok {
				v.ps.addf(fmt.Sprintf("%s.quotas[%d]", path, j), "quota %q is not in quota_defs", q)
				continue
			}
			if qd.Key != "" {
				if msg := v.keyProblem(x.Input, qd.Key); msg != "" {
					v.ps.addf(fmt.Sprintf("%s.quotas[%d]", path, j), "quota %q is keyed by %q: %s", q, qd.Key, msg)
				}
				if n := QuotaRefLen(f.Namespace, q, qd.Key); x.InputFrom == InputExec && n > MaxQuotaRefLen {
					v.ps.addf(fmt.Sprintf("%s.quotas[%d]", path, j), "the reference to quota %q keyed by %q is %d bytes: at most %d are allowed", q, qd.Key, n, MaxQuotaRefLen)
				}
			}
		}
		r := x.Retry
		if r.Attempts < 1 || r.Attempts > MaxAttempts {
			v.ps.addf(path+".retry.attempts", "%d is out of range [1, %d]", r.Attempts, MaxAttempts)
		}
		if r.Backoff != BackoffFixed && r.Backoff != BackoffExponential {
			v.ps.addf(path+".retry.backoff", "must be %q or %q, not %q", BackoffFixed, BackoffExponential, r.Backoff)
		}
		v.duration(path+".retry.delay_ms", r.DelayMs)
		v.duration(path+".retry.max_delay_ms", r.MaxDelayMs)
		if r.MaxDelayMs != 0 && r.MaxDelayMs < r.DelayMs {
			v.ps.addf(path+".retry.max_delay_ms", "%d is below delay_ms %d", r.MaxDelayMs, r.DelayMs)
		}
		v.duration(path+".timeout_ms", x.TimeoutMs)
		v.duration(path+".deadline_ms", x.DeadlineMs)
	}
}

// duration checks a duration in milliseconds: 0 to MaxDurationMs.
func (v *flowValidator) duration(path string, ms int64) {
	switch {
	case ms < 0:
		v.ps.addf(path, "must not be negative")
	case ms > MaxDurationMs:
		v.ps.addf(path, "%d is longer than %d (366 days)", ms, MaxDurationMs)
	}
}

// QuotaRefLen is the length of the reference a member keeps of keyed
// quota name of namespace ns when the key value is read from an upstream's
// output: "<ns>/<name>?<key path>".
func QuotaRefLen(ns, name, key string) int { return len(ns) + 1 + len(name) + 1 + len(key) }

// keyProblem describes why key does not name a string or int field of t.
func (v *flowValidator) keyProblem(t *TypeRef, key string) string {
	parts := strings.Split(key, ".")
	cur, n := FieldAt(t, parts, func(name string) *Type { return v.types[name] })
	switch {
	case n == len(parts):
	case cur == nil || cur.Kind != KindNamed:
		return "the input is not a record"
	case v.types[cur.Name] == nil:
		return "type " + cur.Name + " is missing"
	default:
		return "type " + cur.Name + " has no field " + parts[n]
	}
	if cur.Kind != KindString && cur.Kind != KindInt {
		return "the field is " + TypeString(cur) + ", not string or int"
	}
	return ""
}

// FieldAt follows path, a list of field names, from t through record
// types, finding the declaration of a named type with lookup. It returns
// the type of the last field and len(path); or, when step i cannot be
// taken, the type reached before it and i: that type is nil or not a named
// type, lookup does not know it, or it has no field path[i].
func FieldAt(t *TypeRef, path []string, lookup func(name string) *Type) (*TypeRef, int) {
	cur := t
	for i, name := range path {
		if cur == nil || cur.Kind != KindNamed {
			return cur, i
		}
		td := lookup(cur.Name)
		if td == nil {
			return cur, i
		}
		j := slices.IndexFunc(td.Fields, func(f Field) bool { return f.Name == name })
		if j < 0 {
			return cur, i
		}
		cur = &td.Fields[j].Type
	}
	return cur, len(path)
}

func (v *flowValidator) checkEdges() {
	f := v.f
	n := len(f.Execs)
	ups := make([][]int, n) // edge indexes into each exec
	type pair struct{ from, to string }
	seen := map[pair]bool{}
	valid := true
	for i, e := range f.Edges {
		path := fmt.Sprintf("edges[%d]", i)
		from, okF := v.execs[e.From]
		to, okT := v.execs[e.To]
		if !okF {
			v.ps.addf(path+".from", "unknown exec %q", e.From)
		}
		if !okT {
			v.ps.addf(path+".to", "unknown exec %q", e.To)
		}
		if e.On != OnSuccess && e.On != OnFailure && e.On != OnDone {
			v.ps.addf(path+".on", "must be %q, %q or %q, not %q", OnSuccess, OnFailure, OnDone, e.On)
		}
		if !okF || !okT {
			valid = false
			continue
		}
		if from == to {
			v.ps.addf(path, "exec %q depends on itself", e.From)
			valid = false
			continue
		}
		if seen[pair{e.From, e.To}] {
			v.ps.addf(path, "duplicate edge %s -> %s", e.From, e.To)
		}
		seen[pair{e.From, e.To}] = true
		ups[to] = append(ups[to], i)
		_ = from
	}
	if valid && !acyclic(f, v.execs) {
		v.ps.addf("edges", "the edges form a cycle")
		valid = false
	}
	for i, x := range f.Execs {
		path := fmt.Sprintf("execs[%d]", i)
		var want []string
		for _, ei := range ups[i] {
			want = append(want, f.Edges[ei].From)
		}
		slices.Sort(want)
		got := slices.Clone(x.Upstreams)
		slices.Sort(got)
		if !slices.Equal(want, got) {
			v.ps.addf(path+".upstreams", "%v does not match the edges into %q %v", x.Upstreams, x.Name, want)
		}
		nUp := len(ups[i])
		switch x.Join.Kind {
		case JoinAll:
		case JoinAny:
			if nUp == 0 {
				v.ps.addf(path+".join", "join any on an exec without upstreams")
			}
		case JoinCount:
			if x.Join.N < 1 || x.Join.N > nUp {
				v.ps.addf(path+".join.n", "%d is out of range [1, %d]", x.Join.N, nUp)
			}
		default:
			v.ps.addf(path+".join.kind", "must be %q, %q or %q, not %q", JoinAll, JoinAny, JoinCount, x.Join.Kind)
		}
		if x.Join.Kind != JoinCount && x.Join.N != 0 {
			v.ps.addf(path+".join.n", "only a count join has n")
		}
		switch x.InputFrom {
		case InputFlow:
			if nUp != 0 {
				v.ps.addf(path+".input_from", "only a root exec receives the flow input")
			}
			if x.Input == nil || !SameType(x.Input, f.Input) {
				v.ps.addf(path+".input", "%s differs from the flow input %s", TypeString(x.Input), TypeString(f.Input))
			}
		case InputExec:
			var edge *Edge
			for _, ei := range ups[i] {
				if f.Edges[ei].From == x.InputExec {
					edge = &f.Edges[ei]
				}
			}
			if edge == nil {
				v.ps.addf(path+".input_exec", "%q is not an upstream of %q", x.InputExec, x.Name)
				break
			}
			if edge.On != OnSuccess {
				v.ps.addf(path+".input_exec", "input comes over an `on %s` edge from %q; only a success edge guarantees output", edge.On, x.InputExec)
			}
			up := f.Execs[v.execs[x.InputExec]]
			if x.Input == nil || !SameType(x.Input, up.Output) {
				v.ps.addf(path+".input", "%s differs from the output %s of %q", TypeString(x.Input), TypeString(up.Output), up.Name)
			}
		case InputNone:
			if x.Input != nil {
				v.ps.addf(path+".input_from", "exec has an input type but receives no input")
			}
		default:
			v.ps.addf(path+".input_from", "must be %q, %q or %q, not %q", InputFlow, InputExec, InputNone, x.InputFrom)
		}
		if x.InputFrom != InputExec && x.InputExec != "" {
			v.ps.addf(path+".input_exec", "set although input_from is %q", x.InputFrom)
		}
	}
	if valid {
		v.checkInputs()
	}
}

// checkInputs refuses execs whose join any or join N can start them
// before the upstream feeding their input has succeeded.
func (v *flowValidator) checkInputs() {
	for _, u := range v.f.UnsureInputs() {
		x := v.f.Execs[u.Exec]
		v.ps.addf(fmt.Sprintf("execs[%d].join", u.Exec), "%s of %q can be met by %s before its input_exec %q has succeeded, starting it without input; use join all, or only edges from execs that run after %q succeeds",
			JoinString(x.Join), x.Name, EdgeList(v.f, u.Edges), x.InputExec, x.InputExec)
	}
}

// JoinString formats a join as written in .ff: "join all", "join any",
// "join 2".
func JoinString(j Join) string {
	if j.Kind == JoinCount {
		return fmt.Sprintf("join %d", j.N)
	}
	return "join " + j.Kind
}

// EdgeList describes edges of f by their upstreams: `the edge from "b"`,
// `the edges from "a" and "c"`.
func EdgeList(f *Flow, edges []int) string {
	names := make([]string, len(edges))
	for i, ei := range edges {
		names[i] = fmt.Sprintf("%q", f.Edges[ei].From)
	}
	if len(names) == 1 {
		return "the edge from " + names[0]
	}
	return "the edges from " + strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}

// acyclic reports whether the edges of f form no cycle (Kahn's algorithm).
func acyclic(f *Flow, index map[string]int) bool {
	n := len(f.Execs)
	indeg := make([]int, n)
	out := make([][]int, n)
	for _, e := range f.Edges {
		from, to := index[e.From], index[e.To]
		out[from] = append(out[from], to)
		indeg[to]++
	}
	queue := make([]int, 0, n)
	for i := range n {
		if indeg[i] == 0 {
			queue = append(queue, i)
		}
	}
	for k := 0; k < len(queue); k++ {
		for _, to := range out[queue[k]] {
			indeg[to]--
			if indeg[to] == 0 {
				queue = append(queue, to)
			}
		}
	}
	return len(queue) == n
}

// SameType reports whether a and b denote exactly the same type; two nils
// are the same.
func SameType(a, b *TypeRef) bool {
	if a == nil || b == nil {
		return a == b
	}
	if a.Kind != b.Kind || a.Name != b.Name {
		return false
	}
	return SameType(a.Elem, b.Elem)
}

// TypeString formats a type as written in .ff: "Clip", "[string]",
// "{string: int}"; nil is "no value".
func TypeString(t *TypeRef) string {
	if t == nil {
		return "no value"
	}
	switch t.Kind {
	case KindList:
		return "[" + TypeString(t.Elem) + "]"
	case KindMap:
		return "{string: " + TypeString(t.Elem) + "}"
	case KindNamed:
		return t.Name
	}
	return t.Kind
}
