// Package scheduler grants claims: it turns a worker's "give me up to N
// tasks, waiting up to W" into claim FCALLs on the store's partitions, and
// parks the request until work arrives when there is none.
//
// Waiting is driven by the store's wake-up channel (Valkey pub/sub published
// from Lua when executions become eligible), never by polling on the hot
// path. Waiting claims with the same namespace, lanes, capabilities and
// kinds form a group; a wake-up rouses one waiter per group, which passes the baton to
// the next when it may have left work behind. So N idle workers do not all
// stampede Valkey for one new task.
//
// Each group keeps a per-partition "may have work" hint, set by wake-ups
// and by a periodic resynchronisation (one pipelined ZCARD round through
// Store.EligibleCounts), cleared when a claim on the partition grants
// nothing. A claim attempt scans the hinted partitions from the worker
// instance's own cursor (its first one placed by a hash of the instance:
// jitter), resuming where its previous attempt stopped, and makes at most
// ScanMax claim calls, so each worker reaches every partition within
// ceil(partitions/ScanMax) attempts. An attempt that granted nothing but
// stopped on that budget with partitions still hinted is followed by the
// next one at once: a claim never parks, nor answers empty, on hints it
// has not tried (a wake-up that set one may have been spent on rousing it
// already). ScanMax thus bounds the claim calls between two chances to
// answer with grants, not how far an empty claim looks.
//
// Admission (admission.go): every claim call is Store.ClaimAdmitted, with
// the budgets at a hard limit (cached, their version checked once per
// scan cycle; a read error means no claim: fail closed) and the
// namespace's capability union (cached
// briefly; a read error only turns route blocking off: fail open), so a
// candidate no connected worker can run is parked as
// waiting_for_capable_worker instead of being passed over on every claim.
package scheduler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flowfabric/ff/runtime/internal/lifecycle"
	"github.com/flowfabric/ff/runtime/store"
)

// Store is what the scheduler needs from runtime/store.
type Store interface {
	FlowPartitions() int
	// ClaimAdmitted is the store's claim with quota admission (and budget
	// blocking when the request lists breached budgets).
	ClaimAdmitted(ctx context.Context, req store.ClaimRequest) ([]store.Grant, error)
	EligibleCounts(ctx context.Context, namespace string, lanes []string) ([]int64, error)
	// ClaimBreaches reads the budgets at a hard limit that claims must
	// know, with their version; BreachVersion reads the version alone
	// (admission.go caches the set).
	ClaimBreaches(ctx context.Context) (store.BreachSet, error)
	BreachVersion(ctx context.Context) (string, error)
	// CapabilityUnion is the union of the capabilities of a namespace's
	// connected workers.
	CapabilityUnion(ctx context.Context, namespace string) ([]string, error)
}

// SubscribeFunc subscribes to the wake-up channel and calls onMessage for
// every message until ctx ends or the subscription breaks (then it returns
// the error). onReady, when non-nil, is called once the subscription is
// active.
type SubscribeFunc func(ctx context.Context, onReady func(), onMessage func(msg string)) error

// Defaults of Config.
const (
	ScanMaxDefault        = 8
	ResyncIntervalDefault = time.Second
	UnionTTLDefault       = time.Second
	groupIdleTTL          = 10 * time.Minute
	resubscribeDelayMin   = 50 * time.Millisecond
	resubscribeDelayMax   = 2 * time.Second
)

// Config configures a Scheduler.
type Config struct {
	Store Store
	// Subscribe delivers wake-ups. Without it waiting claims still work but
	// only notice new work through the periodic resynchronisation.
	Subscribe SubscribeFunc
	// ScanMax bounds the claim calls of one claim attempt; an attempt that
	// granted nothing and left partitions hinted is followed by another.
	ScanMax int
	// ResyncInterval is how often the partition hints of waited-on groups
	// are re-read from Valkey (a safety net for lost wake-ups) and how old a
	// hint may be before an attempt refreshes it.
	ResyncInterval time.Duration
	// UnionTTL is how long a namespace's capability union is reused before
	// it is read again (a worker's connect, Connected, adds to it).
	UnionTTL time.Duration
	Logger   *slog.Logger
}

