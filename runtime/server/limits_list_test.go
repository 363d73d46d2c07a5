package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/flowfabric/ff/runtime/client"
	"github.com/flowfabric/ff/runtime/server/servertest"
	"github.com/flowfabric/ff/runtime/wire"
)

// TestListBudgetsAndQuotasHTTP: GET /v1/budgets and /v1/quotas page
// through every budget and quota by id over real HTTP, and refuse bad
// query parameters with 400s that name them.
func TestListBudgetsAndQuotasHTTP(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	ctx := context.Background()
	var budgets, quotas, teamBudgets []string
	for i := range 9 {
		ns := []string{"default", "team/a", "team"}[i%3]
		b, _, err := env.Client.PutBudget(ctx, wire.PutBudget{Namespace: ns, Name: fmt.Sprintf("b%d", i),
			Dimensions: []wire.BudgetDimension{{Name: "tokens", Hard: 10}}})
		if err != nil {
			t.Fatal(err)
		}
		budgets = append(budgets, b.ID)
		if ns == "team/a" {
			teamBudgets = append(teamBudgets, b.ID)
		}
		q, _, err := env.Client.PutQuota(ctx, wire.PutQuota{Namespace: ns, Name: fmt.Sprintf("q%d", i), Rate: 3})
		if err != nil {
			t.Fatal(err)
		}
		quotas = append(quotas, q.ID)
	}
	if _, err := env.Client.ReportBudgetUsage(ctx, budgets[0], wire.BudgetUsageReport{Dimension: "tokens", Delta: 4}); err != nil {
		t.Fatal(err)
	}
	slices.Sort(budgets)
	slices.Sort(quotas)
	slices.Sort(teamBudgets)

	// Raw HTTP: pages of 4 with cursors, each item what GET of its id says.
	var got []string
	path := "/v1/budgets?limit=4"
	for pages := 0; ; pages++ {
		r := env.Do(t, http.MethodGet, path, nil, "")
		if r.Status != http.StatusOK || pages > 10 {
			t.Fatalf("GET %s = %d %s", path, r.Status, r.Body)
		}
		var page wire.BudgetList
		if err := json.Unmarshal([]byte(r.Body), &page); err != nil {
			t.Fatal(err)
		}
		if len(page.Budgets) > 4 {
			t.Fatalf("page of %d budgets, limit 4", len(page.Budgets))
		}
		for _, b := range page.Budgets {
			one, err := env.Client.GetBudget(ctx, b.ID)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(*one, b); d != "" {
				t.Fatalf("listed %s differs from GET (-get +list):\n%s", b.ID, d)
			}
			got = append(got, b.ID)
		}
		if page.NextCursor == "" {
			break
		}
		path = "/v1/budgets?limit=4&cursor=" + url.QueryEscape(page.NextCursor)
	}
	if d := cmp.Diff(budgets, got); d != "" {
		t.Fatalf("GET /v1/budgets ids (-want +got):\n%s", d)
	}

	// The client: filters escaped in the query, cursors followed.
	list := func(o client.LimitListOptions, quota bool) []string {
		t.Helper()
		var ids []string
		for {
			var next string
			if quota {
				p, err := env.Client.ListQuotas(ctx, o)
				if err != nil {
					t.Fatalf("ListQuotas(%+v): %v", o, err)
				}
				for _, q := range p.Quotas {
					ids = append(ids, q.ID)
				}
				next = p.NextCursor
			} else {
				p, err := env.Client.ListBudgets(ctx, o)
				if err != nil {
					t.Fatalf("ListBudgets(%+v): %v", o, err)
				}
				for _, b := range p.Budgets {
					ids = append(ids, b.ID)
				}
				next = p.NextCursor
			}
			if next == "" {
				return ids
			}
			o.Cursor = next
		}
	}
	for _, tc := range []struct {
		o     client.LimitListOptions
		quota bool
		want  []string
	}{
		{client.LimitListOptions{Namespace: "team/a", Limit: 2}, false, teamBudgets},
		{client.LimitListOptions{Scope: "shared", Limit: 5}, false, budgets},
		{client.LimitListOptions{Scope: "run"}, false, nil},
		{client.LimitListOptions{Limit: 1}, true, quotas},
		{client.LimitListOptions{Namespace: "nobody"}, true, nil},
	} {
		if d := cmp.Diff(tc.want, list(tc.o, tc.quota)); d != "" {
			t.Errorf("list %+v quota=%v (-want +got):\n%s", tc.o, tc.quota, d)
		}
	}
	p, err := env.Client.ListQuotas(ctx, client.LimitListOptions{Limit: 1})
	if err != nil || len(p.Quotas) != 1 || p.NextCursor == "" {
		t.Fatalf("ListQuotas limit 1 = %+v, %v", p, err)
	}
	one, err := env.Client.GetQuota(ctx, p.Quotas[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(*one, p.Quotas[0]); d != "" {
		t.Fatalf("listed quota differs from GET (-get +list):\n%s", d)
	}

	for _, tc := range []struct {
		path, code, field string
	}{
		{"/v1/budgets?limit=0", wire.CodeValidation, "limit"},
		{"/v1/budgets?limit=1001", wire.CodeValidation, "limit"},
		{"/v1/quotas?limit=ten", wire.CodeValidation, "limit"},
		{"/v1/budgets?limit=1&limit=2", wire.CodeValidation, "limit"},
		{"/v1/budgets?scope=global", wire.CodeValidation, "scope"},
		{"/v1/budgets?cursor=%21%21", wire.CodeValidation, "cursor"},
		{"/v1/quotas?cursor=bm8tc2xhc2g", wire.CodeValidation, "cursor"}, // "no-slash"
		{"/v1/budgets?namespace=a+b", wire.CodeValidation, "namespace"},
		{"/v1/quotas?scope=shared", wire.CodeUnknownField, "scope"},
		{"/v1/budgets?page=2", wire.CodeUnknownField, "page"},
	} {
		r := env.Do(t, http.MethodGet, tc.path, nil, "")
		if r.Status != http.StatusBadRequest || r.Err.Code != tc.code || r.Field() != tc.field {
			t.Errorf("GET %s = %d %s field %q, want 400 %s field %q", tc.path, r.Status, r.Err.Code, r.Field(), tc.code, tc.field)
		}
	}
	if r := env.Do(t, http.MethodGet, "/v1/budgets?limit=1000", nil, ""); r.Status != http.StatusOK {
		t.Errorf("limit=1000: %d %s", r.Status, r.Body)
	}
	// An empty parameter is none, as on every route.
	for _, path := range []string{"/v1/budgets?namespace=&cursor=", "/v1/quotas?namespace="} {
		if r := env.Do(t, http.MethodGet, path, nil, ""); r.Status != http.StatusOK {
			t.Errorf("GET %s = %d %s; want 200", path, r.Status, r.Body)
		}
	}
}
