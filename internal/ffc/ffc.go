// Package ffc implements the ffc command: check, plan, graph, gen and fmt
// for .ff files. cmd/ffc is a thin main around Run.
package ffc

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"go/build"
	"go/parser"
	"go/token"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"

	"github.com/flowfabric/ff/compiler"
	"github.com/flowfabric/ff/compiler/plan"
	"github.com/flowfabric/ff/dsl"
	"github.com/flowfabric/ff/gen"
)

// Exit statuses.
const (
	exitOK    = 0
	exitError = 1 // diagnostics with errors, or a failed operation
	exitUsage = 2 // bad command line
)

const usage = `ffc compiles .ff workflow files.

Usage:
  ffc check [-json] [-e] FILE|DIR...            report diagnostics
  ffc plan [-flow NAME] FILE|DIR...             print the compiled plan as JSON
  ffc graph [-format dot|mermaid] [-flow NAME] FILE|DIR...
                                                print flows as a graph
  ffc gen -o FILE.go [-package NAME] [-check] FILE|DIR...
                                                write typed Go code
  ffc fmt [-l] [-d] [-w] [FILE|DIR|DIR/...]...
                                                format .ff files (stdin without files)
  ffc version                                   print the version

A directory stands for the .ff files directly inside it; all inputs form
one package. fmt formats each file on its own, and takes DIR/... too: DIR
and every directory below it that holds .ff files (./... for all of them).
Run "ffc COMMAND -h" for the flags of a command.
`

// Run executes the ffc command line args (without the program name) and
// returns the process exit status.
func Run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "check":
		return runCheck(rest, stdout, stderr)
	case "plan":
		return runPlan(rest, stdout, stderr)
	case "graph":
		return runGraph(rest, stdout, stderr)
	case "gen":
		return runGen(rest, stdout, stderr)
	case "fmt":
		return runFmt(rest, stdin, stdout, stderr)
	case "version":
		fmt.Fprintf(stdout, "ffc %s (plan schema %d)\n", version(), plan.SchemaVersion)
		return exitOK
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return exitOK
	}
	fmt.Fprintf(stderr, "ffc: unknown command %q\n\n%s", cmd, usage)
	return exitUsage
}

func version() string {
	if info, ok := debug.ReadBuildInfo(); ok && info.Main.Version != "" {
		return info.Main.Version
	}
	return "(devel)"
}

// newFlags returns a flag set for a subcommand whose usage goes to stderr.
// Every subcommand has flags, so the usage always lists them.
func newFlags(name, synopsis string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("ffc "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: ffc %s %s\n\nflags:\n", name, synopsis)
		fs.PrintDefaults()
	}
	return fs
}

// parseFlags parses args and requires at least one path. It returns the
// exit status to use when parsing fails, or -1.
func parseFlags(fs *flag.FlagSet, args []string, stderr io.Writer) int {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if fs.NArg() == 0 {
		fmt.Fprintf(stderr, "%s: no input files\n", fs.Name())
		fs.Usage()
		return exitUsage
	}
	if misplacedFlag(fs, stderr) {
		return exitUsage
	}
	return -1
}

// misplacedFlag reports, with the usage, an argument after the first file
// that starts with "-" and names no file: a flag given after the files,
// which package flag leaves among them (ffc gen flows.ff -package x). It
// returns whether there was one.
func misplacedFlag(fs *flag.FlagSet, stderr io.Writer) bool {
	for _, a := range fs.Args() {
		if len(a) < 2 || a[0] != '-' {
			continue
		}
		if _, err := os.Lstat(a); err == nil {
			continue
		}
		fmt.Fprintf(stderr, "%s: %s after the files is not a file: flags go before the files\n", fs.Name(), a)
		fs.Usage()
		return true
	}
	return false
}

