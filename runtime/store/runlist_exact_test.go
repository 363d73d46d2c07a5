package store

import "testing"

// A page that holds the last run has no cursor (RunPage.Cursor: "" when
// no run is left; spec/api.md: next_cursor absent on the last page; ffrun
// runs says "(more runs …)" when it is set), also when the index held
// exactly the entries a read asked for (32 here).
func TestListRunsNoCursorOnExactLastPage(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *Config) { c.FlowPartitions = 1 })
	e.stageListed("alpha", "default", 32)
	page, err := e.s.ListRuns(e.ctx, RunListRequest{Namespace: "default", Limit: 32})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Runs) != 32 {
		t.Fatalf("%d runs listed, want 32", len(page.Runs))
	}
	if page.Cursor != "" {
		next, err := e.s.ListRuns(e.ctx, RunListRequest{Namespace: "default", Limit: 32, Cursor: page.Cursor})
		t.Fatalf("the page of the last run has cursor %q (the next page holds %d runs, err %v)", page.Cursor, len(next.Runs), err)
	}
}
