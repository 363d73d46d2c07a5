// Package ffrun is the ffrun command: `ffrun serve` runs the API,
// scheduler and scanners against a Valkey server, `ffrun dev` does the same
// on a private valkey-server/redis-server child it starts and stops.
// cmd/ffrun is a thin main around Main; tests call Run directly.
package ffrun

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	goruntime "runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/flowfabric/ff/compiler"
	"github.com/flowfabric/ff/compiler/plan"
	"github.com/flowfabric/ff/dsl"
	"github.com/flowfabric/ff/lua"
	"github.com/flowfabric/ff/runtime/api"
	"github.com/flowfabric/ff/runtime/devserver"
	"github.com/flowfabric/ff/runtime/ffctl"
	"github.com/flowfabric/ff/runtime/scanner"
	"github.com/flowfabric/ff/runtime/server"
	"github.com/flowfabric/ff/runtime/store"
	"github.com/flowfabric/ff/runtime/wire"
)

// Env is what Run reads from and writes to besides its arguments.
type Env struct {
	Stdin  io.Reader // the client commands' input (start --input -); nil = empty
	Stdout io.Writer
	Stderr io.Writer
	// Getenv reads environment variables; nil means none are set.
	Getenv func(string) string
	// OnListen, when set, is called once the API answers, with its address
	// and the Valkey address in use (tests use it to find free ports). The
	// port is taken, and answers /healthz, before: from the start.
	OnListen func(apiAddr, valkeyAddr string)
}

// valkeyWaitDefault is the default of ffrun serve --valkey-wait: long
// enough for a Valkey started alongside to come up.
const valkeyWaitDefault = 30 * time.Second

// exitUsage is the exit status of a command-line error.
const exitUsage = 2

// errUsage marks command-line errors (exit status 2).
var errUsage = errors.New("usage")

// exitStatus is the exit status of a client command that did not end with
// 0; the command has said why.
type exitStatus int

func (e exitStatus) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

// Main runs ffrun with args (without the program name), stopping on SIGINT
// or SIGTERM, and returns the process exit status: a client command so
// stopped exits 130 for SIGINT and 143 for SIGTERM (ffctl.ExitInterrupted,
// ExitTerminated), serve and dev 0 after a clean shutdown. A second signal
// during the shutdown kills the process at once (the signal's default
// action), so that a drain stuck on a slow client does not need kill -9.
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	ctx, stop := signalContext(context.Background())
	defer stop()
	err := Run(ctx, args, Env{Stdin: stdin, Stdout: stdout, Stderr: stderr, Getenv: os.Getenv})
	var status exitStatus
	switch {
	case errors.As(err, &status):
		return int(status)
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errUsage):
		fmt.Fprintln(stderr, "ffrun:", err)
		return exitUsage
	default:
		fmt.Fprintln(stderr, "ffrun:", err)
		return 1
	}
}

// signalContext returns a context that the first SIGINT or SIGTERM ends,
// its cause an ffctl.Signalled naming which (signal.NotifyContext's does
// not say), and a stop function that releases it. From the first signal
// on, the signals have their default action again.
func signalContext(parent context.Context) (ctx context.Context, stop func()) {
	ctx, cancel := context.WithCancelCause(parent)
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case sig := <-ch:
			signal.Stop(ch)
			cancel(ffctl.Signalled{Signal: sig})
		case <-done:
		}
	}()
	return ctx, sync.OnceFunc(func() {
		signal.Stop(ch)
		close(done)
		cancel(context.Canceled)
	})
}

const usage = `ffrun runs FlowFabric work on Valkey.

Usage:
  ffrun serve --valkey ADDR [flags]   serve the API, scheduler and scanners
  ffrun dev [--data DIR] [flags]      same, on a private valkey-server/redis-server child
  ffrun version                       print the version of ffrun, Go and the Functions library
  ffrun help                          show this help

Client commands, against a running ffrun over its API:
` + ffctl.Usage + `
--flows DIR (serve and dev) compiles the .ff files of DIR at start,
serves their flows as templates (/v1/templates) and creates or replaces the
schedules they declare (others are left alone); an error refuses to start.

ffrun serve waits up to --valkey-wait (30s) for a Valkey that is not up
yet, and reaches one that requires TLS with --valkey-tls, or --valkey-tls-ca
FILE for a private authority (client certificates: --valkey-tls-cert and
--valkey-tls-key). --tls-cert and --tls-key serve the API over HTTPS.

Run "ffrun serve -h" or "ffrun dev -h" for the flags. Every flag can also be
set through the environment variable shown in its help. Secrets are read
from the environment only (flags show in ps): the API token from
FF_API_TOKEN, the Valkey password of ffrun serve from FF_VALKEY_PASSWORD
(and an ACL user from FF_VALKEY_USERNAME).
`

