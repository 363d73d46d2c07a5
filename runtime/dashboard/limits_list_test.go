package dashboard_test

import (
	"fmt"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/flowfabric/ff/runtime/dashboard"
	"github.com/flowfabric/ff/runtime/server"
	"github.com/flowfabric/ff/runtime/server/servertest"
	"github.com/flowfabric/ff/runtime/wire"
)

// TestConsoleLimitsListsEvery: the limits page lists the budgets and
// quotas no template declares too, a page at a time with a "more" link,
// filtered by namespace and scope; its forms return to the page shown.
func TestConsoleLimitsListsEvery(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t, func(c *server.Config) { c.Templates = compile(t, "limits.ff", limitsSource) })
	b := newBrowser(t, env)
	ctx := ctxT(t)
	n := dashboard.LimitsShown + 5
	for i := range n {
		if _, _, err := env.Client.PutBudget(ctx, wire.PutBudget{ID: fmt.Sprintf("many/b%03d", i),
			Dimensions: []wire.BudgetDimension{{Name: "calls", Hard: 7}}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := env.Client.PutQuota(ctx, wire.PutQuota{ID: "other/undeclared", Rate: 4}); err != nil {
		t.Fatal(err)
	}

	p := b.get("/ui/limits")
	// Declared ones with their templates; undeclared ones as well.
	p.want(t, http.StatusOK, "<code>lim/tokens</code>", "<td>work</td>", "<code>many/b000</code>", "calls: ",
		"<code>other/undeclared</code>", "4 per 1s", "<code>lim/api</code>", "More budgets →")
	// By id: lim/tokens first, then many/b000…: the page ends before b099.
	if strings.Contains(p.body, "<code>many/b099</code>") || strings.Contains(p.body, "More quotas") {
		t.Fatalf("first page shows too much:\n%s", p.body)
	}
	more := regexp.MustCompile(`href="([^"]+)">More budgets`).FindStringSubmatch(p.body)
	if more == nil {
		t.Fatalf("no link to more budgets:\n%s", p.body)
	}
	next := html.UnescapeString(more[1])
	p2 := b.get(next)
	p2.want(t, http.StatusOK, fmt.Sprintf("<code>many/b%03d</code>", n-1), "<code>many/b099</code>", "← First budgets",
		"<code>other/undeclared</code>") // the quotas' first page stays
	if strings.Contains(p2.body, "<code>many/b000</code>") || strings.Contains(p2.body, "More budgets") {
		t.Fatalf("second page:\n%s", p2.body)
	}
	// A form on the second page comes back to it.
	u, err := url.Parse(next)
	if err != nil {
		t.Fatal(err)
	}
	b.post("/ui/budgets/reset", url.Values{"id": {"many/b100"}, "view": {u.RawQuery}}).
		wantRedirect(t, "/ui/limits?budgets_cursor="+url.QueryEscape(u.Query().Get("budgets_cursor"))+"&done=budget-reset")

	// Filters.
	p = b.get("/ui/limits?namespace=lim")
	p.want(t, http.StatusOK, "<code>lim/tokens</code>", "<code>lim/api</code>")
	if strings.Contains(p.body, "many/") || strings.Contains(p.body, "other/undeclared") {
		t.Fatalf("namespace lim shows others:\n%s", p.body)
	}
	p = b.get("/ui/limits?scope=run")
	p.want(t, http.StatusOK, "No budget.", "<code>lim/api</code>")
	// A cursor the API refuses is the reader's: shown, 400.
	b.get("/ui/limits?budgets_cursor=%21%21").want(t, http.StatusBadRequest, "Refused: ", "cursor")
	b.get("/ui/limits?namespace=a+b").want(t, http.StatusBadRequest, "Refused: ")

	// A keyed quota with more key values than a listing gives: the page
	// says so, and looking it up by id shows it first, with all of them.
	if _, _, err := env.Client.PutQuota(ctx, wire.PutQuota{ID: "zz/keyed", Concurrency: 2, Key: "tenant"}); err != nil {
		t.Fatal(err)
	}
	for i := range 25 {
		if _, err := env.Client.PauseQuota(ctx, "zz/keyed", wire.QuotaPause{Key: fmt.Sprintf("k%02d", i), ForMs: 60_000}); err != nil {
			t.Fatal(err)
		}
	}
	b.get("/ui/limits?namespace=zz").want(t, http.StatusOK, "<code>k19</code>", "5 more key values are not listed here (look the quota up by id for the first 1,000)")
	p = b.get("/ui/limits?namespace=zz&id=zz/keyed")
	p.want(t, http.StatusOK, "<code>k24</code>", `looked up</span>`)
	if strings.Contains(p.body, "more key values are not listed") {
		t.Fatalf("the quota looked up is cut:\n%s", p.body)
	}
}