// compile compiles the paths and prints diagnostics as text to stderr
// (printDiagnostics). It returns nil when there are errors.
func compile(paths []string, stderr io.Writer) *plan.Package {
	pkg, diags := compiler.CompileFiles(paths...)
	printDiagnostics(stderr, diags, false)
	if diags.HasErrors() {
		return nil
	}
	return pkg
}

// printDiagnostics writes diags, sorted by the caller, to w as text (one
// per line, related positions under it): all of them when all is set,
// else the first dsl.DiagnosticsShownMax, then a line saying how many
// errors and warnings were left out. It ignores write errors, as there is
// nowhere left to report them.
func printDiagnostics(w io.Writer, diags dsl.Diagnostics, all bool) {
	if all {
		_ = diags.Format(w)
		return
	}
	_ = diags.FormatCapped(w, dsl.DiagnosticsShownMax, "ffc", "ffc check -e prints every one")
}

func runCheck(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("check", "[-json] [-e] FILE|DIR...", stderr)
	asJSON := fs.Bool("json", false, "print diagnostics as one JSON object on stdout")
	all := fs.Bool("e", false, fmt.Sprintf("print every diagnostic, not only the first %d (-json prints all)", dsl.DiagnosticsShownMax))
	if code := parseFlags(fs, args, stderr); code >= 0 {
		return code
	}
	_, diags := compiler.CompileFiles(fs.Args()...)
	if *asJSON {
		errs, warns := diags.Count()
		out := struct {
			Version     int             `json:"version"`
			Valid       bool            `json:"valid"`
			Errors      int             `json:"errors"`
			Warnings    int             `json:"warnings"`
			Diagnostics dsl.Diagnostics `json:"diagnostics"`
		}{Version: 1, Valid: errs == 0, Errors: errs, Warnings: warns, Diagnostics: diags}
		if out.Diagnostics == nil {
			out.Diagnostics = dsl.Diagnostics{}
		}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false)
		if err := enc.Encode(out); err != nil {
			fmt.Fprintf(stderr, "ffc check: %v\n", err)
			return exitError
		}
	} else {
		printDiagnostics(stderr, diags, *all)
	}
	if diags.HasErrors() {
		return exitError
	}
	return exitOK
}

// selectFlows returns the flows of pkg, or only the named one.
func selectFlows(pkg *plan.Package, name string, stderr io.Writer) ([]plan.Flow, bool) {
	if name == "" {
		return pkg.Flows, true
	}
	var names []string
	for _, f := range pkg.Flows {
		if f.Name == name {
			return []plan.Flow{f}, true
		}
		names = append(names, f.Name)
	}
	msg := fmt.Sprintf("no flow %q in the package", name)
	if s := dsl.Suggest(name, names); s != "" {
		msg += fmt.Sprintf("; did you mean %q?", s)
	} else if len(names) > 0 {
		msg += " (flows: " + strings.Join(names, ", ") + ")"
	}
	fmt.Fprintln(stderr, "ffc: "+msg)
	return nil, false
}

func runPlan(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("plan", "[-flow NAME] FILE|DIR...", stderr)
	flowName := fs.String("flow", "", "print only the plan of this flow (a self-contained flow plan)")
	if code := parseFlags(fs, args, stderr); code >= 0 {
		return code
	}
	pkg := compile(fs.Args(), stderr)
	if pkg == nil {
		return exitError
	}
	var v any = pkg
	if *flowName != "" {
		flows, ok := selectFlows(pkg, *flowName, stderr)
		if !ok {
			return exitError
		}
		v = flows[0]
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		fmt.Fprintf(stderr, "ffc plan: %v\n", err)
		return exitError
	}
	b = append(b, '\n')
	if _, err := stdout.Write(b); err != nil {
		fmt.Fprintf(stderr, "ffc plan: %v\n", err)
		return exitError
	}
	return exitOK
}

