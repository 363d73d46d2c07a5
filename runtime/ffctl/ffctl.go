// Package ffctl holds ffrun's client commands: `ffrun templates`, `start`,
// `runs`, `get`, `watch`, `result`, `cancel` and `replay` talk to a running
// ffrun over its HTTP API (package client) to start, list, follow, cancel
// and replay flow runs from a terminal or a script.
//
// Every command takes --server (FF_SERVER, default http://127.0.0.1:8080)
// and reads the bearer token from FF_API_TOKEN (never from a flag, which
// would show in the process list); an https server whose certificate a
// private CA signed is trusted with FF_API_CA (a PEM file); --json prints the API's answer as JSON
// instead of text. Exit status: 0 done (a run that succeeded), 1 an error
// (the server refused the request or could not be reached; the commands
// that wait for a run first ride out an outage as client.Run.Wait does),
// 2 bad usage,
// 3 a run that failed or was cancelled, 4 a run still running when the
// wait for it ended, 130 interrupted (ctrl-C: the command stops quietly),
// 143 terminated (SIGTERM, as quietly).
package ffctl

import (
	"bytes"
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/flowfabric/ff/compiler/plan"
	"github.com/flowfabric/ff/dsl"
	"github.com/flowfabric/ff/runtime/client"
	"github.com/flowfabric/ff/runtime/internal/jsonscan"
	"github.com/flowfabric/ff/runtime/internal/timespan"
	"github.com/flowfabric/ff/runtime/internal/utf8cut"
	"github.com/flowfabric/ff/runtime/wire"
)

// ServerDefault is the API address used without --server or FF_SERVER:
// where `ffrun dev` listens.
const ServerDefault = "http://127.0.0.1:8080"

// WatchInterval is how often watch reads the run.
const WatchInterval = 200 * time.Millisecond

// RequestTimeout bounds each request to the server (connecting included),
// so that a server that accepts but never answers cannot hang a command;
// a long-poll of the result route gets its wait on top.
const RequestTimeout = 30 * time.Second

// pollMax is the longest wait a command asks of the result route.
const pollMax = time.Minute

// forever is the wait of await without an end.
const forever time.Duration = -1

// Exit statuses: a script tells a run that failed from a server it could
// not reach (worth another try) and from a run not done yet.
const (
	ExitOK        = 0
	ExitError     = 1 // the server refused the request, or could not be reached
	ExitUsage     = 2
	ExitRunFailed = 3 // the run failed or was cancelled
	ExitRunning   = 4 // the run was still running when the wait ended
	// ExitInterrupted: the command was interrupted (ctrl-C: the context
	// of Main ended) and stopped without a word, 128 + SIGINT as a shell
	// reports a command that ctrl-C stopped. The run it waited for, if
	// any, goes on.
	ExitInterrupted = 130
	// ExitTerminated: as ExitInterrupted, for a context that SIGTERM
	// ended (its cause a Signalled): 128 + SIGTERM, as a shell reports a
	// command that kill stopped.
	ExitTerminated = 143
)

// Signalled is the cause (context.Cause) of a context that a signal
// ended, as ffrun's Main ends the context it gives Main: a command so
// stopped exits with ExitTerminated for SIGTERM, else ExitInterrupted.
type Signalled struct{ Signal os.Signal }

func (s Signalled) Error() string { return "stopped by signal " + s.Signal.String() }

// interrupted returns the exit status of a command whose context ended:
// ExitTerminated when SIGTERM ended it, else ExitInterrupted.
func interrupted(ctx context.Context) int {
	if s, ok := errors.AsType[Signalled](context.Cause(ctx)); ok && s.Signal == syscall.SIGTERM {
		return ExitTerminated
	}
	return ExitInterrupted
}

// runsMaxPage is the most runs `ffrun runs` lists.
const runsMaxPage = 500

// Env is what the commands read and write.
type Env struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	Getenv         func(string) string
	// RequestTimeout overrides the package's RequestTimeout when > 0.
	RequestTimeout time.Duration
}

// withDefaults fills in what env leaves nil: no input, output discarded, no
// environment variables.
func (env Env) withDefaults() Env {
	if env.Stdin == nil {
		env.Stdin = strings.NewReader("")
	}
	if env.Stdout == nil {
		env.Stdout = io.Discard
	}
	if env.Stderr == nil {
		env.Stderr = io.Discard
	}
	if env.Getenv == nil {
		env.Getenv = func(string) string { return "" }
	}
	return env
}

// Usage lists the commands, for ffrun's help.
const Usage = `  ffrun templates                     list the flows the server serves by name
  ffrun namespaces                    the namespaces: runs, workers, and what each lane holds
  ffrun budgets [--scope shared|run]  the budgets: usage against limits, blocked or not
  ffrun quotas                        the quotas: limits, and per key value use and pauses
  ffrun schedules                     list the schedules that start runs of templates
  ffrun schedules run NAME [--key K] [--watch | --wait D]
                                      start a run of a schedule now, besides its fires
  ffrun start TEMPLATE [--input JSON|@FILE|-] [--key K] [--watch | --wait D]
                                      start a run of a template
  ffrun runs [--flow F] [--state S] [--limit N]
                                      list runs, newest first
  ffrun get RUN                       a run and the state of every member
                                      (given an execution's id: it and its attempts)
  ffrun watch RUN                     print members' state changes until the run ends
  ffrun result RUN [--wait D]         the result of a run that succeeded
  ffrun cancel RUN [--reason R]       cancel every member that has not ended
  ffrun cancel --all [--flow F] [--reason R]
                                      cancel every running run of the namespace (of flow F)
  ffrun replay RUN [--watch]          run a failed or cancelled run again from its failures
  ffrun replay --all [--flow F] [--state failed|cancelled]
                                      replay every failed (or cancelled) run of the namespace
  (each takes --server URL, default FF_SERVER or ` + ServerDefault + `, and --json; start, runs,
   budgets, quotas and the --all forms take --namespace NS; the token is read from FF_API_TOKEN, a
   private CA from FF_API_CA;
   exit 0 done, 1 error, 2 usage, 3 the run failed or was cancelled, 4 still running,
   130 interrupted (ctrl-C), 143 terminated (SIGTERM))
`

// IsCommand reports whether name is one of the client commands.
func IsCommand(name string) bool { return commandOf(name) != nil }

