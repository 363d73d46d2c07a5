package ffctl_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flowfabric/ff/compiler"
	"github.com/flowfabric/ff/runtime/ffctl"
	"github.com/flowfabric/ff/runtime/server"
	"github.com/flowfabric/ff/runtime/server/servertest"
	"github.com/flowfabric/ff/runtime/wire"
	"github.com/flowfabric/ff/runtime/worker"
)

func TestMain(m *testing.M) {
	code := m.Run()
	servertest.StopShared()
	os.Exit(code)
}

const greetFF = `type Name { who: string }

flow greet(Name) -> Name {
  exec hello(Name) -> Name { }
  exec shout(Name) -> Name { }
  hello -> shout
}

flow wide(Name) {
  exec w1(Name) { }
  exec w2(Name) { }
  exec w3(Name) { }
  exec w4(Name) { }
  exec w5(Name) { }
  exec w6(Name) { }
}
`

// env is an ffrun serving the greet template, with a worker whose shout
// fails for a name containing "fail" and waits, for one containing
// "slow", until its context ends.
type env struct {
	t     *testing.T
	srv   *servertest.Env
	token string
}

func start(t *testing.T, withWorker bool) *env {
	t.Helper()
	return startWith(t, greetFF, withWorker)
}

// startWith serves the flows of the .ff source src, with the worker of
// the greet flow when withWorker.
func startWith(t *testing.T, src string, withWorker bool) *env {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "flows.ff"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	pkg, diags := compiler.CompileFiles(dir)
	if diags.HasErrors() {
		t.Fatalf("compile: %v", diags)
	}
	const token = "ffctl-test-token-0123"
	srv := servertest.Start(t, func(c *server.Config) {
		for i := range pkg.Flows {
			c.Templates = append(c.Templates, &pkg.Flows[i])
		}
		c.Token = token
	})
	if withWorker {
		runWorker(t, srv, token)
	}
	return &env{t: t, srv: srv, token: token}
}

type name struct {
	Who string `json:"who"`
}

