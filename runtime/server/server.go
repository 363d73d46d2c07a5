// Package server composes ffrun: a Valkey connection, the store, the
// scheduler, the background scanners and the HTTP API, with graceful
// shutdown. cmd/ffrun and the tests build on it.
package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/valkey-io/valkey-go"

	"github.com/flowfabric/ff/compiler/plan"
	"github.com/flowfabric/ff/runtime/api"
	"github.com/flowfabric/ff/runtime/authlimit"
	"github.com/flowfabric/ff/runtime/dashboard"
	"github.com/flowfabric/ff/runtime/scheduler"
	"github.com/flowfabric/ff/runtime/store"
	"github.com/flowfabric/ff/runtime/wire"
)

// Defaults of Config.
const (
	ShutdownTimeoutDefault = 30 * time.Second
	ConnectTimeoutDefault  = 10 * time.Second
)

// Config configures a Server.
type Config struct {
	ValkeyAddr     string        // host:port, or unix:PATH for a Unix socket; required
	Version        string        // the version of the program serving (ff_build_info); "" = unknown
	ValkeyUsername string        // AUTH user (Valkey/Redis ACL), if any; needs ValkeyPassword
	ValkeyPassword string        // AUTH password, if any
	KeyPrefix      string        // prefix of every key (tests, shared servers)
	FlowPartitions int           // 0 = store default; fixed for the life of the data
	Token          string        // bearer token of /v1, at least TokenMinBytes; empty = open (logged loudly; then only requests to localhost or an IP address are served)
	LeaseDefault   time.Duration // lease of claims that name none; 0 = 30s
	BodyLimit      int64         // overrides per-route body limits when > 0
	// ValkeyTLS, when set, makes the connections to Valkey TLS ones, to
	// every node of a cluster alike; nil = plain TCP. It needs a host:port
	// ValkeyAddr (a Unix socket has no TLS). With no ServerName, each
	// connection verifies the host it dials. ffrun builds it from its
	// --valkey-tls flags.
	ValkeyTLS *tls.Config
	// APITLS, when set, makes the API serve HTTPS with it (HTTP/2 too);
	// nil = plain HTTP, for a TLS-terminating proxy in front. ffrun builds
	// it from --tls-cert and --tls-key, reloading the files when they
	// change.
	APITLS *tls.Config
	// ValkeyWait is how long Open keeps trying while Valkey cannot be
	// reached or is not ready yet (connection refused, a name that does
	// not resolve, a timeout, LOADING); 0 = fail at the first error.
	// Errors that waiting cannot heal (a refused password, a certificate
	// that does not verify, partition counts that differ, a server too
	// old) fail at once whatever the wait.
	ValkeyWait time.Duration

	// Templates are compiled flows served by name (/v1/templates); ffrun
	// --flows compiles them from a directory.
	Templates []*plan.Flow
	// Schedules are created or replaced at Open through the API's own
	// route (PUT /v1/schedules/{name}, with Token), so they get its checks;
	// a refusal fails Open. Each names one of Templates. Schedules that
	// exist but are not listed are left alone. ffrun --flows takes them
	// from the .ff files' schedule declarations.
	Schedules []plan.Schedule

	// DisableUI serves no web console; by default it is at /ui/
	// (package dashboard), behind the same token as the API.
	DisableUI bool
	// AuthLimit paces the judging of credentials from one client address
	// that failed too often (wrong bearer tokens, wrong tokens at the
	// console's sign-in, counted together): zero fields take authlimit's
	// defaults (10 failures a minute judged at once; past them every
	// request with credentials, right or wrong, judged one a second, and
	// refused with 429 unjudged past a 10 s wait).
	AuthLimit authlimit.Config

	// Scanners tunes the background scanners; zero values take defaults.
	Scanners ScannerConfig
	// DisableScanners runs no scanners (tests of a bare API).
	DisableScanners bool

	ScanMax        int           // claim calls per claim attempt; 0 = scheduler default
	ResyncInterval time.Duration // scheduler hint resync; 0 = default
	// BulkRunMembers bounds the members of the runs one bulk cancel or
	// replay (POST /v1/flows/cancel, /replay) acts on; the answer's cursor
	// goes on. At least one run is acted on, whatever its size. 0 =
	// BulkRunMembersDefault.
	BulkRunMembers int
	// RunPoll is how often a waiting run result request re-reads the run
	// when no end notice came; 0 = RunPollDefault.
	RunPoll         time.Duration
	ShutdownTimeout time.Duration // how long in-flight requests may finish, and the shutdown take (Serve, Close)
	Logger          *slog.Logger
}