// commandOf returns the method that runs the client command name, or nil.
func commandOf(name string) func(*cmd, context.Context, []string) error {
	switch name {
	case "templates":
		return (*cmd).templates
	case "namespaces":
		return (*cmd).namespaces
	case "budgets":
		return (*cmd).budgets
	case "quotas":
		return (*cmd).quotas
	case "schedules":
		return (*cmd).schedules
	case "start":
		return (*cmd).start
	case "runs":
		return (*cmd).runs
	case "get":
		return (*cmd).get
	case "watch":
		return (*cmd).watch
	case "result":
		return (*cmd).result
	case "cancel":
		return (*cmd).cancel
	case "replay":
		return (*cmd).replay
	}
	return nil
}

// errUsage marks errors in the command line.
var errUsage = errors.New("usage")

// errRunDidNotSucceed marks a run that failed or was cancelled
// (ExitRunFailed, already reported).
var errRunDidNotSucceed = errors.New("run did not succeed")

// errRunning marks a run still running when the wait for it ended
// (ExitRunning).
var errRunning = errors.New("still running")

// Main runs the client command name with its arguments and returns the exit
// status.
func Main(ctx context.Context, name string, args []string, env Env) int {
	env = env.withDefaults()
	err := run(ctx, name, args, env)
	switch {
	case err == nil:
		return ExitOK
	case errors.Is(err, flag.ErrHelp):
		return ExitOK
	case errors.Is(err, errUsage):
		fmt.Fprintf(env.Stderr, "ffrun %s: %v\n", name, err)
		return ExitUsage
	case errors.Is(err, errRunDidNotSucceed):
		return ExitRunFailed
	case errors.Is(err, errRunning):
		fmt.Fprintf(env.Stderr, "ffrun %s: %v\n", name, err)
		return ExitRunning
	case ctx.Err() != nil && errors.Is(err, context.Canceled):
		// Interrupted, as asked: not an error to report.
		return interrupted(ctx)
	}
	if ue, ok := errors.AsType[*url.Error](err); ok {
		// Not the client's layers of context around it: where, and why.
		where := ue.URL
		if u, perr := url.Parse(ue.URL); perr == nil {
			where = u.Scheme + "://" + u.Host
		}
		fmt.Fprintf(env.Stderr, "ffrun %s: cannot reach ffrun at %s: %v\n", name, where, ue.Err)
	} else {
		fmt.Fprintf(env.Stderr, "ffrun %s: %s\n", name, message(err))
	}
	if errors.Is(err, syscall.ECONNREFUSED) {
		fmt.Fprintln(env.Stderr, "(no ffrun listens there: start one, or give its URL with --server or FF_SERVER)")
	}
	return ExitError
}

// message is err as a command prints it. An answer of the API is shown
// without the client's layers of context around it ("client: stage
// template x: ffrun: "), as "<status> <code>: <message>" and what the
// command added after it; an unknown template points to ffrun templates
// rather than to the API's route.
func message(err error) string {
	ae, ok := errors.AsType[*client.APIError](err)
	if !ok {
		return err.Error()
	}
	msg := ae.Message
	if t, ok := ae.Details["template"].(string); ok && ae.Code == wire.CodeNotFound {
		msg = fmt.Sprintf("no such template %q", t)
		if s, _ := ae.Details["suggestion"].(string); s != "" {
			msg += fmt.Sprintf("; did you mean %q?", s)
		}
		msg += " (ffrun templates lists them)"
	}
	_, after, _ := strings.Cut(err.Error(), ae.Error())
	return fmt.Sprintf("%d %s: %s%s", ae.Status, ae.Code, msg, after)
}

// cmd is one invocation: its flags and the client they give.
type cmd struct {
	name      string
	env       Env
	fs        *flag.FlagSet
	server    string
	namespace string
	nsWhy     string // why namespace is what it is, when not given (flowNamespace)
	// noTemplate is set when the --flow given names no template
	// (flowNamespace); suggestion is then the template the API found
	// close to it, if any.
	noTemplate bool
	suggestion string
	json       bool
	c          *client.Client // bounded by the request timeout
	poll       *client.Client // for long-polls: the timeout plus pollMax
}

func newCmd(name string, env Env) *cmd {
	c := &cmd{name: name, env: env, fs: flag.NewFlagSet("ffrun "+name, flag.ContinueOnError)}
	c.fs.SetOutput(env.Stderr)
	c.fs.Usage = c.usage
	c.fs.StringVar(&c.server, "server", cmp.Or(env.Getenv("FF_SERVER"), ServerDefault), "ffrun API base URL (env FF_SERVER)")
	c.fs.BoolVar(&c.json, "json", false, "print the API's answer as JSON")
	return c
}

// usage prints the command's synopses, as Usage lists them, then its
// flags: what -h shows and what follows a flag the command does not know.
func (c *cmd) usage() {
	out := c.fs.Output()
	prefix := "usage: "
	for _, s := range synopses(c.fs.Name()) {
		fmt.Fprintln(out, prefix+s)
		prefix = "       "
	}
	fmt.Fprintln(out, "\nflags:")
	c.fs.PrintDefaults()
}

// synopses returns the lines of Usage that show how to call the command
// name ("ffrun get", "ffrun schedules run"), without their descriptions.
func synopses(name string) []string {
	var out []string
	for line := range strings.Lines(Usage) {
		line = strings.TrimSpace(line)
		if line != name && !strings.HasPrefix(line, name+" ") {
			continue
		}
		syn, _, _ := strings.Cut(line, "  ") // the description follows two spaces
		out = append(out, syn)
	}
	if len(out) == 0 {
		out = append(out, name+" [flags]")
	}
	return out
}

// takesValue reports whether the last of args is a flag that takes the
// next argument as its value (--reason, not --json or --reason=x): a "--"
// after it is that value, not the end of the flags.
func (c *cmd) takesValue(args []string) bool {
	if len(args) == 0 {
		return false
	}
	name, ok := strings.CutPrefix(args[len(args)-1], "-")
	if !ok || strings.Contains(name, "=") {
		return false
	}
	f := c.fs.Lookup(strings.TrimPrefix(name, "-"))
	if f == nil {
		return false
	}
	b, isBool := f.Value.(interface{ IsBoolFlag() bool })
	return !isBool || !b.IsBoolFlag()
}

