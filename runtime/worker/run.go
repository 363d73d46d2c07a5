package worker

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/flowfabric/ff/compiler/plan"
	"github.com/flowfabric/ff/runtime/client"
	"github.com/flowfabric/ff/runtime/wire"
)

// Defaults and limits of Config.
const (
	ConcurrencyDefault  = 1
	ConcurrencyMax      = wire.ClaimMaxLimit
	LeaseTTLDefault     = 30 * time.Second
	ClaimWaitDefault    = 30 * time.Second
	DrainTimeoutDefault = 20 * time.Second // plus HandBackGrace: 25 s, within Kubernetes' default grace period (30 s)
	ClaimLingerDefault  = time.Millisecond
	ReportLingerDefault = 200 * time.Microsecond
	OutputMaxBytes      = 1 << 20 // largest handler output the server accepts
	// KindsMax is the most kinds a claim or a hand-off may name (the
	// server's store.MaxKinds). A worker with handlers for more kinds
	// claims without a kinds filter: see Run.
	KindsMax      = 1024
	retryDelayMin = 50 * time.Millisecond
	requestSlack  = 15 * time.Second // bound of a request beyond its long-poll wait
	retryDelayMax = 5 * time.Second
	// reportsInFlight is how many report requests a worker has in flight
	// at once. With one, a task that finishes while a report is in flight
	// waits for that round trip before its own: a chain step cost about one
	// and a half. Two measured 8-12 % more chain throughput (ffbench, eight
	// alternating rounds) at the same Valkey CPU per plain task; three less.
	reportsInFlight = 2
	// reportBytesMax bounds the encoded size of one batched report, well
	// under the server's limit for batched calls (16 MiB,
	// api.BodyLimitBatch): outputs of up to OutputMaxBytes that finish
	// together go in several requests rather than one the server refuses.
	reportBytesMax = 8 << 20
	// reportRateMin is the slowest uplink, in bytes a second, a report is
	// given time for: a request of n bytes may take requestSlack plus
	// n/reportRateMin (1 MiB: 23 s; reportBytesMax: 79 s), so that a
	// batch of large outputs is not cut where each of them alone would
	// arrive (1 Mbit/s). A report that times out anyway is split.
	reportRateMin = 128 << 10
	// messageMaxBytes is the longest failure message the server keeps
	// (store.MaxErrorBytes); the worker clips longer ones before sending.
	messageMaxBytes = 4096
	// handBackReason is the reason recorded on the attempts handed back
	// when the drain timeout stops their handlers.
	handBackReason = "worker shut down"
	// goexitMessage is the failure recorded when a handler ends its
	// goroutine with runtime.Goexit instead of returning.
	goexitMessage = "handler exited its goroutine (runtime.Goexit, as t.FailNow does) without returning"
	// handBacksInFlight bounds the revoke requests of a hand-back.
	handBacksInFlight = 8
	// HandBackGrace is the most Run takes past DrainTimeout: Run returns
	// at the latest DrainTimeout + HandBackGrace after its context ends.
	// After the drain timeout cancelled the handlers still running, Run
	// waits up to HandBackGrace less handBackSendReserve (3 s) for them to
	// return (a handler honouring its context may need a moment to clean
	// up) and be given back; one still running then keeps its lease until
	// it expires. The outcomes still being sent (a report the server keeps
	// refusing, a hand-back) are cut at the same deadline.
	HandBackGrace = 5 * time.Second
	// handBackSendReserve is the part of HandBackGrace kept for sending
	// the hand-backs of the handlers that returned last.
	handBackSendReserve = 2 * time.Second
)

// Config configures a Worker.
type Config struct {
	URL          string   // ffrun base URL; required
	Token        string   // bearer token, when the server requires one
	Name         string   // worker id (up to 115 bytes; ':' allowed, ',' not); default the host name
	Namespace    string   // default plan.DefaultNamespace
	Lanes        []string // default [plan.DefaultLane]
	Capabilities []string // advertised capabilities
	Concurrency  int      // handlers running at once; default 1

	LeaseTTL time.Duration // lease asked for each claim; default 30s
	// RenewInterval is the time between two renewals of the leases held;
	// default LeaseTTL/3. A renewal is waited for as long as it may still
	// keep its leases (the last of them running out less half a
	// RenewInterval), and at least RenewInterval.
	RenewInterval time.Duration
	ClaimWait     time.Duration // long-poll wait per claim request; default 30s
	// DrainTimeout is how long Run, once ctx ends, lets the running
	// handlers finish (their leases still renewed, their outcomes
	// reported); default 20s. It then cancels those still running
	// (ErrShutdown) and returns at the latest HandBackGrace (5s) later:
	// DrainTimeout + HandBackGrace bounds the time from the stop signal to
	// Run's return, whatever the handlers and the server do (25s with the
	// defaults, within Kubernetes' default grace period of 30s). To fit a
	// grace period G, set it to G less HandBackGrace less what the program
	// needs to exit after Run.
	DrainTimeout time.Duration
	// ClaimLinger is how long a busy worker waits for more of its slots to
	// be free before claiming (batching); 0 = ClaimLingerDefault, negative
	// = claim as soon as one slot is free.
	ClaimLinger time.Duration
	// ReportLinger is how long a finished attempt's report, once a report
	// request is free to go, waits for the worker's other running
	// handlers to finish too, so that their outcomes go in the same
	// request (batching, as ClaimLinger does for claims); 0 =
	// ReportLingerDefault, negative = report at once. A report waits for
	// nothing when no other handler runs.
	ReportLinger time.Duration

	// NoHandoff turns off hand-offs: by default, completing a flow member
	// with downstream members keeps its slot and asks the server to grant
	// this worker, in the same request, the members the completion makes
	// eligible (those a claim would take next anyway), which saves a claim
	// round trip per step of a flow. With NoHandoff every task is claimed.
	NoHandoff bool

	// NoLeaseWatch turns off the lease watch: by default, while the worker
	// holds leases it keeps one long-poll open (POST /v1/worker/watch)
	// that the server answers as soon as one of them ends other than by
	// this worker's report (the execution or its run cancelled, the lease
	// revoked, the attempt's timeout, the lease's expiry or the
	// execution's deadline passed), and the handler's context is
	// cancelled then (ErrCancelled, ErrLeaseLost) rather than at the next
	// renew. A lease is watched once held for 100 ms; a server without the
	// route (an older ffrun) leaves the worker to its renewals.
	NoLeaseWatch bool

	// OnReported, when set, is called once the server answered the report
	// of an attempt's outcome: err is nil when it was recorded, else why
	// not (a stale lease, a transport failure). An attempt handed back at
	// shutdown (see Run) reports an error wrapping ErrShutdown, or why it
	// could not be handed back. A hook for metrics: it should return
	// promptly. No call comes after Run returned: Run waits for the calls
	// under way, and an outcome whose report Run gave up on (see Run) gets
	// none.
	OnReported func(executionID string, err error)

	// HTTPClient is the client of the requests; default: one with pooled
	// connections. Its Timeout, and its transport's ResponseHeaderTimeout
	// when the transport is an *http.Transport, bound the claims' and the
	// lease watch's waits (the smaller of the two, less a margin: see
	// client.Client.Claim), so that the server answers an idle long-poll
	// before the client gives up on it.
	HTTPClient *http.Client
	TLS        *tls.Config    // for an https URL: the default client's TLS settings (a private CA's RootCAs); not with HTTPClient or Client
	Logger     *slog.Logger   // default: discard
	Client     *client.Client // overrides URL, Token and HTTPClient when set
}