// synopsis returns how usage shows to call the command cmd ("ffrun
// serve"): its line without the description, which follows two spaces.
func synopsis(cmd string) string {
	for line := range strings.Lines(usage) {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, cmd+" ") {
			syn, _, _ := strings.Cut(line, "  ")
			return syn
		}
	}
	return cmd + " [flags]"
}

// Run executes one ffrun command until ctx ends.
func Run(ctx context.Context, args []string, env Env) error {
	if env.Stdout == nil {
		env.Stdout = io.Discard
	}
	if env.Stderr == nil {
		env.Stderr = io.Discard
	}
	if env.Getenv == nil {
		env.Getenv = func(string) string { return "" }
	}
	if env.Stdin == nil {
		env.Stdin = strings.NewReader("")
	}
	if len(args) == 0 {
		fmt.Fprint(env.Stderr, usage)
		return fmt.Errorf("%w: missing command: serve, dev, or a client command (listed above)", errUsage)
	}
	if ffctl.IsCommand(args[0]) {
		code := ffctl.Main(ctx, args[0], args[1:], ffctl.Env{Stdin: env.Stdin, Stdout: env.Stdout, Stderr: env.Stderr, Getenv: env.Getenv})
		if code != 0 {
			return exitStatus(code)
		}
		return nil
	}
	switch args[0] {
	case "serve":
		return runServe(ctx, args[1:], env, false)
	case "dev":
		return runServe(ctx, args[1:], env, true)
	case "help", "-h", "-help", "--help":
		fmt.Fprint(env.Stdout, usage)
		return nil
	case "version", "-version", "--version":
		if len(args) > 1 {
			return fmt.Errorf("%w: ffrun version takes no arguments", errUsage)
		}
		fmt.Fprintf(env.Stdout, "ffrun %s %s functions library %s\n", Version(), goruntime.Version(), lua.Version())
		return nil
	default:
		fmt.Fprint(env.Stderr, usage)
		return fmt.Errorf("%w: unknown command %q", errUsage, args[0])
	}
}

// options are the flags of serve and dev.
type options struct {
	ui              bool
	valkey          string
	valkeyBin       string
	data            string
	listen          string
	prefix          string
	partitions      int
	leaseDefault    time.Duration
	shutdownTimeout time.Duration
	logLevel        string
	logFormat       string
	bodyLimit       int64
	scanners        server.ScannerConfig
	flows           string
	templates       []*plan.Flow
	schedules       []plan.Schedule
	dev             bool // ffrun dev: Valkey is a child of this process
	valkeyWait      time.Duration
	valkeyLoad      time.Duration // dev: --valkey-load-timeout
	tls             tlsFlags
	tlsConfig       *tls.Config // built from tls; nil = no TLS
	apiCert, apiKey string      // --tls-cert, --tls-key: HTTPS for the API
	apiTLS          *tls.Config // built from them; nil = plain HTTP
}

// flagSet registers flags whose defaults come from environment variables;
// environment values that do not parse are collected in errs.
type flagSet struct {
	*flag.FlagSet
	getenv func(string) string
	errs   []error
}

func (f *flagSet) str(p *string, name, envName, def, help string) {
	if v := f.getenv(envName); v != "" {
		def = v
	}
	f.StringVar(p, name, def, help+" (env "+envName+")")
}

func (f *flagSet) integer(p *int, name, envName string, def int, help string) {
	if v := f.getenv(envName); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			f.errs = append(f.errs, fmt.Errorf("%s=%q: not an integer", envName, v))
		} else {
			def = n
		}
	}
	f.IntVar(p, name, def, help+" (env "+envName+")")
}

func (f *flagSet) boolean(p *bool, name, envName string, def bool, help string) {
	if v := f.getenv(envName); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			f.errs = append(f.errs, fmt.Errorf("%s=%q: not a boolean (true or false)", envName, v))
		} else {
			def = b
		}
	}
	f.BoolVar(p, name, def, help+" (env "+envName+")")
}

