package gen

import "github.com/flowfabric/ff/compiler/plan"

// handPlan is a plan built by hand after issue 2's example, so gen can be
// tested without the compiler.
func handPlan() *plan.Package {
	named := func(n string) *plan.TypeRef { return &plan.TypeRef{Kind: plan.KindNamed, Name: n} }
	str := plan.TypeRef{Kind: plan.KindString}
	clip := plan.Type{Name: "Clip", Fields: []plan.Field{
		{Name: "id", Type: str},
		{Name: "url", Type: str},
		{Name: "seconds", Type: plan.TypeRef{Kind: plan.KindFloat}},
		{Name: "tags", Type: plan.TypeRef{Kind: plan.KindList, Elem: &str}},
		{Name: "labels", Type: plan.TypeRef{Kind: plan.KindMap, Elem: &str}},
		{Name: "thumb", Type: plan.TypeRef{Kind: plan.KindBytes}, Optional: true},
		{Name: "meta", Type: plan.TypeRef{Kind: plan.KindJSON}, Optional: true},
		{Name: "taken", Type: plan.TypeRef{Kind: plan.KindTime}},
		{Name: "ttl", Type: plan.TypeRef{Kind: plan.KindDuration}},
		{Name: "rank", Type: plan.TypeRef{Kind: plan.KindInt}, Optional: true},
	}}
	retry1 := plan.Retry{Attempts: 1, Backoff: plan.BackoffFixed, DelayMs: 1000}
	all := plan.Join{Kind: plan.JoinAll}
	gpu := plan.Budget{Name: "gpu", Dimensions: []plan.Dimension{{Name: "minutes", Hard: 600, Soft: 480}, {Name: "cost_cents", Hard: 10_000}}, ResetMs: 86_400_000, OnHardLimit: plan.OnHardLimitBlock, Scope: plan.ScopeShared}
	q := plan.Quota{Name: "transcoder", Rate: 120, WindowMs: 60_000, Concurrency: 4, JitterMs: 100}
	fl := plan.Flow{
		Schema: plan.SchemaVersion, Package: "media", Name: "publish", Namespace: "media", Lane: "default",
		Input: named("Clip"), Output: named("Clip"), Result: "publish", Budgets: []string{"gpu"},
		Execs: []plan.Exec{
			{Name: "probe", Kind: "media.probe", Lane: "default", Priority: 100, Input: named("Clip"), Output: named("Clip"), InputFrom: plan.InputFlow, Join: all,
				Retry: plan.Retry{Attempts: 3, Backoff: plan.BackoffExponential, DelayMs: 1000, MaxDelayMs: 60_000}, TimeoutMs: 30_000},
			{Name: "transcode", Kind: "publish.transcode", Lane: "gpu", Priority: 5, Input: named("Clip"), Output: named("Clip"), InputFrom: plan.InputExec, InputExec: "probe", Join: all,
				Requires: []string{"cuda-12", "gpu"}, Quotas: []string{"transcoder"}, Retry: retry1, Upstreams: []string{"probe"}},
			{Name: "thumbnail", Kind: "publish.thumbnail", Lane: "default", Priority: 100, Input: named("Clip"), Output: named("Clip"), InputFrom: plan.InputExec, InputExec: "probe", Join: all,
				Requires: []string{"gpu"}, Retry: retry1, Upstreams: []string{"probe"}},
			{Name: "publish", Kind: "publish.publish", Lane: "default", Priority: 100, Input: named("Clip"), Output: named("Clip"), InputFrom: plan.InputExec, InputExec: "transcode", Join: all,
				Retry: retry1, Upstreams: []string{"thumbnail", "transcode"}},
			{Name: "alert", Kind: "publish.alert", Lane: "default", Priority: 100, InputFrom: plan.InputNone, Join: all, Retry: retry1, Upstreams: []string{"transcode"}},
			{Name: "cleanup", Kind: "publish.cleanup", Lane: "default", Priority: 100, InputFrom: plan.InputNone, Join: plan.Join{Kind: plan.JoinAny}, Retry: retry1, Upstreams: []string{"alert", "publish"}},
		},
		Edges: []plan.Edge{
			{From: "alert", To: "cleanup", On: plan.OnDone},
			{From: "probe", To: "thumbnail", On: plan.OnSuccess},
			{From: "probe", To: "transcode", On: plan.OnSuccess},
			{From: "publish", To: "cleanup", On: plan.OnDone},
			{From: "thumbnail", To: "publish", On: plan.OnSuccess},
			{From: "transcode", To: "alert", On: plan.OnFailure},
			{From: "transcode", To: "publish", On: plan.OnSuccess},
		},
		Types: []plan.Type{clip}, BudgetDefs: []plan.Budget{gpu}, QuotaDefs: []plan.Quota{q},
	}
	return &plan.Package{
		Schema: plan.SchemaVersion, Package: "media",
		Types: []plan.Type{clip}, Budgets: []plan.Budget{gpu}, Quotas: []plan.Quota{q},
		Flows: []plan.Flow{fl},
	}
}
