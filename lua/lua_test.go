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
	if !strings.HasPrefix(Source(), "#!lua name="+LibraryName+"\n") {
		t.Fatalf("source does not start with the library header")
	}
	if len(Version()) != 16 || !strings.Contains(Source(), "'"+Version()+"'") {
		t.Fatalf("version %q not embedded in the source", Version())
	}
}