func (f *flagSet) dur(p *time.Duration, name, envName string, def time.Duration, help string) {
	if v := f.getenv(envName); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			f.errs = append(f.errs, fmt.Errorf("%s=%q: not a duration (like 500ms or 2s)", envName, v))
		} else {
			def = d
		}
	}
	f.DurationVar(p, name, def, help+" (env "+envName+")")
}

func runServe(ctx context.Context, args []string, env Env, dev bool) error {
	name := "serve"
	if dev {
		name = "dev"
	}
	fs := &flagSet{FlagSet: flag.NewFlagSet("ffrun "+name, flag.ContinueOnError), getenv: env.Getenv}
	fs.SetOutput(env.Stderr)
	fs.Usage = func() {
		out := fs.Output()
		fmt.Fprintf(out, "usage: %s\n\nflags:\n", synopsis("ffrun "+name))
		fs.PrintDefaults()
		fmt.Fprint(out, "\nSecrets, from the environment only (flags show in ps):\n  FF_API_TOKEN        bearer token required on /v1 and /metrics, at least 16 bytes (unset: open, with a warning,\n"+
			"                      to requests addressed to localhost or an IP address only)\n")
		if !dev {
			fmt.Fprint(out, "  FF_VALKEY_PASSWORD  password of the Valkey server (AUTH)\n  FF_VALKEY_USERNAME  its ACL user (needs FF_VALKEY_PASSWORD)\n")
			fmt.Fprint(out, "\nTLS to Valkey (TLS 1.2+, always verified; not with a unix: address):\n"+
				"  FF_VALKEY_TLS=true               --valkey-tls, the system's authorities\n"+
				"  FF_VALKEY_TLS_CA=FILE            --valkey-tls-ca, a private authority\n"+
				"  FF_VALKEY_TLS_CERT=FILE          --valkey-tls-cert, client certificate (mutual TLS)\n"+
				"  FF_VALKEY_TLS_KEY=FILE           --valkey-tls-key, its key (with the certificate)\n"+
				"  FF_VALKEY_TLS_SERVER_NAME=NAME   --valkey-tls-server-name, the name to verify\n")
		}
	}
	o := options{dev: dev}
	if dev {
		fs.str(&o.data, "data", "FF_DATA_DIR", ".ffrun", "data directory of the dev Valkey (created)")
		fs.str(&o.valkeyBin, "valkey-bin", "FF_VALKEY_BIN", "", "server program (default: valkey-server or redis-server on PATH)")
		fs.dur(&o.valkeyLoad, "valkey-load-timeout", "FF_VALKEY_LOAD_TIMEOUT", 0, "how long the dev Valkey may take to load its data at start (0 = as long as it makes progress)")
	} else {
		fs.str(&o.valkey, "valkey", "FF_VALKEY_ADDR", "", "Valkey/Redis address: host:port, or unix:PATH for a Unix socket (required)")
		fs.dur(&o.valkeyWait, "valkey-wait", "FF_VALKEY_WAIT", valkeyWaitDefault, "how long to wait at start for a Valkey that is not reachable or not ready yet (0 = fail at once)")
		fs.boolean(&o.tls.enabled, "valkey-tls", "FF_VALKEY_TLS", false, "connect to Valkey over TLS, trusting the system's authorities")
		fs.str(&o.tls.ca, "valkey-tls-ca", "FF_VALKEY_TLS_CA", "", "PEM `file` of the authorities to trust instead of the system's (implies --valkey-tls)")
		fs.str(&o.tls.cert, "valkey-tls-cert", "FF_VALKEY_TLS_CERT", "", "PEM `file` of a client certificate, for servers that require one (with --valkey-tls-key; implies --valkey-tls)")
		fs.str(&o.tls.key, "valkey-tls-key", "FF_VALKEY_TLS_KEY", "", "PEM `file` of the client certificate's private key (with --valkey-tls-cert)")
		fs.str(&o.tls.serverName, "valkey-tls-server-name", "FF_VALKEY_TLS_SERVER_NAME", "", "`name` the server's certificate must hold when it is not the host of --valkey (implies --valkey-tls)")
	}
	// dev is for one machine: loopback unless told otherwise, as it runs
	// without a token by default; serve is the hosted service.
	listen := ":8080"
	if dev {
		listen = "127.0.0.1:8080"
	}
	fs.str(&o.listen, "listen", "FF_LISTEN", listen, "API listen address")
	fs.str(&o.apiCert, "tls-cert", "FF_TLS_CERT", "", "PEM `file` of the API's certificate: serve HTTPS (with --tls-key; reloaded when the file changes)")
	fs.str(&o.apiKey, "tls-key", "FF_TLS_KEY", "", "PEM `file` of the API certificate's private key (with --tls-cert)")
	fs.boolean(&o.ui, "ui", "FF_UI", true, "serve the web console at /ui/ (behind FF_API_TOKEN when set)")
	fs.str(&o.flows, "flows", "FF_FLOWS", "", "directory of .ff files whose flows are served as templates and whose schedules are registered (compiled at start; errors refuse to start)")
	fs.str(&o.prefix, "key-prefix", "FF_KEY_PREFIX", "", "prefix of every Valkey key")
	fs.integer(&o.partitions, "partitions", "FF_PARTITIONS", 0, "execution partitions (0 = default; fixed once data exists)")
	fs.dur(&o.leaseDefault, "lease", "FF_LEASE", 30*time.Second, "lease of claims that ask for none")
	fs.dur(&o.shutdownTimeout, "shutdown-timeout", "FF_SHUTDOWN_TIMEOUT", server.ShutdownTimeoutDefault, "how long in-flight requests may finish, and the whole shutdown take, at shutdown")
	fs.str(&o.logLevel, "log-level", "FF_LOG_LEVEL", "info", "log level: debug, info, warn or error")
	fs.str(&o.logFormat, "log-format", "FF_LOG_FORMAT", "text", "log format: text or json")
	var bodyLimit int
	fs.integer(&bodyLimit, "body-limit", "FF_BODY_LIMIT", 0, "request body limit in bytes for every route (0 = per-route defaults)")
	fs.dur(&o.scanners.LeaseExpiry, "scan-lease-expiry", "FF_SCAN_LEASE_EXPIRY", 0, "lease expiry scanner interval (0 = default)")
	fs.dur(&o.scanners.DelayedPromoter, "scan-delayed", "FF_SCAN_DELAYED", 0, "delayed promotion scanner interval (0 = default)")
	fs.dur(&o.scanners.AttemptTimeout, "scan-attempt-timeout", "FF_SCAN_ATTEMPT_TIMEOUT", 0, "attempt timeout scanner interval (0 = default)")
	fs.dur(&o.scanners.Deadline, "scan-deadline", "FF_SCAN_DEADLINE", 0, "execution deadline scanner interval (0 = default)")
	fs.dur(&o.scanners.Retention, "scan-retention", "FF_SCAN_RETENTION", 0, "retention scanner interval (0 = default)")
	fs.dur(&o.scanners.RetentionAge, "retention", "FF_RETENTION", 0, "how long terminal executions and ended flow runs are kept (0 = default)")
	// The flags are listed on -h only: after a mistyped flag, its error
	// and the synopsis, not some sixty lines that bury the error.
	fs.SetOutput(io.Discard)
	err := fs.Parse(args)
	fs.SetOutput(env.Stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.Usage()
			return err
		}
		if dev && strings.Contains(err.Error(), "provided but not defined: -valkey") {
			return fmt.Errorf("%w: %v (the --valkey flags are for ffrun serve; ffrun dev talks to a child of its own)", errUsage, err)
		}
		return fmt.Errorf("%w: %v\nusage: %s (ffrun %s -h lists the flags)", errUsage, err, synopsis("ffrun "+name), name)
	}
	if dev {
		for _, name := range tlsEnv {
			v := env.Getenv(name)
			if on, err := strconv.ParseBool(v); name == "FF_VALKEY_TLS" && err == nil && !on {
				continue // an environment file shared with serve: asks for nothing
			}
			if v != "" {
				return fmt.Errorf("%w: %s is set, but TLS to Valkey is for ffrun serve; ffrun dev talks to a child of its own without TLS", errUsage, name)
			}
		}
	}
	if len(fs.errs) > 0 {
		return fmt.Errorf("%w: %v", errUsage, errors.Join(fs.errs...))
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected arguments %q", errUsage, fs.Args())
	}
	o.bodyLimit = int64(bodyLimit)
	// The API refuses these too, but only once Valkey is reached: a bad
	// flag must be a usage error whatever the state of the server.
	if o.leaseDefault < wire.LeaseMsMin*time.Millisecond || o.leaseDefault > wire.LeaseMsMax*time.Millisecond {
		return fmt.Errorf("%w: --lease %s is outside %dms..%dms", errUsage, o.leaseDefault, wire.LeaseMsMin, wire.LeaseMsMax)
	}
	for _, d := range []struct {
		flag string
		v    time.Duration
	}{
		{"scan-lease-expiry", o.scanners.LeaseExpiry}, {"scan-delayed", o.scanners.DelayedPromoter},
		{"scan-attempt-timeout", o.scanners.AttemptTimeout}, {"scan-deadline", o.scanners.Deadline},
		{"scan-retention", o.scanners.Retention},
	} {
		if d.v != 0 && d.v < scanner.IntervalMin {
			return fmt.Errorf("%w: --%s %s: want 0 (the default) or at least %s", errUsage, d.flag, d.v, scanner.IntervalMin)
		}
	}
	if o.scanners.RetentionAge != 0 && o.scanners.RetentionAge < time.Millisecond {
		return fmt.Errorf("%w: --retention %s: want 0 (the default) or at least 1ms", errUsage, o.scanners.RetentionAge)
	}
	if o.valkeyLoad < 0 {
		return fmt.Errorf("%w: --valkey-load-timeout %s is negative (0 = as long as the load makes progress)", errUsage, o.valkeyLoad)
	}
	if o.shutdownTimeout < 0 {
		return fmt.Errorf("%w: --shutdown-timeout %s is negative (0 = the default, %s)", errUsage, o.shutdownTimeout, server.ShutdownTimeoutDefault)
	}
	if tok := env.Getenv("FF_API_TOKEN"); tok != "" {
		if err := server.CheckToken(tok); err != nil {
			return fmt.Errorf("%w: FF_API_TOKEN: %v", errUsage, err)
		}
	}
	if o.bodyLimit < 0 || o.bodyLimit > api.BodyLimitMax {
		return fmt.Errorf("%w: --body-limit %d is outside 0..%d", errUsage, o.bodyLimit, api.BodyLimitMax)
	}
	if err := checkListen(o.listen); err != nil {
		return fmt.Errorf("%w: --listen %q: %v", errUsage, o.listen, err)
	}
	if o.partitions < 0 || o.partitions > store.PartitionsMax {
		return fmt.Errorf("%w: --partitions %d is outside 0..%d (0 = default)", errUsage, o.partitions, store.PartitionsMax)
	}
	if strings.ContainsAny(o.prefix, "{}") {
		return fmt.Errorf("%w: --key-prefix %q must not contain braces (they choose the cluster slot of a key)", errUsage, o.prefix)
	}
	if !dev && o.valkey == "" {
		return fmt.Errorf("%w: ffrun serve needs --valkey ADDR (or FF_VALKEY_ADDR); for a local server of its own, use ffrun dev", errUsage)
	}
	if !dev {
		if _, _, err := server.ValkeyNetwork(o.valkey); err != nil {
			return fmt.Errorf("%w: --valkey %v", errUsage, err)
		}
		if env.Getenv("FF_VALKEY_USERNAME") != "" && env.Getenv("FF_VALKEY_PASSWORD") == "" {
			return fmt.Errorf("%w: FF_VALKEY_USERNAME is set without FF_VALKEY_PASSWORD", errUsage)
		}
		if o.valkeyWait < 0 {
			return fmt.Errorf("%w: --valkey-wait %s is negative (0 = fail at once)", errUsage, o.valkeyWait)
		}
		var err error
		if o.tlsConfig, err = o.tls.config(o.valkey); err != nil {
			return fmt.Errorf("%w: %v", errUsage, err)
		}
	}
	log, err := newLogger(env.Stderr, o.logLevel, o.logFormat)
	if err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if o.apiTLS, err = apiTLS(o.apiCert, o.apiKey, log); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	log.Info("ffrun starting", slog.String("command", name), slog.String("version", Version()), slog.String("go", goruntime.Version()))
	if o.flows != "" {
		if o.templates, o.schedules, err = loadTemplates(o.flows, env.Stderr, log); err != nil {
			return err
		}
	}
	// The address first: a start that cannot listen (the port taken)
	// fails before it starts anything (the dev child) or writes anything
	// (the declared budgets, quotas and schedules of --flows). From now on
	// the port answers: /healthz 200, the rest 503 until the API is up.
	ln, err := net.Listen("tcp", o.listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", o.listen, err)
	}
	front := server.NewFront(ln, server.FrontConfig{TLS: o.apiTLS, Logger: log, OnServing: func() {
		if env.OnListen != nil {
			env.OnListen(ln.Addr().String(), o.valkey) // o.valkey: the dev child's, set below
		}
	}})
	defer front.Close()
	if dev {
		// The child listens on its socket only: no password, so no TCP
		// port another local user could reach ("dev valkey started" logs
		// the valkey-cli command that opens it).
		child, err := devserver.Start(ctx, devserver.Config{Binary: o.valkeyBin, Dir: o.data, Logger: log,
			SocketOnly: true, LoadTimeout: o.valkeyLoad})
		if err != nil {
			if ctx.Err() != nil {
				log.Info("stopped while starting the dev valkey")
				return nil
			}
			return err
		}
		// The child stops last, within the shutdown's bound: what is left
		// of --shutdown-timeout, and a second, counted from the moment ctx
		// ended (the signal), after which it is killed (Valkey writes its
		// append-only file before it answers: a kill loses no write it
		// acknowledged).
		var began atomic.Int64
		endedAt := context.AfterFunc(ctx, func() { began.Store(time.Now().UnixNano()) })
		defer func() {
			from := time.Now()
			if stopped := endedAt(); !stopped && began.Load() != 0 { // ctx ended: the shutdown began then
				from = time.Unix(0, began.Load())
			}
			bound := cmp.Or(o.shutdownTimeout, server.ShutdownTimeoutDefault) + devStopGrace
			sctx, cancel := context.WithDeadline(context.Background(), from.Add(bound))
			defer cancel()
			if err := child.Stop(sctx); err != nil {
				log.Warn("stop dev valkey", slog.Any("error", err))
			}
		}()
		// The co-located child is reached over its Unix socket: cheaper
		// than TCP loopback for both processes, too.
		o.valkey = child.ClientAddr()
		// If the child dies, stop serving rather than fail every request;
		// the cause makes the exit status 1.
		var cancel context.CancelCauseFunc
		ctx, cancel = context.WithCancelCause(ctx)
		defer cancel(nil)
		go func() {
			select {
			case <-child.Exited():
				log.Error("dev valkey exited unexpectedly; stopping", slog.String("log", child.LogFile))
				cancel(fmt.Errorf("%w (its log: %s)", errDevValkeyExited, child.LogFile))
			case <-ctx.Done():
			}
		}()
	}
	err = serve(ctx, o, front, env, log)
	if cause := context.Cause(ctx); errors.Is(cause, errDevValkeyExited) {
		return cause
	}
	return err
}

