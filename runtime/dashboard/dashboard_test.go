package dashboard_test

import (
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"flag"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flowfabric/ff/compiler"
	"github.com/flowfabric/ff/compiler/plan"
	"github.com/flowfabric/ff/dsl"
	"github.com/flowfabric/ff/runtime/client"
	"github.com/flowfabric/ff/runtime/server"
	"github.com/flowfabric/ff/runtime/server/servertest"
	"github.com/flowfabric/ff/runtime/wire"
	"github.com/flowfabric/ff/runtime/worker"
)

var update = flag.Bool("update", false, "rewrite the golden files")

func TestMain(m *testing.M) {
	code := m.Run()
	servertest.StopShared()
	os.Exit(code)
}

// pipeSource is the flow most tests run: a fetch, a check that fails on
// the input "bad", a publish on success and an alert on failure.
const pipeSource = `
type Doc { url: string, note?: string }

flow pipe(Doc) -> Doc {
  exec fetch(Doc) -> Doc { }
  exec check(Doc) -> Doc { }
  exec publish(Doc) -> Doc { }
  exec alert() { }
  fetch -> check
  check -> publish
  check -> alert on failure
  result publish
}
`

func compile(t *testing.T, name, src string) []*plan.Flow {
	t.Helper()
	pkg, diags := compiler.Compile([]dsl.Source{{Name: name, Data: []byte(src)}})
	if len(diags) > 0 {
		t.Fatalf("compile %s: %v", name, diags)
	}
	var flows []*plan.Flow
	for i := range pkg.Flows {
		flows = append(flows, &pkg.Flows[i])
	}
	return flows
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// browser is a client that keeps cookies and does not follow redirects,
// so that tests see each answer.
type browser struct {
	t    *testing.T
	base string
	hc   *http.Client
}

func newBrowser(t *testing.T, env *servertest.Env) *browser {
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &browser{t: t, base: env.URL, hc: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}}
}

type page struct {
	status   int
	body     string
	location string
	header   http.Header
}

func (b *browser) do(method, path string, form url.Values, header map[string]string) page {
	b.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, b.base+path, body)
	if err != nil {
		b.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	res, err := b.hc.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer res.Body.Close()
	data, err := io.ReadAll(res.Body)
	if err != nil {
		b.t.Fatal(err)
	}
	return page{status: res.StatusCode, body: string(data), location: res.Header.Get("Location"), header: res.Header}
}

func (b *browser) get(path string) page { b.t.Helper(); return b.do(http.MethodGet, path, nil, nil) }

// post sends a form as a browser on the console's own page does.
func (b *browser) post(path string, form url.Values) page {
	b.t.Helper()
	return b.do(http.MethodPost, path, form, map[string]string{"Origin": b.base, "Sec-Fetch-Site": "same-origin"})
}

// want fails t unless p has the status and holds every fragment.
func (p page) want(t *testing.T, status int, fragments ...string) {
	t.Helper()
	if p.status != status {
		t.Fatalf("status %d, want %d; body:\n%s", p.status, status, p.body)
	}
	for _, f := range fragments {
		if !strings.Contains(p.body, f) {
			t.Fatalf("the page lacks %q; body:\n%s", f, p.body)
		}
	}
}

// runWorker runs handlers on env until t ends.
func runWorker(t *testing.T, env *servertest.Env, handlers map[string]worker.Handler) {
	t.Helper()
	env.RunWorker(t, worker.Config{Name: "console-test", Concurrency: 4}, handlers)
}

// pipeHandlers: check fails (for good) on the url "bad"; the error
// message carries markup, which pages must escape.
func pipeHandlers() map[string]worker.Handler {
	echo := func(_ context.Context, task *worker.Task) (json.RawMessage, error) { return task.Input(), nil }
	return map[string]worker.Handler{
		"pipe.fetch": echo, "pipe.publish": echo,
		"pipe.alert": func(context.Context, *worker.Task) (json.RawMessage, error) { return nil, nil },
		"pipe.check": func(_ context.Context, task *worker.Task) (json.RawMessage, error) {
			var d struct{ URL string }
			if err := json.Unmarshal(task.Input(), &d); err != nil {
				return nil, err
			}
			if d.URL == "bad" {
				return nil, worker.Permanent(errors.New(`<script>alert("x")</script> is not allowed`))
			}
			return task.Input(), nil
		},
	}
}

var runLink = regexp.MustCompile(`^/ui/runs/([^?]+)\?done=(\w+)$`)

// startRun starts a run of template through the console's form and
// returns its id.
func startRun(t *testing.T, b *browser, template string, form url.Values) (id, done string) {
	t.Helper()
	p := b.post("/ui/templates/"+template+"/runs", form)
	m := runLink.FindStringSubmatch(p.location)
	if p.status != http.StatusSeeOther || m == nil {
		t.Fatalf("start: status %d, location %q; body:\n%s", p.status, p.location, p.body)
	}
	id, err := url.PathUnescape(m[1])
	if err != nil {
		t.Fatal(err)
	}
	return id, m[2]
}

func waitRun(t *testing.T, env *servertest.Env, id string) *wire.FlowRun {
	t.Helper()
	run, err := env.Client.RunResult(ctxT(t), id, 20*time.Second)
	if err != nil {
		t.Fatalf("run %s: %v", id, err)
	}
	if run.State == wire.RunRunning {
		t.Fatalf("run %s still running after 20 s", id)
	}
	return run
}

