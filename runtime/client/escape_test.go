package client_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/flowfabric/ff/runtime/client"
)

// TestPathParametersEscapedOnce: ids and names reach the server escaped
// once (a space as %20, a '/' inside an id as %2F, a '%' as %25), and a
// budget or quota id keeps its '/' between namespace and name.
func TestPathParametersEscapedOnce(t *testing.T) {
	var mu sync.Mutex
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.RequestURI)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"error":{"code":"not_found","message":"no"}}`))
	}))
	t.Cleanup(srv.Close)
	for _, base := range []string{srv.URL, srv.URL + "/behind%20proxy"} {
		got = nil
		c, err := client.New(base)
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		_, _ = c.GetRun(ctx, "a b/c")
		_, _ = c.GetSchedule(ctx, "50%off")
		_, _ = c.GetBudget(ctx, "ns/a b")
		_, _ = c.GetQuota(ctx, "ns/q=x/y")
		prefix := base[len(srv.URL):]
		want := []string{prefix + "/v1/flows/a%20b%2Fc", prefix + "/v1/schedules/50%25off", prefix + "/v1/budgets/ns/a%20b", prefix + "/v1/quotas/ns/q=x/y"}
		mu.Lock()
		if len(got) != len(want) {
			t.Fatalf("base %s: requests %q", base, got)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("base %s: request %d went to %q, want %q", base, i, got[i], want[i])
			}
		}
		mu.Unlock()
	}
}