func (c Config) withDefaults() Config {
	if c.Name == "" {
		c.Name = "worker"
		if h, err := os.Hostname(); err == nil && h != "" {
			c.Name = h
		}
	}
	c.Namespace = cmp.Or(c.Namespace, plan.DefaultNamespace)
	if len(c.Lanes) == 0 {
		c.Lanes = []string{plan.DefaultLane}
	}
	c.Concurrency = cmp.Or(c.Concurrency, ConcurrencyDefault)
	c.LeaseTTL = cmp.Or(c.LeaseTTL, LeaseTTLDefault)
	c.RenewInterval = cmp.Or(c.RenewInterval, c.LeaseTTL/3)
	c.ClaimWait = cmp.Or(c.ClaimWait, ClaimWaitDefault)
	c.DrainTimeout = cmp.Or(c.DrainTimeout, DrainTimeoutDefault)
	c.ClaimLinger = cmp.Or(c.ClaimLinger, ClaimLingerDefault)
	c.ReportLinger = cmp.Or(c.ReportLinger, ReportLingerDefault)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

func (c Config) validate() error {
	if c.Client == nil && c.URL == "" {
		return errors.New("worker: Config.URL is required")
	}
	if c.TLS != nil && (c.Client != nil || c.HTTPClient != nil) {
		// It would not be used: those bring their own transport.
		return errors.New("worker: Config.TLS goes with the default HTTP client only: set the TLS settings on Config.HTTPClient's transport instead")
	}
	if c.Concurrency < 1 || c.Concurrency > ConcurrencyMax {
		return fmt.Errorf("worker: Config.Concurrency %d is outside 1..%d", c.Concurrency, ConcurrencyMax)
	}
	if c.LeaseTTL < wire.LeaseMsMin*time.Millisecond || c.LeaseTTL > wire.LeaseMsMax*time.Millisecond {
		return fmt.Errorf("worker: Config.LeaseTTL %s is outside %dms..%dms", c.LeaseTTL, wire.LeaseMsMin, wire.LeaseMsMax)
	}
	if c.RenewInterval <= 0 || c.RenewInterval >= c.LeaseTTL {
		return fmt.Errorf("worker: Config.RenewInterval %s must be positive and below LeaseTTL %s", c.RenewInterval, c.LeaseTTL)
	}
	if c.ClaimWait < 0 || c.ClaimWait > wire.ClaimWaitMaxMs*time.Millisecond {
		return fmt.Errorf("worker: Config.ClaimWait %s is outside 0..%dms", c.ClaimWait, wire.ClaimWaitMaxMs)
	}
	if c.DrainTimeout < 0 {
		return fmt.Errorf("worker: Config.DrainTimeout %s is negative", c.DrainTimeout)
	}
	if err := checkName("Config.Name", c.Name, nameMaxBytes, false); err != nil {
		return err
	}
	if strings.Contains(c.Name, ",") {
		return fmt.Errorf("worker: Config.Name %q contains a comma", c.Name)
	}
	// Namespaces and lanes: the server's rules (runtime/api checkName).
	if p := plan.LabelProblem(c.Namespace); p != "" {
		return fmt.Errorf("worker: Config.Namespace %s", p)
	}
	for i, l := range c.Lanes {
		if p := plan.LabelProblem(l); p != "" {
			return fmt.Errorf("worker: Config.Lanes[%d] %s", i, p)
		}
	}
	if err := plan.ValidateCapabilities(c.Capabilities); err != nil {
		return fmt.Errorf("worker: Config.Capabilities: %w", err)
	}
	return nil
}

// Limits of Config.Name: the server takes worker and instance ids of up to
// 128 bytes (api.WorkerIDMaxBytes), and the instance id is the name, '-'
// and 2*instanceSuffixBytes hex digits.
const (
	instanceSuffixBytes = 6
	nameMaxBytes        = 128 - 1 - 2*instanceSuffixBytes
)

// checkName applies the server's rules for identifiers (runtime/api
// checkIdent): not empty, at most limit bytes, valid UTF-8, no whitespace
// or control character, and no ':' when noColon.
func checkName(field, v string, limit int, noColon bool) error {
	if v == "" {
		return fmt.Errorf("worker: %s must not be empty", field)
	}
	if len(v) > limit {
		return fmt.Errorf("worker: %s is %d bytes, the limit is %d", field, len(v), limit)
	}
	if !utf8.ValidString(v) {
		return fmt.Errorf("worker: %s is not valid UTF-8", field)
	}
	for _, r := range v {
		if unicode.IsSpace(r) || unicode.IsControl(r) {
			return fmt.Errorf("worker: %s %q contains whitespace or a control character", field, v)
		}
		if noColon && r == ':' {
			return fmt.Errorf("worker: %s %q contains ':'", field, v)
		}
	}
	return nil
}

// Worker runs handlers for the tasks it claims. Create it with New,
// register handlers with Handle, then call Run once.
type Worker struct {
	cfg      Config
	log      *slog.Logger
	c        *client.Client
	instance string

	mu       sync.Mutex
	handlers map[string]Handler
	running  bool
	active   map[string]*running // by execution id
	// finished holds the leases this worker ran to the end and forgot
	// while a resume claim was on its way (resuming): the resume's answer
	// may deliver again a grant whose report crossed it, and a grant of
	// one of them is dropped rather than run a second time. Emptied when
	// the resume's answer was handled.
	finished map[wire.Lease]struct{}
	resuming bool

	slots    chan struct{}  // one token per free handler slot
	reports  chan report    // finished attempts waiting to be reported
	quit     chan struct{}  // closed when the drain is over: report what is queued and stop
	idle     chan func()    // hands an attempt to a handler goroutine waiting for one (runOn)
	inWork   sync.WaitGroup // handlers running, and slots held for a hand-off
	draining atomic.Bool    // claiming stopped: no more hand-offs
	// handoffOff: the server refused a hand-off; report without.
	handoffOff atomic.Bool
	base       context.Context // parent of handler contexts, set by Run
	kinds      []string        // the kinds with a handler, sorted; set by Run
	// hbNoKinds: the server refused kinds in heartbeats (one older than
	// them); they are left out from then on.
	hbNoKinds atomic.Bool
	// watchKick tells the lease watch (watchLoop) of a new lease; set by
	// Run.
	watchKick chan struct{}
	// watchArmed is true while the lease watch's timer is set: the watch
	// then looks at every lease held when it fires, so a new lease needs
	// no kick (which would wake it for nothing, once per task).
	watchArmed atomic.Bool
	// renewKick asks the renew loop for a round now: a lease arrived
	// late (start); set by Run.
	renewKick chan struct{}
	// renewRound, when set (tests: export_test.go), is called at the end
	// of each regular renew round.
	renewRound func()
	// unreported counts the attempts whose handlers were started and
	// whose reports the report loop has not taken from reports yet;
	// settled, set by Run, is poked by the report queued that leaves no
	// handler running (settle). Both serve reportLinger.
	unreported atomic.Int32
	settled    chan struct{}
	// reportedMu is held, for reading, by the calls of Config.OnReported
	// (reported); Run takes it to set reportedOff, so that no call comes
	// after it returned.
	reportedMu  sync.RWMutex
	reportedOff bool
	// slack bounds a report, a hand-back and an upstream read beyond the
	// time their bodies take: requestSlack, less in tests.
	slack time.Duration
	// rate is reportRateMin, more in tests.
	rate int
}

// running is one task this worker holds a lease for.
type running struct {
	lease   wire.Lease
	expires time.Time // on this worker's clock
	since   time.Time // when it started here, on this worker's clock
	cancel  context.CancelCauseFunc
	lost    atomic.Bool // lease rejected: do not report
	done    atomic.Bool // the handler returned: its lease needs no watch
	// ctxEnded: the handler's context had ended when it returned (the
	// attempt's timeout or deadline, a lease lost or a cancel): a
	// refusal of its report as stale or cancelled is no news. Written
	// before the report is queued, read by its sender.
	ctxEnded bool
}

// report is the outcome of one attempt.
type report struct {
	r         *running
	output    []byte
	failed    bool
	message   string
	retryable bool
	// held: the task's slot (and an inWork count) is kept for the
	// hand-off of its completion; send gives both back.
	held bool
	// handBack: the drain timeout stopped the handler; the lease is given
	// back instead of reporting a failure, so the attempt is not charged.
	handBack bool
}

// size bounds the encoded size of rep in a complete or fail request: an
// output is sent as it is or compacted, never HTML-escaped
// (wire.Marshal); a failure message may be escaped entirely (6 bytes a
// byte for control characters).
func (rep *report) size() int {
	n := 160 + len(rep.r.lease.ExecutionID) + len(rep.r.lease.LeaseID)
	switch {
	case rep.handBack:
	case rep.failed:
		n += 6 * len(rep.message)
	default:
		n += len(rep.output)
	}
	return n
}

// outputToSend returns the handler output out as a complete request
// carries it, or why it cannot be sent (the attempt then fails, not
// retryable): not JSON, or over OutputMaxBytes as sent, which is what the
// server measures. The request carries it as it is when compact, else
// compacted (wire.Marshal, as encoding/json, drops the white space
// between the tokens of a json.RawMessage; it escapes nothing), so an
// output over the limit only by its white space is sent compacted.
func outputToSend(out []byte) ([]byte, string) {
	if len(out) == 0 {
		return out, ""
	}
	if !json.Valid(out) {
		return nil, "handler output is not valid JSON"
	}
	if len(out) <= OutputMaxBytes {
		return out, ""
	}
	var b bytes.Buffer
	if err := json.Compact(&b, out); err != nil {
		return nil, fmt.Sprintf("handler output: %v", err)
	}
	if b.Len() > OutputMaxBytes {
		return nil, fmt.Sprintf("handler output is %d bytes (%d without white space), the limit is %d", len(out), b.Len(), OutputMaxBytes)
	}
	return b.Bytes(), ""
}

// New validates cfg and returns a Worker.
func New(cfg Config) (*Worker, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	c := cfg.Client
	if c == nil {
		opts := []client.Option{client.WithToken(cfg.Token)}
		if cfg.HTTPClient != nil {
			opts = append(opts, client.WithHTTPClient(cfg.HTTPClient))
		}
		if cfg.TLS != nil {
			opts = append(opts, client.WithTLSConfig(cfg.TLS))
		}
		var err error
		c, err = client.New(cfg.URL, opts...)
		if err != nil {
			return nil, fmt.Errorf("worker: %w", err)
		}
	}
	var b [instanceSuffixBytes]byte
	_, _ = rand.Read(b[:])
	return &Worker{
		cfg:      cfg,
		log:      cfg.Logger.With(slog.String(attrWorker, cfg.Name)),
		c:        c,
		instance: cfg.Name + "-" + hex.EncodeToString(b[:]),
		handlers: map[string]Handler{},
		active:   map[string]*running{},
		finished: map[wire.Lease]struct{}{},
		slack:    requestSlack,
		rate:     reportRateMin,
	}, nil
}

// Handle registers h for kind. Registering a kind twice, a kind no
// execution may have (plan.ValidateKind: empty, over 128 bytes, with white
// space, a control or invisible format character, or a comma) or a nil
// handler is an error, as is registering after Run started.
func (w *Worker) Handle(kind string, h Handler) error {
	if err := checkKind(kind); err != nil {
		return fmt.Errorf("worker: handle: %w", err)
	}
	if h == nil {
		return fmt.Errorf("worker: handle %q: nil handler", kind)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.running {
		return fmt.Errorf("worker: handle %q: the worker is already running", kind)
	}
	if _, dup := w.handlers[kind]; dup {
		return fmt.Errorf("worker: handle %q: kind already has a handler", kind)
	}
	w.handlers[kind] = h
	return nil
}

// checkKind reports why kind may not have a handler: the rule of the
// kinds executions may have (plan.ValidateKind), which the server applies
// to the kinds a worker claims.
func checkKind(kind string) error {
	if err := plan.ValidateKind(kind); err != nil {
		return fmt.Errorf("kind %w", err)
	}
	return nil
}

// Run claims and runs tasks until ctx ends, then drains: it stops claiming,
// waits up to DrainTimeout for running handlers (their leases are still
// renewed and their outcomes reported), cancels the ones still running with
// cause ErrShutdown, and returns. It returns nil after a clean drain.
// However the handlers and the server behave, Run returns at the latest
// DrainTimeout + HandBackGrace after ctx ends (provided a call of
// Config.OnReported under way then returns: Run waits for it): outcomes it
// could not send by then (a server refusing them, down or too slow) are
// dropped, without an OnReported call, and their tasks run again once
// their leases expire.
//
// When a handler so cancelled fails (it returns an error, as one that
// honours its context does) within HandBackGrace less 2 s, the failure is
// not reported: the worker gives the task back (it revokes its own lease),
// so that the attempt is not charged and another worker may run the task
// at once. Tasks a hand-off grants once the drain started are given back
// the same way. A handler that ignores its context, or returns after the
// grace, keeps its lease until it expires.
//
// A claim the server refuses as a bad request (400: a kind it does not
// accept, say) can never succeed: Run then stops claiming, drains the same
// way and returns the server's reason. Other refusals (a token or quota
// the operator may still fix) and transport errors are logged and retried,
// with backoff, or after the time the server said to wait (a 429's
// Retry-After) when longer.
//
// Claims name the kinds that have a handler, so that workers with
// different handlers can share a lane. A worker with more than KindsMax
// kinds (a Register function of a flow of that many executions) claims
// tasks of any kind instead, and fails the ones without a handler as
// retryable: give it a lane or a namespace of its own.
func (w *Worker) Run(ctx context.Context) error {
	w.mu.Lock()
	if w.running {
		w.mu.Unlock()
		return errors.New("worker: Run called twice")
	}
	if len(w.handlers) == 0 {
		w.mu.Unlock()
		return errors.New("worker: no handlers registered")
	}
	w.running = true
	w.kinds = slices.Sorted(maps.Keys(w.handlers))
	w.mu.Unlock()
	if len(w.kinds) > KindsMax {
		w.log.WarnContext(ctx, "more handler kinds than a claim may name; claiming tasks of any kind",
			slog.Int("kinds", len(w.kinds)), slog.Int("limit", KindsMax))
		w.kinds = nil
	}

	if err := w.connect(ctx); err != nil {
		w.mu.Lock()
		w.running = false
		w.mu.Unlock()
		return err
	}

	w.slots = make(chan struct{}, w.cfg.Concurrency)
	for range w.cfg.Concurrency {
		w.slots <- struct{}{}
	}
	w.reports = make(chan report, w.cfg.Concurrency*2)
	w.quit = make(chan struct{})
	w.idle = make(chan func())
	w.watchKick = make(chan struct{}, 1)
	w.renewKick = make(chan struct{}, 1)
	w.settled = make(chan struct{}, 1)

	// Handlers, renewals and reports outlive ctx during the drain.
	bg, stopBG := context.WithCancel(context.WithoutCancel(ctx))
	defer stopBG()
	handlerBase, stopHandlers := context.WithCancelCause(bg)
	defer stopHandlers(ErrShutdown)

	var side sync.WaitGroup
	renewDone := make(chan struct{})
	side.Go(func() { w.renewLoop(bg, renewDone) })
	side.Go(func() { w.heartbeatLoop(bg, renewDone) })
	if !w.cfg.NoLeaseWatch {
		side.Go(func() { w.watchLoop(bg, renewDone) })
	}
	w.base = handlerBase // where hand-offs start their handlers
	reporterDone := make(chan struct{})
	go func() { w.reportLoop(bg); close(reporterDone) }()

	w.log.InfoContext(ctx, "worker started", slog.String(attrInstance, w.instance),
		slog.String(attrNamespace, w.cfg.Namespace), slog.Any("lanes", w.cfg.Lanes),
		slog.Int("concurrency", w.cfg.Concurrency), slog.Any("kinds", kindsToLog(w.kinds)))
	err := w.claimLoop(ctx, handlerBase)

	// Drain, within one bound: Run returns at the latest DrainTimeout +
	// HandBackGrace after ctx ended (when the claim loop saw it).
	w.draining.Store(true)
	w.log.InfoContext(ctx, "worker draining")
	deadline := time.Now().Add(w.cfg.DrainTimeout + HandBackGrace)
	drained := make(chan struct{})
	go func() { w.inWork.Wait(); close(drained) }()
	select {
	case <-drained:
	case <-time.After(w.cfg.DrainTimeout):
		err = errors.Join(err, fmt.Errorf("worker: drain timeout %s: handlers still running were cancelled", w.cfg.DrainTimeout))
		stopHandlers(ErrShutdown)
		// The handlers that honour the cancel return, and are handed
		// back, meanwhile; the last part of the grace is kept for
		// sending the last of those hand-backs.
		select {
		case <-drained:
		case <-time.After(time.Until(deadline) - handBackSendReserve):
		}
	}
	// Outcomes still queued, or still being sent again, have what is
	// left; the requests in flight at the deadline are cancelled (stopBG).
	close(w.quit)
	select {
	case <-reporterDone:
	case <-time.After(time.Until(deadline)):
		err = errors.Join(err, errors.New("worker: reporting outcomes did not finish in time"))
	}
	// No OnReported call from here on: the reports given up on end when
	// stopBG cancels their requests, maybe after Run returned. The calls
	// under way are waited for.
	w.reportedMu.Lock()
	w.reportedOff = true
	w.reportedMu.Unlock()
	close(renewDone)
	stopBG()
	side.Wait()
	w.leave(ctx, deadline)
	w.c.CloseIdleConnections()
	w.log.InfoContext(ctx, "worker stopped")
	return err
}

// claimLoop long-polls for as many tasks as there are free slots, until
// ctx ends (nil) or the server refuses a claim as a bad request (its
// reason).
func (w *Worker) claimLoop(ctx context.Context, handlerBase context.Context) error {
	delay := retryDelayMin
	// resume: the last claim's outcome is unknown (outcomeUnknown: it
	// failed in transport, or a server or a proxy answered it 5xx or 408),
	// so its answer may have been lost after the server granted: the next
	// claim asks for what this instance still holds first. since: when the
	// first claim of that streak was sent (what it granted is as old).
	resume := false
	var since time.Time
	for {
		// Wait for one free slot, then take every other free one.
		select {
		case <-ctx.Done():
			return nil
		case <-w.slots:
		}
		free := 1 + w.takeSlots(ctx, w.cfg.Concurrency-1)
		if resume {
			w.mu.Lock()
			w.resuming = true
			w.mu.Unlock()
		}
		// Bound the request: a server that vanished mid long-poll must not
		// hang the worker.
		cctx, cancel := context.WithTimeout(ctx, w.cfg.ClaimWait+requestSlack)
		if !resume {
			since = time.Now()
		}
		tasks, err := w.c.Claim(cctx, wire.ClaimRequest{
			WorkerID:     w.cfg.Name,
			InstanceID:   w.instance,
			Namespace:    w.cfg.Namespace,
			Lanes:        w.cfg.Lanes,
			Capabilities: w.cfg.Capabilities,
			Kinds:        w.kinds,
			Max:          free,
			WaitMs:       w.cfg.ClaimWait.Milliseconds(),
			LeaseMs:      w.cfg.LeaseTTL.Milliseconds(),
			Resume:       resume,
		})
		cancel()
		for range free - len(tasks) {
			w.slots <- struct{}{}
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			level := slog.LevelWarn
			wait := delay
			var ae *client.APIError
			// A bad request (400) or a claim larger than the server takes
			// (413) will not succeed on a retry.
			if errors.As(err, &ae) && (ae.Status == http.StatusBadRequest || ae.Status == http.StatusRequestEntityTooLarge) {
				w.log.ErrorContext(ctx, "claim refused; stopping", slog.Any(attrError, err))
				return fmt.Errorf("worker: claim refused: %w", err)
			}
			switch {
			case outcomeUnknown(err):
				resume = true
			case !client.Passing(ae):
				level = slog.LevelError // configuration: a wrong token, lane or capability
			}
			if ae != nil {
				// The server said when to try again (a 429 while the
				// address is limited, a 503 while ffrun starts): a claim
				// sooner would be refused too, and take a turn of an
				// address asked to keep quiet.
				wait = max(wait, ae.RetryAfter)
			}
			w.log.Log(ctx, level, "claim failed; retrying", slog.Any(attrError, err), slog.Duration("delay", wait))
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(wait):
			}
			delay = min(delay*2, retryDelayMax)
			continue
		}
		delay = retryDelayMin
		for _, t := range tasks {
			w.start(handlerBase, t, since)
		}
		if resume {
			resume = false
			w.mu.Lock()
			w.resuming = false
			clear(w.finished)
			w.mu.Unlock()
		}
	}
}

// takeSlots takes up to n more free slots. While other handlers still
// run it lingers up to ClaimLinger for them to finish too, so that a busy
// worker claims in batches instead of one task per request (fewer, larger
// claims cost Valkey and HTTP much less per task); an idle worker claims
// at once.
func (w *Worker) takeSlots(ctx context.Context, n int) int {
	got := 0
	take := func() bool {
		select {
		case <-w.slots:
			got++
			return true
		default:
			return false
		}
	}
	for got < n && take() {
	}
	if got == n || w.cfg.ClaimLinger <= 0 {
		return got
	}
	t := time.NewTimer(w.cfg.ClaimLinger)
	defer t.Stop()
	for got < n {
		select {
		case <-w.slots:
			got++
		case <-t.C:
			return got
		case <-ctx.Done():
			return got
		}
	}
	return got
}

// start runs the handler of t in its own goroutine; its slot is already
// taken. The request that granted t (or the first of those it repeats)
// was sent at sent.
func (w *Worker) start(base context.Context, t wire.Task, sent time.Time) {
	w.mu.Lock()
	if _, ok := w.finished[wire.Lease{ExecutionID: t.ExecutionID, LeaseID: t.LeaseID, Epoch: t.Epoch}]; ok {
		w.mu.Unlock()
		// A lease this worker ran to the end, granted again: the server's
		// repeat of an answer it thought lost crossed this worker's report.
		w.slots <- struct{}{}
		return
	}
	if cur := w.active[t.ExecutionID]; cur != nil && cur.lease.LeaseID == t.LeaseID && cur.lease.Epoch == t.Epoch {
		w.mu.Unlock()
		// The lease this worker already runs the execution under, granted
		// again: it runs once, and its slot is free again. (The server
		// re-delivers only the hand-offs of an answer that was lost, which
		// the worker never ran; this guards against any other repeat.)
		w.slots <- struct{}{}
		return
	}
	w.mu.Unlock()
	// The server's times on this worker's clock, which may disagree with
	// Valkey's by more than an attempt's timeout: every grant (claim or
	// hand-off) asks for LeaseTTL, so the server granted it at
	// lease_expires_at - LeaseTTL on its clock, and the answer arrives
	// about then (a long poll answers when it grants).
	now := time.Now()
	shift := now.Sub(t.LeaseExpiresAt.Add(-w.cfg.LeaseTTL))
	hctx, cancel := context.WithCancelCause(base)
	// One allocation for what lives as long as the attempt.
	j := &struct {
		running
		task  Task
		usage taskUsage
		ctx   taskCtx
	}{running: running{lease: wire.Lease{ExecutionID: t.ExecutionID, LeaseID: t.LeaseID, Epoch: t.Epoch},
		expires: t.LeaseExpiresAt.Add(shift), since: now, cancel: cancel}}
	r := &j.running
	w.mu.Lock()
	// A new lease on an execution this worker still runs means the old
	// lease is gone (revoked or expired, then granted again).
	old := w.active[t.ExecutionID]
	w.active[t.ExecutionID] = r
	h := w.handlers[t.Kind]
	w.mu.Unlock()
	// After the lease joined w.active: a watch whose timer is set looks
	// at it when the timer fires (watchLoop clears watchArmed before it
	// looks).
	if !w.watchArmed.Load() {
		select {
		case w.watchKick <- struct{}{}:
		default: // a kick is pending already
		}
	}
	if w.late(t, sent, now) {
		select {
		case w.renewKick <- struct{}{}:
		default: // a kick is pending already
		}
	}
	if old != nil {
		w.lose(old, ErrLeaseLost)
	}
	j.usage.c, j.usage.lease = w.c, r.lease
	task := &j.task
	*task = Task{
		id: t.ExecutionID, kind: t.Kind, namespace: t.Namespace, lane: t.Lane,
		attempt: t.Attempt, maxAttempts: t.MaxAttempts, tags: t.Tags,
		input: t.Input, upstreams: t.Upstreams, upErrors: t.UpstreamErrors,
		usage: &j.usage,
	}
	if t.DeadlineAt != nil {
		task.deadline = t.DeadlineAt.Add(shift)
	}
	// The handler's goroutine reads what it needs of t from these and
	// task: a closure over t would move all of it to the heap.
	omitted, downstream := t.UpstreamsOmitted, t.Downstream
	w.inWork.Add(1)
	w.unreported.Add(1)
	w.runOn(func() {
		defer w.inWork.Done()
		defer cancel(nil)
		rep := report{r: r}
		// inHandler is set while the handler runs. w.call recovers every
		// panic, so the handler can leave it set only by ending this
		// goroutine with runtime.Goexit (t.FailNow or t.Fatal in a test's
		// handler): it neither returned nor panicked, and the attempt would
		// otherwise stay running under a lease this worker renews, its slot
		// taken. Fail it as a panic fails it.
		inHandler := false
		defer func() {
			if !inHandler {
				return
			}
			w.log.Error("handler exited its goroutine", slog.String(attrKind, task.kind), slog.String(attrExecution, task.id))
			rep.failed, rep.retryable, rep.message = true, true, goexitMessage
			rep.handBack = errors.Is(context.Cause(hctx), ErrShutdown)
			w.settle(rep, downstream)
		}()
		if h == nil {
			rep.failed, rep.retryable = true, true
			rep.message = fmt.Sprintf("worker %s has no handler for kind %q", w.cfg.Name, task.kind)
			w.log.Warn("no handler for claimed task", slog.String(attrKind, task.kind), slog.String(attrExecution, task.id))
		} else {
			j.ctx = taskCtx{Context: hctx, t: task}
			ctx := context.Context(&j.ctx)
			if !task.deadline.IsZero() {
				var c context.CancelFunc
				ctx, c = context.WithDeadline(ctx, task.deadline)
				defer c()
			}
			var out []byte
			var err error
			if len(omitted) > 0 {
				// The handler runs with every upstream result or not at all.
				err = w.fetchUpstreams(ctx, task, omitted)
			}
			if err == nil {
				inHandler = true
				out, err = w.call(ctx, h, task)
				inHandler = false
			}
			r.ctxEnded = ctx.Err() != nil
			switch {
			case err != nil:
				rep.failed = true
				rep.message, rep.retryable = w.describe(task, err)
			default:
				var why string
				if rep.output, why = outputToSend(out); why != "" {
					rep.failed, rep.message = true, why
				}
			}
			// Stopped by the drain timeout: the worker goes away, the task
			// did not fail. Give it back uncharged rather than fail it, when
			// the handler's error is that stop (ctx's error or cause,
			// wrapped or not); an error of its own, or an output refused,
			// is its outcome, whenever it came.
			if err != nil && errors.Is(context.Cause(hctx), ErrShutdown) &&
				(errors.Is(err, context.Canceled) || errors.Is(err, ErrShutdown)) {
				rep.handBack = true
			}
		}
		w.settle(rep, downstream)
	})
}

// late reports whether the lease of t reached this worker (now) so long
// after the server granted it that the next regular renew round, up to
// RenewInterval away, may come when the lease has little time left, or
// none: a slow link, a grant of megabytes decoded on a busy host, a
// hand-off started once the rest of its report was delivered. Late is
// older than half the margin the rounds leave a fresh lease, (LeaseTTL -
// RenewInterval)/2. The grant's time is the server's (lease_expires_at
// less LeaseTTL), but no earlier than sent, when the request that asked
// for it was sent: a clock ahead of the server's makes a lease look at
// most as old as its request, one behind makes it look fresh (as start
// assumes for its expiry).
func (w *Worker) late(t wire.Task, sent, now time.Time) bool {
	granted := t.LeaseExpiresAt.Add(-w.cfg.LeaseTTL)
	if granted.Before(sent) {
		granted = sent
	}
	return now.Sub(granted) > (w.cfg.LeaseTTL-w.cfg.RenewInterval)/2
}

// settle ends an attempt on its handler goroutine: it gives back the
// attempt's slot, or keeps it for what the completion hands off when the
// task has downstream work (downstream) and succeeded, and queues rep for
// the reporter.
func (w *Worker) settle(rep report, downstream bool) {
	rep.r.done.Store(true)
	if downstream && !rep.failed && !w.cfg.NoHandoff && !w.handoffOff.Load() && !w.draining.Load() {
		// Keep the slot for what the completion hands off; the inWork
		// count taken here (while this handler's own is still held)
		// keeps a drain waiting for the answer.
		rep.held = true
		w.inWork.Add(1)
	} else {
		w.slots <- struct{}{}
	}
	select {
	case w.reports <- rep:
		// A report loop lingering for the running handlers
		// (reportLinger) waits for the last of them: the report that
		// leaves none running pokes it, not every report (each poke of
		// the parked loop is a goroutine hand-off, once per attempt).
		// The last to queue sees every other report queued, unless the
		// loop took some meanwhile: then it is not lingering, and
		// reportLinger looks before it waits.
		if int(w.unreported.Load()) <= len(w.reports) {
			select {
			case w.settled <- struct{}{}:
			default: // a poke is pending already
			}
		}
	case <-w.quit: // abandoned after the drain timeout
		w.unreported.Add(-1)
		if rep.held {
			w.release(nil, time.Time{})
		}
	}
}

// runOn runs f on a handler goroutine that is waiting for work, or on a
// new one when none is. Handler goroutines stay until the drain is over,
// so that the stack one handler grew is there for the next: a goroutine
// per attempt grew it again for every task (about 6 % of the chain
// benchmark's Go CPU profile).
func (w *Worker) runOn(f func()) {
	select {
	case w.idle <- f:
	default:
		go w.runner(f)
	}
}

// runner runs f, then whatever runOn hands it, until the worker quits.
func (w *Worker) runner(f func()) {
	for {
		f()
		f = nil // not kept alive while waiting
		select {
		case f = <-w.idle:
		case <-w.quit:
			return
		}
	}
}

// upstreamReadsInFlight bounds the result reads one task's omitted
// upstreams have in flight (see fetchUpstreams).
const upstreamReadsInFlight = 8

// fetchUpstreams reads the results of the upstreams the server left out
// of t's grant to bound its size (omitted: exec name to execution id) into
// t's upstreams, under the handler's context ctx, so that the handler
// sees every upstream result as if the grant had carried them. An error
// names the first upstream that could not be read; the attempt then fails
// (retryable) without running the handler.
func (w *Worker) fetchUpstreams(ctx context.Context, t *Task, omitted map[string]string) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	names := slices.Sorted(maps.Keys(omitted))
	results := make([]json.RawMessage, len(names))
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	sem := make(chan struct{}, upstreamReadsInFlight)
	for i, name := range names {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			r, err := w.fetchUpstream(ctx, name, omitted[name])
			if err != nil {
				mu.Lock()
				if first == nil {
					first = err
					cancel() // the attempt fails: the other reads are moot
				}
				mu.Unlock()
				return
			}
			results[i] = r
		}()
	}
	wg.Wait()
	if first != nil {
		return first
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("read the results of %d omitted upstreams: %w", len(names), context.Cause(ctx))
	}
	ups := make(map[string]json.RawMessage, len(t.upstreams)+len(names))
	maps.Copy(ups, t.upstreams)
	for i, name := range names {
		ups[name] = results[i]
	}
	t.upstreams = ups
	return nil
}

