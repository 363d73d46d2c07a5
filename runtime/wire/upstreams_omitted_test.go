package wire

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// omittedOf returns n omitted upstreams u00.. with ids of partition 3.
func omittedOf(n int) map[string]string {
	m := map[string]string{}
	for i := range n {
		m[fmt.Sprintf("u%02d", i)] = fmt.Sprintf("3.%08x-0000-4000-8000-000000000000", i)
	}
	return m
}

// TestUpstreamsOmittedEncode: tasks listing omitted upstreams of any text
// encode as encoding/json encodes them, on the fast path or off it.
func TestUpstreamsOmittedEncode(t *testing.T) {
	at := time.Date(2026, 11, 22, 18, 30, 0, 0, time.UTC)
	for _, omitted := range []map[string]string{
		omittedOf(1),
		omittedOf(40),
		{"a": `say "no"`},
		{"naïve": "1.x"},
		{"<b>": "1.x"},
		{"a": "bad \xff byte"},
		{"": ""},
		{},
		nil,
	} {
		task := Task{ExecutionID: "1.x", Kind: "k", LeaseExpiresAt: at, Input: json.RawMessage(`{"n":1}`),
			Upstreams: map[string]json.RawMessage{"feed": json.RawMessage(`{"n":1}`)}, UpstreamsOmitted: omitted}
		checkEncode(t, ClaimResponse{Tasks: []Task{task}})
		checkEncode(t, LeaseResults{Results: []LeaseResult{}, Tasks: []Task{task, task}})
	}
}

// TestUpstreamsOmittedDecode: what the server writes decodes to what
// encoding/json gives (up to 16 omitted upstreams on the fast path), and
// odd or malformed upstreams_omitted agree with encoding/json too.
func TestUpstreamsOmittedDecode(t *testing.T) {
	at := time.Date(2026, 11, 22, 18, 30, 0, 0, time.UTC)
	for _, n := range []int{1, 16, 17} {
		omitted := omittedOf(n)
		want := ClaimResponse{Tasks: []Task{{ExecutionID: "1.x", LeaseExpiresAt: at, UpstreamsOmitted: omitted}}}
		data, err := AppendClaimResponse(nil, &want)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := fastClaimResponse(data); ok != (n <= 16) {
			t.Errorf("%d omitted upstreams: fast path %v", n, ok)
		}
		checkDecode(t, data)
		var got ClaimResponse
		if err := UnmarshalClaimResponse(data, &got); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("%d omitted upstreams: round trip (-want +got):\n%s", n, diff)
		}
	}
	for _, s := range []string{
		`{"tasks":[{"upstreams_omitted":{"a":"1.x"}}]}`,
		`{"tasks":[{"upstreams_omitted":{"a":"1.x"},"upstreams":{"b":17}}]}`,
		`{"tasks":[{"upstreams_omitted":{"na\u00efve":"1.x"}}]}`,
		`{"tasks":[{"upstreams_omitted":{"a":"` + "\xff" + `"}}]}`,
		`{"tasks":[{"upstreams_omitted":null}]}`,
		`{"tasks":[{"upstreams_omitted":{}}]}`,
		`{"tasks":[{"upstreams_omitted":{"a":null}}]}`,
		`{"tasks":[{"upstreams_omitted":{"a":1}}]}`,
		`{"tasks":[{"upstreams_omitted":{"a":{}}}]}`,
		`{"tasks":[{"upstreams_omitted":{"a":"1.x","a":"2.y"}}]}`,
		`{"tasks":[{"upstreams_omitted":{"a":"1.x"},"upstreams_omitted":{"b":"2.y"}}]}`,
		`{"tasks":[{"Upstreams_Omitted":{"a":"1.x"}}]}`,
		`{"tasks":[{"upstreams_omitted":[]}]}`,
		`{"tasks":[{"upstreams_omitted":{"a":"1.x"}]}`,
		`{"tasks":[{"upstreams_omitted":{"a":"1.x",}}]}`,
		` { "tasks" : [ { "upstreams_omitted" : { "a" : "1.x" } } ] } `,
	} {
		checkDecode(t, []byte(s))
	}
}

// TestUpstreamsOmittedRoundTrip: a task of every field the server sets,
// omitted upstreams among them, encodes on the fast path and decodes to
// itself, in a claim answer and in a complete answer.
func TestUpstreamsOmittedRoundTrip(t *testing.T) {
	at := time.Date(2026, 11, 22, 18, 30, 0, 0, time.UTC)
	deadline := at.Add(time.Minute)
	task := Task{ExecutionID: "3.x", Kind: "k", Namespace: "n", Lane: "l", Attempt: 1, MaxAttempts: 2, LeaseID: "p-0", Epoch: 1,
		LeaseExpiresAt: at, DeadlineAt: &deadline, Tags: map[string]string{"t": "v"}, Input: json.RawMessage(`"in"`),
		Upstreams:        map[string]json.RawMessage{"feed": json.RawMessage(`"in"`)},
		UpstreamErrors:   map[string]UpstreamError{"bad": {State: "failed", Error: "no"}},
		UpstreamsOmitted: map[string]string{"big": "3.y", "bigger": "3.z"}, Downstream: true}
	if _, ok := appendTask(nil, &task); !ok {
		t.Fatal("a task as the server sends it is off the fast path")
	}
	claim := ClaimResponse{Tasks: []Task{task}}
	data, err := AppendClaimResponse(nil, &claim)
	if err != nil {
		t.Fatal(err)
	}
	var got ClaimResponse
	if _, ok := fastClaimResponse(data); !ok {
		t.Errorf("not decoded on the fast path: %s", data)
	}
	if err := UnmarshalClaimResponse(data, &got); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(claim, got); diff != "" {
		t.Fatalf("claim answer round trip (-want +got):\n%s", diff)
	}
	lr := LeaseResults{Results: []LeaseResult{{ExecutionID: "3.w", OK: true, State: "completed"}}, Tasks: []Task{task}}
	if data, err = AppendLeaseResults(nil, &lr); err != nil {
		t.Fatal(err)
	}
	var gotLR LeaseResults
	if _, ok := fastLeaseResults(data); !ok {
		t.Errorf("not decoded on the fast path: %s", data)
	}
	if err := UnmarshalLeaseResults(data, &gotLR); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(lr, gotLR); diff != "" {
		t.Fatalf("complete answer round trip (-want +got):\n%s", diff)
	}
}
