package ffc

import (
	"os"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
)

// TestMain lets the test binary run as the ffc command inside scripts.
func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"ffc": func() { os.Exit(Run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) },
	})
}

// TestScript runs the testdata/script/*.txtar command scripts. Run with
// -update to rewrite the expected outputs in the scripts.
func TestScript(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir:           "testdata/script",
		UpdateScripts: *update,
	})
}