// fetchUpstream reads the result of upstream name, execution id, in a
// request bounded as a report is (an output of up to OutputMaxBytes at
// reportRateMin, plus the slack): the handler's context may have no
// deadline, and a server gone silent must fail the attempt rather than
// hold it, renewed, for ever.
func (w *Worker) fetchUpstream(ctx context.Context, name, id string) (json.RawMessage, error) {
	rctx, cancel := context.WithTimeout(ctx, w.requestTimeout(OutputMaxBytes))
	defer cancel()
	res, err := w.c.ExecutionResult(rctx, id)
	if err != nil {
		return nil, fmt.Errorf("read the result of upstream %s (%s): %w", name, id, err)
	}
	if res.State != "completed" || len(res.Result) == 0 {
		// It had a result when the task was granted, and keeps it while
		// the run goes on (a replay starts once the run ended): checked
		// rather than run the handler without it.
		return nil, fmt.Errorf("upstream %s (%s) is %s, without a result", name, id, res.State)
	}
	return res.Result, nil
}

// describe returns the failure message (clipped to what the server keeps)
// and the retryability of err, the error a handler of t returned. err's
// methods are the user's code: an Error, Unwrap or As method that panics
// (a nil *T returned as an error, whose Error reads a field, is the usual
// case) fails the attempt, retryable, as a panic in the handler does,
// instead of crashing the worker.
func (w *Worker) describe(t *Task, err error) (msg string, retryable bool) {
	defer func() {
		if p := recover(); p != nil {
			w.log.Error("handler error panicked", slog.String(attrKind, t.kind), slog.String(attrExecution, t.id),
				slog.String("type", fmt.Sprintf("%T", err)), slog.Any("panic", p), slog.String("stack", string(debug.Stack())))
			msg, retryable = clip(fmt.Sprintf("handler returned an error of type %T whose methods panicked: %v", err, p), messageMaxBytes), true
		}
	}()
	return clip(err.Error(), messageMaxBytes), !IsPermanent(err)
}

