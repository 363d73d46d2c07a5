package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// sampleTasks are tasks as the server grants them, and some that take the
// encoders off their fast path.
func sampleTasks() []Task {
	at := time.Date(2026, 11, 21, 22, 30, 0, 123456789, time.UTC)
	deadline := at.Add(time.Hour)
	east := at.In(time.FixedZone("east", 5*3600+30*60))
	return []Task{
		{ExecutionID: "3.0f8c2a9e-6b1d-4c3e-9a2b-7d5e1f0a3b4c", Kind: "chain.step", Namespace: "default", Lane: "default",
			Attempt: 1, MaxAttempts: 3, LeaseID: "a1b2c3d4e5f6-0", Epoch: 1, LeaseExpiresAt: at,
			Input:      json.RawMessage(`{"n":3,"at":1763764545123456789,"s":"a \"quoted\" \\ word","l":[1,2.5e3,true,null,{}]}`),
			Upstreams:  map[string]json.RawMessage{"s3": json.RawMessage(`{"n":3}`), "a": json.RawMessage(`"x"`), "b": json.RawMessage(`17`)},
			Downstream: true},
		{ExecutionID: "0.x", Kind: "k", Namespace: "n", Lane: "l", Attempt: 2, LeaseID: "p-1", Epoch: 9, LeaseExpiresAt: east,
			DeadlineAt: &deadline, Tags: map[string]string{"b": "2", "a": "1", "": ""}, Input: json.RawMessage(`[]`)},
		{ExecutionID: "2.y", Kind: "etl.notify", LeaseExpiresAt: at, Upstreams: map[string]json.RawMessage{"extract": json.RawMessage(`{}`)},
			UpstreamErrors:   map[string]UpstreamError{"transform": {State: "failed", Error: "etl.transform: bad row 7"}, "load": {State: "skipped", Error: "its join can no longer be satisfied"}},
			UpstreamsOmitted: map[string]string{"rows": "2.5f0e7c1a-9b2d-4e3f-8a1b-6c7d8e9f0a1b", "big": "2.z"}},
		{}, // zero: every omitempty field omitted
		{LeaseExpiresAt: at, UpstreamErrors: map[string]UpstreamError{"a": {State: "failed", Error: "a \"quoted\"\nline"}}}, // escapes
		{Kind: "html <b> & co", LeaseExpiresAt: at, Input: json.RawMessage(`"<p>&amp;</p>"`)},                               // as it is, not HTML-escaped
		{Kind: "naïve", LeaseExpiresAt: at},                                       // not ASCII
		{LeaseExpiresAt: at, Input: json.RawMessage(`{"a": 1}`)},                  // not compact
		{LeaseExpiresAt: at, Input: json.RawMessage(`"\u2028"`)},                  // an escape, kept
		{LeaseExpiresAt: at, Input: json.RawMessage("\"\u2028\"")},                // raw U+2028, kept
		{LeaseExpiresAt: at, Tags: map[string]string{"k": "tab\there"}},           // control character
		{LeaseExpiresAt: at, UpstreamsOmitted: map[string]string{"naïve": "1.x"}}, // not ASCII
		{LeaseExpiresAt: at, Upstreams: map[string]json.RawMessage{"a": {}}},      // empty raw: an error
		{LeaseExpiresAt: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)},            // year out of range: an error
		{LeaseExpiresAt: at.In(time.FixedZone("far", 24*3600))},                   // zone out of range: an error
		{LeaseExpiresAt: at, Tags: map[string]string{}, Upstreams: map[string]json.RawMessage{}, UpstreamsOmitted: map[string]string{}},
	}
}

func sampleResults() []LeaseResult {
	at := time.Date(2026, 11, 21, 22, 30, 0, 0, time.UTC)
	return []LeaseResult{
		{ExecutionID: "3.0f8c2a9e-6b1d-4c3e-9a2b-7d5e1f0a3b4c", OK: true, State: "completed"},
		{ExecutionID: "1.y", OK: true, LeaseExpiresAt: &at},
		{ExecutionID: "1.z", State: "active", Error: &ErrorBody{Code: CodeStaleLease, Message: "lease expired", Details: map[string]any{"reason": "lease_expired"}}},
		{},
	}
}