// TestConsoleRunsAFlow: a run started from the template page's form runs
// on a worker; its page shows it running then succeeded, with its graph,
// members, result and no action but none; the runs list and its filters
// show it; a member's page shows its input and output.
func TestConsoleRunsAFlow(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t, func(c *server.Config) { c.Templates = compile(t, "pipe.ff", pipeSource) })
	b := newBrowser(t, env)

	// The template page: its graph and execs, and the start form filled
	// with an input of the flow's type.
	b.get("/ui/templates/pipe").want(t, http.StatusOK, "<h1>Template pipe</h1>", `class="graph"`,
		"<td>alert</td>", "<td>fetch</td>", "join all",
		// the input skeleton, in field order, the optional note named
		// and left out
		"{\n  &#34;url&#34;: &#34;&#34;\n}</textarea>", "<code>note</code> (string)")

	id, done := startRun(t, b, "pipe", url.Values{"input": {`{"url": "https://example.com/a"}`}})
	if done != "started" {
		t.Fatalf("done = %q", done)
	}
	// No worker yet: the run page says the run is running and why its
	// first member waits, and reloads itself (without the notice).
	p := b.get("/ui/runs/" + id + "?done=started")
	p.want(t, http.StatusOK, "The run was started.", `<span class="state s-run">running</span>`,
		"no worker is connected to namespace default", "Cancel the run",
		`<meta http-equiv="refresh" content="2; url=/ui/runs/`+id+`">`)

	// Pages showing running work reload (and say how to stop it), the
	// same page with refresh=off does not, pages with forms never do.
	const reload = `http-equiv="refresh"`
	for path, want := range map[string]bool{
		"/ui/runs": true, "/ui/runs?refresh=off": false, "/ui/runs/" + id + "?refresh=off": false,
		"/ui/workers": true, "/ui/templates/pipe": false, "/ui/runs/" + id + "/cancel": false, "/ui/limits": false,
	} {
		p := b.get(path)
		if p.status != http.StatusOK || strings.Contains(p.body, reload) != want || strings.Contains(p.body, "stop reloading") != want {
			t.Fatalf("GET %s: %d, reloads %v, want %v", path, p.status, strings.Contains(p.body, reload), want)
		}
	}

	runWorker(t, env, pipeHandlers())
	waitRun(t, env, id)
	run, err := env.Client.GetRun(ctxT(t), id)
	if err != nil || run.State != wire.RunSucceeded {
		t.Fatalf("run %+v, %v", run, err)
	}
	p = b.get("/ui/runs/" + id)
	p.want(t, http.StatusOK, `<span class="state s-good">succeeded</span>`, "4 of 4 done: 3 succeeded, 0 failed, 1 skipped",
		"<h2>Result</h2>", "&#34;url&#34;: &#34;https://example.com/a&#34;", "<summary>Input</summary>",
		`<g class="node s-good"><title>publish (kind pipe.publish): completed</title>`,
		`<g class="node s-off"><title>alert (kind pipe.alert): skipped</title>`)
	if strings.Contains(p.body, "http-equiv=\"refresh\"") || strings.Contains(p.body, "Cancel the run") ||
		strings.Contains(p.body, "Replay") {
		t.Fatalf("an ended, succeeded run's page reloads or offers actions:\n%s", p.body)
	}
	// Each member links to its execution page, which links back.
	var publish, fetch wire.FlowExec
	for _, x := range run.Execs {
		switch x.Name {
		case "publish":
			publish = x
		case "fetch":
			fetch = x
		}
	}
	if publish.ExecutionID == "" || fetch.ExecutionID == "" {
		t.Fatalf("no publish member in %+v", run.Execs)
	}
	link := "/ui/executions/" + publish.ExecutionID + "?run=" + url.QueryEscape(id)
	if !strings.Contains(p.body, `href="`+strings.ReplaceAll(link, "&", "&amp;")+`"`) && !strings.Contains(p.body, `href="`+link+`"`) {
		t.Fatalf("the run page does not link %s:\n%s", link, p.body)
	}
	b.get(link).want(t, http.StatusOK, "<h1>Member publish <code>"+publish.ExecutionID+"</code>",
		`<a href="/ui/runs/`+id+`">`, "<h2>Input</h2>", "<h2>Output</h2>", "<code>pipe.publish</code>", "1 started; the retry policy gives up after 1 failed")
	// The root member's input is the run's; reached without its run, the
	// page does not name the member.
	b.get("/ui/executions/"+fetch.ExecutionID).want(t, http.StatusOK, "<h1>Execution <code>"+fetch.ExecutionID, "<h2>Input</h2>",
		"&#34;https://example.com/a&#34;")
	// A run id that is not the execution's run is not linked back to.
	if p := b.get("/ui/executions/" + fetch.ExecutionID + "?run=someone-else"); strings.Contains(p.body, "its run") {
		t.Fatalf("the page links a run the execution is not of:\n%s", p.body)
	}
	// A skipped member says why it ended, not as an error.
	for _, x := range run.Execs {
		if x.Name == "alert" {
			b.get("/ui/executions/"+x.ExecutionID+"?run="+id).want(t, http.StatusOK, "<h1>Member alert", "Why it ended")
		}
	}
	// Cancelling the ended run cancels nothing, and says so.
	b.post("/ui/runs/"+id+"/cancel", url.Values{}).wantRedirect(t, "/ui/runs/"+id+"?done=ended")
	b.get("/ui/runs/"+id+"?done=ended").want(t, http.StatusOK, "The run had ended already: nothing was cancelled.",
		`<span class="state s-good">succeeded</span>`)
	// A run id typed in the runs page opens the run; a trailing slash is
	// no other page.
	b.get("/ui/runs?run="+url.QueryEscape(id)).wantRedirect(t, "/ui/runs/"+id)
	b.get("/ui/runs/?state=succeeded").wantRedirect(t, "/ui/runs?state=succeeded")

	// The runs list has it, with and without a matching filter.
	b.get("/ui/runs").want(t, http.StatusOK, `<a href="/ui/runs/`+id+`">`, "4/4")
	b.get("/ui/runs?state=succeeded&flow=pipe").want(t, http.StatusOK, `<a href="/ui/runs/`+id+`">`)
	if p := b.get("/ui/runs?state=failed"); strings.Contains(p.body, id) {
		t.Fatalf("state=failed lists the succeeded run:\n%s", p.body)
	}
	// A filter the API refuses is its 400, with its message.
	b.get("/ui/runs?state=sideways").want(t, http.StatusBadRequest, "state")
	// The workers page shows the worker and the kinds it handles.
	b.get("/ui/workers").want(t, http.StatusOK, "<td>console-test</td>", "pipe.check")
	// A run of the template staged in another namespace has its graph.
	other, err := env.Client.StageTemplate(ctxT(t), "pipe", map[string]string{"url": "u"}, client.WithNamespace("elsewhere"))
	if err != nil {
		t.Fatal(err)
	}
	b.get("/ui/runs/"+other.ID).want(t, http.StatusOK, "in namespace elsewhere", `class="graph"`,
		`<path class="edge on-failure"`, "check → alert (on failure)")
	// A run of a plan this server does not serve is drawn from its own
	// members, its edges' conditions unknown.
	adhoc := compile(t, "adhoc.ff", `flow adhoc() { exec a() { } exec b() { } a -> b on done }`)[0]
	ar, err := env.Client.StageFlow(ctxT(t), adhoc, nil)
	if err != nil {
		t.Fatal(err)
	}
	b.get("/ui/runs/"+ar.ID).want(t, http.StatusOK, `class="graph"`, `<path class="edge on-done"`, "a → b (on done)",
		"staged from a plan: no template of that name is served here")
	if p := b.get("/ui/runs/" + ar.ID); strings.Contains(p.body, `href="/ui/templates/adhoc"`) {
		t.Fatalf("the run page links a template that is not served")
	}
}

