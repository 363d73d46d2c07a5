package plan

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// validFlow returns a small valid flow: a -> b, a -> c on failure,
// b, c -> d on done (join any), with a keyed quota and a budget.
func validFlow() *Flow {
	clip := &TypeRef{Kind: KindNamed, Name: "Clip"}
	retry := Retry{Attempts: 1, Backoff: BackoffExponential, DelayMs: DefaultDelayMs, MaxDelayMs: DefaultMaxDelayMs}
	return &Flow{
		Schema: SchemaVersion, Name: "f", Namespace: "default", Lane: "default",
		Input: clip, Output: clip, Result: "b", Budgets: []string{"gpu"},
		Execs: []Exec{
			{Name: "a", Kind: "f.a", Lane: "default", Priority: PriorityDefault, Input: clip, Output: clip, InputFrom: InputFlow,
				Join: Join{Kind: JoinAll}, Retry: retry, Quotas: []string{"per_tenant"}, Requires: []string{"gpu"}},
			{Name: "b", Kind: "f.b", Lane: "default", Priority: PriorityDefault, Input: clip, Output: clip, InputFrom: InputExec, InputExec: "a",
				Join: Join{Kind: JoinAll}, Retry: retry, Upstreams: []string{"a"}},
			{Name: "c", Kind: "f.c", Lane: "default", Priority: PriorityDefault, InputFrom: InputNone,
				Join: Join{Kind: JoinAll}, Retry: retry, Upstreams: []string{"a"}},
			{Name: "d", Kind: "f.d", Lane: "default", Priority: PriorityDefault, InputFrom: InputNone,
				Join: Join{Kind: JoinAny}, Retry: retry, Upstreams: []string{"b", "c"}},
		},
		Edges: []Edge{
			{From: "a", To: "b", On: OnSuccess},
			{From: "a", To: "c", On: OnFailure},
			{From: "b", To: "d", On: OnDone},
			{From: "c", To: "d", On: OnDone},
		},
		Types:      []Type{{Name: "Clip", Fields: []Field{{Name: "id", Type: TypeRef{Kind: KindString}}, {Name: "tenant", Type: TypeRef{Kind: KindString}}}}},
		BudgetDefs: []Budget{{Name: "gpu", Dimensions: []Dimension{{Name: "minutes", Hard: 10}}, OnHardLimit: OnHardLimitBlock, Scope: ScopeShared}},
		QuotaDefs:  []Quota{{Name: "per_tenant", Concurrency: 2, Key: "tenant"}},
	}
}

