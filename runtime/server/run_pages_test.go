package server_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/flowfabric/ff/compiler/plan"
	"github.com/flowfabric/ff/runtime/server/servertest"
	"github.com/flowfabric/ff/runtime/wire"
)

// flowOfRoots is a flow named name of the given roots, each of kind
// "<name>.<root>", and of members each waiting (on success) for the root
// downstream names.
func flowOfRoots(name string, roots []string, downstream map[string][]string) *plan.Flow {
	f := &plan.Flow{Schema: plan.SchemaVersion, Name: name, Namespace: "default", Lane: "default"}
	add := func(x string) {
		f.Execs = append(f.Execs, plan.Exec{Name: x, Kind: name + "." + x, Lane: "default", Priority: plan.PriorityDefault,
			InputFrom: plan.InputNone, Join: plan.Join{Kind: plan.JoinAll}, Retry: plan.Retry{Attempts: 1, Backoff: plan.BackoffFixed}})
	}
	for _, r := range roots {
		add(r)
		for _, d := range downstream[r] {
			add(d)
			f.Execs[len(f.Execs)-1].Upstreams = []string{r}
			f.Edges = append(f.Edges, plan.Edge{From: r, To: d, On: plan.OnSuccess})
		}
	}
	return f
}

// getRunAnswer is GET /v1/flows/{id} with query q: the run, and the
// answer but for its members and cursor as JSON values.
func getRunAnswer(t *testing.T, env *servertest.Env, id string, q url.Values) (wire.FlowRun, map[string]any) {
	t.Helper()
	res := env.Do(t, http.MethodGet, "/v1/flows/"+id+"?"+q.Encode(), nil, "")
	if res.Status != http.StatusOK {
		t.Fatalf("GET ?%s: %d %s", q.Encode(), res.Status, res.Body)
	}
	var run wire.FlowRun
	var rest map[string]any
	if err := json.Unmarshal([]byte(res.Body), &run); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(res.Body), &rest); err != nil {
		t.Fatal(err)
	}
	delete(rest, "execs")
	delete(rest, "execs_next_cursor")
	return run, rest
}

