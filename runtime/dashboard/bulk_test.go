package dashboard_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/flowfabric/ff/runtime/server"
	"github.com/flowfabric/ff/runtime/server/servertest"
	"github.com/flowfabric/ff/runtime/wire"
)

// TestConsoleBulkCancelReplay: the runs page filtered on running runs
// offers to cancel them all, on a page that asks first with a reason; the
// cancelled ones can then be replayed all at once; the runs page says how
// many each did.
func TestConsoleBulkCancelReplay(t *testing.T) {
	t.Parallel()
	held := compile(t, "held.ff", `flow held() { namespace "nobody" exec a() { } }`)
	env := servertest.Start(t, func(c *server.Config) { c.Templates = held })
	b := newBrowser(t, env)
	var ids []string
	for range 3 {
		id, _ := startRun(t, b, "held", url.Values{})
		ids = append(ids, id)
	}
	// Without a state filter there is nothing to offer.
	if p := b.get("/ui/runs?namespace=nobody"); strings.Contains(p.body, "/ui/bulk?") {
		t.Fatalf("a bulk action offered without a state filter:\n%s", p.body)
	}
	b.get("/ui/runs?namespace=nobody&state=running").want(t, http.StatusOK,
		`<a href="/ui/bulk?namespace=nobody&amp;state=running">Cancel every running run of every flow in nobody…</a>`)
	b.get("/ui/bulk?namespace=nobody&state=running").want(t, http.StatusOK,
		"Cancel every running run of every flow in nobody?", "3 runs match now.", `<input name="reason"`, `<input type="hidden" name="state" value="running">`)
	b.get("/ui/bulk?namespace=nobody&state=succeeded").want(t, http.StatusBadRequest, "Choose the runs first")
	b.post("/ui/bulk", url.Values{"namespace": {"nobody"}, "state": {"running"}, "reason": {"stuck queue"}}).
		wantRedirect(t, "/ui/runs?namespace=nobody&state=running&done=bulk.cancelled.3.0.0")
	for _, id := range ids {
		r, err := env.Client.GetRun(ctxT(t), id)
		if err != nil || r.State != wire.RunCancelled || !strings.Contains(r.Error, "stuck queue") {
			t.Fatalf("run %s after the bulk cancel: %+v, %v", id, r, err)
		}
	}
	b.get("/ui/runs?namespace=nobody&state=running&done=bulk.cancelled.3.0.0").want(t, http.StatusOK, "3 runs were cancelled.")
	b.get("/ui/runs?namespace=nobody&state=cancelled").want(t, http.StatusOK, "Replay every cancelled run of every flow in nobody…")
	b.post("/ui/bulk", url.Values{"namespace": {"nobody"}, "state": {"cancelled"}}).
		wantRedirect(t, "/ui/runs?namespace=nobody&done=bulk.replayed.3.0.0")
	b.get("/ui/runs?namespace=nobody&done=bulk.replayed.3.0.0").want(t, http.StatusOK, "3 runs were replayed.", "<td>held</td>")
	// A state a bulk action does not take, or none, is refused.
	b.post("/ui/bulk", url.Values{"namespace": {"nobody"}, "state": {"succeeded"}}).want(t, http.StatusBadRequest, "Choose the runs first")
	b.post("/ui/bulk", url.Values{"namespace": {"nobody"}}).want(t, http.StatusBadRequest, "Choose the runs first")
}