// devStopGrace is how far past --shutdown-timeout, counted from the stop
// signal, ffrun dev waits for its Valkey child to stop before it kills
// it: the second the server's own shutdown may take past the timeout
// (server.Config.ShutdownTimeout), which the child's stop comes after.
const devStopGrace = time.Second

// errDevValkeyExited is the cause of the end of ffrun dev when its Valkey
// child exits on its own: no clean shutdown, so the exit status is 1.
var errDevValkeyExited = errors.New("the dev valkey exited unexpectedly")

// serve opens the server and serves it on front until ctx ends. A stop
// (ctx ending) while the server is being opened, waiting for Valkey, is a
// clean one.
func serve(ctx context.Context, o options, front *server.Front, env Env, log *slog.Logger) error {
	token := env.Getenv("FF_API_TOKEN")
	cfg := server.Config{
		ValkeyAddr:      o.valkey,
		Version:         Version(),
		KeyPrefix:       o.prefix,
		FlowPartitions:  o.partitions,
		Token:           token,
		LeaseDefault:    o.leaseDefault,
		BodyLimit:       o.bodyLimit,
		Templates:       o.templates,
		Schedules:       o.schedules,
		Scanners:        o.scanners,
		ShutdownTimeout: o.shutdownTimeout,
		Logger:          log,
		APITLS:          o.apiTLS,
		DisableUI:       !o.ui,
	}
	if !o.dev {
		// The dev child has no password; these are for a Valkey of its own.
		cfg.ValkeyUsername = env.Getenv("FF_VALKEY_USERNAME")
		cfg.ValkeyPassword = env.Getenv("FF_VALKEY_PASSWORD")
		cfg.ValkeyTLS = o.tlsConfig
		cfg.ValkeyWait = o.valkeyWait
	}
	srv, err := server.Open(ctx, cfg)
	if err != nil {
		front.Close()
		if ctx.Err() != nil {
			if !errors.Is(context.Cause(ctx), errDevValkeyExited) {
				log.Info("stopped while waiting for valkey")
			}
			return nil
		}
		return tlsHint(authHint(err, cfg.ValkeyPassword != ""), o.tlsConfig != nil)
	}
	if err := srv.ServeFront(ctx, front); err != nil {
		return err
	}
	log.Info("ffrun stopped")
	return nil
}