// parse parses args, flags and operands in any order, and checks that
// there are exactly the operands named.
func (c *cmd) parse(args []string, operands ...string) ([]string, error) {
	var pos []string
	for {
		if err := c.fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, fmt.Errorf("%w: %v", errUsage, err)
		}
		rest := c.fs.Args()
		if len(rest) == 0 {
			break
		}
		if n := len(args) - len(rest); n > 0 && args[n-1] == "--" && !c.takesValue(args[:n-1]) {
			// Parse stopped at "--" (not a flag's value): what follows
			// is operands only.
			pos = append(pos, rest...)
			break
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
	if len(pos) != len(operands) {
		want := "no operand"
		if len(operands) > 0 {
			want = strings.Join(operands, " ")
		}
		if len(pos) == 0 {
			return nil, fmt.Errorf("%w: want %s, got none", errUsage, want)
		}
		return nil, fmt.Errorf("%w: want %s, got %d operand(s): %s", errUsage, want, len(pos), strings.Join(pos, " "))
	}
	timeout := cmp.Or(c.env.RequestTimeout, RequestTimeout)
	// Pinged as the SDK's: watch and result hold a request for up to a minute.
	pings := &http.HTTP2Config{SendPingTimeout: client.HTTP2PingAfter, PingTimeout: client.HTTP2PingTimeout}
	tr := &http.Transport{Proxy: http.ProxyFromEnvironment, DialContext: (&net.Dialer{Timeout: timeout}).DialContext,
		TLSHandshakeTimeout: timeout, ForceAttemptHTTP2: true, HTTP2: pings}
	if ca := c.env.Getenv("FF_API_CA"); ca != "" {
		pem, err := os.ReadFile(ca)
		if err != nil {
			return nil, fmt.Errorf("%w: FF_API_CA: %v", errUsage, err)
		}
		roots := x509.NewCertPool()
		if !roots.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%w: FF_API_CA: %s holds no PEM certificate", errUsage, ca)
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: roots}
	}
	token := client.WithToken(c.env.Getenv("FF_API_TOKEN"))
	cl, err := client.New(c.server, token, client.WithHTTPClient(&http.Client{Transport: tr, Timeout: timeout}))
	if err != nil {
		return nil, fmt.Errorf("%w: --server: %v", errUsage, err)
	}
	poll, err := client.New(c.server, token, client.WithHTTPClient(&http.Client{Transport: tr, Timeout: timeout + pollMax}))
	if err != nil {
		return nil, fmt.Errorf("%w: --server: %v", errUsage, err)
	}
	c.c, c.poll = cl, poll
	return pos, nil
}

func run(ctx context.Context, name string, args []string, env Env) error {
	f := commandOf(name)
	if f == nil {
		return fmt.Errorf("%w: unknown command %q", errUsage, name)
	}
	return f(newCmd(name, env), ctx, args)
}