func runWorker(t *testing.T, srv *servertest.Env, token string) {
	w, err := worker.New(worker.Config{URL: srv.URL, Token: token, Name: "w", Concurrency: 4, ClaimWait: time.Second,
		// A short lease: a cancelled run's handler hears of it at the next
		// renew, well before the test ends.
		LeaseTTL: time.Second, DrainTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	handle := func(kind string, h func(ctx context.Context, in name) (name, error)) {
		err := w.Handle(kind, func(ctx context.Context, task *worker.Task) (json.RawMessage, error) {
			var in name
			if err := json.Unmarshal(task.Input(), &in); err != nil {
				return nil, worker.Permanent(err)
			}
			out, err := h(ctx, in)
			if err != nil {
				return nil, err
			}
			return json.Marshal(out)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	handle("greet.hello", func(_ context.Context, in name) (name, error) { return name{"hello " + in.Who}, nil })
	handle("greet.shout", func(ctx context.Context, in name) (name, error) {
		switch {
		case strings.Contains(in.Who, "fail"):
			return name{}, worker.Permanent(errors.New("cannot shout " + in.Who))
		case strings.Contains(in.Who, "slow"):
			<-ctx.Done()
			return name{}, ctx.Err()
		}
		return name{strings.ToUpper(in.Who)}, nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := w.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("worker: %v", err)
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
}

type result struct {
	code           int
	stdout, stderr string
}

// run runs an ffrun client command against the env's server.
func (e *env) run(stdin string, name string, args ...string) result {
	e.t.Helper()
	return runWith(e.t, map[string]string{"FF_SERVER": e.srv.URL, "FF_API_TOKEN": e.token}, stdin, name, args...)
}

func runWith(t *testing.T, vars map[string]string, stdin string, name string, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	code := ffctl.Main(ctx, name, args, ffctl.Env{
		Stdin: strings.NewReader(stdin), Stdout: &out, Stderr: &errb,
		Getenv: func(k string) string { return vars[k] },
	})
	return result{code, out.String(), errb.String()}
}

var runLine = regexp.MustCompile(`(?m)^run (\S+)`)

func runID(t *testing.T, r result) string {
	t.Helper()
	m := runLine.FindStringSubmatch(r.stdout)
	if m == nil {
		t.Fatalf("no run id in %q (stderr %q)", r.stdout, r.stderr)
	}
	return m[1]
}

func TestStartWatchGetRuns(t *testing.T) {
	t.Parallel()
	e := start(t, true)

	r := e.run("", "templates")
	if r.code != 0 || !regexp.MustCompile(`(?m)^greet\s+default\s+Name\s+Name\s+2$`).MatchString(r.stdout) {
		t.Fatalf("templates = %+v", r)
	}

	r = e.run("", "start", "greet", "--input", `{"who":"ada"}`, "--watch")
	if r.code != 0 {
		t.Fatalf("start --watch = %+v", r)
	}
	id := runID(t, r)
	for _, want := range []string{"hello  staged -> ", "shout  ", "-> completed", "run succeeded (2 succeeded, 0 failed, 0 skipped, 0 cancelled)"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("start --watch output lacks %q:\n%s", want, r.stdout)
		}
	}
	if !strings.HasSuffix(r.stdout, "{\n  \"who\": \"HELLO ADA\"\n}\n") {
		t.Errorf("start --watch does not end with the result:\n%s", r.stdout)
	}

	r = e.run("", "get", id)
	if r.code != 0 {
		t.Fatalf("get = %+v", r)
	}
	for _, want := range []string{"run " + id + "\n", "flow greet (namespace default)\n", "state succeeded: 2 of 2 members done (2 succeeded, 0 failed, 0 skipped, 0 cancelled)\n"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("get output lacks %q:\n%s", want, r.stdout)
		}
	}
	if !regexp.MustCompile(`(?m)^hello\s+completed\s+1\s+\d{4}-`).MatchString(r.stdout) || !regexp.MustCompile(`(?m)^shout\s+completed\s+1\s`).MatchString(r.stdout) {
		t.Errorf("get lists the members wrong:\n%s", r.stdout)
	}

	// Input from a file and from standard input; an idempotency key.
	file := filepath.Join(t.TempDir(), "in.json")
	os.WriteFile(file, []byte(`{"who":"bob"}`), 0o644)
	r = e.run("", "start", "--input", "@"+file, "--key", "k1", "--wait", "20s", "greet")
	if r.code != 0 || !strings.HasSuffix(r.stdout, "{\n  \"who\": \"HELLO BOB\"\n}\n") {
		t.Fatalf("start @file --wait = %+v", r)
	}
	again := e.run("", "start", "greet", "--input", `{"who":"someone else"}`, "--key", "k1")
	if again.code != 0 || runID(t, again) != runID(t, r) || !strings.Contains(again.stdout, "existing") {
		t.Fatalf("start with the same key = %+v, first %s", again, runID(t, r))
	}
	r = e.run(`{"who":"cy"}`, "start", "greet", "--input", "-", "--json", "--wait", "20s")
	var run struct {
		State  string          `json:"state"`
		Result json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &run); r.code != 0 || err != nil || run.State != "succeeded" || compact(run.Result) != `{"who":"HELLO CY"}` {
		t.Fatalf("start - --json --wait = %+v (%v)", r, err)
	}

	r = e.run("", "runs", "--limit", "10")
	if r.code != 0 || strings.Count(r.stdout, " greet ") != 3 || !strings.HasPrefix(r.stdout, "RUN ") || r.stderr != "" {
		t.Fatalf("runs = %+v", r)
	}
	// A limit that leaves runs unread says so, on stderr.
	r = e.run("", "runs", "--limit", "2")
	if r.code != 0 || strings.Count(r.stdout, " greet ") != 2 || !strings.HasPrefix(r.stderr, "(more runs: --limit up to 500") {
		t.Fatalf("runs --limit 2 of 3 runs = %+v, want 2 and a word on the rest", r)
	}
	// After --, operands only: a flag's spelling is taken as a run id.
	if r := e.run("", "get", "--", "--json"); r.code != ffctl.ExitError || !strings.Contains(r.stderr, "--json") {
		t.Fatalf("get -- --json = %+v, want the operand looked up", r)
	}
	if r := e.run("", "get", "--json", "--", id); r.code != 0 || !strings.HasPrefix(r.stdout, "{") {
		t.Fatalf("get --json -- RUN = %+v", r)
	}
	r = e.run("", "runs", "--state", "failed")
	if r.code != 0 || r.stdout != "no failed runs in namespace default (--namespace for another)\n" {
		t.Fatalf("runs --state failed = %+v", r)
	}
	if r := e.run("", "runs", "--state", "bogus"); r.code != ffctl.ExitUsage || !strings.Contains(r.stderr, "want running, succeeded") {
		t.Fatalf("runs --state bogus = %+v, want a usage error", r)
	}
	if r := e.run("", "runs", "--flow", "nope"); r.code != 0 || r.stdout != "no runs of flow nope in namespace default (--namespace for another)\n" {
		t.Fatalf("runs --flow nope = %+v", r)
	}
	// --json has the API's shape: an empty list is [], and a limit that
	// leaves runs unread gives the cursor to go on from.
	r = e.run("", "runs", "--state", "failed", "--json")
	if r.code != 0 || r.stdout != "{\n  \"runs\": []\n}\n" {
		t.Fatalf("runs --state failed --json = %+v", r)
	}
	r = e.run("", "runs", "--limit", "2", "--json")
	var list struct {
		Runs       []json.RawMessage `json:"runs"`
		NextCursor string            `json:"next_cursor"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &list); r.code != 0 || err != nil || len(list.Runs) != 2 || list.NextCursor == "" {
		t.Fatalf("runs --limit 2 --json of 3 runs = %+v (%v), want 2 runs and a next_cursor", r, err)
	}

	r = e.run("", "result", id)
	if r.code != 0 || r.stdout != "{\n  \"who\": \"HELLO ADA\"\n}\n" {
		t.Fatalf("result = %+v", r)
	}
}

func TestFailureCancelReplay(t *testing.T) {
	t.Parallel()
	e := start(t, true)

	r := e.run("", "start", "greet", "--input", `{"who":"fail"}`, "--watch")
	if r.code != ffctl.ExitRunFailed || !regexp.MustCompile(`(?m)^ *\d+ms  shout  \S.* -> failed: cannot shout hello fail$`).MatchString(r.stdout) {
		t.Fatalf("start --watch of a failing run = %+v", r)
	}
	if !strings.Contains(r.stderr, "run "+runID(t, r)+" failed: ") || !strings.Contains(r.stderr, "cannot shout hello fail") {
		t.Fatalf("failure not explained on stderr: %q", r.stderr)
	}
	failed := runID(t, r)
	if r := e.run("", "result", failed); r.code != ffctl.ExitRunFailed || r.stdout != "" || !strings.Contains(r.stderr, "failed") {
		t.Fatalf("result of a failed run = %+v", r)
	}
	if r := e.run("", "runs", "--state", "failed"); r.code != 0 || !strings.Contains(r.stdout, failed) {
		t.Fatalf("runs --state failed = %+v", r)
	}
	// A replay runs the failure again (it fails again here). The member
	// the replay keeps is shown as it is, not as changed from staged.
	if r := e.run("", "replay", failed, "--watch"); r.code != ffctl.ExitRunFailed || !strings.Contains(r.stdout, "run "+failed+" replayed\n") ||
		!regexp.MustCompile(`(?m)^ *\d+ms  hello  completed$`).MatchString(r.stdout) || strings.Contains(r.stdout, "staged") {
		t.Fatalf("replay --watch = %+v", r)
	}
	if r := e.run("", "get", failed); r.code != 0 || !regexp.MustCompile(`(?m)^created .*, replayed once \(last .*\), ended .* \(took \S+ since the replay\)$`).MatchString(r.stdout) {
		t.Fatalf("get of a replayed run = %+v, want the replay said", r)
	}

	// Cancel a running run; watch then reports it cancelled.
	r = e.run("", "start", "greet", "--input", `{"who":"slow"}`)
	if r.code != 0 {
		t.Fatalf("start = %+v", r)
	}
	slow := runID(t, r)
	if r := e.run("", "result", slow); r.code != ffctl.ExitRunning || !strings.Contains(r.stderr, "still running (ffrun result "+slow+" --wait D") {
		t.Fatalf("result of a running run = %+v", r)
	}
	if r := e.run("", "cancel", slow, "--reason", "enough"); r.code != 0 || !strings.HasPrefix(r.stdout, "run "+slow+" cancelled") {
		t.Fatalf("cancel = %+v", r)
	}
	if r := e.run("", "watch", slow); r.code != ffctl.ExitRunFailed || !strings.Contains(r.stdout, "run cancelled") || !strings.Contains(r.stderr, "cancelled") ||
		!regexp.MustCompile(`(?m)^ *\d+ms  shout  cancelled$`).MatchString(r.stdout) || strings.Contains(r.stdout, "staged") {
		t.Fatalf("watch of a cancelled run = %+v", r)
	}
	if r := e.run("", "cancel", slow); r.code != 0 {
		t.Fatalf("second cancel = %+v", r)
	}

	// A run of more members that did not succeed than its error names
	// points to get, which lists them all.
	r = e.run("", "start", "wide", "--input", `{"who":"w"}`)
	wide := runID(t, r)
	if r := e.run("", "cancel", wide); r.code != 0 {
		t.Fatalf("cancel wide = %+v", r)
	}
	if r := e.run("", "result", wide); r.code != ffctl.ExitRunFailed || !strings.Contains(r.stderr, "and 1 more") || !strings.Contains(r.stderr, "(ffrun get "+wide+" lists every member)") {
		t.Fatalf("result of a cancelled wide run = %+v", r)
	}
}

// TestOutcomeNamesEachFailureOnce: a run with several members that did
// not succeed is explained in one line, the API's error, which names each
// (those cancelled alike together, the reason once).
func TestOutcomeNamesEachFailureOnce(t *testing.T) {
	t.Parallel()
	e := start(t, false) // no worker: both members are cancelled unstarted
	r := e.run("", "start", "greet", "--input", `{"who":"x"}`)
	id := runID(t, r)
	if r := e.run("", "cancel", id, "--reason", "enough"); r.code != 0 {
		t.Fatalf("cancel = %+v", r)
	}
	want := "run " + id + " cancelled: result exec shout ended cancelled; hello, shout cancelled: enough\n"
	if r := e.run("", "result", id); r.code != ffctl.ExitRunFailed || r.stderr != want {
		t.Fatalf("result of a run cancelled with 2 members = %+v, want stderr %q", r, want)
	}
}

func TestClientCommandErrors(t *testing.T) {
	t.Parallel()
	e := start(t, false)
	cases := []struct {
		args       []string
		code       int
		wantStderr string
	}{
		{[]string{"get"}, 2, "usage: want RUN, got none\n"},
		{[]string{"get", "a", "b"}, 2, "want RUN, got 2 operand(s): a b"},
		{[]string{"templates", "x"}, 2, "want no operand"},
		{[]string{"start", "greet", "--input", "{nope"}, 2, "--input is not valid JSON: line 1, column 2: invalid character 'n'"},
		{[]string{"start", "greet", "--input", "@/does/not/exist"}, 2, "no such file"},
		{[]string{"start", "greet", "--watch", "--wait", "1s"}, 2, "exclude each other"},
		{[]string{"runs", "--limit", "0"}, 2, "--limit 0: want 1..500"},
		{[]string{"start", "greet", "--wait", "-1s"}, 2, "--wait -1s is negative"},
		{[]string{"result", "0.00000000-0000-4000-8000-000000000000", "--wait", "-1s"}, 2, "--wait -1s is negative"},
		{[]string{"runs", "--bogus"}, 2, "flag provided but not defined: -bogus"},
		{[]string{"start", "nope", "--input", "{}"}, 1, "not_found"},
		{[]string{"start", "greet", "--input", `{"who":1}`}, 1, "input.who"},
		{[]string{"start", "greet"}, 1, "input: want Name (an object), got null (give the run's input with --input JSON|@FILE|-)\n"},
		{[]string{"get", "0.00000000-0000-4000-8000-000000000000"}, 1, "not_found"},
	}
	for _, tc := range cases {
		r := e.run("", tc.args[0], tc.args[1:]...)
		if r.code != tc.code || !strings.Contains(r.stderr, tc.wantStderr) {
			t.Errorf("%v = %d, stderr %q; want %d and %q", tc.args, r.code, r.stderr, tc.code, tc.wantStderr)
		}
	}
	// The token comes from FF_API_TOKEN: without it the server refuses.
	r := runWith(t, map[string]string{"FF_SERVER": e.srv.URL}, "", "templates")
	if r.code != ffctl.ExitError || !strings.Contains(r.stderr, "401") && !strings.Contains(r.stderr, "unauthorized") {
		t.Fatalf("templates without the token = %+v", r)
	}
	// --server beats FF_SERVER; a bad URL is a usage error.
	r = runWith(t, map[string]string{"FF_SERVER": "http://127.0.0.1:1", "FF_API_TOKEN": e.token}, "", "templates", "--server", e.srv.URL)
	if r.code != 0 || !strings.Contains(r.stdout, "greet") {
		t.Fatalf("templates --server = %+v", r)
	}
	if r := runWith(t, nil, "", "templates", "--server", "::nope"); r.code != 2 {
		t.Fatalf("templates with a bad --server = %+v", r)
	}
	// An Env with nothing set is usable (no input, output discarded).
	if code := ffctl.Main(context.Background(), "get", nil, ffctl.Env{}); code != 2 {
		t.Fatalf("get with an empty Env: exit %d, want 2", code)
	}
	var errb strings.Builder
	if code := ffctl.Main(context.Background(), "launch", nil, ffctl.Env{Stderr: &errb}); code != 2 || !strings.Contains(errb.String(), `unknown command "launch"`) {
		t.Fatalf("an unknown command: exit %d, %q", code, errb.String())
	}
	if ffctl.IsCommand("serve") || !ffctl.IsCommand("watch") {
		t.Fatal("IsCommand")
	}
}

// TestNoServer: a refused connection says how to reach a server.
func TestNoServer(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now: connections are refused
	r := runWith(t, map[string]string{"FF_SERVER": "http://" + addr}, "", "templates")
	// Where and why, once: not the client's layers around it.
	if r.code != ffctl.ExitError || !strings.HasPrefix(r.stderr, "ffrun templates: cannot reach ffrun at http://"+addr+": dial tcp ") ||
		strings.Count(r.stderr, addr) != 2 || // the address, and the dial error's
		!strings.HasSuffix(r.stderr, "\n(no ffrun listens there: start one, or give its URL with --server or FF_SERVER)\n") {
		t.Fatalf("templates without a server = %+v", r)
	}
}

// TestRequestTimeout: a server that accepts connections but never
// answers does not hang a command: each request has a time limit.
func TestRequestTimeout(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	servertest.Silent(t, ln) // held open, never answered
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var out, errb bytes.Buffer
	begin := time.Now()
	code := ffctl.Main(ctx, "get", []string{"0.00000000-0000-4000-8000-000000000000", "--server", "http://" + ln.Addr().String()}, ffctl.Env{
		Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" },
		RequestTimeout: 300 * time.Millisecond,
	})
	if took := time.Since(begin); code != ffctl.ExitError || took > 10*time.Second || !strings.Contains(errb.String(), "Timeout exceeded") {
		t.Fatalf("get against a server that never answers = %d after %s, stderr %q; want 1 within the request timeout",
			code, took.Round(time.Millisecond), errb.String())
	}
}

// TestFollowPrintsEveryChange: Follow, shared with the demo, prints each
// member's changes once and returns the ended run.
func TestFollowPrintsEveryChange(t *testing.T) {
	t.Parallel()
	e := start(t, true)
	r := e.run("", "start", "greet", "--input", `{"who":"dee"}`)
	id := runID(t, r)
	var mu sync.Mutex
	var out bytes.Buffer
	w := writerFunc(func(p []byte) (int, error) { mu.Lock(); defer mu.Unlock(); return out.Write(p) })
	ended, err := ffctl.Follow(context.Background(), w, e.srv.Client, id, ffctl.FollowOptions{Interval: 5 * time.Millisecond, Indent: "> "})
	if err != nil || ended.State != "succeeded" || string(ended.Result) != `{"who":"HELLO DEE"}` {
		t.Fatalf("Follow = %+v, %v", ended, err)
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	seen := map[string]bool{}
	for _, l := range lines {
		if !strings.HasPrefix(l, "> ") {
			t.Errorf("line without the indent: %q", l)
		}
		if seen[l[strings.Index(l, "ms")+2:]] {
			t.Errorf("change printed twice: %q", l)
		}
		seen[l[strings.Index(l, "ms")+2:]] = true
	}
	if last := lines[len(lines)-1]; !strings.HasSuffix(last, "run succeeded (2 succeeded, 0 failed, 0 skipped, 0 cancelled)") {
		t.Fatalf("last line %q", last)
	}
}

func compact(raw json.RawMessage) string {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return string(raw)
	}
	return b.String()
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// TestNamespaceOnlyWhereItMeansSomething: --namespace is a flag of start
// and runs; get (which names a run, namespace included) refuses it rather
// than ignore it.
func TestNamespaceOnlyWhereItMeansSomething(t *testing.T) {
	t.Parallel()
	e := start(t, false)
	if r := e.run("", "get", "0.x", "--namespace", "other"); r.code != 2 || !strings.Contains(r.stderr, "flag provided but not defined: -namespace") {
		t.Fatalf("get --namespace = %+v", r)
	}
	if r := e.run("", "runs", "--namespace", "other"); r.code != 0 || r.stdout != "no runs in namespace other (--namespace for another)\n" {
		t.Fatalf("runs --namespace = %+v", r)
	}
}

// TestSchedules: ffrun schedules lists each schedule with its next fire.
func TestSchedules(t *testing.T) {
	t.Parallel()
	e := start(t, false)
	if r := e.run("", "schedules"); r.code != 0 || r.stdout != "no schedules (PUT /v1/schedules/{name} makes one)\n" {
		t.Fatalf("schedules of none = %+v", r)
	}
	if _, _, err := e.srv.Client.PutSchedule(context.Background(), "morning", wire.PutSchedule{Template: "greet", Cron: "30 7 * * 1-5",
		Timezone: "Europe/Berlin", Input: json.RawMessage(`{"who":"team"}`)}); err != nil {
		t.Fatal(err)
	}
	r := e.run("", "schedules")
	if r.code != 0 || !regexp.MustCompile(`(?m)^NAME +TEMPLATE +CRON +ZONE +NEXT +FIRES +LAST\nmorning +greet +30 7 \* \* 1-5 +Europe/Berlin +\d{4}-\d\d-\d\d 07:30 CES?T +0 +-$`).MatchString(r.stdout) {
		t.Fatalf("schedules = %+v", r)
	}
	// A run a schedule started says so.
	if _, _, err := e.srv.Client.PutSchedule(context.Background(), "tick", wire.PutSchedule{Template: "greet", Cron: "@every 1s",
		Input: json.RawMessage(`{"who":"team"}`)}); err != nil {
		t.Fatal(err)
	}
	var s *wire.Schedule
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		var err error
		if s, err = e.srv.Client.GetSchedule(context.Background(), "tick"); err == nil && s.LastRunID != "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no fire of tick in 10 s: %+v", s)
		}
	}
	if r := e.run("", "get", s.LastRunID); r.code != 0 || !strings.Contains(r.stdout, ", by schedule tick (its fire of ") {
		t.Fatalf("get of a scheduled run = %+v", r)
	}
	r = e.run("", "schedules", "--json")
	var l wire.ScheduleList
	if err := json.Unmarshal([]byte(r.stdout), &l); r.code != 0 || err != nil || len(l.Schedules) != 2 || l.Schedules[0].NextAt == nil {
		t.Fatalf("schedules --json = %+v (%v)", r, err)
	}
}

// TestScheduleRun: ffrun schedules run NAME starts a run of the schedule
// now, waits for it with --wait, answers a repeat of --key with the first
// run, and get says the run was started by hand.
func TestScheduleRun(t *testing.T) {
	t.Parallel()
	e := start(t, true)
	if _, _, err := e.srv.Client.PutSchedule(context.Background(), "yearly", wire.PutSchedule{Template: "greet", Cron: "0 5 1 1 *",
		Input: json.RawMessage(`{"who":"team"}`)}); err != nil {
		t.Fatal(err)
	}
	r := e.run("", "schedules", "run", "yearly", "--wait", "10s")
	m := regexp.MustCompile(`^run (\S+)\n`).FindStringSubmatch(r.stdout)
	if r.code != 0 || m == nil || !strings.Contains(r.stdout, `"HELLO TEAM"`) {
		t.Fatalf("schedules run --wait = %+v", r)
	}
	if g := e.run("", "get", m[1]); g.code != 0 || !strings.Contains(g.stdout, ", by hand from schedule yearly") {
		t.Fatalf("get of a run by hand = %+v", g)
	}
	first := e.run("", "schedules", "run", "yearly", "--key", "k1")
	again := e.run("", "schedules", "run", "yearly", "--key", "k1")
	id := strings.TrimPrefix(strings.TrimSpace(first.stdout), "run ")
	if first.code != 0 || again.code != 0 || again.stdout != "run "+id+" (existing: the idempotency key matched it)\n" {
		t.Fatalf("schedules run --key twice = %+v then %+v", first, again)
	}
	if r := e.run("", "schedules", "run", "nope"); r.code != 1 || !strings.Contains(r.stderr, "no such schedule") {
		t.Fatalf("schedules run of an unknown schedule = %+v", r)
	}
	if r := e.run("", "schedules", "run"); r.code != 2 || !strings.Contains(r.stderr, "want NAME") {
		t.Fatalf("schedules run without a name = %+v", r)
	}
	if r := e.run("", "schedules", "bogus"); r.code != 2 || !strings.Contains(r.stderr, "ffrun schedules run NAME") {
		t.Fatalf("schedules with an operand = %+v", r)
	}
	// --json says whether the run is new or the key's.
	var fr wire.FlowRun
	r = e.run("", "schedules", "run", "yearly", "--key", "k1", "--json")
	if err := json.Unmarshal([]byte(r.stdout), &fr); r.code != 0 || err != nil || fr.Created == nil || *fr.Created || fr.ID != id {
		t.Fatalf("schedules run --key k1 --json = %+v (%v)", r, err)
	}
}

// TestNamespacesCommand: ffrun namespaces lists each namespace with its
// runs and workers, then a line per lane. A budget does not make a
// namespace listed, and the empty listing says what would (it said
// "nothing was created" while a budget existed).
func TestNamespacesCommand(t *testing.T) {
	t.Parallel()
	e := start(t, false)
	ctx := context.Background()
	if _, _, err := e.srv.Client.PutBudget(ctx, wire.PutBudget{ID: "ops/gpu", Dimensions: []wire.BudgetDimension{{Name: "minutes", Hard: 600}}}); err != nil {
		t.Fatal(err)
	}
	const none = "no namespaces: no execution or run is kept and no worker is connected " +
		"(budgets, quotas and schedules do not count here: ffrun budgets, quotas and schedules list them)\n"
	if r := e.run("", "namespaces"); r.code != 0 || r.stdout != none {
		t.Fatalf("namespaces of none, with a budget = %+v, want stdout %q", r, none)
	}
	for _, lane := range []string{"a", "b", "b"} {
		if _, _, err := e.srv.Client.CreateExecution(ctx, wire.CreateExecution{Namespace: "jobs", Lane: lane, Kind: "k"}); err != nil {
			t.Fatal(err)
		}
	}
	r := e.run("", "namespaces")
	want := regexp.MustCompile(`^NAMESPACE +RUNS +WORKERS +LANE +ELIGIBLE +DELAYED +PENDING +BLOCKED +ENDED\njobs +0 +0 +a +1 +0 +0 +0 +0\n +b +2 +0 +0 +0 +0\n$`)
	if r.code != 0 || !want.MatchString(r.stdout) {
		t.Fatalf("namespaces = %+v", r)
	}
	r = e.run("", "namespaces", "--json")
	var l wire.NamespaceList
	if err := json.Unmarshal([]byte(r.stdout), &l); r.code != 0 || err != nil || len(l.Namespaces) != 1 || len(l.Namespaces[0].Lanes) != 2 {
		t.Fatalf("namespaces --json = %+v (%v)", r, err)
	}
}

// TestBulkCancelReplay: cancel --all cancels every running run of the
// namespace (of --flow), replay --all --state cancelled replays them; the
// bulk flags are refused with one run.
func TestBulkCancelReplay(t *testing.T) {
	t.Parallel()
	e := start(t, false) // no worker: runs stay running
	var ids []string
	for i := range 3 {
		r := e.run("", "start", "greet", "--input", fmt.Sprintf(`{"who":"w%d"}`, i))
		if r.code != 0 {
			t.Fatalf("start = %+v", r)
		}
		ids = append(ids, strings.TrimSpace(strings.TrimPrefix(r.stdout, "run ")))
	}
	r := e.run("", "cancel", "--all", "--flow", "greet", "--reason", "bad deploy")
	if r.code != 0 || !strings.HasSuffix(r.stdout, "3 runs cancelled in namespace default (the namespace of template greet; --namespace for another)\n") {
		t.Fatalf("cancel --all = %+v", r)
	}
	for _, id := range ids {
		if !strings.Contains(r.stdout, "run "+id+" cancelled\n") {
			t.Fatalf("cancel --all does not name run %s: %+v", id, r)
		}
	}
	if g := e.run("", "get", ids[0]); !strings.Contains(g.stdout, "state cancelled") {
		t.Fatalf("get after cancel --all = %+v", g)
	}
	r = e.run("", "replay", "--all", "--state", "cancelled", "--json")
	var res wire.BulkRunsResult
	if err := json.Unmarshal([]byte(r.stdout), &res); r.code != 0 || err != nil || len(res.Runs) != 3 {
		t.Fatalf("replay --all --json = %+v (%v)", r, err)
	}
	for _, args := range [][]string{
		{"cancel", ids[0], "--all"},
		{"cancel", ids[0], "--flow", "greet"},
		{"replay", ids[0], "--state", "failed"},
		{"replay", "--all", "--watch"},
		{"replay", "--all", "--state", "bogus"},
	} {
		if r := e.run("", args[0], args[1:]...); r.code != 2 {
			t.Errorf("%v = %+v; want usage (2)", args, r)
		}
	}
}

// TestBudgetsQuotasCommands: ffrun budgets and ffrun quotas list every
// budget and quota with their use.
func TestBudgetsQuotasCommands(t *testing.T) {
	t.Parallel()
	e := start(t, false)
	ctx := context.Background()
	if _, _, err := e.srv.Client.PutBudget(ctx, wire.PutBudget{ID: "ops/gpu", Dimensions: []wire.BudgetDimension{{Name: "minutes", Hard: 600}}}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.srv.Client.PutQuota(ctx, wire.PutQuota{ID: "ops/mail", Rate: 10, WindowMs: 60000, Concurrency: 2}); err != nil {
		t.Fatal(err)
	}
	r := e.run("", "budgets", "--namespace", "ops")
	if r.code != 0 || !regexp.MustCompile(`(?m)^ID +SCOPE +USAGE +STATE +ON HARD LIMIT\nops/gpu +shared +minutes 0/600 +ok +block$`).MatchString(r.stdout) {
		t.Fatalf("budgets = %+v", r)
	}
	r = e.run("", "quotas")
	if r.code != 0 || !regexp.MustCompile(`(?m)^ID +LIMITS +KEY +IN WINDOW +RUNNING +PAUSED\nops/mail +10 per 1m, 2 at once +- +0 +0 +-$`).MatchString(r.stdout) {
		t.Fatalf("quotas = %+v", r)
	}
	// A keyed quota says its key; key values past a listing's 20 are
	// counted.
	if _, _, err := e.srv.Client.PutQuota(ctx, wire.PutQuota{ID: "zz/keyed", Concurrency: 2, Key: "tenant"}); err != nil {
		t.Fatal(err)
	}
	for i := range 22 {
		if _, err := e.srv.Client.PauseQuota(ctx, "zz/keyed", wire.QuotaPause{Key: fmt.Sprintf("k%02d", i), ForMs: 60_000}); err != nil {
			t.Fatal(err)
		}
	}
	r = e.run("", "quotas", "--namespace", "zz")
	if r.code != 0 || !strings.Contains(r.stdout, "2 at once, per tenant") || !strings.Contains(r.stdout, "(2 more key values: GET /v1/quotas/zz/keyed)") {
		t.Fatalf("quotas of a keyed quota = %+v", r)
	}
	if r := e.run("", "quotas", "--namespace", "none"); r.code != 0 || r.stdout != "no quotas in namespace none (without --namespace: every quota)\n" {
		t.Fatalf("quotas of an empty namespace = %+v", r)
	}
	r = e.run("", "budgets", "--scope", "run", "--json")
	var l wire.BudgetList
	if err := json.Unmarshal([]byte(r.stdout), &l); r.code != 0 || err != nil || len(l.Budgets) != 0 {
		t.Fatalf("budgets --scope run --json = %+v (%v)", r, err)
	}
	if r := e.run("", "budgets", "--scope", "x"); r.code != 2 || !strings.Contains(r.stderr, "scope") {
		t.Fatalf("budgets --scope x = %+v", r)
	}
}

// TestGetExecution: ffrun get given an execution's id (a run's member, or
// a standalone execution) prints the execution and its attempts instead
// of "no such run".
func TestGetExecution(t *testing.T) {
	t.Parallel()
	e := start(t, true)
	r := e.run("", "start", "greet", "--input", `{"who":"x"}`, "--wait", "10s")
	id := strings.TrimPrefix(strings.SplitN(r.stdout, "\n", 2)[0], "run ")
	if r.code != 0 {
		t.Fatalf("start = %+v", r)
	}
	run, err := e.srv.Client.GetRun(context.Background(), id)
	if err != nil || len(run.Execs) == 0 {
		t.Fatalf("GetRun = %+v, %v", run, err)
	}
	x := run.Execs[0].ExecutionID
	g := e.run("", "get", x)
	// A member says which exec of which run it is.
	if g.code != 0 || !strings.HasPrefix(g.stdout, "execution "+x+" (exec "+run.Execs[0].Name+" of run "+id+": ffrun get "+id+" shows the run)\n") ||
		!regexp.MustCompile(`(?m)^# +TYPE +WORKER +STARTED +TOOK +OUTCOME +ERROR\n1 +initial +\S+ .* success`).MatchString(g.stdout) {
		t.Fatalf("get of an execution = %+v", g)
	}
	if g := e.run("", "get", "1.00000000-0000-0000-0000-000000000000"); g.code != 1 || !strings.Contains(g.stderr, "no such run") {
		t.Fatalf("get of nothing = %+v", g)
	}
}

// TestFlowNamespace: runs --flow F and the --all forms look for F's runs
// in its template's namespace when no --namespace is given, and say so.
func TestFlowNamespace(t *testing.T) {
	t.Parallel()
	e := startWith(t, greetFF+`
flow order(Name) -> Name {
  namespace "shop"
  exec take(Name) -> Name { }
}
`, false)
	if r := e.run("", "start", "order", "--input", `{"who":"x"}`); r.code != 0 {
		t.Fatalf("start = %+v", r)
	}
	if r := e.run("", "runs", "--flow", "order"); r.code != 0 || !strings.Contains(r.stdout, "\torder\t") && !regexp.MustCompile(`(?m) order +running`).MatchString(r.stdout) {
		t.Fatalf("runs --flow order = %+v; want its run (namespace shop)", r)
	}
	if r := e.run("", "runs", "--flow", "order", "--namespace", "default"); r.code != 0 || r.stdout != "no runs of flow order in namespace default (--namespace for another)\n" {
		t.Fatalf("runs --flow order --namespace default = %+v", r)
	}
	r := e.run("", "cancel", "--all", "--flow", "order")
	if r.code != 0 || !strings.HasSuffix(r.stdout, "1 run cancelled in namespace shop (the namespace of template order; --namespace for another)\n") {
		t.Fatalf("cancel --all --flow order = %+v", r)
	}
	// A flow no template names stays in the default namespace.
	if r := e.run("", "runs", "--flow", "elsewhere"); r.code != 0 || r.stdout != "no runs of flow elsewhere in namespace default (--namespace for another)\n" {
		t.Fatalf("runs --flow elsewhere = %+v", r)
	}
}