// checkListen reports why addr cannot be listened on as an API address:
// it is no [host]:port, or its port is no number in 0..65535 (0: any free
// port) nor the name of a service.
func checkListen(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return errors.New("want [host]:port, like :8080 or 127.0.0.1:8080")
	}
	if _, err := net.LookupPort("tcp", port); err != nil {
		return fmt.Errorf("the port %q is neither a number in 0..65535 nor a service name", port)
	}
	return nil
}

// authHint adds what to do to an authentication refusal of Valkey, which
// otherwise reads as a protocol error (NOAUTH HELLO must be called ...).
func authHint(err error, hasPassword bool) error {
	msg := err.Error()
	switch {
	case strings.Contains(msg, "NOAUTH") && !hasPassword:
		return fmt.Errorf("%w (the server wants a password: set FF_VALKEY_PASSWORD)", err)
	case strings.Contains(msg, "WRONGPASS"), strings.Contains(msg, "NOAUTH"):
		return fmt.Errorf("%w (check FF_VALKEY_PASSWORD and FF_VALKEY_USERNAME)", err)
	}
	return err
}

// loadTemplates compiles the .ff files of dir, printing the diagnostics
// to stderr as path:line:col: severity: message, as ffc does (the first
// dsl.DiagnosticsShownMax, then a line counting the others); errors
// refuse the start. It returns the flows, served as templates, and the
// declared schedules.
func loadTemplates(dir string, stderr io.Writer, log *slog.Logger) ([]*plan.Flow, []plan.Schedule, error) {
	pkg, diags := compiler.CompileFiles(dir)
	if len(diags) > 0 {
		if err := diags.FormatCapped(stderr, dsl.DiagnosticsShownMax, "ffrun", "ffc check -e "+dir+" prints every one"); err != nil {
			return nil, nil, fmt.Errorf("--flows %s: print diagnostics: %w", dir, err)
		}
	}
	if diags.HasErrors() || pkg == nil {
		n, _ := diags.Count()
		return nil, nil, fmt.Errorf("--flows %s: %d error(s) in the .ff files; not starting", dir, n)
	}
	if len(pkg.Flows) == 0 {
		return nil, nil, fmt.Errorf("--flows %s: the .ff files declare no flow; not starting", dir)
	}
	out := make([]*plan.Flow, len(pkg.Flows))
	names := make([]string, len(pkg.Flows))
	for i := range pkg.Flows {
		out[i] = &pkg.Flows[i] // validated by api.Server.AddFlows
		names[i] = out[i].Name
	}
	log.Info("serving flow templates", slog.String("dir", dir), slog.String("templates", strings.Join(names, ",")))
	return out, pkg.Schedules, nil
}

// Version is the version ffrun was built as: the module version, or for a
// build from a checkout "(devel)" with the VCS revision (and "-dirty" for
// uncommitted changes) when the build recorded it.
func Version() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "(unknown)"
	}
	v := cmp.Or(info.Main.Version, "(devel)")
	if v != "(devel)" {
		return v
	}
	var rev, dirty string
	for _, kv := range info.Settings {
		switch kv.Key {
		case "vcs.revision":
			rev = kv.Value
		case "vcs.modified":
			if kv.Value == "true" {
				dirty = "-dirty"
			}
		}
	}
	if rev == "" {
		return v
	}
	return v + "+" + rev[:min(len(rev), 12)] + dirty
}

func newLogger(w io.Writer, level, format string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("log level %q: want debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch strings.ToLower(format) {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("log format %q: want text or json", format)
}