func (c Config) withDefaults() Config {
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.ShutdownTimeout <= 0 {
		c.ShutdownTimeout = ShutdownTimeoutDefault
	}
	return c
}

func (c Config) validate() error {
	if c.ValkeyAddr == "" {
		return errors.New("server: Config.ValkeyAddr is required (host:port of Valkey or Redis, or unix:PATH)")
	}
	if c.Token != "" {
		// Before Valkey is reached: ffrun refuses it as it refuses a bad flag.
		if err := CheckToken(c.Token); err != nil {
			return fmt.Errorf("server: Config.Token (FF_API_TOKEN): %w", err)
		}
	}
	if _, _, err := ValkeyNetwork(c.ValkeyAddr); err != nil {
		return fmt.Errorf("server: Config.ValkeyAddr: %w", err)
	}
	if network, _, _ := ValkeyNetwork(c.ValkeyAddr); network == "unix" && c.ValkeyTLS != nil {
		return errors.New("server: Config.ValkeyTLS is set but Config.ValkeyAddr is a Unix socket, which has no TLS")
	}
	if c.ValkeyWait < 0 {
		return fmt.Errorf("server: Config.ValkeyWait %s is negative", c.ValkeyWait)
	}
	if c.ValkeyUsername != "" && c.ValkeyPassword == "" {
		return errors.New("server: Config.ValkeyUsername is set without Config.ValkeyPassword")
	}
	if c.RunPoll < 0 {
		return fmt.Errorf("server: Config.RunPoll %s is negative", c.RunPoll)
	}
	return nil
}

// TokenMinBytes is the shortest API token a server accepts.
const TokenMinBytes = 16

// CheckToken reports why tok cannot be the API token of a server, or nil:
// it cannot be sent in a header (wire.CheckToken), or it is shorter than
// TokenMinBytes, too short not to be guessed (the server slows guesses
// down, it does not stop them).
func CheckToken(tok string) error {
	if err := wire.CheckToken(tok); err != nil {
		return err
	}
	if len(tok) < TokenMinBytes {
		return fmt.Errorf("the API token is %d bytes long: it must be at least %d, so that it cannot be guessed (make one with: openssl rand -hex 32)",
			len(tok), TokenMinBytes)
	}
	return nil
}

// ValkeyNetwork splits a Valkey address into the network and address to
// dial: "unix:PATH" (or "unix://PATH") is a Unix socket, anything else
// must be host:port over TCP. URLs (redis://host:port) are refused with a
// message that says so.
func ValkeyNetwork(addr string) (network, address string, err error) {
	if path, ok := strings.CutPrefix(addr, "unix:"); ok {
		path = strings.TrimPrefix(path, "//")
		if path == "" {
			return "", "", fmt.Errorf("%q: no socket path after the unix: prefix", addr)
		}
		return "unix", path, nil
	}
	if scheme, _, ok := strings.Cut(addr, "://"); ok {
		// Not quoted back: a URL may carry a password.
		return "", "", fmt.Errorf("want host:port or unix:PATH, not a %s:// URL (the password is given apart)", scheme)
	}
	if strings.Contains(addr, "@") {
		// user:password@host:port, a URL without its scheme: not quoted
		// back either.
		return "", "", errors.New("want host:port or unix:PATH, not user info and a host (the password is given apart)")
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", "", fmt.Errorf("%q: want host:port or unix:PATH: %w", addr, err)
	}
	if port == "" {
		return "", "", fmt.Errorf("%q: want host:port or unix:PATH: no port after the colon", addr)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return "", "", fmt.Errorf("%q: want host:port or unix:PATH: the port is not a number in 1..65535", addr)
	}
	return "tcp", addr, nil
}