// TestFastEncodeMatchesEncodingJSON: the encoders write what Marshal
// (encoding/json without HTML escaping) writes, errors included, and take
// the fast path for what the server sends.
func TestFastEncodeMatchesEncodingJSON(t *testing.T) {
	fast := 0
	for i, task := range sampleTasks() {
		checkEncode(t, LeaseResults{Results: []LeaseResult{}, Tasks: []Task{task}})
		checkEncode(t, ClaimResponse{Tasks: []Task{task}})
		want, _ := Marshal(task)
		if b, ok := appendTask(nil, &task); ok {
			fast++
			if string(b) != string(want) {
				t.Errorf("task %d: fast path wrote %s, want %s", i, b, want)
			}
		}
	}
	for i, r := range sampleResults() {
		checkEncode(t, LeaseResults{Results: []LeaseResult{r}})
		want, _ := Marshal(r)
		if b, ok := appendLeaseResult(nil, &r); ok {
			fast++
			if string(b) != string(want) {
				t.Errorf("result %d: fast path wrote %s, want %s", i, b, want)
			}
		}
	}
	// The first three tasks, the empty ones, the one with HTML, the
	// escape and the raw U+2028 of raw inputs, and three of the results.
	if fast != 11 {
		t.Errorf("%d samples took the fast path, want 11", fast)
	}
	checkEncode(t, LeaseResults{})
	checkEncode(t, ClaimResponse{})
	checkEncode(t, LeaseResults{Results: sampleResults(), Tasks: sampleTasks()})
	checkEncode(t, ClaimResponse{Tasks: sampleTasks()[:3]})
}

// checkEncode fails t unless the Append function of v's type writes what
// Marshal writes, after a prefix it keeps.
func checkEncode(t *testing.T, v any) {
	t.Helper()
	want, wantErr := Marshal(v)
	var got []byte
	var err error
	switch v := v.(type) {
	case LeaseResults:
		got, err = AppendLeaseResults([]byte("prefix"), &v)
	case ClaimResponse:
		got, err = AppendClaimResponse([]byte("prefix"), &v)
	}
	if (err != nil) != (wantErr != nil) || (err == nil && string(got) != "prefix"+string(want)) {
		t.Fatalf("%+v: wrote %s (%v), want prefix%s (%v)", v, got, err, want, wantErr)
	}
}

// TestFastDecodeMatchesEncodingJSON: the answers the server writes decode
// on the fast path, to what json.Unmarshal gives.
func TestFastDecodeMatchesEncodingJSON(t *testing.T) {
	tasks := sampleTasks()[:4]
	results := sampleResults()
	results = append(results[:2], results[3])
	for _, v := range []any{
		LeaseResults{Results: results, Tasks: tasks},
		LeaseResults{Results: []LeaseResult{}},
		ClaimResponse{Tasks: tasks},
		ClaimResponse{Tasks: []Task{}},
	} {
		data, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		data = append(data, '\n') // as Echo writes it
		switch v.(type) {
		case LeaseResults:
			if _, ok := fastLeaseResults(data); !ok {
				t.Errorf("not on the fast path: %s", data)
			}
		case ClaimResponse:
			if _, ok := fastClaimResponse(data); !ok {
				t.Errorf("not on the fast path: %s", data)
			}
		}
		checkDecode(t, data)
	}
}

// checkDecode fails t unless the Unmarshal functions and json.Unmarshal
// agree on data.
func checkDecode(t *testing.T, data []byte) {
	t.Helper()
	var got, want LeaseResults
	err, wantErr := UnmarshalLeaseResults(data, &got), json.Unmarshal(data, &want)
	if (err != nil) != (wantErr != nil) {
		t.Fatalf("%q: lease results error %v, encoding/json %v", data, err, wantErr)
	}
	if diff := cmp.Diff(want, got); wantErr == nil && diff != "" {
		t.Fatalf("%q: lease results differ from encoding/json's (-want +got):\n%s", data, diff)
	}
	var gotC, wantC ClaimResponse
	err, wantErr = UnmarshalClaimResponse(data, &gotC), json.Unmarshal(data, &wantC)
	if (err != nil) != (wantErr != nil) {
		t.Fatalf("%q: claim response error %v, encoding/json %v", data, err, wantErr)
	}
	if diff := cmp.Diff(wantC, gotC); wantErr == nil && diff != "" {
		t.Fatalf("%q: claim response differs from encoding/json's (-want +got):\n%s", data, diff)
	}
	var gotR, wantR FlowRun
	err, wantErr = UnmarshalFlowRun(data, &gotR), json.Unmarshal(data, &wantR)
	if (err != nil) != (wantErr != nil) {
		t.Fatalf("%q: flow run error %v, encoding/json %v", data, err, wantErr)
	}
	if diff := cmp.Diff(wantR, gotR); wantErr == nil && diff != "" {
		t.Fatalf("%q: flow run differs from encoding/json's (-want +got):\n%s", data, diff)
	}
}