// TestConsoleFailureCancelReplay: a failed run's page shows what failed
// (escaped) and offers a replay; a cancel through the form cancels a
// running run; a replay the API refuses says why.
func TestConsoleFailureCancelReplay(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t, func(c *server.Config) { c.Templates = compile(t, "pipe.ff", pipeSource) })
	b := newBrowser(t, env)
	runWorker(t, env, pipeHandlers())

	id, _ := startRun(t, b, "pipe", url.Values{"input": {`{"url": "bad"}`}})
	if run := waitRun(t, env, id); run.State != wire.RunFailed {
		t.Fatalf("run %+v", run)
	}
	p := b.get("/ui/runs/" + id)
	p.want(t, http.StatusOK, `<span class="state s-bad">failed</span>`, "<h2>Did not succeed</h2>",
		"&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt; is not allowed", "Replay what did not succeed",
		`<g class="node s-good"><title>alert (kind pipe.alert): completed</title>`)
	if strings.Contains(p.body, "<script>") {
		t.Fatalf("the handler's markup reached the page unescaped:\n%s", p.body)
	}
	// Replayed: check runs again, fails again (the same input).
	b.post("/ui/runs/"+id+"/replay", url.Values{}).wantRedirect(t, "/ui/runs/"+id+"?done=replayed")
	run := waitRun(t, env, id)
	if run.State != wire.RunFailed || run.Replays != 1 {
		t.Fatalf("after the replay: %+v", run)
	}
	b.get("/ui/runs/"+id+"?done=replayed").want(t, http.StatusOK, "The run was replayed", "Replayed</dt><dd>1 time(s)")
	// The failing member's page lists both attempts: who ran them and why
	// they failed.
	full, err := env.Client.GetRun(ctxT(t), id)
	if err != nil {
		t.Fatal(err)
	}
	checked := false
	for _, x := range full.Execs {
		if x.Name == "check" {
			checked = true
			p := b.get("/ui/executions/" + x.ExecutionID + "?run=" + id)
			p.want(t, http.StatusOK, "<h2>Attempts</h2>", "<td>initial</td>", "<td>replay</td>", "console-test<br>",
				`<span class="state s-bad">failed</span>`)
			if n := strings.Count(p.body, "is not allowed</td>"); n != 2 {
				t.Fatalf("%d attempts with their error, want 2:\n%s", n, p.body)
			}
		}
	}
	if !checked {
		t.Fatalf("no member check in %+v", full.Execs)
	}

	// A run with no worker for its namespace stays running; cancel it.
	other := compile(t, "held.ff", `flow held() { namespace "nobody" exec a() { } }`)
	env2 := servertest.Start(t, func(c *server.Config) { c.Templates = other })
	b2 := newBrowser(t, env2)
	id2, _ := startRun(t, b2, "held", url.Values{})
	b2.get("/ui/runs/"+id2).want(t, http.StatusOK, "Cancel the run…", "no worker is connected to namespace nobody")
	// The reason is asked on a page of its own, which does not reload.
	c := b2.get("/ui/runs/" + id2 + "/cancel")
	c.want(t, http.StatusOK, "Cancel run <code>"+id2+"</code>?", `<input name="reason"`)
	if strings.Contains(c.body, "http-equiv") {
		t.Fatalf("the cancel page reloads:\n%s", c.body)
	}
	b2.post("/ui/runs/"+id2+"/cancel", url.Values{"reason": {"tried from a test"}}).
		wantRedirect(t, "/ui/runs/"+id2+"?done=cancelled")
	got, err := env2.Client.GetRun(ctxT(t), id2)
	if err != nil || got.State != wire.RunCancelled || !strings.Contains(got.Error, "tried from a test") {
		t.Fatalf("after the cancel: %+v, %v", got, err)
	}
	b2.get("/ui/runs/"+id2).want(t, http.StatusOK, `<span class="state s-off">cancelled</span>`, "Replay what did not succeed")
	// Replay it, then replay the running run again: the API refuses, and
	// the page says so with a 409.
	b2.post("/ui/runs/"+id2+"/replay", url.Values{}).wantRedirect(t, "/ui/runs/"+id2+"?done=replayed")
	b2.post("/ui/runs/"+id2+"/replay", url.Values{}).want(t, http.StatusConflict, "Refused: ", "<h1>Run <code>"+id2)
	// An unknown run is the API's 404.
	b2.get("/ui/runs/no-such-run").want(t, http.StatusNotFound, "not_found")
}

func (p page) wantRedirect(t *testing.T, location string) {
	t.Helper()
	if p.status != http.StatusSeeOther || p.location != location {
		t.Fatalf("status %d location %q, want 303 to %q; body:\n%s", p.status, p.location, location, p.body)
	}
}