func (c Config) withDefaults() Config {
	if c.ScanMax <= 0 {
		c.ScanMax = ScanMaxDefault
	}
	if c.ResyncInterval <= 0 {
		c.ResyncInterval = ResyncIntervalDefault
	}
	if c.UnionTTL <= 0 {
		c.UnionTTL = UnionTTLDefault
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Request is one claim.
type Request struct {
	Worker   store.WorkerIdentity
	Lanes    []string
	Max      int
	LeaseTTL time.Duration
	Wait     time.Duration // 0: one attempt, no waiting
	Kinds    []string      // the worker's kinds (store.ClaimRequest.Kinds); nil: any
}

// Scheduler grants claims. Start it before use; Stop releases every waiting
// claim at once.
type Scheduler struct {
	cfg        Config
	log        *slog.Logger
	partitions int

	mu     sync.Mutex
	groups map[string]*group
	byLane map[laneKey]map[*group]struct{}

	unionMu sync.Mutex
	unions  map[string]unionEntry // capability union per namespace

	breachMu sync.Mutex
	breach   breachEntry // the budgets at a hard limit claims are made with

	stopping chan struct{} // closed by Stop: waiting claims return
	rearmed  func()        // tests only: called after a waiter is re-armed for an attempt
	startMu  sync.Mutex
	stopped  bool
	bg       lifecycle.Background // the wake-up subscription and resync loops
}

type laneKey struct{ ns, lane string }

// group is every claim with one namespace, lane set, capability set and
// kind set: its waiters and its partition hints.
type group struct {
	sig      string
	ns       string
	lanes    []string
	waiters  []*waiter // FIFO
	maybe    []bool    // per partition: may hold eligible work for this group
	gen      []uint64  // per partition: bumped by every wake-up
	fresh    time.Time // when maybe was last read from Valkey
	lastUsed time.Time
	cursors  map[string]int // per worker instance: where its next scan starts
}

type waiter struct {
	ch      chan struct{} // capacity 1
	pending bool          // a wake-up was sent and not yet consumed
	idle    bool          // parked in select, not attempting
}

// New returns a Scheduler.
func New(cfg Config) (*Scheduler, error) {
	cfg = cfg.withDefaults()
	if cfg.Store == nil {
		return nil, errors.New("scheduler: Config.Store is required")
	}
	p := cfg.Store.FlowPartitions()
	if p < 1 {
		return nil, fmt.Errorf("scheduler: store reports %d partitions", p)
	}
	return &Scheduler{
		cfg:        cfg,
		log:        cfg.Logger,
		partitions: p,
		groups:     map[string]*group{},
		byLane:     map[laneKey]map[*group]struct{}{},
		unions:     map[string]unionEntry{},
		stopping:   make(chan struct{}),
	}, nil
}

// Start runs the wake-up subscription and the resynchronisation loop until
// Stop. Calling it twice is harmless; after Stop it fails.
func (s *Scheduler) Start(ctx context.Context) error {
	s.startMu.Lock()
	defer s.startMu.Unlock() // held while starting: a Stop comes after, and sees it
	if s.stopped {
		return errors.New("scheduler: start after stop")
	}
	err := s.bg.Start(ctx, func(ctx context.Context) {
		var wg sync.WaitGroup
		if s.cfg.Subscribe != nil {
			wg.Go(func() { s.subscribeLoop(ctx) })
		}
		wg.Go(func() { s.resyncLoop(ctx) })
		wg.Wait()
	})
	if err != nil {
		return fmt.Errorf("scheduler: %w", err)
	}
	return nil
}

// Stop releases every waiting claim at once (they return what they have,
// usually nothing), stops the background loops and waits for them within
// ctx: when ctx ends first (with Valkey hung, the release of the wake-up
// subscription's connection waits for it) it returns ctx's error, and a
// later Stop waits for them again. So a Stop with a ctx that has ended
// releases the claims without waiting, and a Stop that returns nil, one
// of several at once too, returns once the loops ended.
func (s *Scheduler) Stop(ctx context.Context) error {
	s.startMu.Lock()
	if !s.stopped {
		s.stopped = true
		close(s.stopping)
	}
	s.startMu.Unlock()
	if err := s.bg.Stop(ctx); err != nil {
		return fmt.Errorf("scheduler: stop: %w", err)
	}
	return nil
}

// Waiting returns how many claims wait for work now (long-polls parked
// until a wake-up or their deadline), for metrics.
func (s *Scheduler) Waiting() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, g := range s.groups {
		n += len(g.waiters)
	}
	return n
}

// Claim grants up to req.Max tasks. With req.Wait > 0 it returns as soon as
// at least one task was granted, or empty when the wait ends, ctx ends or
// the scheduler stops.
func (s *Scheduler) Claim(ctx context.Context, req Request) ([]store.Grant, error) {
	if req.Max < 1 {
		return nil, fmt.Errorf("scheduler: claim max %d < 1", req.Max)
	}
	if len(req.Lanes) == 0 {
		return nil, errors.New("scheduler: claim without lanes")
	}
	g := s.group(req)
	if req.Wait <= 0 {
		grants, _, err := s.attemptAll(ctx, g, req)
		return grants, err
	}
	w := &waiter{ch: make(chan struct{}, 1)}
	s.mu.Lock()
	g.waiters = append(g.waiters, w)
	s.mu.Unlock()
	var left bool // the last attempt may have left work behind
	defer func() { s.leave(g, w, left) }()

	// last is the attempt at the deadline: it goes on past the ScanMax
	// budget until every hinted partition was tried.
	last := func() ([]store.Grant, error) {
		s.rearm(w)
		grants, more, err := s.attemptAll(ctx, g, req)
		left = len(grants) == req.Max || more
		return grants, err
	}
	timer := time.NewTimer(req.Wait)
	defer timer.Stop()
	for {
		s.rearm(w)
		if s.rearmed != nil {
			s.rearmed()
		}
		grants, more, err := s.attempt(ctx, g, req)
		left = len(grants) == req.Max || more
		if err != nil || len(grants) > 0 {
			return grants, err
		}
		if more {
			// The attempt spent its ScanMax claim calls with partitions
			// still hinted: no wake-up may come for them (theirs may have
			// roused this very attempt), so go on at once. Each empty
			// claim call clears its partition's hint, so this ends.
			select {
			case <-timer.C:
				return last()
			case <-ctx.Done():
				return nil, nil
			case <-s.stopping:
				return nil, nil
			default:
				continue
			}
		}
		s.mu.Lock()
		w.idle = true
		s.mu.Unlock()
		select {
		case <-w.ch:
		case <-timer.C:
			return last()
		case <-ctx.Done():
			return nil, nil
		case <-s.stopping:
			return nil, nil
		}
	}
}

// rearm readies w for an attempt: wake-ups sent to it so far are answered
// by that attempt, which reads the hints they set. The flag and the channel
// are cleared in one locked section, as rouseLocked sets them in one, so a
// wake-up sent afterwards is always both pending and in the channel: it
// can never be drained while pending stays set (which would make every
// later wake-up skip w).
func (s *Scheduler) rearm(w *waiter) {
	s.mu.Lock()
	defer s.mu.Unlock()
	w.pending, w.idle = false, false
	select {
	case <-w.ch:
	default:
	}
}

// leave removes w from g; when w may have left work behind (its last
// attempt claimed its full Max or stopped on the ScanMax budget with
// partitions still hinted, or a wake-up reached it after that attempt),
// the next waiter of the group gets the baton.
func (s *Scheduler) leave(g *group, w *waiter, left bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if i := slices.Index(g.waiters, w); i >= 0 {
		g.waiters = slices.Delete(g.waiters, i, i+1)
	}
	if left || w.pending {
		s.rouseLocked(g)
	}
}

// rouseLocked wakes one waiter of g: an idle one first, else any without a
// pending wake-up.
func (s *Scheduler) rouseLocked(g *group) {
	var pick *waiter
	for _, w := range g.waiters {
		if w.pending {
			continue
		}
		if w.idle {
			pick = w
			break
		}
		if pick == nil {
			pick = w
		}
	}
	if pick == nil {
		return
	}
	pick.pending = true
	select {
	case pick.ch <- struct{}{}:
	default:
	}
}

// group returns (creating it) the group of req.
func (s *Scheduler) group(req Request) *group {
	lanes := slices.Clone(req.Lanes)
	slices.Sort(lanes)
	lanes = slices.Compact(lanes)
	caps := slices.Clone(req.Worker.Capabilities)
	slices.Sort(caps)
	caps = slices.Compact(caps)
	kinds := slices.Clone(req.Kinds)
	slices.Sort(kinds)
	kinds = slices.Compact(kinds)
	sig := req.Worker.Namespace + "\x00" + strings.Join(lanes, "\x01") + "\x00" + strings.Join(caps, "\x01") +
		"\x00" + strings.Join(kinds, "\x01")
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.groups[sig]
	if g == nil {
		g = &group{sig: sig, ns: req.Worker.Namespace, lanes: lanes,
			maybe: make([]bool, s.partitions), gen: make([]uint64, s.partitions)}
		for i := range g.maybe {
			g.maybe[i] = true // unknown until the first resync: try them
		}
		s.groups[sig] = g
		for _, l := range lanes {
			k := laneKey{g.ns, l}
			if s.byLane[k] == nil {
				s.byLane[k] = map[*group]struct{}{}
			}
			s.byLane[k][g] = struct{}{}
		}
	}
	g.lastUsed = time.Now()
	return g
}

// attemptAll makes attempts until one grants something or one ends with no
// partition left hinted, at most ceil(partitions/ScanMax) of them (enough
// to try every partition once): a claim that does not wait, or whose wait
// is over, answers empty only when every hinted partition was tried.
func (s *Scheduler) attemptAll(ctx context.Context, g *group, req Request) ([]store.Grant, bool, error) {
	rounds := (s.partitions + s.cfg.ScanMax - 1) / s.cfg.ScanMax
	for {
		grants, more, err := s.attempt(ctx, g, req)
		rounds--
		if err != nil || len(grants) > 0 || !more || rounds <= 0 {
			return grants, more, err
		}
	}
}

// attempt makes one bounded pass over the partitions that may hold work.
// more reports that it stopped on the ScanMax budget, short of req.Max,
// with partitions still hinted: another attempt at once may find work that
// no wake-up will announce again.
func (s *Scheduler) attempt(ctx context.Context, g *group, req Request) (_ []store.Grant, more bool, _ error) {
	if err := s.refreshIfStale(ctx, g); err != nil {
		s.log.WarnContext(ctx, "scheduler: refresh partition hints", slog.Any("error", err))
	}
	n := s.partitions
	start := s.startFor(g, req.Worker.InstanceID)
	var out []store.Grant
	calls, i := 0, 0
	// The worker's next attempt resumes after the last partition this one
	// looked at, so each worker reaches every partition within
	// ceil(partitions/ScanMax) attempts.
	defer func() { s.advance(g, req.Worker.InstanceID, (start+i)%n) }()
	var cycle *admission // read lazily, once per scan cycle
	for ; i < n && calls < s.cfg.ScanMax && len(out) < req.Max; i++ {
		p := (start + i) % n
		s.mu.Lock()
		maybe, gen := g.maybe[p], g.gen[p]
		s.mu.Unlock()
		if !maybe {
			continue
		}
		want := req.Max - len(out)
		if cycle == nil {
			a, err := s.admission(ctx, req)
			if err != nil {
				if len(out) > 0 {
					return out, false, nil
				}
				return nil, false, fmt.Errorf("scheduler: %w", err)
			}
			cycle = a
		}
		grants, err := s.claimPartition(ctx, p, req, want, cycle)
		calls++
		if err != nil {
			if len(out) > 0 {
				// Granted leases must reach the worker; report the rest later.
				s.log.WarnContext(ctx, "scheduler: claim failed after grants", slog.Int("partition", p), slog.Any("error", err))
				return out, false, nil
			}
			return nil, false, fmt.Errorf("scheduler: claim on partition %d: %w", p, err)
		}
		out = append(out, grants...)
		// A claim that granted nothing means the partition holds nothing
		// this group can run now. One that granted some but fewer than
		// asked may only have reached the end of its lookahead (work for
		// other capability sets in front): the hint stays, and the next
		// attempt finds out.
		if len(grants) == 0 {
			s.mu.Lock()
			if g.gen[p] == gen {
				g.maybe[p] = false
			}
			s.mu.Unlock()
		}
	}
	if calls < s.cfg.ScanMax || len(out) >= req.Max {
		return out, false, nil
	}
	return out, s.hinted(g), nil
}

// hinted reports whether any partition of g may hold work.
func (s *Scheduler) hinted(g *group) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Contains(g.maybe, true)
}