// sampleFlowRuns are runs as the answers of a staging request and a
// result carry them, and some that take the codecs off their fast path.
func sampleFlowRuns() []FlowRun {
	at := time.Date(2026, 11, 23, 6, 29, 35, 132000000, time.UTC)
	end := at.Add(25 * time.Millisecond)
	yes, no := true, false
	return []FlowRun{
		{ID: "5.5a435042-3eb9-4216-9fe2-c36ec8cd50cb", Namespace: "bench", Flow: "chain", State: "succeeded", Created: &yes,
			Total: 10, Done: 10, Succeeded: 10, ResultExec: "s9", Result: json.RawMessage(`1`), CreatedAt: &at, EndedAt: &end},
		{ID: "1.x", Flow: "etl", State: "failed", Created: &no, Total: 3, Done: 3, Succeeded: 1, Failed: 1, Skipped: 1,
			Error: "etl.load failed", CreatedAt: &at, EndedAt: &end, Replays: 2, ReplayedAt: &at,
			IdempotencyKey: "k-1", Schedule: "nightly", ScheduledAt: &at, ScheduleManual: true,
			Input: json.RawMessage(`{"day":"2026-11-23","n":[1,2.5]}`), ExecsNextCursor: "c1"},
		{ID: "2.y", Flow: "f", State: "cancelled", Cancelled: 2, Result: json.RawMessage(`{"a":"<b>"}`)}, // as it is, not HTML-escaped
		{}, // zero: every omitempty member omitted
		{ID: "3.z", Flow: "f", State: "failed", Failures: []ExecFailure{{}}},                            // failures: encoding/json's
		{ID: "3.z", Flow: "f", State: "running", Execs: []FlowExec{{}}},                                 // members: encoding/json's
		{ID: "3.z", Flow: "f", State: "failed", Error: "a \"quoted\"\nline"},                            // escapes
		{ID: "3.z", Flow: "f", State: "succeeded", Result: json.RawMessage(`{"a": 1}`)},                 // not compact
		{ID: "3.z", Flow: "naïve", State: "succeeded"},                                                  // not ASCII
		{ID: "3.z", Flow: "f", State: "succeeded", Result: json.RawMessage{}, Input: json.RawMessage{}}, // empty raw: omitted
	}
}

// TestFlowRunCodec: AppendFlowRun writes what Marshal writes, and
// UnmarshalFlowRun reads it as json.Unmarshal does, the runs that ended
// without failures on the fast paths.
func TestFlowRunCodec(t *testing.T) {
	// Decoded on the fast path: what Marshal writes of each sample, but
	// the run of over 16 members (a decoder's bound), the members and
	// failures, and the escapes.
	decodedFast := []bool{true, false, true, true, false, false, false, true, true, true}
	fast := 0
	for i, r := range sampleFlowRuns() {
		want, wantErr := Marshal(r)
		got, err := AppendFlowRun([]byte("prefix"), &r)
		if (err != nil) != (wantErr != nil) || (err == nil && string(got) != "prefix"+string(want)) {
			t.Fatalf("run %d: wrote %s (%v), want prefix%s (%v)", i, got, err, want, wantErr)
		}
		if _, ok := appendFlowRun(nil, &r); ok {
			fast++
		}
		data := append(want, '\n') // as the API writes it
		checkDecode(t, data)
		if _, ok := fastFlowRun(data); ok != decodedFast[i] {
			t.Errorf("run %d: decoded on the fast path %v, want %v: %s", i, ok, decodedFast[i], data)
		}
	}
	// The first four, and the one whose empty raw values are omitted.
	if fast != 5 {
		t.Errorf("%d runs took the fast path, want 5", fast)
	}
}