// TestConsoleStartRefusals: the start form keeps what was typed and says
// why the API refused it.
func TestConsoleStartRefusals(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t, func(c *server.Config) { c.Templates = compile(t, "pipe.ff", pipeSource) })
	b := newBrowser(t, env)
	b.post("/ui/templates/pipe/runs", url.Values{"input": {`{"url": `}}).
		want(t, http.StatusBadRequest, "The input is not valid JSON: unexpected end of JSON input (line 1, column 7).", "{&#34;url&#34;:</textarea>")
	b.post("/ui/templates/pipe/runs", url.Values{"input": {"{\n  \"url\": \"a\"\n  \"note\": 1\n}"}}).
		want(t, http.StatusBadRequest, "(line 3, column 3)")
	b.post("/ui/templates/pipe/runs", url.Values{"input": {`{"url": 7}`}}).
		want(t, http.StatusBadRequest, "Refused: input.url", "{&#34;url&#34;: 7}</textarea>")
	b.post("/ui/templates/pipe/runs", url.Values{"input": {`{"note": "x"}`}}).
		want(t, http.StatusBadRequest, "Refused: ", "input.url")
	b.post("/ui/templates/pipe/runs", url.Values{"input": {"  "}}).
		want(t, http.StatusBadRequest, "The input is empty: the flow takes Doc.")
	b.post("/ui/templates/nope/runs", url.Values{"input": {`{}`}}).want(t, http.StatusNotFound, "nope")
	// A form over the bound is refused whole, before anything acts.
	huge := `{"url": "` + strings.Repeat("x", 1200<<10) + `"}`
	b.post("/ui/templates/pipe/runs", url.Values{"input": {huge}}).want(t, http.StatusRequestEntityTooLarge, "too large")
	b.post("/ui/runs/x/cancel", url.Values{"reason": {strings.Repeat("x", 3<<20+100<<10)}}).want(t, http.StatusRequestEntityTooLarge, "too large")
	if list, err := env.Client.ListRuns(ctxT(t), client.RunListOptions{}); err != nil || len(list.Runs) != 0 {
		t.Fatalf("runs after the refusals: %+v, %v", list, err)
	}
	// A form that does not decode is a bad request.
	req, err := http.NewRequest(http.MethodPost, env.URL+"/ui/templates/pipe/runs", strings.NewReader("input=%zz"))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusBadRequest {
		t.Fatalf("a form with a bad escape: %d, want 400", res.StatusCode)
	}
	// The bound is on the input, not on its encoding: a browser sends
	// each quote of this 400 KB input as three bytes.
	quoted := `{"url": "` + strings.Repeat(`\"`, 200_000) + `"}`
	if _, done := startRun(t, b, "pipe", url.Values{"input": {quoted}}); done != "started" {
		t.Fatalf("done = %q", done)
	}
	// The form twice (a second click on Start): its nonce makes the second
	// show the first run.
	twice := url.Values{"input": {`{"url": "twice"}`}, "nonce": {"AAAAAAAAAAAAAAAAAAAAAA"}}
	first, _ := startRun(t, b, "pipe", twice)
	again, done2 := startRun(t, b, "pipe", twice)
	if first != again || done2 != "resent" {
		t.Fatalf("the form sent twice: %s, then %s %s", first, again, done2)
	}
	if p := b.get("/ui/templates/pipe"); !regexp.MustCompile(`name="nonce" value="[A-Za-z0-9_-]{22}"`).MatchString(p.body) {
		t.Fatalf("the start form has no nonce:\n%s", p.body)
	}
	// The same idempotency key twice: the second start shows the first run.
	form := url.Values{"input": {`{"url": "u"}`}, "key": {"console-key-1"}}
	id, done := startRun(t, b, "pipe", form)
	id2, done2 := startRun(t, b, "pipe", form)
	if id != id2 || done != "started" || done2 != "existing" {
		t.Fatalf("starts with one key: %s %s, %s %s", id, done, id2, done2)
	}
	b.get("/ui/runs/"+id2+"?done=existing").want(t, http.StatusOK, "A run with that idempotency key exists already",
		"<code>console-key-1</code>")
}

// TestConsoleCrossSite: unsafe requests from another origin are refused
// before they act; the same origin and non-browser clients pass.
func TestConsoleCrossSite(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t, func(c *server.Config) { c.Templates = compile(t, "pipe.ff", pipeSource) })
	b := newBrowser(t, env)
	form := url.Values{"input": {`{"url": "u"}`}}
	for _, h := range []map[string]string{
		{"Origin": "https://evil.example"},
		{"Sec-Fetch-Site": "cross-site"},
		{"Sec-Fetch-Site": "same-site", "Origin": "http://sub." + strings.TrimPrefix(env.URL, "http://")},
	} {
		b.do(http.MethodPost, "/ui/templates/pipe/runs", form, h).want(t, http.StatusForbidden, "came from another site")
	}
	list, err := env.Client.ListRuns(ctxT(t), client.RunListOptions{})
	if err != nil || len(list.Runs) != 0 {
		t.Fatalf("a refused request started a run: %+v, %v", list, err)
	}
	// Without the headers (curl, scripts) the request is not a browser's.
	startRun(t, b, "pipe", form)
}