// Server is a running ffrun: open it, Serve it, and it closes itself when
// Serve returns.
type Server struct {
	cfg      Config
	log      *slog.Logger
	vk       valkey.Client
	store    *store.Store
	sched    *scheduler.Scheduler
	api      *api.Server
	scanners []component
	notices  *runNotices
	leases   *leaseWatch // the workers' lease watches
	// redeclare writes the declared budgets, quotas and schedules again
	// after Valkey lost its data.
	redeclare *redeclare

	closeOnce sync.Once
}

// component is a background part with the house Start/Stop shape.
type component interface {
	Start(ctx context.Context) error
	Stop(ctx context.Context) error
}

// Open connects to Valkey (waiting up to Config.ValkeyWait for it), opens
// the store (loading the Functions library when needed) and builds the
// scheduler, scanners and API.
func Open(ctx context.Context, cfg Config) (*Server, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	log := cfg.Logger
	// Waiting result requests answer from the outcome a finish of this
	// process brings (store.Config.RunEnded), else from the store's
	// run-end notices (subscribed below, once the channel is known).
	notices := newRunNotices(nil, log)
	re := newRedeclare(log)
	vk, st, err := connect(ctx, cfg, store.Config{
		FlowPartitions:  cfg.FlowPartitions,
		KeyPrefix:       cfg.KeyPrefix,
		Logger:          log,
		RunEnded:        notices.ended,
		LibraryReloaded: re.trigger,
	})
	if err != nil {
		return nil, err
	}
	// fail is every error return once the store is open: it stops what
	// the store runs in the background and closes the client, for up to
	// ShutdownTimeout (a stop of a start that fails on a hung Valkey must
	// not wait on it longer than a stop of a server).
	fail := func(err error) (*Server, error) {
		closing, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.ShutdownTimeout)
		defer cancel()
		closeValkey(closing, log, re, st, vk)
		return nil, err
	}
	sched, err := scheduler.New(scheduler.Config{
		Store:          st,
		Subscribe:      scheduler.ValkeySubscriber(vk, st.WakeChannel()),
		ScanMax:        cfg.ScanMax,
		ResyncInterval: cfg.ResyncInterval,
		Logger:         log,
	})
	if err != nil {
		return fail(err)
	}
	s := &Server{cfg: cfg, log: log, vk: vk, store: st, sched: sched, redeclare: re}
	notices.subscribe = scheduler.ValkeySubscriber(vk, st.RunsChannel())
	s.notices = notices
	s.leases = newLeaseWatch(scheduler.ValkeySubscriber(vk, st.LeasesChannel()), log)
	adm := newAdmissionService(log, st, sched)
	met := newServerMetrics(st, sched, s.leases, log, cfg.Version)
	hints := newWaitHints(st)
	authLimiter := authlimit.New(cfg.AuthLimit)
	svc := &service{log: log, vk: vk, st: st, sched: sched, onClaim: adm.onClaim, hints: hints, watch: s.leases}
	a, err := api.New(api.Config{
		Service:      svc,
		Token:        cfg.Token,
		Logger:       log,
		BodyLimit:    cfg.BodyLimit,
		LeaseDefault: cfg.LeaseDefault,
		Metrics:      met.reg,
		AuthLimiter:  authLimiter,
	})
	if err != nil {
		return fail(err)
	}
	s.api = a
	flows := &flowService{st: st, hints: hints, notice: s.notices, poll: cfg.RunPoll, bulkMembers: cfg.BulkRunMembers}
	if err := a.AddFlows(flows, cfg.Templates); err != nil {
		return fail(fmt.Errorf("server: %w", err))
	}
	templates := templatesByName(cfg.Templates)
	if err := a.AddSchedules(&scheduleService{st: st, flows: flows, templates: templates, log: log}); err != nil {
		return fail(fmt.Errorf("server: %w", err))
	}
	if err := a.AddAdmission(adm); err != nil {
		return fail(fmt.Errorf("server: %w", err))
	}
	if err := a.AddLeaseWatch(svc); err != nil {
		return fail(fmt.Errorf("server: %w", err))
	}
	if !cfg.DisableUI {
		ui, err := dashboard.New(dashboard.Config{API: a, Token: cfg.Token, Logger: log, Revoked: st, AuthLimiter: authLimiter})
		if err != nil {
			return fail(fmt.Errorf("server: %w", err))
		}
		a.Mount(dashboard.Prefix, ui)
	}
	// The templates' shared budgets and quotas (ffrun --flows) and the
	// declared schedules; again whenever Valkey is found to have lost them
	// (the store reloads its library).
	declare := func(ctx context.Context) error {
		if err := RegisterDeclared(ctx, st, cfg.Templates, log); err != nil {
			return err
		}
		return registerSchedules(ctx, a, cfg.Token, cfg.Schedules, cfg.Templates, log)
	}
	if err := declare(ctx); err != nil {
		return fail(fmt.Errorf("server: %w", err))
	}
	if !cfg.DisableScanners {
		s.scanners, err = newScanners(st, cfg.Scanners, log, met)
		if err != nil {
			return fail(err)
		}
		s.scanners = append(s.scanners, newParkLog(st, log, cfg.Scanners.Unblock),
			newScheduleRunner(st, flows, templates, cfg.Scanners.Schedules, log))
	}
	re.start(declare)
	return s, nil
}