// call runs h, turning a panic into a *PanicError.
func (w *Worker) call(ctx context.Context, h Handler, t *Task) (out []byte, err error) {
	defer func() {
		if p := recover(); p != nil {
			w.log.Error("handler panicked", slog.String(attrKind, t.kind), slog.String(attrExecution, t.id),
				slog.Any("panic", p), slog.String("stack", string(debug.Stack())))
			out, err = nil, &PanicError{Value: p}
		}
	}()
	return h(ctx, t)
}

// renewLoop renews every held lease once per interval, in one request.
// After a refusal that said when to try again, the next round waits for
// that, within the leases (renewWait). A lease that arrived late (start,
// late) is renewed at once, with the others, unless the server asked to
// wait: the regular round keeps its time. The heartbeat has its own loop
// (heartbeatLoop): a renewal waited for up to its leases' expiry
// (renewDeadline) would hold it past its ttl.
func (w *Worker) renewLoop(ctx context.Context, done <-chan struct{}) {
	t := time.NewTimer(w.cfg.RenewInterval)
	defer t.Stop()
	var quiet time.Time // the server asked for no request before
	for {
		kicked := false
		select {
		case <-done:
			return
		case <-ctx.Done():
			return
		case <-t.C:
		case <-w.renewKick:
			if time.Now().Before(quiet) {
				continue // the round renewWait set comes in time, or as late as the server asked
			}
			kicked = true
		}
		start := time.Now()
		hint := w.renewOnce(ctx)
		if hint == 0 && kicked {
			continue
		}
		quiet = time.Now().Add(hint)
		t.Reset(w.renewWait(start, hint))
		if w.renewRound != nil {
			w.renewRound()
		}
	}
}