func TestValidate(t *testing.T) {
	if err := validFlow().Validate(); err != nil {
		t.Fatalf("valid flow: %v", err)
	}
	// At every limit, the flow is still valid.
	atLimits := validFlow()
	x := &atLimits.Execs[1]
	x.TimeoutMs, x.DeadlineMs, x.Retry.DelayMs, x.Retry.MaxDelayMs = MaxDurationMs, MaxDurationMs, MaxDurationMs, MaxDurationMs
	atLimits.BudgetDefs[0].ResetMs = MaxDurationMs
	atLimits.QuotaDefs[0].Rate, atLimits.QuotaDefs[0].WindowMs, atLimits.QuotaDefs[0].JitterMs = 1, MaxDurationMs, MaxDurationMs
	for i := range MaxDimensions - 1 {
		atLimits.BudgetDefs[0].Dimensions = append(atLimits.BudgetDefs[0].Dimensions, Dimension{Name: fmt.Sprintf("d%d", i)})
	}
	deep := TypeRef{Kind: KindString}
	for range MaxTypeDepth {
		inner := deep
		deep = TypeRef{Kind: KindMap, Elem: &inner}
	}
	atLimits.Types[0].Fields = append(atLimits.Types[0].Fields, Field{Name: "deep", Type: deep})
	k := strings.Repeat("k", MaxQuotaKeyLen)
	atLimits.Types[0].Fields = append(atLimits.Types[0].Fields, Field{Name: k, Type: TypeRef{Kind: KindString}})
	atLimits.Namespace = strings.Repeat("n", MaxLaneLen-2)
	atLimits.QuotaDefs[0].Name, atLimits.QuotaDefs[0].Key = strings.Repeat("q", MaxResourceNameLen), k
	atLimits.Execs[0].Quotas, atLimits.Execs[1].Quotas = nil, []string{atLimits.QuotaDefs[0].Name}
	if err := atLimits.Validate(); err != nil {
		t.Fatalf("flow at the limits: %v", err)
	}
	tests := []struct {
		name   string
		mutate func(f *Flow)
		want   []string // substrings of the error, one per problem
	}{
		{"schema", func(f *Flow) { f.Schema = 2 }, []string{"schema: unsupported schema version 2"}},
		{"empty name", func(f *Flow) { f.Name = "" }, []string{"name: name must not be empty"}},
		{"bad name", func(f *Flow) { f.Name = "a-b" }, []string{`name: name "a-b" has an invalid character`}},
		{"lane", func(f *Flow) { f.Lane = "a b" }, []string{`lane: "a b": only letters, digits, '_', '-', '.' and '/' are allowed`}},
		{"lane with colon", func(f *Flow) { f.Lane = "gpu:1" }, []string{`lane: "gpu:1": only letters`}},
		{"kind with comma", func(f *Flow) { f.Execs[0].Kind = "a,b" }, []string{`execs[0].kind: "a,b" contains white space, a control character or a comma`}},
		{"kind with format character", func(f *Flow) { f.Execs[0].Kind = "f.a\u202e" }, []string{`execs[0].kind: "f.a\u202e" contains the invisible Unicode format character U+202E`}},
		{"no execs", func(f *Flow) { f.Execs, f.Edges, f.Result, f.Output = nil, nil, "", nil }, []string{"execs: flow has no exec"}},
		{"duplicate exec", func(f *Flow) { f.Execs[2].Name = "b"; f.Execs[2].Kind = "x" }, []string{
			`execs[2].name: duplicate exec "b"`, "execs[1].upstreams", "execs[3].upstreams"}},
		{"duplicate kind", func(f *Flow) { f.Execs[1].Kind = "f.a" }, []string{`execs[1].kind: duplicate kind "f.a"`}},
		{"empty kind", func(f *Flow) { f.Execs[1].Kind = "" }, []string{"execs[1].kind: must not be empty"}},
		{"priority", func(f *Flow) { f.Execs[0].Priority = PriorityMax + 1 }, []string{"execs[0].priority: 1001 is out of range"}},
		{"capability", func(f *Flow) { f.Execs[0].Requires = []string{"a,b"} }, []string{"execs[0].requires: capability 0: capability \"a,b\" contains a comma"}},
		{"duplicate capability", func(f *Flow) { f.Execs[0].Requires = []string{"a", "a"} }, []string{`execs[0].requires: duplicate capability "a"`}},
		{"retry attempts", func(f *Flow) { f.Execs[0].Retry.Attempts = 0 }, []string{"execs[0].retry.attempts: 0 is out of range"}},
		{"retry backoff", func(f *Flow) { f.Execs[0].Retry.Backoff = "linear" }, []string{"execs[0].retry.backoff"}},
		{"retry delays", func(f *Flow) { f.Execs[0].Retry.MaxDelayMs = 10 }, []string{"execs[0].retry.max_delay_ms: 10 is below delay_ms 1000"}},
		{"negative timeout", func(f *Flow) { f.Execs[0].TimeoutMs = -1 }, []string{"execs[0].timeout_ms"}},
		{"unknown edge exec", func(f *Flow) { f.Edges[0].To = "zz" }, []string{`edges[0].to: unknown exec "zz"`, "execs[1].upstreams", "execs[1].input_exec"}},
		{"edge condition", func(f *Flow) { f.Edges[1].On = "maybe" }, []string{"edges[1].on"}},
		{"self edge", func(f *Flow) {
			f.Edges = append(f.Edges, Edge{From: "d", To: "d", On: OnSuccess})
		}, []string{`edges[4]: exec "d" depends on itself`}},
		{"duplicate edge", func(f *Flow) {
			f.Edges = append(f.Edges, Edge{From: "a", To: "b", On: OnFailure})
			f.Execs[1].Upstreams = []string{"a", "a"}
		}, []string{"edges[4]: duplicate edge a -> b"}},
		{"cycle", func(f *Flow) {
			f.Edges = append(f.Edges, Edge{From: "d", To: "a", On: OnSuccess})
			f.Execs[0].Upstreams = []string{"d"}
			f.Execs[0].InputFrom, f.Execs[0].Input = InputNone, nil
		}, []string{"edges: the edges form a cycle"}},
		{"upstreams", func(f *Flow) { f.Execs[3].Upstreams = []string{"b"} }, []string{`execs[3].upstreams: [b] does not match the edges into "d" [b c]`}},
		{"join count", func(f *Flow) { f.Execs[3].Join = Join{Kind: JoinCount, N: 3} }, []string{"execs[3].join.n: 3 is out of range [1, 2]"}},
		{"join n without count", func(f *Flow) { f.Execs[3].Join.N = 1 }, []string{"execs[3].join.n: only a count join has n"}},
		{"join kind", func(f *Flow) { f.Execs[3].Join.Kind = "most" }, []string{"execs[3].join.kind"}},
		{"join any root", func(f *Flow) { f.Execs[0].Join.Kind = JoinAny }, []string{"execs[0].join: join any on an exec without upstreams"}},
		{"input from flow with upstream", func(f *Flow) { f.Execs[1].InputFrom, f.Execs[1].InputExec = InputFlow, "" }, []string{"execs[1].input_from: only a root exec receives the flow input"}},
		{"input type", func(f *Flow) { f.Execs[0].Input = &TypeRef{Kind: KindString} }, []string{"execs[0].input: string differs from the flow input Clip"}},
		{"input exec not upstream", func(f *Flow) { f.Execs[1].InputExec = "c" }, []string{`execs[1].input_exec: "c" is not an upstream of "b"`}},
		{"input over failure edge", func(f *Flow) {
			f.Execs[2].InputFrom, f.Execs[2].InputExec, f.Execs[2].Input = InputExec, "a", f.Input
		}, []string{"execs[2].input_exec: input comes over an `on failure` edge from \"a\"; only a success edge guarantees output"}},
		{"input not guaranteed by join any", func(f *Flow) {
			f.Edges[2].On = OnSuccess
			f.Execs[3].InputFrom, f.Execs[3].InputExec, f.Execs[3].Input = InputExec, "b", f.Input
		}, []string{`execs[3].join: join any of "d" can be met by the edge from "c" before its input_exec "b" has succeeded, starting it without input; use join all, or only edges from execs that run after "b" succeeds`}},
		{"input not guaranteed by join 1", func(f *Flow) {
			f.Edges[2].On = OnSuccess
			f.Execs[3].Join = Join{Kind: JoinCount, N: 1}
			f.Execs[3].InputFrom, f.Execs[3].InputExec, f.Execs[3].Input = InputExec, "b", f.Input
		}, []string{`execs[3].join: join 1 of "d" can be met by the edge from "c"`}},
		{"input none with type", func(f *Flow) { f.Execs[2].Input = &TypeRef{Kind: KindInt} }, []string{"execs[2].input_from: exec has an input type but receives no input"}},
		{"input_from value", func(f *Flow) { f.Execs[2].InputFrom = "" }, []string{"execs[2].input_from: must be"}},
		{"unknown named type", func(f *Flow) { f.Types = nil }, []string{`input: named type "Clip" is not in types`}},
		{"bad type kind", func(f *Flow) { f.Types[0].Fields[0].Type.Kind = "uuid" }, []string{`types[0].fields[0].type: unknown type kind "uuid"`}},
		{"list without elem", func(f *Flow) { f.Types[0].Fields[0].Type = TypeRef{Kind: KindList} }, []string{"types[0].fields[0].type: list type needs elem"}},
		{"duplicate field", func(f *Flow) { f.Types[0].Fields[1].Name = "id" }, []string{`types[0].fields[1].name: duplicate field "id"`, "quota"}},
		{"result unknown", func(f *Flow) { f.Result = "zz" }, []string{`result: unknown exec "zz"`}},
		{"result type", func(f *Flow) { f.Result = "c" }, []string{`result: exec "c" returns no value but the flow returns Clip`}},
		{"result missing", func(f *Flow) { f.Result = "" }, []string{"result: flow has an output type but no result exec"}},
		{"budget missing", func(f *Flow) { f.BudgetDefs = nil }, []string{`budgets[0]: budget "gpu" is not in budget_defs`}},
		{"budget values", func(f *Flow) {
			f.BudgetDefs[0].Scope = "global"
			f.BudgetDefs[0].OnHardLimit = ""
			f.BudgetDefs[0].Dimensions[0].Soft = 20
		}, []string{"budget_defs[0].dimensions[0].soft: soft limit 20 is above hard limit 10", "budget_defs[0].on_hard_limit", "budget_defs[0].scope"}},
		{"quota missing", func(f *Flow) { f.QuotaDefs = nil }, []string{`execs[0].quotas[0]: quota "per_tenant" is not in quota_defs`}},
		{"quota key", func(f *Flow) { f.QuotaDefs[0].Key = "owner" }, []string{`execs[0].quotas[0]: quota "per_tenant" is keyed by "owner": type Clip has no field owner`}},
		{"quota key path", func(f *Flow) { f.QuotaDefs[0].Key = "tenant.id" }, []string{`execs[0].quotas[0]: quota "per_tenant" is keyed by "tenant.id": the input is not a record`}},
		{"quota key type", func(f *Flow) { f.Types[0].Fields[1].Type = TypeRef{Kind: KindFloat} }, []string{`execs[0].quotas[0]: quota "per_tenant" is keyed by "tenant": the field is float, not string or int`}},
		{"quota limits", func(f *Flow) { f.QuotaDefs[0].Concurrency = 0; f.QuotaDefs[0].Rate = 0 }, []string{"quota_defs[0]: quota limits nothing"}},
		{"quota window", func(f *Flow) { f.QuotaDefs[0].Rate = 5 }, []string{"quota_defs[0].window_ms: a rate needs a window"}},
		{"durations", func(f *Flow) {
			x := &f.Execs[0]
			x.TimeoutMs, x.DeadlineMs, x.Retry.DelayMs, x.Retry.MaxDelayMs = MaxDurationMs+1, MaxDurationMs+1, MaxDurationMs+1, MaxDurationMs+1
			f.BudgetDefs[0].ResetMs = MaxDurationMs + 1
			f.QuotaDefs[0].Rate, f.QuotaDefs[0].WindowMs, f.QuotaDefs[0].JitterMs = 1, MaxDurationMs+1, MaxDurationMs+1
		}, []string{"budget_defs[0].reset_ms: 31622400001 is longer than 31622400000 (366 days)", "quota_defs[0].window_ms: 31622400001 is longer",
			"quota_defs[0].jitter_ms", "execs[0].retry.delay_ms", "execs[0].retry.max_delay_ms", "execs[0].timeout_ms", "execs[0].deadline_ms"}},
		{"negative durations", func(f *Flow) {
			f.Execs[0].DeadlineMs, f.QuotaDefs[0].JitterMs = -1, -1
		}, []string{"quota_defs[0].jitter_ms: must not be negative", "execs[0].deadline_ms: must not be negative"}},
		{"resource names", func(f *Flow) {
			long := strings.Repeat("n", MaxResourceNameLen+1)
			f.BudgetDefs[0].Name, f.Budgets[0] = long, long
			f.BudgetDefs[0].Dimensions[0].Name = long
			f.QuotaDefs[0].Name, f.Execs[0].Quotas[0] = long, long
		}, []string{"budget_defs[0].name: budget name is longer than 64 bytes", "budget_defs[0].dimensions[0].name: dimension name is longer than 64 bytes",
			"quota_defs[0].name: quota name is longer than 64 bytes"}},
		{"dimensions", func(f *Flow) {
			for i := range MaxDimensions {
				f.BudgetDefs[0].Dimensions = append(f.BudgetDefs[0].Dimensions, Dimension{Name: fmt.Sprintf("d%d", i)})
			}
		}, []string{"budget_defs[0].dimensions: 33 dimensions: at most 32 are allowed"}},
		{"quota key length", func(f *Flow) {
			k := strings.Repeat("k", MaxQuotaKeyLen)
			f.Types[0].Fields = append(f.Types[0].Fields, Field{Name: k, Type: TypeRef{Kind: KindNamed, Name: "Clip"}, Optional: true})
			f.QuotaDefs[0].Key = k + ".id"
		}, []string{"quota_defs[0].key: key path is longer than 128 bytes"}},
		{"quota reference", func(f *Flow) {
			k := strings.Repeat("k", MaxQuotaKeyLen)
			f.Types[0].Fields = append(f.Types[0].Fields, Field{Name: k, Type: TypeRef{Kind: KindString}})
			f.Namespace = strings.Repeat("n", MaxLaneLen)
			f.QuotaDefs[0].Name, f.QuotaDefs[0].Key = strings.Repeat("q", MaxResourceNameLen), k
			f.Execs[0].Quotas = nil
			f.Execs[1].Quotas = []string{f.QuotaDefs[0].Name} // fed by a
		}, []string{`execs[1].quotas[0]: the reference to quota "qqqq`, "is 258 bytes: at most 256 are allowed"}},
		{"type depth", func(f *Flow) {
			t := TypeRef{Kind: KindString}
			for range MaxTypeDepth + 1 {
				inner := t
				t = TypeRef{Kind: KindList, Elem: &inner}
			}
			f.Types[0].Fields = append(f.Types[0].Fields, Field{Name: "deep", Type: t})
		}, []string{"types[0].fields[2].type" + strings.Repeat(".elem", MaxTypeDepth+1) + ": type nests too deeply"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := validFlow()
			tt.mutate(f)
			err := f.Validate()
			if err == nil {
				t.Fatal("want an error, got none")
			}
			got := strings.Split(err.Error(), "\n")
			for _, w := range tt.want {
				found := false
				for _, g := range got {
					if strings.Contains(g, w) {
						found = true
					}
				}
				if !found {
					t.Errorf("missing problem %q in:\n%v", w, err)
				}
			}
			if !strings.Contains(got[0], tt.want[0]) && len(got) <= len(tt.want) {
				t.Errorf("first problem %q, want %q", got[0], tt.want[0])
			}
		})
	}
}