func (c *cmd) printJSON(v any) error {
	enc := json.NewEncoder(c.env.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func (c *cmd) table() *tabwriter.Writer {
	return tabwriter.NewWriter(c.env.Stdout, 0, 4, 2, ' ', 0)
}

func (c *cmd) templates(ctx context.Context, args []string) error {
	if _, err := c.parse(args); err != nil {
		return err
	}
	ts, err := c.c.Templates(ctx)
	if err != nil {
		return err
	}
	if c.json {
		return c.printJSON(wire.TemplateList{Templates: ts}) // the API's answer
	}
	if len(ts) == 0 {
		fmt.Fprintln(c.env.Stdout, "no templates (start ffrun with --flows DIR)")
		return nil
	}
	w := c.table()
	fmt.Fprintln(w, "NAME\tNAMESPACE\tINPUT\tOUTPUT\tEXECS")
	for _, t := range ts {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%d\n", t.Name, t.Namespace, typeName(t.Input), typeName(t.Output), len(t.Execs))
	}
	return w.Flush()
}

// namespaces lists the namespaces with their runs and workers, and per
// lane the executions by what they wait for.
func (c *cmd) namespaces(ctx context.Context, args []string) error {
	if _, err := c.parse(args); err != nil {
		return err
	}
	l, err := c.c.Namespaces(ctx, client.NamespaceOptions{})
	if err != nil {
		return err
	}
	if c.json {
		return c.printJSON(l)
	}
	if len(l.Namespaces) == 0 {
		// What the listing counts: lanes (their executions, a run's
		// members among them) and connected workers.
		fmt.Fprintln(c.env.Stdout, "no namespaces: no execution or run is kept and no worker is connected "+
			"(budgets, quotas and schedules do not count here: ffrun budgets, quotas and schedules list them)")
		return nil
	}
	w := c.table()
	fmt.Fprintln(w, "NAMESPACE\tRUNS\tWORKERS\tLANE\tELIGIBLE\tDELAYED\tPENDING\tBLOCKED\tENDED")
	for _, ns := range l.Namespaces {
		if len(ns.Lanes) == 0 {
			fmt.Fprintf(w, "%s\t%d\t%d\t-\t\t\t\t\t\n", ns.Name, ns.Runs, ns.Workers)
		}
		for i, ln := range ns.Lanes {
			name, runs, workers := ns.Name, strconv.FormatInt(ns.Runs, 10), strconv.FormatInt(ns.Workers, 10)
			if i > 0 {
				name, runs, workers = "", "", ""
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\n", name, runs, workers, ln.Lane, ln.Eligible, ln.Delayed,
				ln.Pending, ln.Blocked+ln.BlockedBudget+ln.BlockedQuota, ln.Terminal)
		}
	}
	return w.Flush()
}

// budgets lists the budgets of the namespace (--namespace; every one
// without), a page of the API at a time, with their usage against limits.
func (c *cmd) budgets(ctx context.Context, args []string) error {
	c.fs.StringVar(&c.namespace, "namespace", "", "only the budgets of this namespace (default: every namespace)")
	scope := c.fs.String("scope", "", "only shared or run-scoped budgets")
	if _, err := c.parse(args); err != nil {
		return err
	}
	if *scope != "" && *scope != plan.ScopeShared && *scope != plan.ScopeRun {
		return fmt.Errorf("%w: --scope %q: want shared or run", errUsage, *scope)
	}
	budgets, err := allPages(client.LimitListOptions{Namespace: c.namespace, Scope: *scope, Limit: 1000},
		func(o client.LimitListOptions) ([]wire.Budget, string, error) {
			l, err := c.c.ListBudgets(ctx, o)
			if err != nil {
				return nil, "", err
			}
			return l.Budgets, l.NextCursor, nil
		})
	if err != nil {
		return err
	}
	all := &wire.BudgetList{Budgets: budgets}
	if c.json {
		return c.printJSON(all)
	}
	if len(all.Budgets) == 0 {
		switch {
		case c.namespace != "" || *scope != "":
			fmt.Fprintln(c.env.Stdout, "no budgets match (without --namespace and --scope: every budget)")
		default:
			fmt.Fprintln(c.env.Stdout, "no budgets (PUT /v1/budgets or a .ff file's budget makes one)")
		}
		return nil
	}
	w := c.table()
	fmt.Fprintln(w, "ID\tSCOPE\tUSAGE\tSTATE\tON HARD LIMIT")
	for _, b := range all.Budgets {
		var use []string
		for _, d := range b.Dimensions {
			u := fmt.Sprintf("%s %d", d.Dimension, d.Used)
			if d.Hard > 0 {
				u += fmt.Sprintf("/%d", d.Hard)
			}
			use = append(use, u)
		}
		state := "ok"
		if b.HardLimited {
			state = "at hard limit (" + b.HardLimitedDimension + ")"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", b.ID, b.Scope, strings.Join(use, ", "), state, b.OnHardLimit)
	}
	return w.Flush()
}

// allPages reads every page of a budget or quota listing from o, following
// the cursor; never nil ("budgets": [] in JSON, as the API answers).
func allPages[T any](o client.LimitListOptions, page func(client.LimitListOptions) ([]T, string, error)) ([]T, error) {
	out := []T{}
	for {
		items, next, err := page(o)
		if err != nil {
			return nil, err
		}
		out = append(out, items...)
		if o.Cursor = next; o.Cursor == "" {
			return out, nil
		}
	}
}

// quotas lists the quotas of the namespace (--namespace; every one
// without) with their limits and, per subject, use and pauses.
func (c *cmd) quotas(ctx context.Context, args []string) error {
	c.fs.StringVar(&c.namespace, "namespace", "", "only the quotas of this namespace (default: every namespace)")
	if _, err := c.parse(args); err != nil {
		return err
	}
	quotas, err := allPages(client.LimitListOptions{Namespace: c.namespace, Limit: 1000},
		func(o client.LimitListOptions) ([]wire.Quota, string, error) {
			l, err := c.c.ListQuotas(ctx, o)
			if err != nil {
				return nil, "", err
			}
			return l.Quotas, l.NextCursor, nil
		})
	if err != nil {
		return err
	}
	all := &wire.QuotaList{Quotas: quotas}
	if c.json {
		return c.printJSON(all)
	}
	if len(all.Quotas) == 0 {
		if c.namespace != "" {
			fmt.Fprintln(c.env.Stdout, "no quotas in namespace "+c.namespace+" (without --namespace: every quota)")
		} else {
			fmt.Fprintln(c.env.Stdout, "no quotas (PUT /v1/quotas or a .ff file's quota makes one)")
		}
		return nil
	}
	w := c.table()
	fmt.Fprintln(w, "ID\tLIMITS\tKEY\tIN WINDOW\tRUNNING\tPAUSED")
	for _, q := range all.Quotas {
		var lim []string
		if q.Rate > 0 {
			lim = append(lim, fmt.Sprintf("%d per %s", q.Rate, window(q.WindowMs)))
		}
		if q.Concurrency > 0 {
			lim = append(lim, fmt.Sprintf("%d at once", q.Concurrency))
		}
		if q.Key != "" {
			lim = append(lim, "per "+q.Key)
		}
		id := q.ID
		if len(q.Subjects) == 0 {
			fmt.Fprintf(w, "%s\t%s\t-\t0\t0\t-\n", id, strings.Join(lim, ", "))
		}
		for _, s := range q.Subjects {
			paused := "-"
			if s.PausedUntil != nil {
				paused = "until " + stamp(s.PausedUntil)
			}
			key := cmp.Or(s.Key, "-")
			fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%d\t%s\n", id, strings.Join(lim, ", "), key, s.WindowCount, s.ActiveCount, paused)
			id, lim = "", nil
		}
		if q.SubjectsMore > 0 {
			fmt.Fprintf(w, "\t\t(%d more key values: GET /v1/quotas/%s)\t\t\t\n", q.SubjectsMore, q.ID)
		}
	}
	return w.Flush()
}

// window writes a quota's window as its definition would: 1s, 1m, 90s.
func window(ms int64) string {
	d := time.Duration(ms) * time.Millisecond
	switch {
	case d > 0 && d%time.Hour == 0:
		return fmt.Sprintf("%dh", d/time.Hour)
	case d > 0 && d%time.Minute == 0:
		return fmt.Sprintf("%dm", d/time.Minute)
	case d%time.Second == 0:
		return fmt.Sprintf("%ds", d/time.Second)
	}
	return d.String()
}

// schedules lists the schedules: what each starts, when next, and what its
// last fire did.
func (c *cmd) schedules(ctx context.Context, args []string) error {
	// The first operand, after flags and their values in any order:
	// "run" is the subcommand.
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" { // operands only from here
			if i+1 < len(args) && args[i+1] == "run" {
				return c.runSchedule(ctx, slices.Concat(args[:i+1], args[i+2:]))
			}
			break
		}
		if !strings.HasPrefix(a, "-") {
			if a == "run" {
				return c.runSchedule(ctx, slices.Concat(args[:i], args[i+1:]))
			}
			return fmt.Errorf("%w: ffrun schedules takes no operand: it lists the schedules; ffrun schedules run NAME starts a run of one now", errUsage)
		}
		if c.takesValue(args[:i+1]) {
			i++ // the flag's value
		}
	}
	if _, err := c.parse(args); err != nil {
		return err
	}
	l, err := c.c.ListSchedules(ctx)
	if err != nil {
		return err
	}
	if c.json {
		return c.printJSON(l)
	}
	if len(l.Schedules) == 0 {
		fmt.Fprintln(c.env.Stdout, "no schedules (PUT /v1/schedules/{name} makes one)")
		return nil
	}
	w := c.table()
	fmt.Fprintln(w, "NAME\tTEMPLATE\tCRON\tZONE\tNEXT\tFIRES\tLAST")
	for _, s := range l.Schedules {
		last := "-"
		switch {
		case s.LastError != "":
			last = "no run: " + clip(s.LastError, 80)
		case s.LastRunID != "" && s.LastRunState != "":
			last = "run " + s.LastRunID + " (" + s.LastRunState + ")"
		case s.LastRunID != "":
			last = "run " + s.LastRunID
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%d\t%s\n", s.Name, s.Template, s.Cron, s.Timezone, zoned(s.NextAt, s.Timezone), s.Fires, last)
	}
	return w.Flush()
}

// zoned writes t in time zone tz with the zone's abbreviation ("-" for
// none): a schedule's next fire reads as its expression does.
func zoned(t *time.Time, tz string) string {
	if t == nil {
		return "-"
	}
	loc, err := time.LoadLocation(tz)
	if err != nil {
		loc = time.UTC
	}
	if t.Second() != 0 { // @every with seconds
		return t.In(loc).Format("2006-01-02 15:04:05 MST")
	}
	return t.In(loc).Format("2006-01-02 15:04 MST")
}

// typeName spells a type as the .ff language does; "-" for none.
func typeName(t *plan.TypeRef) string {
	switch {
	case t == nil:
		return "-"
	case t.Kind == plan.KindNamed:
		return t.Name
	case t.Kind == plan.KindList && t.Elem != nil:
		return "[" + typeName(t.Elem) + "]"
	case t.Kind == plan.KindMap && t.Elem != nil:
		return "{string: " + typeName(t.Elem) + "}"
	}
	return t.Kind
}

func (c *cmd) start(ctx context.Context, args []string) error {
	c.fs.StringVar(&c.namespace, "namespace", "", "namespace of the run (default: the template's)")
	input := c.fs.String("input", "", "the run's input: JSON text, @FILE, or - for standard input (default: none)")
	key := c.fs.String("key", "", "idempotency key: a repeat returns the first run")
	watch := c.fs.Bool("watch", false, "print the members' state changes until the run ends, then its result")
	wait := c.fs.Duration("wait", 0, "wait up to this long for the run to end, then print its result")
	pos, err := c.parse(args, "TEMPLATE")
	if err != nil {
		return err
	}
	if err := checkWait(*wait); err != nil {
		return err
	}
	if *watch && *wait > 0 {
		return fmt.Errorf("%w: --watch and --wait exclude each other", errUsage)
	}
	raw, err := c.readInput(*input)
	if err != nil {
		return err
	}
	var opts []client.StageOption
	if *key != "" {
		opts = append(opts, client.WithIdempotencyKey(*key))
	}
	if c.namespace != "" {
		opts = append(opts, client.WithNamespace(c.namespace))
	}
	var in any // no input: the flow's input is absent
	if raw != nil {
		in = raw
	}
	r, err := c.c.StageTemplate(ctx, pos[0], in, opts...)
	if ae := (*client.APIError)(nil); raw == nil && errors.As(err, &ae) && ae.Code == wire.CodeValidation && strings.HasPrefix(ae.Message, "input: ") {
		return fmt.Errorf("%w (give the run's input with --input JSON|@FILE|-)", err)
	}
	if err != nil {
		return err
	}
	return c.started(ctx, r, *watch, *wait)
}

// runSchedule starts a run of a schedule now (ffrun schedules run NAME).
func (c *cmd) runSchedule(ctx context.Context, args []string) error {
	c.fs.Init("ffrun schedules run", flag.ContinueOnError) // its usage names the subcommand
	key := c.fs.String("key", "", "idempotency key: a repeat returns the first run")
	watch := c.fs.Bool("watch", false, "print the members' state changes until the run ends, then its result")
	wait := c.fs.Duration("wait", 0, "wait up to this long for the run to end, then print its result")
	pos, err := c.parse(args, "NAME")
	if err != nil {
		return err
	}
	if err := checkWait(*wait); err != nil {
		return err
	}
	if *watch && *wait > 0 {
		return fmt.Errorf("%w: --watch and --wait exclude each other", errUsage)
	}
	var opts []client.StageOption
	if *key != "" {
		opts = append(opts, client.WithIdempotencyKey(*key))
	}
	r, err := c.c.RunSchedule(ctx, pos[0], opts...)
	if err != nil {
		return err
	}
	return c.started(ctx, r, *watch, *wait)
}

// started reports a run that start or schedules run staged (or found by
// its idempotency key), then follows it, waits for it or prints it as
// JSON as asked.
func (c *cmd) started(ctx context.Context, r *client.Run, watch bool, wait time.Duration) error {
	if !c.json {
		if r.Created {
			fmt.Fprintf(c.env.Stdout, "run %s\n", r.ID)
		} else {
			fmt.Fprintf(c.env.Stdout, "run %s (existing: the idempotency key matched it)\n", r.ID)
		}
	}
	switch {
	case watch:
		return c.follow(ctx, r.ID, !r.Created)
	case wait > 0:
		return c.awaitResult(ctx, r.ID, wait)
	case c.json:
		fr, err := c.c.GetRun(ctx, r.ID)
		if err != nil {
			return err
		}
		created := r.Created // a new run, or the one its idempotency key matched
		fr.Created = &created
		return c.printJSON(fr)
	}
	return nil
}

// readInput returns the JSON of --input: text, @FILE or - (standard
// input); nil when the flag is empty. Text that is not JSON is refused
// with where it stops being JSON.
func (c *cmd) readInput(v string) (json.RawMessage, error) {
	var b []byte
	switch {
	case v == "":
		return nil, nil
	case v == "-":
		var err error
		if b, err = io.ReadAll(c.env.Stdin); err != nil {
			return nil, fmt.Errorf("read the input from standard input: %w", err)
		}
	case strings.HasPrefix(v, "@"):
		var err error
		if b, err = os.ReadFile(v[1:]); err != nil {
			return nil, fmt.Errorf("%w: --input: %v", errUsage, err)
		}
	default:
		b = []byte(v)
	}
	what := "--input"
	if v == "-" || strings.HasPrefix(v, "@") {
		what += " " + v
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return nil, fmt.Errorf("%w: %s is empty: want the run's input as JSON", errUsage, what)
	}
	var raw json.RawMessage // checked, not decoded
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, fmt.Errorf("%w: %s is not valid JSON: %s", errUsage, what, jsonWhere(b, err))
	}
	return bytes.TrimSpace(b), nil
}

// jsonWhere is err, an error of encoding/json about data, after the line
// and column (in characters, from 1) where data stops being JSON, when
// err says: "line 3, column 5: invalid character ...".
func jsonWhere(data []byte, err error) string {
	se, ok := errors.AsType[*json.SyntaxError](err)
	if !ok {
		return err.Error()
	}
	line, col := jsonscan.LineCol(data, se.Offset)
	return fmt.Sprintf("line %d, column %d: %v", line, col, se)
}

// detail is what the DETAIL column says of a member: why it waits while it
// is blocked (its last attempt's error may be older news), else its error.
func detail(x wire.FlowExec) string {
	if x.State == "blocked" && x.Blocked != "" {
		return x.Blocked
	}
	return cmp.Or(x.Error, x.Blocked)
}

// clip shortens s to at most n bytes, not inside a character, and marks
// the cut with "…".
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return utf8cut.Cut(s, n) + "…"
}

