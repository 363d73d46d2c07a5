package wire_test

import (
	"bytes"
	"encoding/json"
	"os"
	"regexp"
	"testing"

	"github.com/flowfabric/ff/runtime/flowinput"
	"github.com/flowfabric/ff/runtime/wire"
)

// TestSpecExamples decodes every JSON example of spec/api.md strictly (no
// unknown fields) into one of the wire types, so the reference cannot
// drift from the code.
func TestSpecExamples(t *testing.T) {
	data, err := os.ReadFile("../../spec/api.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```json\n(.*?)```").FindAllSubmatch(data, -1)
	if len(blocks) < 5 {
		t.Fatalf("found %d JSON examples in spec/api.md, want at least 5", len(blocks))
	}
	types := map[string]func() any{
		"ErrorEnvelope":   func() any { return new(wire.ErrorEnvelope) },
		"CreateExecution": func() any { return new(wire.CreateExecution) },
		"Execution":       func() any { return new(wire.Execution) },
		"ClaimRequest":    func() any { return new(wire.ClaimRequest) },
		"CompleteRequest": func() any { return new(wire.CompleteRequest) },
		"Task":            func() any { return new(wire.Task) },
		"StageFlow":       func() any { return new(wire.StageFlow) },
		"FlowRun":         func() any { return new(wire.FlowRun) },
		"Template":        func() any { return new(wire.Template) },
	}
	for i, b := range blocks {
		var matched []string
		for name, mk := range types {
			dec := json.NewDecoder(bytes.NewReader(b[1]))
			dec.DisallowUnknownFields()
			if dec.Decode(mk()) == nil {
				matched = append(matched, name)
			}
		}
		if len(matched) == 0 {
			t.Errorf("example %d of spec/api.md decodes strictly into no wire type:\n%s", i+1, b[1])
		}
		// A staging example must be one the server accepts.
		var sf wire.StageFlow
		dec := json.NewDecoder(bytes.NewReader(b[1]))
		dec.DisallowUnknownFields()
		if dec.Decode(&sf) == nil && sf.Plan != nil {
			if err := sf.Plan.Validate(); err != nil {
				t.Errorf("example %d of spec/api.md: the plan does not validate: %v", i+1, err)
			}
			if err := flowinput.Flow(sf.Plan, "input", sf.Input); err != nil {
				t.Errorf("example %d of spec/api.md: the input does not match the plan: %v", i+1, err)
			}
		}
	}
}