// Store returns the store (tests and the bench inspect state through it).
func (s *Server) Store() *store.Store { return s.store }

// Handler returns the HTTP API.
func (s *Server) Handler() http.Handler { return s.api }

// API returns the API server, so later features can add routes.
func (s *Server) API() *api.Server { return s.api }

// Serve starts the scheduler and scanners and serves the API on ln until
// ctx ends; then it shuts down gracefully: waiting claims are released at
// once, the listener closes, in-flight requests may finish within
// ShutdownTimeout, background components stop, and the Valkey connection
// closes. It returns within ShutdownTimeout (closeGraceMin more when the
// requests used it all up), leaving what has not ended then (with Valkey
// hung, the close of its connections) to end in the background.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	return s.ServeFront(ctx, newFront(ln, FrontConfig{TLS: s.cfg.APITLS, Logger: s.log}))
}

// ServeFront is Serve on the listener of f, which answered while the
// server was being opened: once the scheduler and scanners run, the API
// answers there instead of f's starting answers.
func (s *Server) ServeFront(ctx context.Context, f *Front) error {
	defer s.Close()
	if (f.cfg.TLS != nil) != (s.cfg.APITLS != nil) {
		return errors.New("server: the Front's TLS is not Config.APITLS")
	}
	if err := s.sched.Start(ctx); err != nil {
		return err
	}
	for i, c := range s.scanners {
		if err := c.Start(ctx); err != nil {
			s.stopScanners(ctx, s.scanners[:i])
			return fmt.Errorf("server: start scanner: %w", err)
		}
	}
	if err := s.notices.Start(ctx); err != nil {
		s.stopScanners(ctx, s.scanners)
		return fmt.Errorf("server: start run notices: %w", err)
	}
	if err := s.leases.Start(ctx); err != nil {
		s.stopScanners(ctx, s.scanners)
		return fmt.Errorf("server: start lease notices: %w", err)
	}
	var handler http.Handler = s.api
	if s.cfg.Token == "" && f.ln.Addr().Network() != "unix" { // no browser reaches a Unix socket
		handler = loopbackHosts(handler, s.log)
	}
	f.takeOver(handler)
	attrs := []any{slog.String("listen", f.ln.Addr().String()), slog.String("scheme", f.scheme()), slog.String("valkey", s.cfg.ValkeyAddr)}
	if !s.cfg.DisableUI {
		attrs = append(attrs, slog.String("console", dashboard.Prefix+"/"))
	}
	s.log.Info("ffrun serving", attrs...)

	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-f.served:
	}
	s.log.Info("ffrun shutting down")
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.ShutdownTimeout)
	defer cancel()
	// Parked claims, waiting result requests and lease watches answer at
	// once, so that the HTTP shutdown does not wait for them: a Stop with
	// a ctx that has ended ends their background loops without waiting
	// for them (with Valkey hung, the release of a subscription's
	// connection waits for it); close waits for them, after the requests.
	released, release := context.WithCancel(sctx)
	release()
	for _, w := range s.waiters() {
		_ = w.c.Stop(released)
	}
	if err := f.shutdown(sctx); err != nil {
		s.log.Warn("http shutdown did not finish in time", slog.Any("error", err))
	}
	s.stopScanners(sctx, s.scanners)
	deadline, _ := sctx.Deadline()
	s.close(deadline)
	if serveErr != nil && !errors.Is(serveErr, http.ErrServerClosed) {
		return fmt.Errorf("server: serve: %w", serveErr)
	}
	return nil
}