// TestRunAnswerPages: GET /v1/flows/{id} answers a page of execs_limit
// members from execs_cursor; following the cursors gives every member
// once, in the order of the whole answer, and every page carries the
// whole run's counts, error and failures. Bad limits and cursors are 400
// with their field.
func TestRunAnswerPages(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	ctx := ctxT(t)
	c := env.Client
	ms := []string{"m0", "m1", "m2", "m3", "m4", "m5"}
	f := flowOfRoots("paged", []string{"src", "r0", "r1"}, map[string][]string{"src": ms})
	run, err := c.StageFlow(ctx, f, nil)
	if err != nil {
		t.Fatal(err)
	}
	// src fails (its members are skipped), r0 succeeds, r1 runs until the
	// run is cancelled: failures of two kinds.
	tasks, err := c.Claim(ctx, wire.ClaimRequest{WorkerID: "w", Max: 10, WaitMs: 2000})
	if err != nil || len(tasks) != 3 {
		t.Fatalf("claim: %+v %v", tasks, err)
	}
	for _, x := range tasks {
		l := wire.Lease{ExecutionID: x.ExecutionID, LeaseID: x.LeaseID, Epoch: x.Epoch}
		switch x.Kind {
		case "paged.src":
			_, err = c.FailOne(ctx, l, "src broke", false)
		case "paged.r0":
			_, err = c.CompleteOne(ctx, l, json.RawMessage(`1`))
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.CancelRun(ctx, run.ID, "enough"); err != nil {
		t.Fatal(err)
	}
	whole, wholeRest := getRunAnswer(t, env, run.ID, url.Values{"execs_limit": {"1000"}})
	if len(whole.Execs) != 9 || whole.ExecsNextCursor != "" || whole.State != wire.RunCancelled || len(whole.Failures) != 2 || whole.Error == "" {
		t.Fatalf("the whole run: %+v", whole)
	}
	if _, rest := getRunAnswer(t, env, run.ID, nil); cmp.Diff(wholeRest, rest) != "" {
		t.Fatalf("a run of 9 members without execs_limit (-whole +default):\n%s", cmp.Diff(wholeRest, rest))
	}
	for _, limit := range []int{1, 2, 4, 8} {
		var got []wire.FlowExec
		cursor := ""
		for range 10 {
			q := url.Values{"execs_limit": {strconv.Itoa(limit)}}
			if cursor != "" {
				q.Set("execs_cursor", cursor)
			}
			page, rest := getRunAnswer(t, env, run.ID, q)
			if len(page.Execs) == 0 || len(page.Execs) > limit {
				t.Fatalf("limit %d, cursor %q: %d members", limit, cursor, len(page.Execs))
			}
			if diff := cmp.Diff(wholeRest, rest); diff != "" {
				t.Fatalf("limit %d, cursor %q: the answer but for its members (-whole +page):\n%s", limit, cursor, diff)
			}
			got = append(got, page.Execs...)
			if cursor = page.ExecsNextCursor; cursor == "" {
				break
			}
		}
		if diff := cmp.Diff(whole.Execs, got); diff != "" {
			t.Fatalf("pages of %d (-whole +pages):\n%s", limit, diff)
		}
	}

	for _, tc := range []struct {
		query, code, field string
	}{
		{"execs_limit=0", wire.CodeValidation, "execs_limit"},
		{"execs_limit=1001", wire.CodeValidation, "execs_limit"},
		{"execs_limit=x", wire.CodeValidation, "execs_limit"},
		{"execs_limit=", wire.CodeValidation, "execs_limit"},
		{"execs_limit=2&execs_limit=3", wire.CodeValidation, "execs_limit"},
		{"execs_cursor=garbage", wire.CodeValidation, "execs_cursor"},
		{"execs_cursor=1.src", wire.CodeValidation, "execs_cursor"}, // r1 is second
		{"execs_cursor=9.m5", wire.CodeValidation, "execs_cursor"},  // past the last member
		{"execs_cursor=" + url.QueryEscape("2.src") + "&execs_limit=-1", wire.CodeValidation, "execs_limit"},
		{"limit=2", wire.CodeUnknownField, "limit"},
	} {
		res := env.Do(t, http.MethodGet, "/v1/flows/"+run.ID+"?"+tc.query, nil, "")
		if res.Status != http.StatusBadRequest || res.Err.Code != tc.code || res.Field() != tc.field {
			t.Errorf("?%s: %d %s, want 400 %s of %s", tc.query, res.Status, res.Body, tc.code, tc.field)
		}
	}
	if res := env.Do(t, http.MethodGet, "/v1/flows/"+run.ID+"?execs_cursor=2.src&execs_limit=1", nil, ""); res.Status != http.StatusOK {
		t.Fatalf("the page at 2.src: %d %s", res.Status, res.Body)
	}
}

// TestRunAnswersBoundedByDefault: a run of more than 1,000 members is
// answered with its first 1,000 and the cursor of the rest, by GET without
// execs_limit and by the staging, cancel and replay routes; the client's
// GetRun reads it all.
func TestRunAnswersBoundedByDefault(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	const members = 1001
	var roots []string
	for i := range members {
		roots = append(roots, fmt.Sprintf("m%04d", i))
	}
	bounded := func(what string, res servertest.Response, status int) wire.FlowRun {
		t.Helper()
		var run wire.FlowRun
		if res.Status != status {
			t.Fatalf("%s: %d %s", what, res.Status, res.Body)
		}
		if err := json.Unmarshal([]byte(res.Body), &run); err != nil {
			t.Fatal(err)
		}
		if run.Total != members || len(run.Execs) != 1000 || run.ExecsNextCursor == "" {
			t.Fatalf("%s: %d of %d members, next cursor %q; want the first 1000 and a cursor", what, len(run.Execs), run.Total, run.ExecsNextCursor)
		}
		return run
	}
	staged := bounded("staging", env.Do(t, http.MethodPost, "/v1/flows", nil, stageBody(t, flowOfRoots("wide", roots, nil), "null")), http.StatusCreated)
	got := bounded("GET", env.Do(t, http.MethodGet, "/v1/flows/"+staged.ID, nil, ""), http.StatusOK)
	ids := func(xs []wire.FlowExec) []string {
		var out []string
		for _, x := range xs {
			out = append(out, x.Name+" "+x.ExecutionID)
		}
		return out
	}
	// The same members (a read adds why they wait).
	if diff := cmp.Diff(ids(staged.Execs), ids(got.Execs)); diff != "" || staged.ExecsNextCursor != got.ExecsNextCursor {
		t.Fatalf("staged page, cursor %q, read %q (-staged +read):\n%s", staged.ExecsNextCursor, got.ExecsNextCursor, diff)
	}
	rest, _ := getRunAnswer(t, env, staged.ID, url.Values{"execs_cursor": {got.ExecsNextCursor}})
	if len(rest.Execs) != 1 || rest.ExecsNextCursor != "" || rest.Execs[0].Name != "m1000" {
		t.Fatalf("the second page: %+v", rest.Execs)
	}
	all, err := env.Client.GetRun(ctxT(t), staged.ID)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(append(got.Execs, rest.Execs...), all.Execs); diff != "" || all.ExecsNextCursor != "" {
		t.Fatalf("client GetRun (-pages +GetRun):\n%s", diff)
	}
	cancelled := bounded("cancel", env.Do(t, http.MethodPost, "/v1/flows/"+staged.ID+"/cancel", nil, `{"reason":"enough"}`), http.StatusOK)
	if cancelled.State != wire.RunCancelled || len(cancelled.Failures) != members {
		t.Fatalf("cancel: %s with %d failures", cancelled.State, len(cancelled.Failures))
	}
	if replayed := bounded("replay", env.Do(t, http.MethodPost, "/v1/flows/"+staged.ID+"/replay", nil, "{}"), http.StatusOK); replayed.State != wire.RunRunning {
		t.Fatalf("replay: %s", replayed.State)
	}
}
