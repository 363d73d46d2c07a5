package ffrun_test

import (
	"os"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/flowfabric/ff/runtime/ffrun"
)

func TestMain(m *testing.M) {
	// TestSignalStopsDevChild re-runs this binary as ffrun.
	if os.Getenv("FFRUN_AS_MAIN") == "1" {
		os.Exit(ffrun.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	}
	testscript.Main(m, map[string]func(){
		"ffrun": func() { os.Exit(ffrun.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) },
	})
}

// TestScripts runs the command-line scripts in testdata/script.
func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{Dir: "testdata/script"})
}