// renewWait returns how long the renew loop waits for its next round, the
// last one having started at start: RenewInterval from start, or, after a
// refusal that said to try again in hint (a 429's Retry-After), at least
// hint, but never past the last chance to keep the leases held (half a
// RenewInterval before the first of them runs out). The two pull apart
// when the server asks to wait longer than a lease has left: a renewal
// sent sooner than asked is likely refused again, one sent after the
// lease ran out surely is, and the lease lost means its task runs again
// elsewhere, so the worker takes the last chance (one request the server
// may refuse) rather than give the lease up.
func (w *Worker) renewWait(start time.Time, hint time.Duration) time.Duration {
	next := start.Add(w.cfg.RenewInterval)
	if hint <= 0 {
		return max(time.Until(next), 0)
	}
	at := time.Now().Add(hint)
	w.mu.Lock()
	for _, r := range w.active {
		if last := r.expires.Add(-w.cfg.RenewInterval / 2); !r.lost.Load() && last.Before(at) {
			at = last
		}
	}
	w.mu.Unlock()
	if at.After(next) {
		next = at
	}
	return max(time.Until(next), 0)
}

// renewOnce renews the leases held, and returns how long the server said
// to wait when it refused a renewal (APIError.RetryAfter; 0 when none
// said).
func (w *Worker) renewOnce(ctx context.Context) (hint time.Duration) {
	w.mu.Lock()
	held := make([]*running, 0, len(w.active))
	for _, r := range w.active {
		if !r.lost.Load() {
			held = append(held, r)
		}
	}
	w.mu.Unlock()
	for start := 0; start < len(held); start += wire.BatchMax {
		batch := held[start:min(start+wire.BatchMax, len(held))]
		leases := make([]wire.Lease, len(batch))
		for i, r := range batch {
			leases[i] = r.lease
		}
		sent := time.Now() // the server renews no earlier
		rctx, cancel := context.WithDeadline(ctx, w.renewDeadline(batch, sent))
		res, err := w.c.Renew(rctx, wire.RenewRequest{WorkerID: w.cfg.Name, LeaseMs: w.cfg.LeaseTTL.Milliseconds(), Leases: leases})
		cancel()
		if err != nil || len(res) != len(batch) {
			if err == nil {
				err = fmt.Errorf("renew answered %d results for %d leases", len(res), len(batch))
			}
			hint = max(hint, retryAfter(err))
			w.log.Warn("renew failed", slog.Any(attrError, err), slog.Int("leases", len(batch)))
			for _, r := range batch {
				w.mu.Lock()
				exp := r.expires
				w.mu.Unlock()
				if sent.After(exp) { // it ran out while we could not reach the server
					w.lose(r, ErrLeaseLost)
				}
			}
			continue
		}
		for i, rr := range res {
			r := batch[i]
			switch {
			case rr.OK:
				// Renewed for LeaseTTL from when the server got the
				// request, which is no earlier than it was sent (on this
				// worker's clock: see start): the answer's way back, which
				// may be long on a slow link or a loaded host, does not
				// count.
				w.mu.Lock()
				r.expires = sent.Add(w.cfg.LeaseTTL)
				w.mu.Unlock()
			case rr.Error != nil && rr.Error.Code == wire.CodeCancelled:
				w.lose(r, ErrCancelled)
			default:
				w.lose(r, ErrLeaseLost)
			}
		}
	}
	return hint
}