// TestConsoleSignIn: with a token, the console asks for it once and keeps
// a session; a wrong token, a forged or foreign session, and signing out
// leave the pages closed; the API still wants its bearer token.
func TestConsoleSignIn(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t, func(c *server.Config) {
		c.Token = "s3cret-console-token"
		c.Templates = compile(t, "pipe.ff", pipeSource)
	})
	b := newBrowser(t, env)
	b.get("/ui/templates").wantRedirect(t, "/ui/login?next=%2Fui%2Ftemplates")
	// An action without a session is refused, not redirected (its form
	// would be lost).
	b.do(http.MethodPost, "/ui/templates/pipe/runs", url.Values{"input": {`{"url":"u"}`}},
		map[string]string{"Origin": b.base, "Referer": b.base + "/ui/templates/pipe"}).
		want(t, http.StatusUnauthorized, "nothing was done", `<a href="/ui/login?next=%2fui%2ftemplates%2fpipe">Sign in</a>`)
	// Signed out, the pages' links are not offered.
	if p := b.get("/ui/login"); strings.Contains(p.body, `href="/ui/workers"`) {
		t.Fatalf("the sign-in page links pages it cannot show:\n%s", p.body)
	}
	b.get("/ui/login?next=%2Fui%2Ftemplates").want(t, http.StatusOK, `name="token"`, `value="/ui/templates"`)
	b.post("/ui/login", url.Values{"token": {"wrong"}, "next": {"/ui/templates"}}).
		want(t, http.StatusUnauthorized, "That is not ffrun&#39;s API token")
	p := b.post("/ui/login", url.Values{"token": {"s3cret-console-token"}, "next": {"/ui/templates"}})
	p.wantRedirect(t, "/ui/templates")
	cookie := p.header.Get("Set-Cookie")
	for _, attr := range []string{"ff_session=", "Path=/ui", "HttpOnly", "SameSite=Lax", "Max-Age=43200"} {
		if !strings.Contains(cookie, attr) {
			t.Fatalf("session cookie %q lacks %s", cookie, attr)
		}
	}
	if strings.Contains(cookie, "s3cret-console-token") {
		t.Fatalf("the session cookie holds the token: %q", cookie)
	}
	b.get("/ui/templates").want(t, http.StatusOK, `<a href="/ui/templates/pipe">pipe</a>`, "Sign out")
	startRun(t, b, "pipe", url.Values{"input": {`{"url":"u"}`}})
	// Behind a proxy that says the browser came over HTTPS, the cookie is
	// Secure.
	if c := newBrowser(t, env).do(http.MethodPost, "/ui/login", url.Values{"token": {"s3cret-console-token"}},
		map[string]string{"X-Forwarded-Proto": "https"}).header.Get("Set-Cookie"); !strings.Contains(c, "; Secure") {
		t.Fatalf("session cookie behind an HTTPS proxy: %q", c)
	}
	if strings.Contains(cookie, "Secure") {
		t.Fatalf("session cookie over plain HTTP is Secure: %q", cookie)
	}
	// The session is the console's only: the API wants its bearer token.
	if r := env.Do(t, http.MethodGet, "/v1/templates", map[string]string{"Cookie": strings.Split(cookie, ";")[0]}, ""); r.Status != http.StatusUnauthorized {
		t.Fatalf("the console's session opened the API: %d %s", r.Status, r.Body)
	}
	// A forged signature, and a session of another token, are not sessions.
	value := strings.TrimPrefix(strings.Split(cookie, ";")[0], "ff_session=")
	exp, _, _ := strings.Cut(value, ".")
	other := servertest.Start(t, func(c *server.Config) { c.Token = "another-token-0123" })
	ob := newBrowser(t, other)
	ob.post("/ui/login", url.Values{"token": {"another-token-0123"}}).wantRedirect(t, "/ui/runs")
	for _, forged := range []string{exp + ".AAAA", "9999999999." + strings.SplitN(value, ".", 2)[1], "nonsense", ""} {
		fresh := newBrowser(t, env)
		fresh.do(http.MethodGet, "/ui/runs", nil, map[string]string{"Cookie": "ff_session=" + forged}).
			wantRedirect(t, "/ui/login?next=%2Fui%2Fruns")
	}
	u, _ := url.Parse(other.URL)
	foreign := ob.hc.Jar.Cookies(&url.URL{Scheme: "http", Host: u.Host, Path: "/ui/"})
	if len(foreign) != 1 {
		t.Fatalf("cookies of the other server: %v", foreign)
	}
	newBrowser(t, env).do(http.MethodGet, "/ui/runs", nil, map[string]string{"Cookie": "ff_session=" + foreign[0].Value}).
		wantRedirect(t, "/ui/login?next=%2Fui%2Fruns")
	// A next outside the console goes to the runs.
	for _, next := range []string{"//evil.example/ui/", "https://evil.example/", "/v1/flows", `/ui/\evil`} {
		nb := newBrowser(t, env)
		nb.post("/ui/login", url.Values{"token": {"s3cret-console-token"}, "next": {next}}).wantRedirect(t, "/ui/runs")
	}
	// Signing out ends the session, a copy of its cookie included, on
	// every ffrun of the token; other sessions go on.
	second := newBrowser(t, env)
	second.post("/ui/login", url.Values{"token": {"s3cret-console-token"}}).wantRedirect(t, "/ui/runs")
	b.post("/ui/logout", url.Values{}).wantRedirect(t, "/ui/login")
	b.get("/ui/runs").wantRedirect(t, "/ui/login?next=%2Fui%2Fruns")
	sameToken := servertest.Start(t, func(c *server.Config) {
		c.Token = "s3cret-console-token"
		c.KeyPrefix = env.Config.KeyPrefix // one deployment: the same keys
	})
	for _, e := range []*servertest.Env{env, sameToken} {
		newBrowser(t, e).do(http.MethodGet, "/ui/runs", nil, map[string]string{"Cookie": strings.Split(cookie, ";")[0]}).
			wantRedirect(t, "/ui/login?next=%2Fui%2Fruns")
	}
	second.get("/ui/runs").want(t, http.StatusOK)
}

