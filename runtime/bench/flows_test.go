package bench

import "testing"

// TestScenarioFlowsCompile: the generated .ff sources of the flow
// scenarios compile into valid plans of the intended size.
func TestScenarioFlowsCompile(t *testing.T) {
	for _, tt := range []struct {
		name, src string
		execs     int
	}{
		{"chain", chainSource(10), 10},
		{"diamond", diamondSource(1000), 1002},
	} {
		f, err := compileFlow(tt.name, tt.src)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Validate(); err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if len(f.Execs) != tt.execs || f.Result == "" {
			t.Fatalf("%s: %d execs, result %q", tt.name, len(f.Execs), f.Result)
		}
	}
}