// renewDeadline returns when a renewal of batch sent at sent is given up:
// when none of its leases can be saved any more by this worker's count,
// the last of them running out less half a RenewInterval (the margin
// renewWait keeps for a last chance, which a renewal cut then can still
// take on a new connection), but no sooner than RenewInterval after
// sent. A renewal the server is slow to answer (a loaded server or
// host, a slow link) is so waited for as long as it may keep the leases,
// rather than cut after a fixed interval while it would have succeeded,
// and the leases taken for lost while the server still held them.
func (w *Worker) renewDeadline(batch []*running, sent time.Time) time.Time {
	at := sent.Add(w.cfg.RenewInterval)
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, r := range batch {
		if last := r.expires.Add(-w.cfg.RenewInterval / 2); last.After(at) {
			at = last
		}
	}
	return at
}

// lose marks r's lease as gone and cancels its handler.
func (w *Worker) lose(r *running, cause error) {
	if r.lost.Swap(true) {
		return
	}
	msg := "lease lost; cancelling handler"
	if errors.Is(cause, ErrCancelled) {
		msg = "execution cancelled; cancelling handler"
	}
	w.log.Info(msg, slog.String(attrExecution, r.lease.ExecutionID), slog.Any("cause", cause))
	r.cancel(cause)
}

// reportLoop sends outcomes, up to reportsInFlight requests at once,
// coalescing whatever finished while they were in flight into one request
// per kind of outcome, of at most wire.BatchMax items and about
// reportBytesMax bytes.
func (w *Worker) reportLoop(ctx context.Context) {
	sem := make(chan struct{}, reportsInFlight)
	// The senders live as long as the loop, for the reason handler
	// goroutines do (runOn): a request grows the stack of the goroutine
	// that sends it.
	batches := make(chan []report)
	var inflight, senders sync.WaitGroup
	for range reportsInFlight {
		senders.Go(func() {
			for b := range batches {
				w.send(ctx, b)
				inflight.Done()
				<-sem
			}
		})
	}
	defer func() {
		inflight.Wait()
		close(batches)
		senders.Wait()
	}()
	var carry *report // taken from the channel, but over the size of the batch before
	quitting := false
	linger := time.NewTimer(time.Hour)
	linger.Stop()
	for {
		var first report
		switch {
		case carry != nil:
			first, carry = *carry, nil
		case !quitting:
			select {
			case first = <-w.reports:
				w.unreported.Add(-1)
			case <-w.quit:
				// Report what is queued, one request after the other.
				quitting = true
				inflight.Wait()
				continue
			}
		default:
			select {
			case first = <-w.reports:
				w.unreported.Add(-1)
			default:
				return
			}
		}
		if !quitting {
			// Wait for a request slot before taking the queue: what
			// finishes meanwhile joins this batch (fewer, larger reports).
			sem <- struct{}{}
			w.reportLinger(linger)
		}
		var batch []report
		batch, carry = w.fill(first)
		if quitting {
			w.send(ctx, batch)
			continue
		}
		inflight.Add(1)
		batches <- batch
	}
}

// reportLinger waits, once a report request is free to go, up to
// ReportLinger for the handlers still running to finish, so that their
// outcomes join the request: fewer, larger reports cost the server much
// less per task (an HTTP request and a store call each), as fewer, larger
// claims do (takeSlots). It returns at once when no handler runs (their
// reports, if any, are queued already) and once the drain started. t is
// the loop's timer, stopped.
func (w *Worker) reportLinger(t *time.Timer) {
	running := func() bool { return int(w.unreported.Load()) > len(w.reports) }
	if w.cfg.ReportLinger <= 0 || w.draining.Load() || !running() {
		return
	}
	t.Reset(w.cfg.ReportLinger)
	defer t.Stop()
	for running() {
		select {
		case <-w.settled:
		case <-t.C:
			return
		case <-w.quit:
			return
		}
	}
}

// fill makes a batch of first and the reports waiting in the channel,
// without blocking: at most wire.BatchMax of them, and no more than
// reportBytesMax bytes once encoded unless first alone is. It returns the
// report it took that did not fit, if any: the first of the next batch.
func (w *Worker) fill(first report) ([]report, *report) {
	batch := make([]report, 1, min(1+len(w.reports), wire.BatchMax))
	batch[0] = first
	size := first.size()
	for len(batch) < wire.BatchMax {
		select {
		case r := <-w.reports:
			w.unreported.Add(-1)
			if size += r.size(); size > reportBytesMax {
				carry := r // a copy: taking r's address would move every report taken to the heap
				return batch, &carry
			}
			batch = append(batch, r)
		default:
			return batch, nil
		}
	}
	return batch, nil
}

func (w *Worker) send(ctx context.Context, batch []report) {
	// Most batches are completions only: room for all of them at once.
	comps := make([]wire.Completion, 0, len(batch))
	compR := make([]*running, 0, len(batch))
	compSize := make([]int, 0, len(batch))  // their reports' sizes
	compHeld := make([]bool, 0, len(batch)) // completions whose slot is kept for a hand-off
	var fails []wire.Failure
	var failR, backR []*running
	var failSize []int
	held := 0
	draining := w.draining.Load()
	for _, rep := range batch {
		// Read once: a lease lost between two reads would keep a slot
		// for a hand-off that is never asked for.
		lost := rep.r.lost.Load()
		if rep.held && (draining || lost) {
			w.release(nil, time.Time{}) // no hand-off once claiming stopped, nor for a lost lease
			rep.held = false
		}
		switch {
		case lost:
			w.forget(rep.r)
		case rep.handBack:
			backR = append(backR, rep.r)
		case rep.failed:
			fails = append(fails, wire.Failure{Lease: rep.r.lease, Message: rep.message, Retryable: rep.retryable})
			failR, failSize = append(failR, rep.r), append(failSize, rep.size())
		default:
			comps = append(comps, wire.Completion{Lease: rep.r.lease, Output: rep.output})
			compR, compSize = append(compR, rep.r), append(compSize, rep.size())
			compHeld = append(compHeld, rep.held)
			if rep.held {
				held++
			}
		}
	}
	// One request per kind of outcome; the usual batch has one kind and
	// sends it on this goroutine.
	parts := 0
	for _, n := range [...]int{len(comps), len(fails), len(backR)} {
		parts += min(n, 1)
	}
	if parts == 1 {
		switch {
		case len(comps) > 0:
			w.sendCompletions(ctx, comps, compR, compSize, compHeld, held)
		case len(fails) > 0:
			w.sendFailures(ctx, fails, failR, failSize)
		default:
			w.handBack(ctx, backR)
		}
		return
	}
	var wg sync.WaitGroup
	if len(comps) > 0 {
		wg.Go(func() { w.sendCompletions(ctx, comps, compR, compSize, compHeld, held) })
	}
	if len(fails) > 0 {
		wg.Go(func() { w.sendFailures(ctx, fails, failR, failSize) })
	}
	if len(backR) > 0 {
		wg.Go(func() { w.handBack(ctx, backR) })
	}
	wg.Wait()
}

