package ffc

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/flowfabric/ff/compiler"
	"github.com/flowfabric/ff/dsl"
)

// runFmt formats .ff files (dsl.Format): to stdout, or in place with -w;
// -l and -d report the files that are not formatted, for CI. Without
// paths it formats standard input to standard output (for editors).
func runFmt(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := newFlags("fmt", "[-l] [-d] [-w] [FILE|DIR|DIR/...]...", stderr)
	list := fs.Bool("l", false, "list the files whose formatting differs (exit 1 if any, unless -w)")
	diff := fs.Bool("d", false, "print the changes formatting makes as a unified diff (exit 1 if any, unless -w)")
	write := fs.Bool("w", false, "rewrite the files that are not formatted, in place")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if misplacedFlag(fs, stderr) {
		return exitUsage
	}
	if fs.NArg() == 0 {
		if *write || *list {
			fmt.Fprintln(stderr, "ffc fmt: -w and -l need files: standard input is formatted to standard output")
			return exitUsage
		}
		src, err := io.ReadAll(stdin)
		if err != nil {
			fmt.Fprintf(stderr, "ffc fmt: read standard input: %v\n", err)
			return exitError
		}
		o := fmtOne("<stdin>", src, stdout, stderr, fmtMode{diff: *diff, print: !*diff})
		if o == fmtFailed || o == fmtChanged && *diff {
			return exitError
		}
		return exitOK
	}
	paths, err := expandTrees(fs.Args())
	if err != nil {
		fmt.Fprintf(stderr, "ffc fmt: %v\n", err)
		return exitError
	}
	srcs, diags := compiler.ReadSources(paths...)
	printDiagnostics(stderr, diags, false)
	failed := diags.HasErrors()
	changed := false
	mode := fmtMode{list: *list, diff: *diff, write: *write, print: !*list && !*diff && !*write}
	for _, src := range srcs {
		switch fmtOne(src.Name, src.Data, stdout, stderr, mode) {
		case fmtFailed:
			failed = true
		case fmtChanged:
			changed = true
		}
	}
	if failed || changed && (*list || *diff) && !*write {
		return exitError
	}
	return exitOK
}

// expandTrees replaces each path of the form DIR/... (the go tool's
// pattern; ./... for the current directory) by DIR and every directory
// below it that holds .ff files, in walk order, leaving out directories
// the go tool leaves out (names starting with "." or "_", and testdata,
// where files are often unformatted on purpose). A tree without .ff files
// is an error. Other paths are kept as they are.
func expandTrees(paths []string) ([]string, error) {
	var out []string
	for _, p := range paths {
		root, ok := strings.CutSuffix(p, "/...")
		if !ok && p != "..." {
			out = append(out, p)
			continue
		}
		switch {
		case !ok:
			root = "." // "..."
		case root == "":
			root = "/" // "/..."
		}
		n := len(out)
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if !d.IsDir() {
				return nil
			}
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata") {
				return filepath.SkipDir
			}
			ff, err := filepath.Glob(filepath.Join(path, "*.ff"))
			if err != nil {
				return err
			}
			for _, f := range ff {
				if base := filepath.Base(f); !strings.HasPrefix(base, ".") && !strings.HasPrefix(base, "_") {
					out = append(out, path)
					break
				}
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		if len(out) == n {
			return nil, fmt.Errorf("%s: no .ff files in %s or below it", p, root)
		}
	}
	return out, nil
}

// fmtMode says what fmtOne does with a file.
type fmtMode struct {
	list  bool // print its name when formatting changes it
	diff  bool // print the change
	write bool // rewrite it when formatting changes it
	print bool // print the formatted source
}

type fmtOutcome int

const (
	fmtUnchanged fmtOutcome = iota
	fmtChanged
	fmtFailed
)

// fmtOne formats src (named name) as mode says, printing diagnostics to
// stderr. A file with errors is left as it is.
func fmtOne(name string, src []byte, stdout, stderr io.Writer, mode fmtMode) fmtOutcome {
	out, diags := dsl.Format(name, src)
	if diags.HasErrors() {
		diags.Sort()
		printDiagnostics(stderr, diags, false)
		return fmtFailed
	}
	if mode.print {
		if _, err := stdout.Write(out); err != nil {
			fmt.Fprintf(stderr, "ffc fmt: %v\n", err)
			return fmtFailed
		}
	}
	if bytes.Equal(out, src) {
		return fmtUnchanged
	}
	if mode.list {
		fmt.Fprintln(stdout, name)
	}
	if mode.diff {
		fmt.Fprint(stdout, unifiedDiff(name, src, out))
	}
	if mode.write {
		// In place, as gofmt does: through a link to the file it points
		// to, keeping the file's owner, permissions and hard links, and
		// refused for a file the user may not write (a rename over it
		// would need only the directory to be writable).
		f, err := os.OpenFile(name, os.O_WRONLY|os.O_TRUNC, 0)
		if err == nil {
			_, err = f.Write(out)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
		}
		if err != nil {
			fmt.Fprintf(stderr, "ffc fmt: %v\n", err)
			return fmtFailed
		}
	}
	return fmtChanged
}
