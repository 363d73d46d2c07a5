package ffctl_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/flowfabric/ff/compiler"
	"github.com/flowfabric/ff/dsl"
	"github.com/flowfabric/ff/runtime/ffctl"
	"github.com/flowfabric/ff/runtime/wire"
)

// Flags may come before the run subcommand of ffrun schedules, as before
// any operand (it was recognised only as the very first argument).
func TestSchedulesRunFlagsFirst(t *testing.T) {
	t.Parallel()
	e := start(t, false)
	if _, _, err := e.srv.Client.PutSchedule(context.Background(), "yearly", wire.PutSchedule{Template: "greet", Cron: "0 5 1 1 *",
		Input: json.RawMessage(`{"who":"team"}`)}); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"--json", "run", "yearly"},
		{"--server", e.srv.URL, "run", "yearly"},
	} {
		r := e.run("", "schedules", args...)
		started := strings.Contains(r.stdout, `"schedule_manual": true`) || strings.HasPrefix(r.stdout, "run ")
		if r.code != 0 || !started {
			t.Errorf("ffrun schedules %s = exit %d, stdout %q, stderr %q; want the run started, as with the flags after run",
				strings.Join(args, " "), r.code, r.stdout, r.stderr)
		}
	}
}

// ffrun templates --json prints the API's answer, {"templates": [...]}, as
// every other listing command prints its route's object (it printed a
// bare array).
func TestTemplatesJSONIsTheAPIAnswer(t *testing.T) {
	t.Parallel()
	e := start(t, false)
	r := e.run("", "templates", "--json")
	var got wire.TemplateList
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &got) != nil || len(got.Templates) != 2 {
		t.Fatalf("ffrun templates --json = exit %d:\n%s\nwant the API's answer, {\"templates\": [...]} with greet and wide", r.code, r.stdout)
	}
}

// TestInputJSONPosition: an --input that is not JSON was refused with the
// start of its text only; in a file or on standard input the mistake could
// be anywhere. The error now gives its line and column (encoding/json's
// offset), in the text as given, and names the file.
func TestInputJSONPosition(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "in.json")
	if err := os.WriteFile(file, []byte("\n{\n  \"who\": \"ada\"\n  \"x\": 1\n}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		stdin string
		args  []string
		want  string
	}{
		{"", []string{"--input", `{"who": x}`},
			"ffrun start: usage: --input is not valid JSON: line 1, column 9: invalid character 'x' looking for beginning of value\n"},
		{"{\n  \"who\": \"ada\",\n}", []string{"--input", "-"},
			"ffrun start: usage: --input - is not valid JSON: line 3, column 1: invalid character '}' looking for beginning of object key string\n"},
		{"", []string{"--input", "@" + file},
			"ffrun start: usage: --input @" + file + " is not valid JSON: line 4, column 3: invalid character '\"' after object key:value pair\n"},
		{"", []string{"--input", `{"who": "ada"`},
			"ffrun start: usage: --input is not valid JSON: line 1, column 13: unexpected end of JSON input\n"},
		{"  \n", []string{"--input", "-"},
			"ffrun start: usage: --input - is empty: want the run's input as JSON\n"},
	} {
		r := runWith(t, nil, c.stdin, "start", append([]string{"greet"}, c.args...)...)
		if r.code != 2 || r.stderr != c.want {
			t.Errorf("ffrun start greet %s = exit %d, stderr\n%s\nwant exit 2 and\n%s", strings.Join(c.args, " "), r.code, r.stderr, c.want)
		}
	}
}

// writeHook is an io.Writer that calls hook after its first write.
type writeHook struct {
	mu   sync.Mutex
	b    strings.Builder
	hook func()
}

func (w *writeHook) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.hook != nil {
		defer w.hook()
		w.hook = nil
	}
	return w.b.Write(p)
}

// TestWatchInterrupted: ctrl-C during ffrun watch (the context of Main
// ended) printed "ffrun watch: context canceled" as an error and exited
// 1, as if the server had failed. An interrupt the user asked for now
// ends the command quietly with 130, as a shell reports one.
func TestWatchInterrupted(t *testing.T) {
	t.Parallel()
	e := start(t, false) // no worker: the run stays running
	id := runID(t, e.run("", "start", "greet", "--input", `{"who":"ada"}`))
	vars := map[string]string{"FF_SERVER": e.srv.URL, "FF_API_TOKEN": e.token}
	for _, args := range [][]string{{id}, {id, "--json"}} {
		ctx, cancel := context.WithCancel(context.Background())
		out := &writeHook{hook: cancel} // text: interrupted once it printed the members
		if slices.Contains(args, "--json") {
			cancel() // --json prints nothing before the end: interrupted from the start
		}
		var errb strings.Builder
		code := ffctl.Main(ctx, "watch", args, ffctl.Env{Stdout: out, Stderr: &errb, Getenv: func(k string) string { return vars[k] }})
		cancel()
		if code != ffctl.ExitInterrupted || errb.String() != "" {
			t.Errorf("ffrun watch %s interrupted = exit %d, stderr %q; want %d and nothing on stderr", strings.Join(args, " "), code, errb.String(), ffctl.ExitInterrupted)
		}
	}
}

// TestRunsUnknownFlow: ffrun runs --flow with a misspelt flow listed
// nothing, as for a flow without runs, with no hint. When no template
// has that name either, it now says so on stderr, with the template or
// the flow of a run of the namespace it is close to.
func TestRunsUnknownFlow(t *testing.T) {
	t.Parallel()
	e := start(t, false)
	// A run of a flow that is no template: staged with its plan.
	pkg, diags := compiler.Compile([]dsl.Source{{Name: "report.ff", Data: []byte("flow report() {\n  exec make() { }\n}\n")}})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	if _, err := e.srv.Client.StageFlow(context.Background(), &pkg.Flows[0], nil); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		flow, stderr string
	}{
		{"greett", "(no template is named greett either; did you mean \"greet\"? ffrun templates lists the templates)\n"},
		{"reprot", "(no template is named reprot either; did you mean \"report\", the flow of a run in namespace default?)\n"},
		{"zzz", "(no template is named zzz either: is the flow's name right? ffrun templates lists the templates)\n"},
		{"greet", ""}, // a template without runs
		{"report", ""},
	} {
		r := e.run("", "runs", "--flow", c.flow)
		if r.code != 0 || r.stderr != c.stderr {
			t.Errorf("ffrun runs --flow %s = exit %d, stdout %q, stderr %q; want exit 0 and stderr %q", c.flow, r.code, r.stdout, r.stderr, c.stderr)
		}
	}
	// The bulk forms, which filter alike, say so too.
	r := e.run("", "cancel", "--all", "--flow", "greett")
	want := "(no template is named greett either; did you mean \"greet\"? ffrun templates lists the templates)\n"
	if r.code != 0 || r.stdout != "0 runs cancelled in namespace default (--namespace for another)\n" || r.stderr != want {
		t.Errorf("ffrun cancel --all --flow greett = exit %d, stdout %q, stderr %q; want exit 0 and stderr %q", r.code, r.stdout, r.stderr, want)
	}
}
