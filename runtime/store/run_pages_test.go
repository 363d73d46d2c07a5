package store

import (
	"errors"
	"fmt"
	"strconv"
	"testing"

	"github.com/flowfabric/ff/compiler/plan"
	"github.com/google/go-cmp/cmp"
)

// pagedFlow is a run of 13 members with edges of every condition
// (fanFlow of width 10: m00..m09).
func pagedFlow() *plan.Flow { return fanFlow("paged", 10) }

// fanFlow is flow name: src feeds width members m<i> (i written with at
// least two digits, as many as width-1 has), each of which feeds sink
// (the result) on done; comp runs on src's failure (it is skipped when
// src succeeds).
func fanFlow(name string, width int) *plan.Flow {
	names := []string{"src", "sink", "comp"}
	edges := []string{"src->comp on failure"}
	digits := max(2, len(strconv.Itoa(width-1)))
	for i := range width {
		m := fmt.Sprintf("m%0*d", digits, i)
		names = append(names, m)
		edges = append(edges, "src->"+m, m+"->sink on done")
	}
	f := flowOf(name, execs(names...), edges...)
	f.Result = "sink"
	for i := range f.Execs {
		if f.Execs[i].Name == "sink" || f.Execs[i].Name == "comp" {
			f.Execs[i].InputFrom = plan.InputNone
		}
	}
	return f
}

// readPages reads every page of run id of limit members from the first,
// checking that each holds 1..limit members and, but for them and the
// cursor, is the whole run; it returns the members in page order.
func (e *env) readPages(id RunID, whole *Run, limit int) []RunNode {
	e.t.Helper()
	var got []RunNode
	cursor := ""
	for range len(whole.Nodes) + 1 {
		page, err := e.s.GetRunPage(e.ctx, id, cursor, limit)
		if err != nil {
			e.t.Fatalf("limit %d, cursor %q: %v", limit, cursor, err)
		}
		if len(page.Nodes) == 0 || len(page.Nodes) > limit {
			e.t.Fatalf("limit %d, cursor %q: a page of %d members", limit, cursor, len(page.Nodes))
		}
		head, want := *page, *whole
		head.Nodes, head.NextCursor, want.Nodes = nil, "", nil
		if diff := cmp.Diff(&want, &head); diff != "" {
			e.t.Fatalf("limit %d, cursor %q: the run but for its members (-whole +page):\n%s", limit, cursor, diff)
		}
		got = append(got, page.Nodes...)
		if page.NextCursor == "" {
			return got
		}
		cursor = page.NextCursor
	}
	e.t.Fatalf("limit %d: more pages than members", limit)
	return nil
}

// TestRunPages: the pages of a run, of any size, hold every member once in
// the order of the whole run, and each page carries the whole run's
// counts, failures, result and input; bad cursors and limits are refused
// with their field.
func TestRunPages(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	f := pagedFlow()
	ended := e.stage(f, `"in"`)
	e.drive(func(g Grant) outcome {
		return outcome{result: []byte(`"r"`), fail: g.FlowNode == "m03" || g.FlowNode == "m07"}
	})
	running := e.stage(f, `"in"`)
	// The staged run's first page is the one read back.
	for _, limit := range []int{1, 4} {
		staged := e.stage(f, `"in"`).FirstPage(limit)
		read, err := e.s.GetRunPage(e.ctx, staged.ID, "", limit)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(read.Nodes, staged.Nodes); diff != "" || read.NextCursor != staged.NextCursor {
			t.Fatalf("first page of %d of a staged run, cursor %q, read %q (-read +staged):\n%s", limit, staged.NextCursor, read.NextCursor, diff)
		}
	}
	for _, id := range []RunID{running.ID, ended.ID} {
		whole := e.run(id)
		if id == ended.ID && (whole.State != RunSucceeded || len(whole.Failures) != 2 || whole.Result == nil || whole.ResultState != StateCompleted) {
			t.Fatalf("the ended run: %+v", whole)
		}
		n := len(whole.Nodes)
		for _, limit := range []int{1, 3, 5, n - 1, n, RunPageMax} {
			if diff := cmp.Diff(whole.Nodes, e.readPages(id, whole, limit)); diff != "" {
				t.Fatalf("run %s in pages of %d (-whole +pages):\n%s", whole.State, limit, diff)
			}
		}
	}

	n := len(f.Execs)
	for _, c := range []string{"x", "1", "1.", ".src", "-1.src", "01.m00", "+1.m00", "1.m-0", "1.src.x", strconv.Itoa(n) + ".src",
		"1.nosuch", "1.src", "99999999999999999999.src"} {
		_, err := e.s.GetRunPage(e.ctx, ended.ID, c, 2)
		if ve := (*ValidationError)(nil); !errors.As(err, &ve) || ve.Field != "execs_cursor" {
			t.Errorf("cursor %q: %v, want a validation error of execs_cursor", c, err)
		}
	}
	for _, limit := range []int{-1, RunPageMax + 1} {
		_, err := e.s.GetRunPage(e.ctx, ended.ID, "", limit)
		if ve := (*ValidationError)(nil); !errors.As(err, &ve) || ve.Field != "execs_limit" {
			t.Errorf("limit %d: %v, want a validation error of execs_limit", limit, err)
		}
	}
}