func runGraph(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("graph", "[-format dot|mermaid] [-flow NAME] FILE|DIR...", stderr)
	format := fs.String("format", "dot", "output format: dot (Graphviz) or mermaid")
	flowName := fs.String("flow", "", "draw only this flow")
	if code := parseFlags(fs, args, stderr); code >= 0 {
		return code
	}
	if *format != "dot" && *format != "mermaid" {
		fmt.Fprintf(stderr, "ffc graph: unknown format %q: use dot or mermaid\n", *format)
		return exitUsage
	}
	pkg := compile(fs.Args(), stderr)
	if pkg == nil {
		return exitError
	}
	flows, ok := selectFlows(pkg, *flowName, stderr)
	if !ok {
		return exitError
	}
	var err error
	if *format == "dot" {
		err = writeDOT(stdout, flows)
	} else {
		err = writeMermaid(stdout, flows)
	}
	if err != nil {
		fmt.Fprintf(stderr, "ffc graph: %v\n", err)
		return exitError
	}
	return exitOK
}

func runGen(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("gen", "-o FILE.go [-package NAME] [-check] FILE|DIR...", stderr)
	out := fs.String("o", "", "output file (required)")
	pkgName := fs.String("package", "", "Go package name (default: the package of the Go files in the output directory, else the .ff package clause, else the output directory's name)")
	check := fs.Bool("check", false, "do not write; fail if FILE.go is not up to date")
	if code := parseFlags(fs, args, stderr); code >= 0 {
		return code
	}
	if *out == "" {
		fmt.Fprintln(stderr, "ffc gen: -o FILE.go is required")
		fs.Usage()
		return exitUsage
	}
	if !strings.HasSuffix(*out, ".go") {
		// The go tool ignores any other file: the generated code would
		// silently not be built.
		fmt.Fprintf(stderr, "ffc gen: -o %s: the output must be a .go file\n", *out)
		return exitUsage
	}
	if why := ignoredByGoTool(filepath.Base(*out)); why != "" {
		fmt.Fprintf(stderr, "ffc gen: -o %s: the go tool would not build it in the package: %s\n", *out, why)
		return exitUsage
	}
	if *pkgName != "" && !isPackageName(*pkgName) {
		fmt.Fprintf(stderr, "ffc gen: -package %q is not a valid Go package name\n", *pkgName)
		return exitUsage
	}
	pkg := compile(fs.Args(), stderr)
	if pkg == nil {
		return exitError
	}
	dirPkg, err := outputDirPackage(*out)
	if err != nil {
		fmt.Fprintf(stderr, "ffc gen: %v\n", err)
		return exitUsage
	}
	name := *pkgName
	switch {
	case dirPkg != "" && name != "" && name != dirPkg:
		fmt.Fprintf(stderr, "ffc gen: -package %s, but the Go files in the directory of %s are of package %s: a directory holds one package; pass -package %s, or write the output to a directory of its own\n",
			name, *out, dirPkg, dirPkg)
		return exitUsage
	case dirPkg != "" && name == "" && pkg.Package != "" && pkg.Package != dirPkg:
		fmt.Fprintf(stderr, "ffc gen: the .ff files declare package %s, but the Go files in the directory of %s are of package %s: a directory holds one package; pass -package %s, or write the output to a directory of its own\n",
			pkg.Package, *out, dirPkg, dirPkg)
		return exitUsage
	case name == "" && dirPkg != "":
		name = dirPkg
	case name == "" && pkg.Package == "":
		name = defaultPackage(*out)
		if !isPackageName(name) {
			fmt.Fprintf(stderr, "ffc gen: the output directory of %s gives the package name %q, which Go does not allow: pass -package NAME or declare `package NAME` in the .ff files\n", *out, name)
			return exitUsage
		}
	}
	src, err := gen.Generate(pkg, gen.Options{Package: name})
	if err != nil {
		fmt.Fprintf(stderr, "ffc gen: %v\n", err)
		return exitError
	}
	if *check {
		old, err := os.ReadFile(*out)
		if err != nil {
			fmt.Fprintf(stderr, "ffc gen: %s is missing: run ffc gen without -check (%v)\n", *out, err)
			return exitError
		}
		if !bytes.Equal(old, src) {
			fmt.Fprintf(stderr, "ffc gen: %s is out of date: run ffc gen without -check\n", *out)
			return exitError
		}
		return exitOK
	}
	if err := writeFileAtomic(*out, src, 0o644); err != nil {
		fmt.Fprintf(stderr, "ffc gen: %v\n", err)
		return exitError
	}
	return exitOK
}