func (c *cmd) runs(ctx context.Context, args []string) error {
	c.fs.StringVar(&c.namespace, "namespace", "", "namespace whose runs to list (default: the server's default)")
	flow := c.fs.String("flow", "", "only runs of this flow")
	state := c.fs.String("state", "", "only runs in this state: running, succeeded, failed or cancelled")
	limit := c.fs.Int("limit", 20, fmt.Sprintf("at most this many runs (1..%d)", runsMaxPage))
	if _, err := c.parse(args); err != nil {
		return err
	}
	if *limit < 1 || *limit > runsMaxPage {
		return fmt.Errorf("%w: --limit %d: want 1..%d", errUsage, *limit, runsMaxPage)
	}
	switch *state {
	case "", wire.RunRunning, wire.RunSucceeded, wire.RunFailed, wire.RunCancelled:
	default:
		return fmt.Errorf("%w: --state %q: want running, succeeded, failed or cancelled", errUsage, *state)
	}
	if err := c.flowNamespace(ctx, *flow); err != nil {
		return err
	}
	out := []wire.FlowRun{} // --json: "runs": [], as the API answers, not null
	next := ""
	o := client.RunListOptions{Namespace: c.namespace, Flow: *flow, State: *state, Limit: *limit}
	// A page may hold fewer runs than asked (filters apply as the server
	// reads its index): follow the cursor, a bounded number of pages.
	for page := 0; page < 100 && len(out) < *limit; page++ {
		o.Limit = *limit - len(out)
		l, err := c.c.ListRuns(ctx, o)
		if err != nil {
			return err
		}
		out = append(out, l.Runs...)
		next = l.NextCursor
		if next == "" {
			break
		}
		o.Cursor = next
	}
	if c.json {
		// next_cursor: where the API would go on (it is the last page's
		// when the limit or the page bound stopped the reading).
		return c.printJSON(wire.FlowRunList{Runs: out, NextCursor: next})
	}
	if len(out) == 0 {
		// Name the filters: "no runs" alone would read as an empty namespace.
		what := "runs"
		if *state != "" {
			what = *state + " runs"
		}
		if *flow != "" {
			what += " of flow " + *flow
		}
		fmt.Fprintf(c.env.Stdout, "no %s in namespace %s%s\n", what, cmp.Or(c.namespace, plan.DefaultNamespace), cmp.Or(c.nsNote(), " (--namespace for another)"))
		if *flow != "" {
			c.unknownFlow(ctx, *flow)
		}
		return nil
	}
	w := c.table()
	fmt.Fprintln(w, "RUN\tFLOW\tSTATE\tDONE\tCREATED\tTOOK")
	for _, r := range out {
		fmt.Fprintf(w, "%s\t%s\t%s\t%d/%d\t%s\t%s\n", r.ID, r.Flow, r.State, r.Done, r.Total, stamp(r.CreatedAt), took(r.CreatedAt, r.EndedAt))
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if next != "" {
		// On stderr: the table stays the whole of stdout.
		if *limit < runsMaxPage {
			fmt.Fprintf(c.env.Stderr, "(more runs: --limit up to %d lists more, --state or --flow fewer)\n", runsMaxPage)
		} else {
			fmt.Fprintln(c.env.Stderr, "(more runs: --state or --flow narrows the list)")
		}
	}
	return nil
}

// flowNamespace sets c.namespace, when no --namespace was given, to the
// namespace of the served template named flow: its runs are there (ffrun
// start stages them there), as the console's runs page looks for them. A
// flow no template names leaves the default namespace.
func (c *cmd) flowNamespace(ctx context.Context, flow string) error {
	if flow == "" || c.namespace != "" {
		return nil
	}
	t, err := c.c.Template(ctx, flow)
	switch {
	case err == nil:
		c.namespace, c.nsWhy = t.Namespace, "the namespace of template "+flow
		return nil
	case client.IsCode(err, wire.CodeNotFound):
		c.noTemplate = true
		if ae, ok := errors.AsType[*client.APIError](err); ok {
			c.suggestion, _ = ae.Details["suggestion"].(string)
		}
		return nil
	case errors.Is(err, client.ErrFlowsUnsupported):
		return nil
	}
	return err
}

// unknownFlow says on stderr, after a listing of no runs of flow, that no
// template has that name either (flowNamespace found none), and which
// template or flow of a recent run of the namespace it may be a
// misspelling of (dsl.Suggest, as the API suggests templates).
func (c *cmd) unknownFlow(ctx context.Context, flow string) {
	if !c.noTemplate {
		return
	}
	if c.suggestion != "" {
		fmt.Fprintf(c.env.Stderr, "(no template is named %s either; did you mean %q? ffrun templates lists the templates)\n", flow, c.suggestion)
		return
	}
	var flows []string
	if l, err := c.c.ListRuns(ctx, client.RunListOptions{Namespace: c.namespace, Limit: runsMaxPage}); err == nil {
		for _, r := range l.Runs {
			flows = append(flows, r.Flow)
		}
	}
	slices.Sort(flows)
	if s := dsl.Suggest(flow, slices.Compact(flows)); s != "" {
		fmt.Fprintf(c.env.Stderr, "(no template is named %s either; did you mean %q, the flow of a run in namespace %s?)\n",
			flow, s, cmp.Or(c.namespace, plan.DefaultNamespace))
		return
	}
	fmt.Fprintf(c.env.Stderr, "(no template is named %s either: is the flow's name right? ffrun templates lists the templates)\n", flow)
}

func stamp(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.Local().Format(time.DateTime)
}

// took is the time from from to to as timespan.Format writes it; "-"
// without both.
func took(from, to *time.Time) string {
	if from == nil || to == nil {
		return "-"
	}
	return timespan.Format(to.Sub(*from))
}

func (c *cmd) get(ctx context.Context, args []string) error {
	pos, err := c.parse(args, "RUN")
	if err != nil {
		return err
	}
	r, err := c.c.GetRun(ctx, pos[0])
	if client.IsCode(err, wire.CodeNotFound) {
		// Runs and executions have ids of one shape: a member's id, or a
		// standalone execution's, is shown as an execution.
		if x, xerr := c.c.GetExecution(ctx, pos[0]); xerr == nil {
			return c.describeExecution(x)
		}
	}
	if err != nil {
		return err
	}
	if c.json {
		return c.printJSON(r)
	}
	c.describeRun(r)
	w := c.table()
	fmt.Fprintln(w, "EXEC\tSTATE\tATTEMPTS\tSTARTED\tTOOK\tDETAIL")
	for _, x := range r.Execs {
		fmt.Fprintf(w, "%s\t%s\t%d\t%s\t%s\t%s\n", x.Name, x.State, x.Attempts, stamp(x.StartedAt), took(x.StartedAt, x.EndedAt),
			clip(detail(x), 100))
	}
	return w.Flush()
}

// describeExecution prints one execution and its attempt history
// (ffrun get given an execution's id).
func (c *cmd) describeExecution(x *wire.Execution) error {
	if c.json {
		return c.printJSON(x)
	}
	out := c.env.Stdout
	what := "not a run"
	if x.RunID != "" {
		what = fmt.Sprintf("exec %s of run %s: ffrun get %[2]s shows the run", x.FlowNode, x.RunID)
	}
	fmt.Fprintf(out, "execution %s (%s)\nkind %s (namespace %s, lane %s)\nstate %s, %d attempt(s) started",
		x.ID, what, x.Kind, x.Namespace, x.Lane, x.State, x.Attempt)
	if x.LastError != "" {
		fmt.Fprintf(out, "; last error: %s", clip(x.LastError, 200))
	}
	if x.BlockingDetail != "" {
		fmt.Fprintf(out, "; waits: %s", clip(x.BlockingDetail, 200))
	}
	fmt.Fprintln(out)
	if x.AttemptsDropped > 0 {
		fmt.Fprintf(out, "(%d earlier attempts not kept)\n", x.AttemptsDropped)
	}
	if len(x.Attempts) == 0 {
		return nil
	}
	w := c.table()
	fmt.Fprintln(w, "#\tTYPE\tWORKER\tSTARTED\tTOOK\tOUTCOME\tERROR")
	for _, a := range x.Attempts {
		fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\t%s\t%s\n", a.Index, a.Type, a.WorkerID, stamp(a.StartedAt), took(a.StartedAt, a.EndedAt),
			a.Outcome, clip(a.Error, 100))
	}
	return w.Flush()
}

