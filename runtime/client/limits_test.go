package client_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/flowfabric/ff/runtime/client"
	"github.com/flowfabric/ff/runtime/wire"
)

// TestListBudgetsAndQuotasQuery: the list methods send their options as
// escaped query parameters (a namespace with '/', a cursor with '=' and
// '+'), send none that is empty, and decode the page.
func TestListBudgetsAndQuotasQuery(t *testing.T) {
	var got []string // path?query of each request
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.URL.Path+"?"+r.URL.RawQuery)
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/v1/budgets":
			_ = json.NewEncoder(w).Encode(wire.BudgetList{Budgets: []wire.Budget{{ID: "team/a/x", Scope: "shared"}}, NextCursor: "c+1="})
		case "/v1/quotas":
			_ = json.NewEncoder(w).Encode(wire.QuotaList{Quotas: []wire.Quota{{ID: "d/q", Rate: 2}}})
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	c, err := client.New(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	bl, err := c.ListBudgets(ctx, client.LimitListOptions{Namespace: "team/a", Scope: "run", Cursor: "a+b=&c", Limit: 7})
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(&wire.BudgetList{Budgets: []wire.Budget{{ID: "team/a/x", Scope: "shared"}}, NextCursor: "c+1="}, bl); d != "" {
		t.Errorf("ListBudgets (-want +got):\n%s", d)
	}
	ql, err := c.ListQuotas(ctx, client.LimitListOptions{})
	if err != nil || len(ql.Quotas) != 1 || ql.Quotas[0].ID != "d/q" || ql.NextCursor != "" {
		t.Errorf("ListQuotas = %+v, %v", ql, err)
	}
	want := []string{"/v1/budgets?" + url.Values{"namespace": {"team/a"}, "scope": {"run"}, "cursor": {"a+b=&c"}, "limit": {"7"}}.Encode(),
		"/v1/quotas?"}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("requests (-want +got):\n%s", d)
	}
	q, _ := url.ParseQuery(got[0][len("/v1/budgets?"):])
	if q.Get("cursor") != "a+b=&c" || q.Get("namespace") != "team/a" {
		t.Errorf("query decodes to %v", q)
	}
}