// stopScanners stops scanners, waiting for each within ctx.
func (s *Server) stopScanners(ctx context.Context, scanners []component) {
	for _, c := range scanners {
		if err := c.Stop(ctx); err != nil {
			s.log.Warn("scanner stop", slog.Any("error", err))
		}
	}
}

// namedComponent is a component and what its log lines call it.
type namedComponent struct {
	name string
	c    component
}

// waiters are the components that requests wait on: their Stop answers
// the waiting requests at once.
func (s *Server) waiters() []namedComponent {
	return []namedComponent{{"scheduler", s.sched}, {"run notices", s.notices}, {"lease notices", s.leases}}
}

// closeGraceMin is how long at least Close waits for the background parts
// to end and the Valkey connections to close, when the requests of a
// shutdown used up its ShutdownTimeout.
const closeGraceMin = time.Second

// Close stops the scheduler and the run and lease notices, and closes the
// Valkey connection, waiting for them for up to ShutdownTimeout: past it,
// it logs what was left and returns, leaving it to end in the background.
// Serve calls it; call it yourself only when Serve never ran. Safe to call
// twice.
func (s *Server) Close() {
	s.close(time.Now().Add(s.cfg.ShutdownTimeout))
}

// close is Close, waiting until deadline, or for closeGraceMin when that
// is later.
func (s *Server) close(deadline time.Time) {
	s.closeOnce.Do(func() {
		if grace := time.Now().Add(closeGraceMin); deadline.Before(grace) {
			deadline = grace
		}
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		defer cancel()
		for _, w := range s.waiters() {
			if err := w.c.Stop(ctx); err != nil {
				s.log.Warn(w.name+" stop", slog.Any("error", err))
			}
		}
		closeValkey(ctx, s.log, s.redeclare, s.store, s.vk)
	})
}

// closeValkey ends a pass of re under way, waits for the run-end notices
// the store is publishing (Store.Wait) and closes the client, waiting for
// that until ctx ends: then it logs it and returns, leaving the rest to
// the background. With Valkey hung, closing the client waits up to a
// second for each of its connections, one after the other (valkey-go).
func closeValkey(ctx context.Context, log *slog.Logger, re *redeclare, st *store.Store, vk valkey.Client) {
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		re.stop()
		st.Wait()
		vk.Close()
	}()
	select {
	case <-closed:
	case <-ctx.Done():
		select {
		case <-closed:
		default:
			log.Warn("the valkey connections did not close in time; left to close in the background",
				slog.Any("error", ctx.Err()))
		}
	}
}