// claimPartition is one grant cycle on one partition, with the admission
// state of the scan cycle.
func (s *Scheduler) claimPartition(ctx context.Context, p int, req Request, want int, a *admission) ([]store.Grant, error) {
	return s.cfg.Store.ClaimAdmitted(ctx, store.ClaimRequest{
		Partition:             p,
		Lanes:                 req.Lanes,
		Worker:                req.Worker,
		Max:                   want,
		LeaseTTL:              req.LeaseTTL,
		Kinds:                 req.Kinds,
		BreachedBudgets:       a.breached,
		RouteBlocking:         a.route,
		NamespaceCapabilities: a.union,
	})
}

// refreshIfStale re-reads g's hints when they are older than the resync
// interval.
func (s *Scheduler) refreshIfStale(ctx context.Context, g *group) error {
	s.mu.Lock()
	stale := time.Since(g.fresh) > s.cfg.ResyncInterval
	s.mu.Unlock()
	if !stale {
		return nil
	}
	_, err := s.refresh(ctx, g)
	return err
}

// refresh reads the eligible counts of g's lanes and rewrites its hints;
// it reports whether any partition has work.
func (s *Scheduler) refresh(ctx context.Context, g *group) (bool, error) {
	s.mu.Lock()
	gens := slices.Clone(g.gen)
	s.mu.Unlock()
	counts, err := s.cfg.Store.EligibleCounts(ctx, g.ns, g.lanes)
	if err != nil {
		return false, err
	}
	if len(counts) != s.partitions {
		return false, fmt.Errorf("eligible counts: %d partitions, want %d", len(counts), s.partitions)
	}
	any := false
	s.mu.Lock()
	defer s.mu.Unlock()
	for p, c := range counts {
		switch {
		case c > 0:
			g.maybe[p] = true
			any = true
		case g.gen[p] == gens[p]:
			g.maybe[p] = false
		}
	}
	g.fresh = time.Now()
	return any, nil
}