// outputDirPackage returns the package of the Go files already in the
// output file's directory, which the generated file must join: that of
// the files the go tool builds there (the output itself and test files
// left out; only their package clauses are read), else, under go generate
// run in that directory, $GOPACKAGE. It returns "" when neither says.
func outputDirPackage(out string) (string, error) {
	abs, err := filepath.Abs(out)
	if err != nil {
		return "", fmt.Errorf("-o %s: %w", out, err)
	}
	dir := filepath.Dir(abs)
	entries, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("-o %s: reading its directory: %w", out, err)
	}
	found := map[string][]string{} // package -> files
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || name == filepath.Base(abs) || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		if ok, err := build.Default.MatchFile(dir, name); err != nil || !ok {
			continue // not built here (build constraints), or unreadable: the go tool says why
		}
		f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(dir, name), nil, parser.PackageClauseOnly)
		if err != nil {
			continue // the go tool reports its syntax error
		}
		found[f.Name.Name] = append(found[f.Name.Name], name)
	}
	switch len(found) {
	case 0:
	case 1:
		for p := range found {
			return p, nil
		}
	default:
		var list []string
		for _, p := range slices.Sorted(maps.Keys(found)) {
			list = append(list, fmt.Sprintf("%s (%s)", p, strings.Join(found[p], ", ")))
		}
		return "", fmt.Errorf("-o %s: the Go files of its directory are of several packages, %s: the go tool builds one package per directory; fix them first", out, strings.Join(list, " and "))
	}
	if p := strings.TrimSuffix(os.Getenv("GOPACKAGE"), "_test"); p != "" {
		if wd, err := os.Getwd(); err == nil && wd == dir {
			return p, nil
		}
	}
	return "", nil
}

// defaultPackage derives a Go package name from the output file's
// directory: its letters, digits and "_", lower-cased, without leading
// digits; "flows" if nothing is left.
func defaultPackage(out string) string {
	abs, err := filepath.Abs(out)
	if err != nil {
		return "flows"
	}
	base := filepath.Base(filepath.Dir(abs))
	var b strings.Builder
	for _, r := range base {
		switch {
		case r == '_' || 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z':
			b.WriteRune(r)
		case '0' <= r && r <= '9' && b.Len() > 0: // a name cannot start with a digit
			b.WriteRune(r)
		}
	}
	if b.Len() == 0 {
		return "flows"
	}
	return strings.ToLower(b.String())
}

// isPackageName reports whether s can name a Go package: an identifier
// that is neither a keyword nor "_".
func isPackageName(s string) bool { return token.IsIdentifier(s) && s != "_" }

// ignoredByGoTool says why the go tool leaves a .go file named base out of
// a package's build, or returns "": names starting with "." or "_", test
// files, and names whose part before the first "." ends in _GOOS, _GOARCH
// or _GOOS_GOARCH, a _test after them aside (flows_linux.go,
// flows_windows.ff.go: built only for that system), as package go/build
// decides.
func ignoredByGoTool(base string) string {
	switch {
	case strings.HasPrefix(base, ".") || strings.HasPrefix(base, "_"):
		return "its name starts with \".\" or \"_\""
	case strings.HasSuffix(base, "_test.go"):
		return "it is a test file (_test.go)"
	}
	stem, _, _ := strings.Cut(base, ".")
	i := strings.IndexByte(stem, '_')
	if i < 0 {
		return ""
	}
	parts := strings.Split(stem[i:], "_")
	if n := len(parts); parts[n-1] == "test" {
		parts = parts[:n-1]
	}
	n := len(parts)
	if n >= 2 && knownOS(parts[n-2]) && knownArch(parts[n-1]) {
		return fmt.Sprintf("it is built only for GOOS=%s GOARCH=%s", parts[n-2], parts[n-1])
	}
	switch last := parts[n-1]; {
	case knownOS(last):
		return "it is built only for GOOS=" + last
	case knownArch(last):
		return "it is built only for GOARCH=" + last
	}
	return ""
}