// describeRun prints a run's header lines.
func (c *cmd) describeRun(r *wire.FlowRun) {
	out := c.env.Stdout
	fmt.Fprintf(out, "run %s\nflow %s (namespace %s)\nstate %s: %d of %d members done (%d succeeded, %d failed, %d skipped, %d cancelled)\n",
		r.ID, r.Flow, r.Namespace, r.State, r.Done, r.Total, r.Succeeded, r.Failed, r.Skipped, r.Cancelled)
	fmt.Fprintf(out, "created %s", stamp(r.CreatedAt))
	if r.Schedule != "" {
		if r.ScheduleManual {
			fmt.Fprintf(out, ", by hand from schedule %s", r.Schedule)
		} else {
			fmt.Fprintf(out, ", by schedule %s (its fire of %s)", r.Schedule, stamp(r.ScheduledAt))
		}
	}
	if r.Replays > 0 {
		times := "once"
		if r.Replays > 1 {
			times = fmt.Sprintf("%d times", r.Replays)
		}
		fmt.Fprintf(out, ", replayed %s (last %s)", times, stamp(r.ReplayedAt))
	}
	if r.EndedAt != nil {
		if r.Replays > 0 {
			fmt.Fprintf(out, ", ended %s (took %s since the replay)", stamp(r.EndedAt), took(r.ReplayedAt, r.EndedAt))
		} else {
			fmt.Fprintf(out, ", ended %s (took %s)", stamp(r.EndedAt), took(r.CreatedAt, r.EndedAt))
		}
	}
	fmt.Fprintln(out)
	if r.Error != "" {
		fmt.Fprintf(out, "error %s\n", r.Error)
	}
	fmt.Fprintln(out)
}