// FuzzDecode: on any input the decoders agree with encoding/json.
func FuzzDecode(f *testing.F) {
	for _, v := range []any{
		LeaseResults{Results: sampleResults(), Tasks: sampleTasks()[:3]},
		ClaimResponse{Tasks: sampleTasks()[:3]},
	} {
		data, err := json.Marshal(v)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	for _, s := range []string{
		`{"tasks":[{"attempt":01}]}`, `{"tasks":[{"attempt":1.0}]}`, `{"tasks":[{"attempt":-0}]}`,
		`{"tasks":[{"epoch":9223372036854775808}]}`, `{"tasks":null}`, `{"tasks":[null]}`,
		`{"tasks":[{"kind":"a","kind":"b"}]}`, `{"tasks":[{"Kind":"a"}]}`, `{"tasks":[{"kind":"\u0041"}]}`,
		`{"tasks":[{"kind":"` + "\xff" + `"}]}`, `{"tasks":[{"input":{"a":[1,{"b":"]"}]}}]}`,
		// Strings with bytes outside ASCII are checked as UTF-8; ASCII
		// ones are not (strBytes).
		`{"tasks":[{"kind":"kö","lane":"l"}]}`, `{"tasks":[{"kind":"ö` + "\xff" + `"}]}`,
		`{"tasks":[{"kind":"a` + "\x01" + `"}]}`, `{"tasks":[{"kind":"a` + "\x7f" + `"}]}`,
		`{"tasks":[{"input":nul}]}`, `{"tasks":[{"input":"\"}"}]}`, `{"tasks":[{"upstreams":{"a":null}}]}`,
		`{"tasks":[{"lease_expires_at":"2026-11-21T22:30:00+25:00"}]}`, `{"tasks":[{"downstream":truex}]}`,
		`{"results":[{"ok":true,"error":{"code":"x","message":"y"}}]} `, `{"results":[]} x`, ` {} `, `[]`, ``,
		`{"tasks":[{"tags":{"a":"1","a":"2"}}]}`, `{"tasks":[{"input":[1,2}]}`, `{"tasks":[{"input":-}]}`,
		`{"tasks":[{"upstreams_omitted":{"a":"1.x","b":"1.y"}}]}`, `{"tasks":[{"upstreams_omitted":{"a":null}}]}`,
		`{"tasks":[{"upstreams_omitted":{"a":1}}]}`, `{"tasks":[{"upstreams_omitted":null}]}`,
		// A task's and a result's strings are written together when it
		// ends (one allocation): held strings of an object that fails,
		// and of lists that grow.
		`{"tasks":[{"execution_id":"1.x","kind":"k","namespace":"","lane":"l","lease_id":"a","nope":1}]}`,
		`{"tasks":[{"lease_id":"a","execution_id":"1.x"},{"kind":"k2"},{"lane":"l3","namespace":"n3"},{},{"execution_id":"1.y","epoch":2}]}`,
		`{"results":[{"execution_id":"1.a","ok":true,"state":"succeeded"},{"state":"","execution_id":""},{"execution_id":"1.c"}]}`,
		`{"results":[{"execution_id":"1.a","state":1}]}`,
		// Flow runs (checkDecode compares them too).
		`{"id":"1.x","flow":"f","state":"succeeded","created":true,"total":2,"done":2,"result":{"a":1},"ended_at":"2026-11-23T06:29:35.157Z"}`,
		`{"id":"1.x","created":null}`, `{"id":"1.x","ended_at":null}`, `{"id":"1.x","result":null}`, `{"id":"1.x","ID":"1.y"}`,
		`{"id":"1.x","total":1e2}`, `{"id":"1.x","failures":[{"exec":"a"}]}`, `{"id":"1.x","schedule_manual":false,"replays":0}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkDecode(t, data)
	})
}

// FuzzEncode: tasks built from any values encode as Marshal encodes them.
func FuzzEncode(f *testing.F) {
	f.Add("3.abc", "kind", "tag", `{"n":1}`, int64(1), int64(1763764545123456789), int32(0), true)
	f.Add("x<y", "naïve", "t\tab", `[1, 2]`, int64(-5), int64(-62135596800000000), int32(-3600), false)
	f.Fuzz(func(t *testing.T, id, kind, tag, raw string, n, unixNano int64, offset int32, down bool) {
		task := Task{ExecutionID: id, Kind: kind, Namespace: tag, Lane: tag, Attempt: int(n), MaxAttempts: int(n % 7),
			LeaseID: id + kind, Epoch: n, LeaseExpiresAt: time.Unix(0, unixNano).In(time.FixedZone("z", int(offset))),
			Tags: map[string]string{tag: kind, kind: id}, Downstream: down,
			UpstreamErrors:   map[string]UpstreamError{tag: {State: kind, Error: raw}},
			UpstreamsOmitted: map[string]string{tag: id, kind: raw}}
		if json.Valid([]byte(raw)) {
			task.Input = json.RawMessage(raw)
			task.Upstreams = map[string]json.RawMessage{tag: task.Input}
		}
		if n%3 == 0 {
			task.DeadlineAt = &task.LeaseExpiresAt
		}
		r := LeaseResult{ExecutionID: id, OK: down, State: strings.ToLower(kind)}
		if n%2 == 0 {
			r.LeaseExpiresAt = &task.LeaseExpiresAt
		}
		checkEncode(t, LeaseResults{Results: []LeaseResult{r}, Tasks: []Task{task}})
		checkEncode(t, ClaimResponse{Tasks: []Task{task, task}})
		// What encodes decodes to what encoding/json decodes.
		if data, err := json.Marshal(LeaseResults{Results: []LeaseResult{r}, Tasks: []Task{task}}); err == nil {
			checkDecode(t, data)
		}
	})
}

// benchAnswer is a complete answer with four results and four hand-off
// tasks, the shape of a busy chain worker's.
func benchAnswer() LeaseResults {
	var lr LeaseResults
	task := sampleTasks()[0]
	task.Input = json.RawMessage(`{"n":3,"at":1763764545123456789}`)
	task.Upstreams = map[string]json.RawMessage{"s3": task.Input}
	for range 4 {
		lr.Results = append(lr.Results, sampleResults()[0])
		lr.Tasks = append(lr.Tasks, task)
	}
	return lr
}

// BenchmarkLeaseResults compares the fast paths with encoding/json on a
// complete answer:
//
//	go test -run '^$' -bench LeaseResults -benchmem ./runtime/wire/
func BenchmarkLeaseResults(b *testing.B) {
	lr := benchAnswer()
	data, err := json.Marshal(lr)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("encode", func(b *testing.B) {
		for b.Loop() {
			if _, err := AppendLeaseResults(nil, &lr); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encode-encoding-json", func(b *testing.B) {
		for b.Loop() {
			if _, err := json.Marshal(lr); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decode", func(b *testing.B) {
		for b.Loop() {
			var v LeaseResults
			if err := UnmarshalLeaseResults(data, &v); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decode-encoding-json", func(b *testing.B) {
		for b.Loop() {
			var v LeaseResults
			if err := json.Unmarshal(data, &v); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func sampleCompleteRequests() []CompleteRequest {
	out := json.RawMessage(`{"n":3,"s":"a \"b\""}`)
	return []CompleteRequest{
		{WorkerID: "bench-worker", Completions: []Completion{
			{Lease: Lease{ExecutionID: "3.0f8c2a9e-6b1d-4c3e-9a2b-7d5e1f0a3b4c", LeaseID: "a1b2-0", Epoch: 1}, Output: out},
			{Lease: Lease{ExecutionID: "3.x", LeaseID: "a1b2-1", Epoch: 2}},
		}, Handoff: &Handoff{InstanceID: "i-1", Namespace: "ns", Lanes: []string{"a", "b"}, Capabilities: []string{"gpu"},
			Kinds: []string{"k1", "k2"}, Max: 2, LeaseMs: 30000}},
		{Completions: []Completion{}},
		{},
		{Completions: []Completion{{Lease: Lease{ExecutionID: "x"}}}, Handoff: &Handoff{Max: 1}},
		{Completions: []Completion{{Lease: Lease{ExecutionID: "x"}, Output: json.RawMessage(`{"a": "<b>"}`)}}},
		{WorkerID: "wörker", Completions: []Completion{{Lease: Lease{ExecutionID: "x"}}}},
		{Completions: []Completion{{Lease: Lease{ExecutionID: "x"}}}, Handoff: &Handoff{Lanes: []string{}, Max: 1}},
		{Completions: []Completion{{Lease: Lease{ExecutionID: "x"}, Output: json.RawMessage("\"<p>&amp;</p>\u2028\"")}}},
	}
}

// TestNoHTMLEscaping: inputs, outputs and strings holding <, > and & go
// on the wire as they are, on the fast path and off it (encoding/json
// would write each as six bytes, \u003c): an output of 1 MiB of HTML is
// sent in a little more than 1 MiB, and the server, which measures what
// it receives, takes it.
func TestNoHTMLEscaping(t *testing.T) {
	html := `"` + strings.Repeat("<b>&", 1<<18) + `"`
	at := time.Date(2026, 11, 22, 4, 30, 0, 0, time.UTC)
	for _, out := range []json.RawMessage{json.RawMessage(html), json.RawMessage("[ " + html + " ]")} {
		req := CompleteRequest{Completions: []Completion{{Lease: Lease{ExecutionID: "1.x", LeaseID: "l-0", Epoch: 1}, Output: out}}}
		body, err := AppendCompleteRequest(nil, &req)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(body, []byte(`\u00`)) || len(body) > len(out)+100 {
			t.Errorf("a complete request with an output of %d bytes is %d bytes: %.80s", len(out), len(body), body)
		}
		task := Task{ExecutionID: "1.x", Kind: "a<b", LeaseExpiresAt: at, Input: out, Tags: map[string]string{"k": "&"}}
		for _, v := range []any{ClaimResponse{Tasks: []Task{task}}, LeaseResults{Tasks: []Task{task}}} {
			var b []byte
			switch v := v.(type) {
			case ClaimResponse:
				b, err = AppendClaimResponse(nil, &v)
			case LeaseResults:
				b, err = AppendLeaseResults(nil, &v)
			}
			if err != nil {
				t.Fatal(err)
			}
			if bytes.Contains(b, []byte(`\u00`)) || len(b) > len(out)+300 {
				t.Errorf("%T with an input of %d bytes is %d bytes: %.80s", v, len(out), len(b), b)
			}
		}
	}
}

// strictDecode decodes a request body as the API does: unknown fields
// refused, nothing after the value.
func strictDecode(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("data after the value")
	}
	return nil
}

// checkCompleteRequest fails t unless FastCompleteRequest, when it reads
// data, gives what strict decoding gives.
func checkCompleteRequest(t *testing.T, data []byte) bool {
	t.Helper()
	got, ok := FastCompleteRequest(data)
	if !ok {
		return false
	}
	var want CompleteRequest
	if err := strictDecode(data, &want); err != nil {
		t.Fatalf("%q: read on the fast path, but strict decoding fails: %v", data, err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("%q: differs from strict decoding (-want +got):\n%s", data, diff)
	}
	return true
}

// TestCompleteRequestCodec: the encoder writes Marshal's bytes, and what
// the SDK sends decodes on the fast path to the strict decoding.
func TestCompleteRequestCodec(t *testing.T) {
	for i, req := range sampleCompleteRequests() {
		want, err := Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		got, err := AppendCompleteRequest([]byte("p"), &req)
		if err != nil || string(got) != "p"+string(want) {
			t.Errorf("request %d: wrote %s (%v), want p%s", i, got, err, want)
		}
		fast := checkCompleteRequest(t, want)
		if plain := i != 2; fast != plain { // 2 has "completions":null
			t.Errorf("request %d: fast path %v, want %v: %s", i, fast, plain, want)
		}
	}
}

// FuzzCompleteRequest: the fast path never reads a body differently from
// strict decoding, nor one strict decoding refuses.
func FuzzCompleteRequest(f *testing.F) {
	for _, req := range sampleCompleteRequests() {
		data, err := json.Marshal(req)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	for _, s := range []string{
		`{"completions":[{"execution_id":"x","Lease_ID":"y"}]}`, `{"completions":[]} {}`, `{"completions":[],}`,
		`{"completions":[{"epoch":1e2}]}`, `{"handoff":null}`, `{"handoff":{"max":1,"max":2}}`, `{"handoff":{"lanes":["a",]}}`,
		`{"completions":[{"output":{"a":1}}],"worker_id":"w"}`, `{"completions":[{"output":[1,2]]}]}`, "{\"worker_id\":\"w\"}\n\n",
		// Lists of strings (read with one allocation for all of them) and
		// completions' held strings.
		`{"handoff":{"kinds":[ "a" , "bc",""],"lanes":["x"],"max":1}}`, `{"handoff":{"kinds":["a","\u0062"],"max":1}}`,
		`{"handoff":{"kinds":[],"capabilities":[ ],"max":1}}`, `{"handoff":{"kinds":["a"  ] ,"max":1}}`,
		`{"handoff":{"kinds":["a",1],"max":1}}`, `{"handoff":{"kinds":["a" "b"],"max":1}}`, `{"handoff":{"kinds":null,"max":1}}`,
		`{"completions":[{"execution_id":"1.a","lease_id":"","epoch":1},{"lease_id":"l2","execution_id":"1.b","epoch":2},` +
			`{"execution_id":"1.c","lease_id":"l3","epoch":3},{"execution_id":"","lease_id":"l4"},{"execution_id":"1.e","lease_id":"l5","epoch":5}]}`,
		`{"completions":[{"execution_id":"1.a","lease_id":"l","Epoch":1}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkCompleteRequest(t, data)
	})
}

// fill sets every field of the struct v points to (and of the structs in
// it) to a value that is not zero, so that a field the fast codecs do not
// know shows in a comparison with encoding/json.
func fill(t *testing.T, v reflect.Value) {
	t.Helper()
	switch v.Kind() {
	case reflect.Pointer:
		if v.Type() == reflect.TypeFor[*ErrorBody]() {
			return // the codecs leave error bodies to encoding/json
		}
		v.Set(reflect.New(v.Type().Elem()))
		fill(t, v.Elem())
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[time.Time]() {
			v.Set(reflect.ValueOf(time.Date(2026, 11, 21, 23, 0, 0, 5, time.UTC)))
			return
		}
		for i := range v.NumField() {
			fill(t, v.Field(i))
		}
	case reflect.String:
		v.SetString("x")
	case reflect.Int, reflect.Int64:
		v.SetInt(7)
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Slice:
		if v.Type() == reflect.TypeFor[json.RawMessage]() {
			v.SetBytes([]byte(`{"k":[1,"v"]}`))
			return
		}
		s := reflect.MakeSlice(v.Type(), 1, 1)
		fill(t, s.Index(0))
		v.Set(s)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		val := reflect.New(v.Type().Elem()).Elem()
		fill(t, val)
		m.SetMapIndex(reflect.ValueOf("key"), val)
		v.Set(m)
	default:
		t.Fatalf("fill: no value for kind %s (%s): teach fill and the fast codecs", v.Kind(), v.Type())
	}
}

// TestFastCodecsKnowEveryField: with every field set, the fast paths are
// taken and agree with encoding/json, so a field added to a wire type
// cannot be dropped by them unnoticed.
func TestFastCodecsKnowEveryField(t *testing.T) {
	var lr LeaseResults
	fill(t, reflect.ValueOf(&lr).Elem())
	var task Task
	fill(t, reflect.ValueOf(&task).Elem())
	if _, ok := appendTask(nil, &task); !ok {
		t.Fatalf("a full task is not on the fast path: %+v", task)
	}
	checkEncode(t, lr)
	checkEncode(t, ClaimResponse{Tasks: lr.Tasks})
	data, err := json.Marshal(lr)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := fastLeaseResults(data); !ok {
		t.Fatalf("full lease results are not on the fast path: %s", data)
	}
	checkDecode(t, data)

	var req CompleteRequest
	fill(t, reflect.ValueOf(&req).Elem())
	want, err := Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	got, err := AppendCompleteRequest(nil, &req)
	if err != nil || string(got) != string(want) {
		t.Fatalf("full complete request: wrote %s (%v), want %s", got, err, want)
	}
	if !checkCompleteRequest(t, want) {
		t.Fatalf("a full complete request is not on the fast path: %s", want)
	}

	// A run's members and failures are encoding/json's; every other
	// member is the fast encoder's.
	var run FlowRun
	fill(t, reflect.ValueOf(&run).Elem())
	run.Execs, run.Failures = nil, nil
	want, err = Marshal(run)
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := appendFlowRun(nil, &run); !ok || string(got) != string(want) {
		t.Fatalf("full flow run: wrote %s (fast path %v), want %s", got, ok, want)
	}
	checkDecode(t, want)
}
