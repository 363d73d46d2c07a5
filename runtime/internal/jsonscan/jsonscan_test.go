package jsonscan

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func TestMember(t *testing.T) {
	tests := []struct {
		body string
		want string // the plan's text; "" when not found
	}{
		{`{"plan": {"a": 1}}`, `{"a": 1}`},
		{` { "plan" :{"a":"}\"{"} , "input": 1}`, `{"a":"}\"{"}`},
		{`{"input": {"plan": [1, "]"]}, "namespace": "n", "idempotency_key": "\"plan\"", "plan": [{}], "x": 1}`, `[{}]`},
		{`{"input": 1.5e3, "plan": null}`, `null`},
		{`{"input": true,"plan":{"a":[{"b":"\\"}]}}`, `{"a":[{"b":"\\"}]}`},
		{`{"Plan": {}}`, ""},
		{`{"pl\u0061n": {}}`, ""},
		{`{"plan": {"a": 1}`, `{"a": 1}`}, // not JSON: the caller's decoding refuses it
		{`{"plan": {"a": 1`, ""},
		{`{"plan": "x`, ""},
		{`{"input": 1`, ""},
		{`{"input"`, ""},
		{`{"input" 1}`, ""},
		{`[{"plan": {}}]`, ""},
		{``, ""},
	}
	for _, tt := range tests {
		start, end, ok := Member([]byte(tt.body), "plan")
		got := ""
		if ok {
			got = tt.body[start:end]
		}
		if got != tt.want || ok != (tt.want != "") {
			t.Errorf("Member(%s, plan) = %q %v, want %q", tt.body, got, ok, tt.want)
		}
	}
}

// FuzzMember: Member never panics, and on a valid JSON object whose keys
// are distinct it finds exactly the value the decoder finds.
func FuzzMember(f *testing.F) {
	for _, s := range []string{
		`{"plan": {"a": 1}}`, `{"input": [1, "]", {"plan": 2}], "plan": "x\"}"}`, `{"a": 1e5, "plan": true}`,
		`{"plan"`, `{"plan": `, `{}`, `[]`, `{"\u0070lan": 1}`, `{"a":{"b":[[]]},"plan":{}}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data string) {
		start, end, ok := Member([]byte(data), "plan")
		if !ok {
			return
		}
		if start < 0 || end < start || end > len(data) {
			t.Fatalf("span %d:%d of %d bytes", start, end, len(data))
		}
		var members map[string]json.RawMessage
		if json.Unmarshal([]byte(data), &members) != nil {
			return
		}
		var keys []string
		dec := json.NewDecoder(strings.NewReader(data))
		if _, err := dec.Token(); err != nil {
			return
		}
		for dec.More() {
			k, err := dec.Token()
			if err != nil {
				return
			}
			keys = append(keys, k.(string))
			var skip json.RawMessage
			if dec.Decode(&skip) != nil {
				return
			}
		}
		if len(keys) != len(members) {
			return // a key repeats
		}
		want, found := members["plan"]
		if !found || !bytes.Equal(want, []byte(data[start:end])) {
			t.Fatalf("Member(%q) = %q, the decoder has %q (found %v)", data, data[start:end], want, found)
		}
	})
}

func TestLineCol(t *testing.T) {
	for _, tc := range []struct {
		data      string
		off       int64
		line, col int
	}{
		{"", 0, 1, 0},
		{"{nope", 2, 1, 2},
		{"{\n  \"a\": x", 10, 2, 8},
		{"{\"é\": ?", 7, 1, 6}, // é is two bytes, one character
		{"[1,\n2,\n", 99, 3, 0},
		{"x", -1, 1, 0},
	} {
		line, col := LineCol([]byte(tc.data), tc.off)
		if line != tc.line || col != tc.col {
			t.Errorf("LineCol(%q, %d) = %d:%d, want %d:%d", tc.data, tc.off, line, col, tc.line, tc.col)
		}
	}
	// As encoding/json reports it: the offset of the bad byte, counted.
	data := []byte("{\n  \"a\": 1,\n  \"b\": nope\n}")
	var v any
	se, ok := json.Unmarshal(data, &v).(*json.SyntaxError)
	if !ok {
		t.Fatal("want a syntax error")
	}
	if line, col := LineCol(data, se.Offset); line != 3 || col != 9 {
		t.Errorf("at %d:%d, want 3:9 (the o of nope, where a null goes wrong)", line, col)
	}
}
