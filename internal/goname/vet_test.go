package goname

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// vetCandidates are the method names go vet's stdmethods check knows (and
// Peek, which some versions of it knew), reserved or not.
var vetCandidates = []string{
	"As", "Format", "GobDecode", "GobEncode", "Is", "MarshalJSON", "MarshalXML",
	"Peek", "ReadByte", "ReadFrom", "ReadRune", "Scan", "Seek", "UnmarshalJSON",
	"UnmarshalXML", "UnreadByte", "UnreadRune", "Unwrap", "WriteByte", "WriteTo",
}

// TestVetMethodAgreesWithGoVet runs the toolchain's go vet on interfaces
// with a method of each name vet's stdmethods check knows, in the shapes
// of the methods of a <Flow>Handlers interface (context first, then the
// input and the upstream struct, returning an output and an error, or an
// error only), and checks that VetMethod reports exactly the names vet
// rejects.
func TestVetMethodAgreesWithGoVet(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to run go vet: %v", err)
	}
	var src strings.Builder
	src.WriteString("package vetnames\n\nimport \"context\"\n\ntype Doc struct{}\n\ntype Up struct{ A *Doc }\n\n")
	shapes := []string{
		"(ctx context.Context) error",
		"(ctx context.Context, in Doc) error",
		"(ctx context.Context) (Doc, error)",
		"(ctx context.Context, in Doc, up Up) (Doc, error)",
	}
	for i, shape := range shapes {
		fmt.Fprintf(&src, "type H%d interface {\n", i)
		for _, name := range vetCandidates {
			fmt.Fprintf(&src, "\t%s%s\n", name, shape)
		}
		src.WriteString("}\n\n")
	}
	dir := t.TempDir()
	for name, data := range map[string]string{"go.mod": "module vetnames\n\ngo 1.22\n", "vetnames.go": src.String()} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(goBin, "vet", "-stdmethods", ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=", "GOWORK=off")
	out, _ := cmd.CombinedOutput()
	rejected := map[string]int{}
	for _, m := range regexp.MustCompile(`method (\w+)\(`).FindAllStringSubmatch(string(out), -1) {
		rejected[m[1]]++
	}
	if len(rejected) == 0 {
		t.Fatalf("go vet rejected no method; did it run?\n%s", out)
	}
	for _, name := range vetCandidates {
		_, reserved := VetMethod(name)
		switch n := rejected[name]; {
		case reserved && n != len(shapes):
			t.Errorf("VetMethod reserves %s, but go vet rejects it in %d of %d shapes", name, n, len(shapes))
		case !reserved && n > 0:
			t.Errorf("go vet rejects %s in %d of %d shapes, but VetMethod does not reserve it", name, n, len(shapes))
		}
	}
	for name := range vetMethods {
		if !slices.Contains(vetCandidates, name) {
			t.Errorf("VetMethod reserves %s, which go vet does not know", name)
		}
	}
}
