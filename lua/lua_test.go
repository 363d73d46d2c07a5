package lua

import (
	"io/fs"
	"slices"
	"strings"
	"testing"
)

func TestEveryFileIsLoaded(t *testing.T) {
	names, err := fs.Glob(fsys, "*.lua")
	if err != nil {
		t.Fatal(err)
	}
	got := Files()
	slices.Sort(names)
	slices.Sort(got)
	if !slices.Equal(names, got) {
		t.Fatalf("embedded files %v, load list %v: add new .lua files to files in lua.go", names, got)
	}
}

// Loading on a real server is tested by runtime/store (TestLibraryLoads),
// where the test harness lives.

func TestHeader(t *testing.T) {
	if !strings.HasPrefix(Source(), "#!lua name="+LibraryFamily+Version()+"\n") || Library() != LibraryFamily+Version() {
		t.Fatalf("source does not start with the library header naming %s", Library())
	}
	if len(Version()) != 16 || !strings.Contains(Source(), "'"+Version()+"'") {
		t.Fatalf("version %q not embedded in the source", Version())
	}
}

// TestFunctionNames: every registration is found, so Function names each
// one as the library registers it.
func TestFunctionNames(t *testing.T) {
	calls := strings.Count(Source(), "\nregister(")
	if calls < 30 || len(functions) != calls {
		t.Fatalf("%d registrations found by the pattern, %d register( calls at line start", len(functions), calls)
	}
	if got, want := Function("ff_claim"), "ff_claim_"+Version(); got != want {
		t.Fatalf("Function(ff_claim) = %q, want %q", got, want)
	}
	if got := Function("ff_version"); got != "ff_version_"+Version() {
		t.Fatalf("Function(ff_version) = %q", got)
	}
	if n := strings.Count(Source(), "register("); n != calls+1 { // the definition in lib.lua
		t.Fatalf("%d register( in the source, %d at line start: a registration the pattern misses?", n, calls)
	}
}
