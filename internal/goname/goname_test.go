package goname

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/flowfabric/ff/compiler/plan"
)

func TestOf(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"publish", "Publish"},
		{"Clip", "Clip"},
		{"id", "ID"},
		{"user_id", "UserID"},
		{"ids", "IDs"},
		{"order_ids", "OrderIDs"},
		{"api_url", "APIURL"},
		{"http_status", "HTTPStatus"},
		{"json_body", "JSONBody"},
		{"ttl", "TTL"},
		{"idle", "Idle"},
		{"userId", "UserId"},
		{"fetch_v2", "FetchV2"},
		{"e1_10", "E1_10"},
		{"e11_0", "E11_0"},
		{"step_2_b", "Step2B"},
		{"v1_2", "V1_2"},
		{"a__b", "AB"},
		{"_private", "Private"},
		{"trailing_", "Trailing"},
		{"cost_cents", "CostCents"},
		{"Api_key", "ApiKey"},
		{"LLM_call", "LLMCall"},
		{"skus", "SKUs"},
		{"urls", "URLs"},
		{"os", "OS"},
		{"status", "Status"},
		{"eta", "ETA"},
		{"foo_bar", "FooBar"},
		{"fooBar", "FooBar"},
		{"_", ""},
		{"_1", "1"},
	} {
		if got := Of(tt.in); got != tt.want {
			t.Errorf("Of(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestExported(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want bool
	}{
		{"Clip", true}, {"E1_10", true}, {"clip", false}, {"", false}, {"1", false}, {"A-B", false},
	} {
		if got := Exported(tt.in); got != tt.want {
			t.Errorf("Exported(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

func TestDecls(t *testing.T) {
	clip := &plan.TypeRef{Kind: plan.KindNamed, Name: "Clip"}
	fl := &plan.Flow{Name: "media_publish", Execs: []plan.Exec{
		{Name: "probe", Output: clip},
		{Name: "alert"},
		{Name: "fetch_url", Upstreams: []string{"probe"}, Output: clip},      // reads probe's output
		{Name: "cleanup", Upstreams: []string{"alert"}},                      // alert has no output: no struct
		{Name: "notify", Upstreams: []string{"alert", "fetch_url", "ghost"}}, // unknown upstreams are ignored
	}}
	want := []Decl{
		{Ident: "MediaPublishPlanJSON"},
		{Ident: "MediaPublishPlan"},
		{Ident: "StageMediaPublish"},
		{Ident: "MediaPublishRun"},
		{Ident: "MediaPublishHandlers"},
		{Ident: "RegisterMediaPublish"},
		{Ident: "MediaPublishFetchURLUpstream", Exec: "fetch_url"},
		{Ident: "MediaPublishNotifyUpstream", Exec: "notify"},
	}
	if diff := cmp.Diff(want, Decls(fl)); diff != "" {
		t.Errorf("Decls (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"fetch_url"}, Upstreams(&fl.Execs[4], Outputs(fl))); diff != "" {
		t.Errorf("Upstreams (-want +got):\n%s", diff)
	}
}