func TestValidateDecodedJSON(t *testing.T) {
	// Garbage that decodes must be rejected without a panic.
	for _, src := range []string{`{}`, `{"schema":1,"name":"x","execs":[{}],"edges":[{}]}`, `{"schema":1,"execs":[{"name":"a","join":{"kind":"count","n":-1}}]}`} {
		var f Flow
		if err := json.Unmarshal([]byte(src), &f); err != nil {
			t.Fatal(err)
		}
		if err := f.Validate(); err == nil {
			t.Errorf("%s: want an error", src)
		}
	}
}

func TestValidateCapabilities(t *testing.T) {
	tests := []struct {
		tokens []string
		want   string
	}{
		{nil, ""},
		{[]string{"gpu", "cuda-12", "région"}, ""},
		{[]string{""}, "capability 0: capability must not be empty"},
		{[]string{"ok", "a b"}, `capability 1: capability "a b" contains white space`},
		{[]string{"a\x01"}, "contains a control character"},
		// Unicode format characters: a zero-width space, a soft hyphen, a
		// right-to-left override, a byte order mark.
		{[]string{"gpu\u200b"}, `capability 0: capability "gpu\u200b" contains the invisible Unicode format character U+200B`},
		{[]string{"ok", "gpu\u00ad"}, "capability 1: capability \"gpu\\u00ad\" contains the invisible Unicode format character U+00AD"},
		{[]string{"cuda\u202e"}, "U+202E"},
		{[]string{"\ufeffx"}, "U+FEFF"},
		{[]string{"\xff"}, "is not valid UTF-8"},
		{make([]string, MaxCapabilities+1), "257 capabilities: at most 256 are allowed"},
		{[]string{strings.Repeat("x", 4000), strings.Repeat("y", 96)}, "4097 bytes when joined"},
		{[]string{strings.Repeat("x", 4000), strings.Repeat("y", 95)}, ""},
	}
	for _, tt := range tests {
		err := ValidateCapabilities(tt.tokens)
		got := ""
		if err != nil {
			got = err.Error()
		}
		if tt.want == "" && got != "" || tt.want != "" && !strings.Contains(got, tt.want) {
			t.Errorf("ValidateCapabilities(%.40q) = %q, want %q", tt.tokens, got, tt.want)
		}
	}
}