// TestConsolePages: schedules, an empty server, headers, the refusal of
// unknown pages, and no console when it is disabled.
func TestConsolePages(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t, func(c *server.Config) { c.Templates = compile(t, "pipe.ff", pipeSource) })
	b := newBrowser(t, env)
	if _, _, err := env.Client.PutSchedule(ctxT(t), "hourly-pipe", wire.PutSchedule{Template: "pipe", Cron: "@hourly",
		Timezone: "Asia/Kolkata", Input: json.RawMessage(`{"url":"s"}`)}); err != nil {
		t.Fatal(err)
	}
	p := b.get("/ui/schedules")
	p.want(t, http.StatusOK, "<td>hourly-pipe</td>", "<code>@hourly</code> in Asia/Kolkata", ":00:00 IST (", ":30 UTC)", "<summary>input</summary>", "&#34;url&#34;: &#34;s&#34;", "<td>the API</td>",
		`<a href="/ui/schedules/hourly-pipe/delete">delete…</a>`)
	// Deleting asks first, on a page of its own; then the schedule is gone.
	b.get("/ui/schedules/hourly-pipe/delete").want(t, http.StatusOK, "Delete schedule hourly-pipe?", "Delete the schedule")
	b.post("/ui/schedules/hourly-pipe/delete", url.Values{}).wantRedirect(t, "/ui/schedules?done=schedule-deleted")
	if _, err := env.Client.GetSchedule(ctxT(t), "hourly-pipe"); !client.IsCode(err, wire.CodeNotFound) {
		t.Fatalf("the deleted schedule: %v", err)
	}
	b.get("/ui/schedules?done=schedule-deleted").want(t, http.StatusOK, "The schedule was deleted", "No schedule")
	b.post("/ui/schedules/hourly-pipe/delete", url.Values{}).want(t, http.StatusNotFound)
	for k, v := range map[string]string{
		"Content-Security-Policy": "default-src 'none'", "X-Frame-Options": "DENY", "X-Content-Type-Options": "nosniff",
		"Cache-Control": "no-store", "Content-Type": "text/html; charset=utf-8", "Referrer-Policy": "same-origin",
	} {
		if !strings.Contains(p.header.Get(k), v) {
			t.Fatalf("header %s = %q, want %q", k, p.header.Get(k), v)
		}
	}
	b.get("/ui").wantRedirect(t, "/ui/runs")
	b.get("/ui/").wantRedirect(t, "/ui/runs")
	b.get("/ui/runs").want(t, http.StatusOK, "No run here")
	// Namespaces to choose from: the default, the templates', the one asked for.
	b.get("/ui/runs?namespace=elsewhere").want(t, http.StatusOK, "<option>default</option>", "<option selected>elsewhere</option>")
	if p := b.get("/ui/runs?namespace=elsewhere"); strings.Contains(p.body, `<option value="" selected>`) {
		t.Fatal("auto is selected with a namespace asked for")
	}
	b.get("/ui/workers").want(t, http.StatusOK, "<option selected>default</option>")
	b.get("/ui/workers").want(t, http.StatusOK, "No worker is connected")
	b.get("/ui/nothing/here").want(t, http.StatusNotFound, "There is no such page.")
	// Past a page of runs (the API's 50), older ones are a link away, and
	// the newest a link back, filters kept.
	for i := range 51 {
		if _, err := env.Client.StageTemplate(ctxT(t), "pipe", map[string]string{"url": strconv.Itoa(i)}); err != nil {
			t.Fatal(err)
		}
	}
	// The oldest as listed (runs staged in one millisecond are listed by
	// id, not by staging order).
	all, err := env.Client.ListRuns(ctxT(t), client.RunListOptions{State: wire.RunRunning, Limit: 100})
	if err != nil || len(all.Runs) != 51 {
		t.Fatalf("ListRuns = %d runs, %v", len(all.Runs), err)
	}
	first := all.Runs[50].ID
	p = b.get("/ui/runs?state=running")
	older := regexp.MustCompile(`<a href="(/ui/runs\?[^"]*cursor=[^"]*)">Older runs →</a>`).FindStringSubmatch(p.body)
	if older == nil || strings.Contains(p.body, first) {
		t.Fatalf("the first page of 51 runs: no older link, or the oldest run on it:\n%s", p.body)
	}
	next := strings.ReplaceAll(older[1], "&amp;", "&")
	b.get(next).want(t, http.StatusOK, first, `Newest runs</a>`, "state=running")
	b.get("/ui/static/app.css").want(t, http.StatusOK, "svg.graph")
	// Only the stylesheet's directory is served, whatever the path says.
	for _, path := range []string{"/ui/static/%2e%2e/templates/layout.html", "/ui/static/..%2ftemplates%2flogin.html", "/ui/static/../templates/run.html"} {
		if p := b.get(path); strings.Contains(p.body, "{{define") {
			t.Fatalf("GET %s serves a page template", path)
		}
	}
	b.do(http.MethodDelete, "/ui/runs", nil, nil).want(t, http.StatusMethodNotAllowed, "method_not_allowed")
	// Run now starts a run by hand and shows it; the page's form sent
	// twice shows the same run.
	if _, _, err := env.Client.PutSchedule(ctxT(t), "by-hand", wire.PutSchedule{Template: "pipe", Cron: "0 4 1 1 *",
		Input: json.RawMessage(`{"url":"s"}`)}); err != nil {
		t.Fatal(err)
	}
	p = b.get("/ui/schedules")
	form := regexp.MustCompile(`<form method="post" action="/ui/schedules/by-hand/run"><input type="hidden" name="nonce" value="([A-Za-z0-9_-]{22})">`).FindStringSubmatch(p.body)
	if form == nil {
		t.Fatalf("no Run now form on the schedules page:\n%s", p.body)
	}
	started := b.post("/ui/schedules/by-hand/run", url.Values{"nonce": {form[1]}})
	m := regexp.MustCompile(`^/ui/runs/([^?]+)\?done=started$`).FindStringSubmatch(started.location)
	if started.status != http.StatusSeeOther || m == nil {
		t.Fatalf("Run now: %d to %q", started.status, started.location)
	}
	b.post("/ui/schedules/by-hand/run", url.Values{"nonce": {form[1]}}).wantRedirect(t, "/ui/runs/"+m[1]+"?done=resent")
	b.get("/ui/runs/"+m[1]).want(t, http.StatusOK, ">by-hand</a>, run by hand")
	if s, err := env.Client.GetSchedule(ctxT(t), "by-hand"); err != nil || s.Fires != 0 || s.LastRunID != "" {
		t.Fatalf("the schedule after Run now: %+v, %v; want no fire recorded", s, err)
	}
	b.post("/ui/schedules/nope/run", url.Values{"nonce": {form[1]}}).want(t, http.StatusNotFound, "no such schedule")
	// A namespace no template names is offered once something was
	// created in it, and the workers page shows what its lanes hold.
	if _, _, err := env.Client.CreateExecution(ctxT(t), wire.CreateExecution{Namespace: "side", Lane: "l2", Kind: "k"}); err != nil {
		t.Fatal(err)
	}
	b.get("/ui/runs").want(t, http.StatusOK, "<option>side</option>")
	b.get("/ui/workers?namespace=side").want(t, http.StatusOK, "<h2>Work in side</h2>", "<tr><td>l2</td><td>1</td><td>0</td>")
	b.get("/ui/workers").want(t, http.StatusOK, "<h2>Work in default</h2>", "<tr><td>default</td>")

	off := servertest.Start(t, func(c *server.Config) { c.DisableUI = true })
	if r := off.Do(t, http.MethodGet, "/ui/runs", nil, ""); r.Status != http.StatusNotFound || r.Err.Code != wire.CodeUnknownRoute {
		t.Fatalf("a disabled console answers %d %s", r.Status, r.Body)
	}
}

