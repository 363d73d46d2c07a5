package ffc

import (
	"strings"
	"testing"

	"github.com/flowfabric/ff/dsl"
	"github.com/google/go-cmp/cmp"
)

// TestPrintDiagnosticsCap: up to dsl.DiagnosticsShownMax diagnostics print
// as they are; past it, the first dsl.DiagnosticsShownMax and a line counting
// the errors and warnings left out; with all set, every one.
func TestPrintDiagnosticsCap(t *testing.T) {
	// diags returns errors and then warnings, one per line.
	diags := func(errs, warns int) dsl.Diagnostics {
		var ds dsl.Diagnostics
		for i := range errs + warns {
			p := dsl.Position{File: "a.ff", Line: i + 1, Col: 1, Offset: i}
			if i < errs {
				ds.Errorf(dsl.Range{Start: p, End: p}, dsl.CodeBadChar, "e")
			} else {
				ds.Warnf(dsl.Range{Start: p, End: p}, dsl.CodeUnreachable, "w")
			}
		}
		return ds
	}
	tests := []struct {
		name        string
		errs, warns int
		all         bool
		lines       int    // diagnostics printed
		last        string // the last line printed
	}{
		{"at the cap", dsl.DiagnosticsShownMax, 0, false, dsl.DiagnosticsShownMax, "a.ff:20:1: error: e"},
		{"one error more", dsl.DiagnosticsShownMax + 1, 0, false, dsl.DiagnosticsShownMax,
			"ffc: too many diagnostics: 1 more error not shown (ffc check -e prints every one)"},
		{"errors and warnings more", dsl.DiagnosticsShownMax + 2, 3, false, dsl.DiagnosticsShownMax,
			"ffc: too many diagnostics: 2 more errors and 3 more warnings not shown (ffc check -e prints every one)"},
		{"warnings more", dsl.DiagnosticsShownMax - 1, 5, false, dsl.DiagnosticsShownMax,
			"ffc: too many diagnostics: 4 more warnings not shown (ffc check -e prints every one)"},
		{"all", 100, 1, true, 101, "a.ff:101:1: warning: w"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b strings.Builder
			printDiagnostics(&b, diags(tt.errs, tt.warns), tt.all)
			lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
			n := len(lines)
			if strings.HasPrefix(lines[n-1], "ffc: ") {
				n--
			}
			if n != tt.lines {
				t.Errorf("%d diagnostics printed, want %d:\n%s", n, tt.lines, b.String())
			}
			if diff := cmp.Diff(tt.last, lines[len(lines)-1]); diff != "" {
				t.Errorf("last line (-want +got):\n%s", diff)
			}
		})
	}
}