func TestFieldAt(t *testing.T) {
	owner := TypeRef{Kind: KindNamed, Name: "Owner"}
	types := map[string]*Type{
		"Job":   {Name: "Job", Fields: []Field{{Name: "owner", Type: owner}, {Name: "size", Type: TypeRef{Kind: KindFloat}}}},
		"Owner": {Name: "Owner", Fields: []Field{{Name: "id", Type: TypeRef{Kind: KindInt}}}},
	}
	lookup := func(name string) *Type { return types[name] }
	job := &TypeRef{Kind: KindNamed, Name: "Job"}
	tests := []struct {
		t    *TypeRef
		path string
		want string // TypeString of the type returned
		n    int
	}{
		{job, "owner.id", "int", 2},
		{job, "owner", "Owner", 1},
		{job, "size.x", "float", 1},                                // not a record
		{job, "owner.name", "Owner", 1},                            // no such field
		{job, "ghost", "Job", 0},                                   // no such field
		{&TypeRef{Kind: KindNamed, Name: "Gone"}, "id", "Gone", 0}, // unknown type
		{&TypeRef{Kind: KindList, Elem: job}, "owner", "[Job]", 0}, // a list is not a record
		{nil, "owner", "no value", 0},
	}
	for _, tt := range tests {
		got, n := FieldAt(tt.t, strings.Split(tt.path, "."), lookup)
		if TypeString(got) != tt.want || n != tt.n {
			t.Errorf("FieldAt(%s, %q) = %s, %d; want %s, %d", TypeString(tt.t), tt.path, TypeString(got), n, tt.want, tt.n)
		}
	}
}