// wake handles one wake-up message.
func (s *Scheduler) wake(msg string) {
	w, err := store.ParseWake(msg)
	if err != nil {
		s.log.Warn("scheduler: ignoring wake-up", slog.String("message", msg), slog.Any("error", err))
		return
	}
	if w.Partition >= s.partitions {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for g := range s.byLane[laneKey{w.Namespace, w.Lane}] {
		g.maybe[w.Partition] = true
		g.gen[w.Partition]++
		s.rouseLocked(g)
	}
}

// forgetHints marks every hint stale and rouses a waiter of every group:
// used when wake-ups may have been lost (a new subscription).
func (s *Scheduler) forgetHints() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, g := range s.groups {
		g.fresh = time.Time{}
		for p := range g.maybe {
			g.maybe[p] = true
			g.gen[p]++
		}
		s.rouseLocked(g)
	}
}

// subscribeLoop keeps the wake-up subscription up until ctx ends. A loss
// is logged once at warn level, the failed attempts that follow at debug
// level, and the subscription's return at info level, so that a Valkey
// away for minutes does not log a warning per attempt.
func (s *Scheduler) subscribeLoop(ctx context.Context) {
	delay := resubscribeDelayMin
	var down atomic.Bool // a loss was logged, and no subscription came up since
	up := func() {
		if down.CompareAndSwap(true, false) {
			s.log.InfoContext(ctx, "scheduler: wake-up subscription restored")
		}
		s.forgetHints()
	}
	for ctx.Err() == nil {
		began := time.Now()
		err := s.cfg.Subscribe(ctx, up, s.wake)
		if ctx.Err() != nil {
			return
		}
		if down.CompareAndSwap(false, true) {
			s.log.WarnContext(ctx, "scheduler: wake-up subscription ended; resubscribing", slog.Any("error", err))
		} else {
			s.log.DebugContext(ctx, "scheduler: wake-up subscription still down; resubscribing", slog.Any("error", err), slog.Duration("delay", delay))
		}
		s.forgetHints()
		if time.Since(began) > 10*time.Second {
			delay = resubscribeDelayMin
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(delay):
		}
		delay = min(delay*2, resubscribeDelayMax)
	}
}

// resyncLoop is the safety net for lost wake-ups: every interval it
// re-reads the hints of groups that have waiters and rouses one waiter of
// each group that has work. It also drops groups idle for long.
func (s *Scheduler) resyncLoop(ctx context.Context) {
	t := time.NewTicker(s.cfg.ResyncInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		s.mu.Lock()
		var waited []*group
		for sig, g := range s.groups {
			switch {
			case len(g.waiters) > 0:
				waited = append(waited, g)
			case time.Since(g.lastUsed) > groupIdleTTL:
				delete(s.groups, sig)
				for _, l := range g.lanes {
					delete(s.byLane[laneKey{g.ns, l}], g)
				}
			}
		}
		s.mu.Unlock()
		for _, g := range waited {
			rctx, cancel := context.WithTimeout(ctx, s.cfg.ResyncInterval)
			work, err := s.refresh(rctx, g)
			cancel()
			if err != nil {
				if ctx.Err() == nil {
					s.log.Warn("scheduler: resync partition hints", slog.Any("error", err))
				}
				continue
			}
			if work {
				s.mu.Lock()
				s.rouseLocked(g)
				s.mu.Unlock()
			}
		}
	}
}