// TestConsoleLargeRun: a run of 2,001 members lists its first 1,000 (a
// page of GET /v1/flows/{id}), says how many it has, and links to the next
// page, and so on to the last, which links back to the first; it has no
// graph.
func TestConsoleLargeRun(t *testing.T) {
	t.Parallel()
	var src strings.Builder
	src.WriteString("flow wide() {\n  namespace \"nobody\"\n  exec root() { }\n")
	for i := range 2000 {
		src.WriteString("  exec m" + strconv.Itoa(i) + "() { }\n  root -> m" + strconv.Itoa(i) + "\n")
	}
	src.WriteString("}\n")
	env := servertest.Start(t, func(c *server.Config) { c.Templates = compile(t, "wide.ff", src.String()) })
	b := newBrowser(t, env)
	id, _ := startRun(t, b, "wide", url.Values{})
	p := b.get("/ui/runs/" + id)
	p.want(t, http.StatusOK, "0 of 2001 done", "1000 of the run's 2001 members, in flow order",
		// 2 s for each 500 members a reload reads, the page's 1,000 (not
		// the run's 2,001): 4 s, not the 2 s of a small run.
		`<meta http-equiv="refresh" content="4; url=/ui/runs/`+id+`">`)
	if strings.Contains(p.body, `class="graph"`) {
		t.Fatal("a 2,001-member run is drawn")
	}
	// Page after page, every member once, in flow order (root first).
	members := regexp.MustCompile(`<a href="/ui/executions/[^"]*">([^<]*)</a>`)
	next := regexp.MustCompile(`<a href="([^"]*)">Next members →</a>`)
	seen := map[string]bool{}
	var order []string
	for pages := 1; ; pages++ {
		if n := len(members.FindAllStringSubmatch(p.body, -1)); n != min(1000, 2001-len(order)) {
			t.Fatalf("page %d lists %d members", pages, n)
		}
		for _, m := range members.FindAllStringSubmatch(p.body, -1) {
			if seen[m[1]] {
				t.Fatalf("page %d lists %s again", pages, m[1])
			}
			seen[m[1]] = true
			order = append(order, m[1])
		}
		if pages > 1 && !strings.Contains(p.body, `<a href="/ui/runs/`+id+`">← First members</a>`) {
			t.Fatalf("page %d does not link to the first", pages)
		}
		link := next.FindStringSubmatch(p.body)
		if link == nil {
			break
		}
		if pages == 3 {
			t.Fatal("a third page links to a fourth")
		}
		p = b.get(html.UnescapeString(link[1]))
		p.want(t, http.StatusOK, "0 of 2001 done", "of the run's 2001 members")
	}
	if len(order) != 2001 || order[0] != "root" {
		t.Fatalf("%d members listed, the first %q", len(order), order[0])
	}
	// The page of the last member, reached from its run, names it and
	// links back without reading the run: the execution says both.
	last := regexp.MustCompile(`<a href="([^"]*)">` + order[2000] + `</a>`).FindStringSubmatch(p.body)
	if last == nil {
		t.Fatalf("the last page does not link %s", order[2000])
	}
	reads := runReads(t, env)
	if reads < 3 {
		t.Fatalf("the metrics count %d reads of the run after its three pages", reads)
	}
	b.get(html.UnescapeString(last[1])).want(t, http.StatusOK, "<h1>Member "+order[2000]+" <code>", `<a href="/ui/runs/`+id+`">← its run</a>`)
	if got := runReads(t, env); got != reads {
		t.Fatalf("the member page read its run: GET /v1/flows/{id} answered %d times before, %d after", reads, got)
	}
	// A made-up cursor is the API's refusal.
	if p := b.get("/ui/runs/" + id + "?members=7.nosuch"); p.status != http.StatusBadRequest || !strings.Contains(p.body, "execs_cursor") {
		t.Fatalf("a made-up page: %d\n%s", p.status, p.body)
	}
	// Cancelled, every member did not succeed: the first 100 of them are
	// listed as such.
	b.post("/ui/runs/"+id+"/cancel", url.Values{}).wantRedirect(t, "/ui/runs/"+id+"?done=cancelled")
	p = b.get("/ui/runs/" + id)
	p.want(t, http.StatusOK, "2001 of 2001 done", "1901 more did not succeed")
	if n := strings.Count(p.body, `<a href="/ui/executions/`); n != 1100 {
		t.Fatalf("%d links on the cancelled run's page, want 1,000 members and 100 failures", n)
	}

	// A flow of few execs but many edges is not drawn either: 60 execs,
	// each after every earlier one, have 1,770 edges and far more lanes.
	var dense strings.Builder
	dense.WriteString("flow dense() {\n")
	for i := range 60 {
		dense.WriteString("  exec m" + strconv.Itoa(i) + "() { }\n")
		for j := range i {
			dense.WriteString("  m" + strconv.Itoa(j) + " -> m" + strconv.Itoa(i) + "\n")
		}
	}
	dense.WriteString("}\n")
	env2 := servertest.Start(t, func(c *server.Config) { c.Templates = compile(t, "dense.ff", dense.String()) })
	if p := newBrowser(t, env2).get("/ui/templates/dense"); p.status != http.StatusOK || strings.Contains(p.body, `class="graph"`) || len(p.body) > 1<<20 {
		t.Fatalf("the dense flow's page: %d, %d bytes, graph drawn: %v", p.status, len(p.body), strings.Contains(p.body, `class="graph"`))
	}
}

// runReads is how many GET /v1/flows/{id} env answered (its metrics).
func runReads(t *testing.T, env *servertest.Env) int {
	t.Helper()
	r := env.Do(t, http.MethodGet, "/metrics", nil, "")
	if r.Status != http.StatusOK {
		t.Fatalf("GET /metrics: %d", r.Status)
	}
	n := 0
	for line := range strings.Lines(r.Body) {
		if rest, ok := strings.CutPrefix(line, `ff_http_requests_total{method="GET",route="/v1/flows/:id",`); ok {
			_, v, _ := strings.Cut(strings.TrimSpace(rest), " ")
			k, err := strconv.Atoi(v)
			if err != nil {
				t.Fatalf("metrics line %q: %v", line, err)
			}
			n += k
		}
	}
	return n
}

var svgRe = regexp.MustCompile(`(?s)<svg class="graph".*?</svg>`)