func (c *cmd) watch(ctx context.Context, args []string) error {
	pos, err := c.parse(args, "RUN")
	if err != nil {
		return err
	}
	return c.follow(ctx, pos[0], true)
}

// follow prints the run's changes until it ends, then its outcome; attach
// for a run staged earlier (see FollowOptions.Attach).
func (c *cmd) follow(ctx context.Context, id string, attach bool) error {
	var r *wire.FlowRun
	var err error
	if c.json {
		r, err = c.await(ctx, id, forever)
	} else {
		r, err = Follow(ctx, c.env.Stdout, c.c, id, FollowOptions{Interval: WatchInterval, Attach: attach, Stderr: c.env.Stderr})
	}
	if err != nil {
		return err
	}
	return c.outcome(r)
}

// await waits for the run to end with long-polls of the result route, up
// to wait (0: asks once; forever: for as long as it takes); a run still
// running then is an error.
//
// A wait (not 0) rides out an outage (ffrun restarting, see outage) until
// its end, for at most client.WaitOutageMax, saying so once on stderr.
func (c *cmd) await(ctx context.Context, id string, wait time.Duration) (*wire.FlowRun, error) {
	deadline := time.Now().Add(wait)
	until := deadline
	if wait == forever {
		until = time.Time{}
	}
	down := client.Outage{Note: c.env.Stderr}
	for {
		poll := pollMax
		if wait != forever {
			poll = max(min(time.Until(deadline), pollMax), 0)
		}
		r, err := c.poll.RunResult(ctx, id, poll)
		var ae *client.APIError
		if errors.As(err, &ae) && ae.Code == wire.CodeNotTerminal {
			down.OK()
			if wait == forever || time.Until(deadline) > 0 {
				continue
			}
			return nil, fmt.Errorf("run %s is %w (ffrun result %s --wait D waits for its end)", id, errRunning, id)
		}
		if err != nil && wait != 0 && down.Failed(ctx, err, until) == nil {
			continue
		}
		return r, err
	}
}

// outcome prints how run r ended: its result (stdout) when it succeeded,
// else why not (stderr, and errRunDidNotSucceed).
func (c *cmd) outcome(r *wire.FlowRun) error {
	if c.json {
		if err := c.printJSON(r); err != nil {
			return err
		}
	} else if r.State == wire.RunSucceeded {
		if err := c.printResult(r.Result); err != nil {
			return err
		}
	}
	if r.State == wire.RunSucceeded {
		return nil
	}
	// The error names the members that did not succeed, the first five of
	// them when there are more.
	fmt.Fprintf(c.env.Stderr, "run %s %s: %s\n", r.ID, r.State, cmp.Or(r.Error, "no error recorded"))
	if len(r.Failures) > 5 {
		fmt.Fprintf(c.env.Stderr, "(ffrun get %s lists every member)\n", r.ID)
	}
	return errRunDidNotSucceed
}

// printResult prints a result indented, or "(no result)" for a flow
// without one.
func (c *cmd) printResult(raw json.RawMessage) error {
	if len(raw) == 0 {
		_, err := fmt.Fprintln(c.env.Stdout, "(no result)")
		return err
	}
	var b bytes.Buffer
	if err := json.Indent(&b, raw, "", "  "); err != nil {
		b.Reset()
		b.Write(raw)
	}
	b.WriteByte('\n')
	_, err := c.env.Stdout.Write(b.Bytes())
	return err
}

func (c *cmd) result(ctx context.Context, args []string) error {
	wait := c.fs.Duration("wait", 0, "wait up to this long for a running run to end")
	pos, err := c.parse(args, "RUN")
	if err != nil {
		return err
	}
	if err := checkWait(*wait); err != nil {
		return err
	}
	return c.awaitResult(ctx, pos[0], *wait)
}