// sendCompletions reports comps, the completions of the attempts rs (their
// reports' sizes, and whether each kept its slot for a hand-off: held of
// them did), and runs or frees what the hand-off granted on those slots.
func (w *Worker) sendCompletions(ctx context.Context, comps []wire.Completion, rs []*running, sizes []int, kept []bool, held int) {
	var granted []wire.Task
	var tooLarge []wire.Failure
	// asked is when the first request was sent: a request sent
	// again may be answered grants of one sent before.
	var asked time.Time
	w.deliver(ctx, "complete", rs, sizes, func(ctx context.Context, items []int) ([]wire.LeaseResult, error) {
		if asked.IsZero() {
			asked = time.Now()
		}
		// items are in order: as many as comps are all of them.
		part := comps
		if len(items) != len(comps) {
			part = make([]wire.Completion, len(items))
			for j, i := range items {
				part[j] = comps[i]
			}
		}
		ask := 0
		for _, i := range items {
			if kept[i] {
				ask++
			}
		}
		// A request sent again (split, or items retried) asks for
		// no more than the slots still kept.
		res, tasks, err := w.complete(ctx, part, min(ask, held-len(granted)))
		granted = append(granted, tasks...)
		tooLarge = append(tooLarge, refusedTooLarge(part, res, err)...)
		return res, err
	})
	if len(tooLarge) > 0 {
		w.failTooLarge(ctx, tooLarge)
	}
	for i := range held {
		var t *wire.Task
		if i < len(granted) {
			t = &granted[i]
		}
		if t != nil && w.draining.Load() {
			// Granted once the drain started: hand it back, not run.
			_ = w.giveBack(ctx, wire.Lease{ExecutionID: t.ExecutionID, LeaseID: t.LeaseID, Epoch: t.Epoch})
			t = nil
		}
		w.release(t, asked)
	}
	if len(granted) > held {
		w.log.Error("hand-off granted more tasks than asked for; their leases will expire",
			slog.Int("asked", held), slog.Int("granted", len(granted)))
	}
}

// sendFailures reports fails, the failures of the attempts rs (their
// reports' sizes).
func (w *Worker) sendFailures(ctx context.Context, fails []wire.Failure, rs []*running, sizes []int) {
	w.deliver(ctx, "fail", rs, sizes, func(ctx context.Context, items []int) ([]wire.LeaseResult, error) {
		part := make([]wire.Failure, len(items))
		for j, i := range items {
			part[j] = fails[i]
		}
		return w.c.Fail(ctx, wire.FailRequest{WorkerID: w.cfg.Name, Failures: part})
	})
}

// refusedTooLarge returns the failures that end, not retryable, the
// attempts of the completions of comps the server refused as too large:
// the items of res answered payload_too_large, or the one completion of a
// request refused with a 413 (which cannot be split further). The same
// output would be refused again; the attempt left running would run again
// once its lease expired, and again, until its execution failed with
// reclaims_exhausted.
func refusedTooLarge(comps []wire.Completion, res []wire.LeaseResult, err error) []wire.Failure {
	why := func(code, msg string) string {
		return fmt.Sprintf("handler output refused by the server: %s: %s", code, msg)
	}
	if err != nil {
		// (Declared here: ae escapes, and would cost every report an
		// allocation.)
		var ae *client.APIError
		if errors.As(err, &ae) {
			if len(comps) == 1 && ae.Status == http.StatusRequestEntityTooLarge {
				return []wire.Failure{{Lease: comps[0].Lease, Message: why(ae.Code, ae.Message)}}
			}
			return nil
		}
	}
	var out []wire.Failure
	for j, rr := range res {
		if j < len(comps) && !rr.OK && codeOf(rr.Error) == wire.CodePayloadTooLarge {
			out = append(out, wire.Failure{Lease: comps[j].Lease, Message: why(codeOf(rr.Error), msgOf(rr.Error))})
		}
	}
	return out
}

// failTooLarge reports fails, the attempts whose outputs the server
// refused as too large (refusedTooLarge), once. OnReported has had the
// refusal of their completions; an attempt this cannot fail (its answer
// lost, its lease gone) is logged, and recovered by the server when its
// lease expires.
func (w *Worker) failTooLarge(ctx context.Context, fails []wire.Failure) {
	for i := range fails {
		fails[i].Message = clip(fails[i].Message, messageMaxBytes)
	}
	rctx, cancel := context.WithTimeout(ctx, requestSlack)
	defer cancel()
	res, err := w.c.Fail(rctx, wire.FailRequest{WorkerID: w.cfg.Name, Failures: fails})
	if err != nil {
		w.log.Error("could not fail the attempts whose outputs the server refused as too large; they run again once their leases expire",
			slog.Any(attrError, err), slog.Int("items", len(fails)))
		return
	}
	for j, rr := range res {
		if j < len(fails) && !rr.OK {
			w.log.Warn("could not fail an attempt whose output the server refused as too large", slog.String(attrExecution, fails[j].ExecutionID),
				slog.String(attrCode, codeOf(rr.Error)), slog.String("message", msgOf(rr.Error)))
		}
	}
}

// complete reports comps, asking for a hand-off of up to held tasks. A
// server that refuses the hand-off itself (an older one that does not know
// the field) gets the report again without it, and no more hand-offs.
func (w *Worker) complete(ctx context.Context, comps []wire.Completion, held int) ([]wire.LeaseResult, []wire.Task, error) {
	req := wire.CompleteRequest{WorkerID: w.cfg.Name, Completions: comps}
	if held > 0 && !w.handoffOff.Load() {
		req.Handoff = &wire.Handoff{
			InstanceID: w.instance, Namespace: w.cfg.Namespace, Lanes: w.cfg.Lanes,
			Capabilities: w.cfg.Capabilities, Kinds: w.kinds, Max: held, LeaseMs: w.cfg.LeaseTTL.Milliseconds(),
		}
	}
	res, tasks, err := w.c.CompleteHandoff(ctx, req)
	if req.Handoff != nil && err != nil && refusedHandoff(err) {
		w.log.Warn("the server refused a hand-off; completing without", slog.Any(attrError, err))
		w.handoffOff.Store(true)
		req.Handoff = nil
		res, tasks, err = w.c.CompleteHandoff(ctx, req)
	}
	return res, tasks, err
}

// isTimeout reports whether err is a net.Error that timed out.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// apiError returns err as a *client.APIError, nil when it is none (or
// nil: a delivered report costs no allocation here).
func apiError(err error) *client.APIError {
	if err == nil {
		return nil
	}
	var ae *client.APIError
	if errors.As(err, &ae) {
		return ae
	}
	return nil
}

// refusedHandoff reports whether err is a refusal of a complete request's
// hand-off: a 400 about a field of it.
func refusedHandoff(err error) bool {
	var ae *client.APIError
	return errors.As(err, &ae) && ae.Status == http.StatusBadRequest && strings.HasPrefix(fieldOf(ae), "handoff")
}

// deliver sends one batched report: call sends the items of rs it is
// given, and answers one result per item; sizes bounds each item's
// encoded size, by which a request's time is bounded (requestTimeout).
// Transport errors, refusals that pass (client.Passing: 5xx, 429, 408) and items
// the server could not record for a passing reason (codes unavailable and
// internal: one partition's call failed) are sent again with backoff, or
// after the server's Retry-After when longer, while the leases, as
// renewals keep moving them, may still be valid; a request the server
// finds too large (413) is split in halves, down to single items, and so
// is one that timed out (a link slower than the bound). Other refusals
// are final.
func (w *Worker) deliver(ctx context.Context, op string, rs []*running, sizes []int, call func(context.Context, []int) ([]wire.LeaseResult, error)) {
	defer func() {
		for _, r := range rs {
			w.forget(r)
		}
	}()
	reported := func(i int, err error) { w.reported(rs[i].lease.ExecutionID, err) }
	// latest is when the last of rs's leases runs out, as the renewals,
	// which go on while a report is sent again, have moved it.
	latest := func() time.Time {
		var t time.Time
		w.mu.Lock()
		defer w.mu.Unlock()
		for _, r := range rs {
			if r.expires.After(t) {
				t = r.expires
			}
		}
		return t
	}
	delay := retryDelayMin
	// hint is how long the server, refusing the request just sent, said
	// to wait (APIError.RetryAfter).
	var hint time.Duration
	// backoff waits before sending again, the backoff's delay or the
	// server's hint, whichever is longer, but not past the end of the
	// leases as it stands (the renewals that go on meanwhile move it, and
	// the next backoff reads it again); false when the leases ran out or
	// ctx ended.
	backoff := func() bool {
		left := time.Until(latest())
		if ctx.Err() != nil || left <= 0 {
			return false
		}
		wait := min(max(delay, hint), left)
		select {
		case <-ctx.Done():
			return false
		case <-time.After(wait):
		}
		delay = min(delay*2, retryDelayMax)
		return true
	}
	all := make([]int, len(rs))
	for i := range all {
		all[i] = i
	}
	todo := [][]int{all} // requests to send, each a list of indexes into rs
	for len(todo) > 0 {
		items := todo[0]
		todo = todo[1:]
		n := 0
		for _, i := range items {
			n += sizes[i]
		}
		cctx, cancel := context.WithTimeout(ctx, w.requestTimeout(n))
		res, err := call(cctx, items)
		// Cut short by its bound (or the http.Client's Timeout), not by
		// ctx: a link too slow for the batch, or a server that did not
		// answer.
		timedOut := err != nil && ctx.Err() == nil &&
			(errors.Is(cctx.Err(), context.DeadlineExceeded) || isTimeout(err))
		cancel()
		ae := apiError(err)
		isAPI := ae != nil
		hint = 0
		if isAPI {
			hint = ae.RetryAfter
		}
		switch {
		case err == nil:
			var again []int
			var againErrs []error
			for j, i := range items {
				if j >= len(res) {
					reported(i, fmt.Errorf("worker: %s answered %d results for %d items", op, len(res), len(items)))
					continue
				}
				rr := res[j]
				if rr.OK {
					reported(i, nil)
					continue
				}
				code := codeOf(rr.Error)
				rerr := fmt.Errorf("worker: %s rejected: %s: %s", op, code, msgOf(rr.Error))
				if code == wire.CodeUnavailable || code == wire.CodeInternal {
					again, againErrs = append(again, i), append(againErrs, rerr)
					continue
				}
				level := slog.LevelWarn
				if (code == wire.CodeStaleLease || code == wire.CodeCancelled) && (rs[i].ctxEnded || rs[i].lost.Load()) {
					// The worker knew the lease was gone (it ended the
					// handler's context): an attempt timeout, say.
					level = slog.LevelDebug
				}
				w.log.Log(ctx, level, op+" rejected", slog.String(attrExecution, rs[i].lease.ExecutionID),
					slog.String(attrCode, code), slog.String("message", msgOf(rr.Error)))
				reported(i, rerr)
			}
			if len(again) == 0 {
				continue
			}
			if backoff() {
				w.log.Warn(op+" failed for some items; sending them again", slog.Any(attrError, againErrs[0]), slog.Int("items", len(again)))
				todo = append(todo, again)
				continue
			}
			w.log.Error(op+" failed for some items; the server will recover the tasks when their leases expire",
				slog.Any(attrError, againErrs[0]), slog.Int("items", len(again)))
			for k, i := range again {
				reported(i, againErrs[k])
			}
		case isAPI && ae.Status == http.StatusRequestEntityTooLarge && len(items) > 1:
			w.log.Warn(op+" too large for the server; sending it in halves", slog.Int("items", len(items)))
			half := len(items) / 2
			todo = append([][]int{items[:half], items[half:]}, todo...)
		case timedOut && len(items) > 1 && backoff():
			w.log.Warn(op+" timed out; sending it in halves", slog.Any(attrError, err), slog.Int("items", len(items)))
			half := len(items) / 2
			todo = append([][]int{items[:half], items[half:]}, todo...)
		case isAPI && !client.Passing(ae):
			w.log.Error(op+" refused", slog.Any(attrError, err), slog.Int("items", len(items)))
			for _, i := range items {
				reported(i, err)
			}
		case backoff():
			w.log.Warn(op+" failed; retrying", slog.Any(attrError, err), slog.Int("items", len(items)))
			todo = append([][]int{items}, todo...)
		default:
			w.log.Error(op+" failed; the server will recover the tasks when their leases expire",
				slog.Any(attrError, err), slog.Int("items", len(items)))
			for _, i := range items {
				reported(i, err)
			}
		}
	}
}