// TestConsoleGraphs: the graph of every example flow, as its template
// page draws it, is well-formed SVG and matches its golden file
// (testdata/<flow>.svg; -update rewrites them).
func TestConsoleGraphs(t *testing.T) {
	t.Parallel()
	pkg, diags := compiler.CompileFiles("../../examples/flows")
	if len(diags) > 0 {
		t.Fatalf("compile the examples: %v", diags)
	}
	var flows []*plan.Flow
	for i := range pkg.Flows {
		flows = append(flows, &pkg.Flows[i])
	}
	env := servertest.Start(t, func(c *server.Config) { c.Templates, c.Schedules = flows, pkg.Schedules })
	b := newBrowser(t, env)
	b.get("/ui/runs").want(t, http.StatusOK, `<option value="" selected>auto`, "<option>etl</option>", "<option>shop</option>",
		"Showing namespace default.", "No run here")
	// The default namespace empty, the page opens on the first with runs;
	// a template's flow is looked for in its namespace.
	if _, err := env.Client.StageTemplate(ctxT(t), "nightly_etl", map[string]string{"source": "s", "day": "d"}); err != nil {
		t.Fatal(err)
	}
	b.get("/ui/runs").want(t, http.StatusOK, `<option value="" selected>auto`, "Showing namespace etl (the default one has none).", "<td>nightly_etl</td>")
	b.get("/ui/runs?flow=nightly_etl").want(t, http.StatusOK, "Showing namespace etl (the namespace of template nightly_etl).", "<td>nightly_etl</td>")
	b.get("/ui/runs?namespace=etl").want(t, http.StatusOK, "<option selected>etl</option>", "<td>nightly_etl</td>")
	// The examples' declared schedule is registered, and said to be.
	b.get("/ui/schedules").want(t, http.StatusOK, "<td>nightly</td>", "<td>a .ff file</td>")
	// Upstreams are listed with the condition of their edge.
	b.get("/ui/templates/nightly_etl").want(t, http.StatusOK, "<td>extract, validate (on failure)</td>", "on failure</span>")
	for _, f := range flows {
		p := b.get("/ui/templates/" + f.Name)
		p.want(t, http.StatusOK)
		svg := svgRe.FindString(p.body)
		if svg == "" {
			t.Fatalf("template %s: no graph", f.Name)
		}
		dec := xml.NewDecoder(strings.NewReader(svg))
		for {
			if _, err := dec.Token(); err == io.EOF {
				break
			} else if err != nil {
				t.Fatalf("template %s: the graph is not well-formed: %v\n%s", f.Name, err, svg)
			}
		}
		for _, x := range f.Execs {
			if !strings.Contains(svg, ">"+x.Name+"<") {
				t.Fatalf("template %s: exec %s is not drawn", f.Name, x.Name)
			}
		}
		if n := strings.Count(svg, `<path class="edge`); n != len(f.Edges) {
			t.Fatalf("template %s: %d edges drawn, want %d", f.Name, n, len(f.Edges))
		}
		golden := filepath.Join("testdata", f.Name+".svg")
		if *update {
			if err := os.MkdirAll("testdata", 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(golden, []byte(svg+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(golden)
		if err != nil {
			t.Fatalf("%v (run go test ./runtime/dashboard -update)", err)
		}
		if d := cmp.Diff(strings.TrimSuffix(string(want), "\n"), svg); d != "" {
			t.Fatalf("template %s: graph differs from %s (-want +got):\n%s", f.Name, golden, d)
		}
	}
}

// limitsSource declares a shared budget, a run budget, a quota and a keyed
// quota.
const limitsSource = `
type Job { tenant: string }
budget tokens { dimension tokens { hard 100 } }
budget per_run { dimension calls { hard 5 } scope run }
quota api { concurrency 3 }
quota per_tenant { rate 10 per 1m key tenant }
flow work(Job) {
  namespace "lim"
  budget tokens, per_run
  exec call(Job) { quota api, per_tenant }
}
`

// TestConsoleLimits: the limits page shows the declared shared budgets
// and quotas with their state, and its forms pause and resume a quota (or
// one key value of a keyed one) and reset a budget through the API.
func TestConsoleLimits(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t, func(c *server.Config) { c.Templates = compile(t, "limits.ff", limitsSource) })
	b := newBrowser(t, env)
	ctx := ctxT(t)
	if _, err := env.Client.ReportBudgetUsage(ctx, "lim/tokens", wire.BudgetUsageReport{Dimension: "tokens", Delta: 40}); err != nil {
		t.Fatal(err)
	}
	p := b.get("/ui/limits")
	p.want(t, http.StatusOK, "<code>lim/tokens</code>", `tokens: <progress max="100" value="40"></progress> 40 of 100`,
		"<code>lim/api</code>", "3 at once", "<code>lim/per_tenant</code>", "10 per 1m", "per value of tenant",
		"no key value has been admitted yet", "<td>work</td>")
	if strings.Contains(p.body, "per_run") {
		t.Fatalf("a run-scoped budget is listed as shared:\n%s", p.body)
	}

	b.post("/ui/quotas/pause", url.Values{"id": {"lim/api"}, "minutes": {"30"}, "reason": {"vendor said 429"}}).
		wantRedirect(t, "/ui/limits?done=quota-paused")
	q, err := env.Client.GetQuota(ctx, "lim/api")
	if err != nil || len(q.Subjects) != 1 || q.Subjects[0].PausedUntil == nil || q.Subjects[0].PauseReason != "vendor said 429" ||
		time.Until(*q.Subjects[0].PausedUntil) < 29*time.Minute {
		t.Fatalf("after the pause: %+v, %v", q, err)
	}
	b.get("/ui/limits?done=quota-paused").want(t, http.StatusOK, "The quota was paused", "vendor said 429", "Resume")
	b.post("/ui/quotas/resume", url.Values{"id": {"lim/api"}}).wantRedirect(t, "/ui/limits?done=quota-resumed")
	if q, err = env.Client.GetQuota(ctx, "lim/api"); err != nil || q.Subjects[0].PausedUntil != nil {
		t.Fatalf("after the resume: %+v, %v", q, err)
	}
	// One key value of the keyed quota, before it was ever admitted.
	b.post("/ui/quotas/pause", url.Values{"id": {"lim/per_tenant"}, "key": {"acme"}, "minutes": {"5"}}).
		wantRedirect(t, "/ui/limits?done=quota-paused")
	b.get("/ui/limits").want(t, http.StatusOK, "<code>acme</code>", "paused from the console")
	// Bad lengths never reach the API; a refusal of the API is shown.
	for _, m := range []string{"0", "-1", "x", "10081"} {
		b.post("/ui/quotas/pause", url.Values{"id": {"lim/api"}, "minutes": {m}}).want(t, http.StatusBadRequest, "at most 10080 minutes")
	}
	b.post("/ui/quotas/pause", url.Values{"id": {"lim/nope"}, "minutes": {"1"}}).want(t, http.StatusNotFound, "Refused: ")

	// A reset asks first, on a page of its own, which shows the usage.
	b.get("/ui/limits").want(t, http.StatusOK, `<form method="get" action="/ui/budgets/reset"><input type="hidden" name="id" value="lim/tokens">`)
	b.get("/ui/budgets/reset?id=lim/tokens&view=namespace%3Dlim").want(t, http.StatusOK, "Reset budget <code>lim/tokens</code>?",
		"<li>tokens: ", `<input type="hidden" name="view" value="namespace=lim">`, `<a href="/ui/limits?namespace=lim">Keep its usage</a>`)
	b.get("/ui/budgets/reset?id=lim/nope").want(t, http.StatusNotFound)
	b.post("/ui/budgets/reset", url.Values{"id": {"lim/tokens"}}).wantRedirect(t, "/ui/limits?done=budget-reset")
	if bu, err := env.Client.GetBudget(ctx, "lim/tokens"); err != nil || bu.Dimensions[0].Used != 0 {
		t.Fatalf("after the reset: %+v, %v", bu, err)
	}
	// Others by id: one the API made, and one nobody did.
	if _, _, err := env.Client.PutQuota(ctx, wire.PutQuota{ID: "other/made", Concurrency: 1}); err != nil {
		t.Fatal(err)
	}
	b.get("/ui/limits?id=other/made").want(t, http.StatusOK, "<code>other/made</code>", "1 at once")
	b.get("/ui/limits?id=other/none").want(t, http.StatusOK, "Not found: other/none.")
}