// checkWait refuses a negative --wait, which would read as none.
func checkWait(d time.Duration) error {
	if d < 0 {
		return fmt.Errorf("%w: --wait %s is negative", errUsage, d)
	}
	return nil
}

// awaitResult waits up to wait for run id to end and prints its outcome;
// a run still running then is an error.
func (c *cmd) awaitResult(ctx context.Context, id string, wait time.Duration) error {
	r, err := c.await(ctx, id, wait)
	if err != nil {
		return err
	}
	return c.outcome(r)
}

func (c *cmd) cancel(ctx context.Context, args []string) error {
	reason := c.fs.String("reason", "", "why (recorded on the cancelled members)")
	all := c.bulkFlags("cancel every running run of the namespace (of --flow F)")
	if c.wantsAll(args, all) {
		if _, err := c.parse(args); err != nil {
			return err
		}
		return c.bulk(ctx, func(b wire.BulkRuns) (*wire.BulkRunsResult, error) {
			b.Reason = *reason
			return c.c.CancelRuns(ctx, b)
		}, all, "cancelled")
	}
	pos, err := c.parse(args, "RUN")
	if err != nil {
		return err
	}
	if err := all.single(); err != nil {
		return err
	}
	r, err := c.c.CancelRun(ctx, pos[0], *reason)
	if err != nil {
		return err
	}
	if c.json {
		return c.printJSON(r)
	}
	fmt.Fprintf(c.env.Stdout, "run %s %s (%d of %d members done)\n", r.ID, r.State, r.Done, r.Total)
	return nil
}

// bulkOptions are the flags of cancel --all and replay --all.
type bulkOptions struct {
	all      *bool
	flow, ns *string
}

// bulkFlags defines --all (described by what) and --flow, and --namespace.
func (c *cmd) bulkFlags(what string) bulkOptions {
	c.fs.StringVar(&c.namespace, "namespace", "", "with --all: the namespace (default: the default one)")
	return bulkOptions{all: c.fs.Bool("all", false, what), flow: c.fs.String("flow", "", "with --all: only runs of this flow"), ns: &c.namespace}
}

// wantsAll reports whether the flags before the first operand hold --all
// (a first look, silent: parse reports the errors).
func (c *cmd) wantsAll(args []string, o bulkOptions) bool {
	c.fs.SetOutput(io.Discard)
	_ = c.fs.Parse(args)
	c.fs.SetOutput(c.env.Stderr)
	return *o.all
}

// single refuses the bulk flags on a command given one run.
func (o bulkOptions) single() error {
	switch {
	case *o.all:
		return fmt.Errorf("%w: --all takes no RUN", errUsage)
	case *o.flow != "" || *o.ns != "":
		return fmt.Errorf("%w: --flow and --namespace go with --all", errUsage)
	}
	return nil
}

// bulk runs a bulk action (do) over every matching run, a thousand at a
// time, following the cursor, then prints the runs it acted on (done) and
// those it did not, with why. The runs of one request stand when a later
// one fails.
func (c *cmd) bulk(ctx context.Context, do func(wire.BulkRuns) (*wire.BulkRunsResult, error), o bulkOptions, done string) error {
	if err := c.flowNamespace(ctx, *o.flow); err != nil {
		return err
	}
	total := &wire.BulkRunsResult{Runs: []string{}}
	req := wire.BulkRuns{Namespace: c.namespace, Flow: *o.flow, Limit: 1000}
	for {
		r, err := do(req)
		if err != nil {
			if n := len(total.Runs); n > 0 {
				fmt.Fprintf(c.env.Stderr, "%d run(s) %s before the error\n", n, done)
			}
			return err
		}
		total.Runs = append(total.Runs, r.Runs...)
		total.Refused = append(total.Refused, r.Refused...)
		if r.NextCursor == "" {
			break
		}
		req.Cursor = r.NextCursor
	}
	if c.json {
		return c.printJSON(total)
	}
	for _, id := range total.Runs {
		fmt.Fprintf(c.env.Stdout, "run %s %s\n", id, done)
	}
	for _, f := range total.Refused {
		fmt.Fprintf(c.env.Stderr, "run %s not %s: %s\n", f.RunID, done, f.Error.Message)
	}
	runs := "runs"
	if len(total.Runs) == 1 {
		runs = "run"
	}
	fmt.Fprintf(c.env.Stdout, "%d %s %s in namespace %s%s\n", len(total.Runs), runs, done, cmp.Or(c.namespace, plan.DefaultNamespace), c.nsNote())
	if len(total.Runs) == 0 && len(total.Refused) == 0 && *o.flow != "" {
		c.unknownFlow(ctx, *o.flow)
	}
	return nil
}

// nsNote says, after a namespace the command used, where it came from
// when it was not given.
func (c *cmd) nsNote() string {
	switch {
	case c.nsWhy != "":
		return " (" + c.nsWhy + "; --namespace for another)"
	case c.namespace == "":
		return " (--namespace for another)"
	}
	return ""
}

func (c *cmd) replay(ctx context.Context, args []string) error {
	watch := c.fs.Bool("watch", false, "print the members' state changes until the run ends, then its result")
	all := c.bulkFlags("replay every failed run of the namespace (of --flow F; --state cancelled: the cancelled ones)")
	state := c.fs.String("state", "", "with --all: failed (default) or cancelled")
	if c.wantsAll(args, all) {
		if _, err := c.parse(args); err != nil {
			return err
		}
		if *watch {
			return fmt.Errorf("%w: --watch follows one run, not --all", errUsage)
		}
		if *state != "" && *state != wire.RunFailed && *state != wire.RunCancelled {
			return fmt.Errorf("%w: --state %q: want failed or cancelled", errUsage, *state)
		}
		return c.bulk(ctx, func(b wire.BulkRuns) (*wire.BulkRunsResult, error) {
			b.State = *state
			return c.c.ReplayRuns(ctx, b)
		}, all, "replayed")
	}
	pos, err := c.parse(args, "RUN")
	if err != nil {
		return err
	}
	if err := all.single(); err != nil {
		return err
	}
	if *state != "" {
		return fmt.Errorf("%w: --state goes with --all", errUsage)
	}
	r, err := c.c.ReplayRun(ctx, pos[0])
	if err != nil {
		return err
	}
	if *watch {
		if !c.json {
			fmt.Fprintf(c.env.Stdout, "run %s replayed\n", r.ID)
		}
		return c.follow(ctx, r.ID, true)
	}
	if c.json {
		return c.printJSON(r)
	}
	fmt.Fprintf(c.env.Stdout, "run %s replayed: %s\n", r.ID, r.State)
	return nil
}