// handBack gives back the leases of attempts the drain timeout stopped:
// each attempt ends revoked, not charged to the retry policy, and its
// execution is eligible again at once. The revoke is fenced by the lease,
// so a lease this worker lost meanwhile is left alone; a lease it cannot
// give back expires.
func (w *Worker) handBack(ctx context.Context, rs []*running) {
	sem := make(chan struct{}, handBacksInFlight)
	var wg sync.WaitGroup
	for _, r := range rs {
		sem <- struct{}{}
		r.lost.Store(true) // renewals leave it alone from now on
		wg.Go(func() {
			defer func() { <-sem }()
			defer w.forget(r)
			w.handedBack(r, w.giveBack(ctx, r.lease))
		})
	}
	wg.Wait()
}

// giveBack revokes lease l, if it is still the execution's lease. A
// transport error or a refusal that passes (client.Passing: 5xx, 429, 408) is
// tried again with backoff, or after the server's Retry-After when
// longer, within the bound of one request (the slack). A try sent again
// after one that may have reached the server (its answer lost: a
// transport error, a proxy's 5xx or 408) and answered stale_lease is
// taken as done: the first most likely revoked the lease, and the lease
// is not this worker's any more, which is what a hand-back wants.
func (w *Worker) giveBack(ctx context.Context, l wire.Lease) error {
	rctx, cancel := context.WithTimeout(ctx, w.slack)
	defer cancel()
	delay := retryDelayMin
	sent := false // a try may have reached the server, its answer lost
	for {
		_, err := w.c.GiveBack(rctx, l, handBackReason)
		if err == nil {
			w.log.Info("task handed back", slog.String(attrExecution, l.ExecutionID))
			return nil
		}
		if sent && client.IsCode(err, wire.CodeStaleLease) {
			w.log.Info("task handed back (sent again after an answer was lost, and its lease was gone)",
				slog.String(attrExecution, l.ExecutionID), slog.Any(attrError, err))
			return nil
		}
		wait := delay
		var ae *client.APIError
		if errors.As(err, &ae) {
			wait = max(wait, ae.RetryAfter)
			if !client.Passing(ae) {
				wait = -1 // final: a stale lease, a refused token
			}
		}
		sent = sent || outcomeUnknown(err)
		dl, _ := rctx.Deadline()
		if wait < 0 || rctx.Err() != nil || time.Now().Add(wait).After(dl) {
			w.log.Warn("could not hand a task back; its lease will expire", slog.String(attrExecution, l.ExecutionID), slog.Any(attrError, err))
			return err
		}
		select {
		case <-rctx.Done():
		case <-time.After(wait):
		}
		delay = min(delay*2, retryDelayMax)
	}
}

// handedBack calls OnReported for an attempt handed back (err nil) or not.
func (w *Worker) handedBack(r *running, err error) {
	if err == nil {
		err = fmt.Errorf("worker: handed back: %w", ErrShutdown)
	}
	w.reported(r.lease.ExecutionID, err)
}

// reported calls Config.OnReported, if set, unless Run is returning (or
// returned): a report that ends then, given up on, is not told.
func (w *Worker) reported(executionID string, err error) {
	if w.cfg.OnReported == nil {
		return
	}
	w.reportedMu.RLock()
	defer w.reportedMu.RUnlock()
	if !w.reportedOff {
		w.cfg.OnReported(executionID, err)
	}
}

// release gives back one slot held for a hand-off: it runs t on it when
// the hand-off granted t (asked for by a request sent at sent), else
// frees it; then drops the slot's inWork count (after start took the new
// handler's).
func (w *Worker) release(t *wire.Task, sent time.Time) {
	if t != nil {
		w.start(w.base, *t, sent)
	} else {
		w.slots <- struct{}{}
	}
	w.inWork.Done()
}

func (w *Worker) forget(r *running) {
	w.mu.Lock()
	if w.active[r.lease.ExecutionID] == r {
		delete(w.active, r.lease.ExecutionID)
		if w.resuming {
			w.finished[r.lease] = struct{}{}
		}
	}
	w.mu.Unlock()
}

// clip cuts s to at most n bytes, on a UTF-8 boundary, as the server
// stores failure messages.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xc0 == 0x80 {
		n--
	}
	return s[:n]
}

// requestTimeout bounds a request whose body is n bytes: the slack, and
// the time n bytes take at reportRateMin.
func (w *Worker) requestTimeout(n int) time.Duration {
	return w.slack + time.Duration(n)*time.Second/time.Duration(w.rate)
}

// outcomeUnknown reports whether err, the failure of a request, leaves
// unknown whether the server did what was asked: no answer (a transport
// error, an answer that does not decode), a 5xx (ffrun failing after its
// call, a proxy that lost ffrun's answer: 502, 504) or a 408 (a proxy that
// timed the request out, maybe after passing it on). Other refusals (4xx,
// 429 included) come before the server acted.
func outcomeUnknown(err error) bool {
	var ae *client.APIError
	return err != nil && (!errors.As(err, &ae) || ae.Status >= 500 || ae.Status == http.StatusRequestTimeout)
}

// retryAfter returns how long the server said to wait when it refused a
// request with err (APIError.RetryAfter: a 429's, a starting ffrun's
// 503's); 0 when it said nothing.
func retryAfter(err error) time.Duration {
	var ae *client.APIError
	if errors.As(err, &ae) {
		return ae.RetryAfter
	}
	return 0
}

// fieldOf returns the request field an API error names, if any.
func fieldOf(ae *client.APIError) string {
	f, _ := ae.Details["field"].(string)
	return f
}

func codeOf(b *wire.ErrorBody) string {
	if b == nil {
		return ""
	}
	return b.Code
}

func msgOf(b *wire.ErrorBody) string {
	if b == nil {
		return ""
	}
	return b.Message
}

// Attribute keys of this package's logs.
const (
	attrWorker    = "worker"
	attrInstance  = "instance"
	attrNamespace = "namespace"
	attrKind      = "kind"
	attrExecution = "execution_id"
	attrError     = "error"
	attrCode      = "code"
)

// kindsLogged is how many handler kinds the "worker started" line lists.
const kindsLogged = 16

// kindsToLog returns kinds as the "worker started" line shows them: all
// of them up to kindsLogged, else the first ones and a count of the rest;
// "any" when the claims name none.
func kindsToLog(kinds []string) any {
	if len(kinds) == 0 {
		return "any"
	}
	if len(kinds) <= kindsLogged {
		return kinds
	}
	return append(slices.Clone(kinds[:kindsLogged]), fmt.Sprintf("(%d more)", len(kinds)-kindsLogged))
}