// knownOS and knownArch report the GOOS and GOARCH values that constrain
// a file by its name (the lists of go/build, unexported there).
func knownOS(s string) bool {
	switch s {
	case "aix", "android", "darwin", "dragonfly", "freebsd", "hurd", "illumos", "ios", "js", "linux", "nacl",
		"netbsd", "openbsd", "plan9", "solaris", "wasip1", "windows", "zos":
		return true
	}
	return false
}

func knownArch(s string) bool {
	switch s {
	case "386", "amd64", "amd64p32", "arm", "armbe", "arm64", "arm64be", "loong64", "mips", "mipsle", "mips64",
		"mips64le", "mips64p32", "mips64p32le", "ppc", "ppc64", "ppc64le", "riscv", "riscv64", "s390", "s390x", "sparc",
		"sparc64", "wasm":
		return true
	}
	return false
}

// writeFileAtomic writes data to a temporary file next to path and renames
// it into place, so readers never see a partial file, with the permissions
// of the file it replaces, or perm for a new file. When path is a
// symbolic link, the file at the end of its links is replaced so (created,
// for a dangling link) and the links are kept.
func writeFileAtomic(path string, data []byte, perm os.FileMode) error {
	name := path
	path, err := followLinks(path)
	if err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	if info, err := os.Stat(path); err == nil && info.Mode().IsRegular() {
		perm = info.Mode().Perm() // the file's own, as an editor keeps it
	}
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, dirProblem(dir, err))
	}
	defer os.Remove(tmp.Name()) // no-op after a successful rename
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Chmod(perm); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// dirProblem explains err, the failure to create a temporary file in dir,
// by dir rather than by the temporary file's name, which the user never
// chose: dir missing, not a directory, or the system's reason.
func dirProblem(dir string, err error) error {
	info, serr := os.Stat(dir)
	switch {
	case errors.Is(serr, fs.ErrNotExist):
		return fmt.Errorf("the directory %s does not exist (ffc gen does not create it)", dir)
	case serr == nil && !info.IsDir():
		return fmt.Errorf("%s is not a directory", dir)
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("cannot create a file in %s: %w", dir, pe.Err)
	}
	return err
}

// linksFollowedMax bounds how many symbolic links followLinks follows,
// as Linux does before it gives up with ELOOP.
const linksFollowedMax = 40

// followLinks returns the file path leads to: path itself when it is not
// a symbolic link or does not exist, else the file at the end of its
// links, which need not exist (a dangling link). A relative link is
// resolved against the real directory of the link, as the system does,
// not against the path as written (`..` after a linked directory).
func followLinks(path string) (string, error) {
	for range linksFollowedMax {
		info, err := os.Lstat(path)
		if errors.Is(err, fs.ErrNotExist) {
			return path, nil
		}
		if err != nil {
			return "", err
		}
		if info.Mode()&os.ModeSymlink == 0 {
			return path, nil
		}
		to, err := os.Readlink(path)
		if err != nil {
			return "", err
		}
		if !filepath.IsAbs(to) {
			dir, err := filepath.EvalSymlinks(filepath.Dir(path))
			if err != nil {
				return "", err
			}
			to = filepath.Join(dir, to)
		}
		path = to
	}
	return "", fmt.Errorf("more than %d symbolic links to follow", linksFollowedMax)
}
