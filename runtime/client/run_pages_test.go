package client

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/flowfabric/ff/runtime/wire"
)

// pagedServer answers GET /v1/flows/1.run with the pages of a run of
// total members: pages[cursor] is the page at that cursor ("" the first),
// members by name, with the next cursor. It records the queries it got.
func pagedServer(t *testing.T, total int, pages map[string]wire.FlowRun, queries *[]string) *Client {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		*queries = append(*queries, r.URL.RawQuery)
		page, ok := pages[r.URL.Query().Get("execs_cursor")]
		if r.Method != http.MethodGet || r.URL.Path != "/v1/flows/1.run" || !ok {
			http.Error(w, "unexpected request", http.StatusBadRequest)
			return
		}
		page.ID, page.State, page.Total = "1.run", wire.RunRunning, total
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(page)
	}))
	t.Cleanup(srv.Close)
	c, err := New(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// page is a page of the members named, with next as its cursor.
func page(next string, names ...string) wire.FlowRun {
	p := wire.FlowRun{ExecsNextCursor: next}
	for _, n := range names {
		p.Execs = append(p.Execs, wire.FlowExec{Name: n})
	}
	return p
}

// TestGetRunFollowsPages: GetRun reads a run of several pages by their
// cursors and returns every member in page order, without a cursor; pages
// that do not hold the run's members once each are an error, not a run.
func TestGetRunFollowsPages(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		total int
		pages map[string]wire.FlowRun
		want  []string // the members, or the error's text
		err   bool
	}{
		{"one page", 2, map[string]wire.FlowRun{"": page("", "a", "b")}, []string{"a", "b"}, false},
		{"three pages", 5, map[string]wire.FlowRun{"": page("2.c", "a", "b"), "2.c": page("4.e", "c", "d"), "4.e": page("", "e")},
			[]string{"a", "b", "c", "d", "e"}, false},
		{"an empty page with a cursor", 3, map[string]wire.FlowRun{"": page("2.c", "a", "b"), "2.c": page("3.d")},
			[]string{"holds 0 members"}, true},
		{"the same cursor again", 3, map[string]wire.FlowRun{"": page("2.c", "a", "b"), "2.c": page("2.c", "c")},
			[]string{"holds 1 members and the cursor"}, true},
		{"a member twice", 3, map[string]wire.FlowRun{"": page("2.c", "a", "b"), "2.c": page("", "b")},
			[]string{`member "b" is on two pages`}, true},
		{"fewer than the total", 4, map[string]wire.FlowRun{"": page("2.c", "a", "b"), "2.c": page("", "c")},
			[]string{"hold 3 of the run's 4 members"}, true},
		{"more than the total", 2, map[string]wire.FlowRun{"": page("2.c", "a", "b"), "2.c": page("3.d", "c"), "3.d": page("", "d")},
			[]string{"more than the run's 2 members"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var queries []string
			c := pagedServer(t, tc.total, tc.pages, &queries)
			run, err := c.GetRun(context.Background(), "1.run")
			if tc.err {
				if err == nil || !strings.Contains(err.Error(), tc.want[0]) {
					t.Fatalf("GetRun = %+v, %v; want an error saying %q", run, err, tc.want[0])
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, x := range run.Execs {
				got = append(got, x.Name)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" || run.ExecsNextCursor != "" {
				t.Fatalf("members, cursor %q (-want +got):\n%s", run.ExecsNextCursor, diff)
			}
			// The first request asks for the default page; the others
			// for the page at the cursor, and nothing else.
			for i, q := range queries {
				if i == 0 && q != "" || i > 0 && !strings.HasPrefix(q, "execs_cursor=") || strings.Contains(q, "&") {
					t.Errorf("request %d asked %q", i, q)
				}
			}
		})
	}
}

// TestGetRunPageQuery: GetRunPage sends the cursor and the limit it is
// given, and returns the answer's cursor.
func TestGetRunPageQuery(t *testing.T) {
	t.Parallel()
	var queries []string
	c := pagedServer(t, 3, map[string]wire.FlowRun{"1.b": page("2.c", "b")}, &queries)
	run, next, err := c.GetRunPage(context.Background(), "1.run", "1.b", 1)
	if err != nil || next != "2.c" || len(run.Execs) != 1 || run.Execs[0].Name != "b" {
		t.Fatalf("GetRunPage = %+v, %q, %v", run, next, err)
	}
	if diff := cmp.Diff([]string{"execs_cursor=1.b&execs_limit=1"}, queries); diff != "" {
		t.Fatalf("queries (-want +got):\n%s", diff)
	}
}
