package wire

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestUpstreamErrorsEncode: tasks with upstream errors of any text
// encode as encoding/json encodes them, on the fast path or off it.
func TestUpstreamErrorsEncode(t *testing.T) {
	at := time.Date(2026, 11, 22, 4, 30, 0, 0, time.UTC)
	many := map[string]UpstreamError{}
	for i := range 20 {
		many[fmt.Sprintf("u%02d", i)] = UpstreamError{State: "failed", Error: fmt.Sprintf("e%d", i)}
	}
	for _, errs := range []map[string]UpstreamError{
		{"a": {State: "failed", Error: `say "no"` + "\nand\\stop"}},
		{"a": {State: "failed", Error: "naïve – ünïcode ✓"}},
		{"a": {State: "failed", Error: "<script> & co"}},
		{"a": {State: "failed", Error: "bad \xff byte"}},
		{"a": {State: "failed", Error: "line\u2028sep"}},
		{"a": {State: "failed", Error: "nul\x00byte"}},
		{"a": {State: "failed"}, "": {}}, // empty strings
		{"é": {State: "skipped", Error: "its join can no longer be satisfied"}},
		many,
		{},
	} {
		task := Task{ExecutionID: "1.x", Kind: "k", LeaseExpiresAt: at, UpstreamErrors: errs}
		checkEncode(t, ClaimResponse{Tasks: []Task{task}})
		checkEncode(t, LeaseResults{Results: []LeaseResult{}, Tasks: []Task{task, task}})
	}
}

// TestUpstreamErrorsDecode: what the server writes decodes to what
// encoding/json gives (the plain ones on the fast path), and odd or
// malformed upstream_errors agree with encoding/json too.
func TestUpstreamErrorsDecode(t *testing.T) {
	at := time.Date(2026, 11, 22, 4, 30, 0, 0, time.UTC)
	for _, n := range []int{1, 16, 17} {
		errs := map[string]UpstreamError{}
		for i := range n {
			errs[fmt.Sprintf("u%02d", i)] = UpstreamError{State: "failed", Error: fmt.Sprintf("e%d", i)}
		}
		data, err := json.Marshal(ClaimResponse{Tasks: []Task{{ExecutionID: "1.x", LeaseExpiresAt: at, UpstreamErrors: errs}}})
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := fastClaimResponse(data); ok != (n <= 16) {
			t.Errorf("%d upstream errors: fast path %v", n, ok)
		}
		checkDecode(t, data)
		var got ClaimResponse
		if err := UnmarshalClaimResponse(data, &got); err != nil || !cmp.Equal(errs, got.Tasks[0].UpstreamErrors) {
			t.Fatalf("%d upstream errors decode to %v, %v", n, got.Tasks, err)
		}
	}
	for _, s := range []string{
		`{"tasks":[{"upstream_errors":{"a":{"state":"failed","error":"x"}}}]}`,
		`{"tasks":[{"upstream_errors":{"a":{"state":"failed","error":"say \"no\"\n"}}}]}`,
		`{"tasks":[{"upstream_errors":{"a":{"state":"failed","error":"na\u00efve"}}}]}`,
		`{"tasks":[{"upstream_errors":{"a":{"state":"failed","error":"naïve"}}}]}`,
		`{"tasks":[{"upstream_errors":{"a":{"state":"failed","error":"` + "\xff" + `"}}}]}`,
		`{"tasks":[{"upstream_errors":null}]}`,
		`{"tasks":[{"upstream_errors":{}}]}`,
		`{"tasks":[{"upstream_errors":{"a":null}}]}`,
		`{"tasks":[{"upstream_errors":{"a":{}}}]}`,
		`{"tasks":[{"upstream_errors":{"a":{"state":null}}}]}`,
		`{"tasks":[{"upstream_errors":{"a":{"state":1}}}]}`,
		`{"tasks":[{"upstream_errors":{"a":{"State":"failed","ERROR":"x"}}}]}`,
		`{"tasks":[{"upstream_errors":{"a":{"state":"failed","other":"x"}}}]}`,
		`{"tasks":[{"upstream_errors":{"a":{"state":"a","state":"b"}}}]}`,
		`{"tasks":[{"upstream_errors":{"a":{"state":"a"},"a":{"error":"b"}}}]}`,
		`{"tasks":[{"upstream_errors":{"a":{"state":"a"}},"upstream_errors":{"b":{"state":"b"}}}]}`,
		`{"tasks":[{"Upstream_Errors":{"a":{"state":"a"}}}]}`,
		`{"tasks":[{"upstream_errors":[]}]}`,
		`{"tasks":[{"upstream_errors":{"a":{"state":"failed","error":"x"}}]}`,
		`{"tasks":[{"upstream_errors":{"a":{"state":"failed","error":"x"},}}]}`,
		` { "tasks" : [ { "upstream_errors" : { "a" : { "state" : "failed" , "error" : "x" } } } ] } `,
	} {
		checkDecode(t, []byte(s))
	}
}

// TestUpstreamErrorsRoundTrip: what the server encodes, a worker
// decodes to the same task (text that is valid UTF-8).
func TestUpstreamErrorsRoundTrip(t *testing.T) {
	at := time.Date(2026, 11, 22, 4, 30, 0, 0, time.UTC)
	want := ClaimResponse{Tasks: []Task{{ExecutionID: "1.x", Kind: "k", LeaseExpiresAt: at,
		UpstreamErrors: map[string]UpstreamError{
			"a": {State: "failed", Error: "say \"no\"\n<&> naïve \u2028"},
			"b": {State: "cancelled", Error: "plain"},
		}}}}
	data, err := AppendClaimResponse(nil, &want)
	if err != nil {
		t.Fatal(err)
	}
	var got ClaimResponse
	if err := UnmarshalClaimResponse(data, &got); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("round trip (-want +got):\n%s", diff)
	}
}
