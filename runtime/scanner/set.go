package scanner

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/flowfabric/ff/runtime/store"
)

// SetConfig configures every scanner at once; zero fields take each
// scanner's default.
type SetConfig struct {
	Store  *store.Store // required
	Logger *slog.Logger // nil = discard
	Limit  int          // per partition and tick; 0 = LimitDefault

	LeaseExpiryInterval    time.Duration
	DelayedInterval        time.Duration
	AttemptTimeoutInterval time.Duration
	DeadlineInterval       time.Duration
	RetentionInterval      time.Duration
	RetentionAge           time.Duration
	UnblockInterval        time.Duration
	BudgetResetInterval    time.Duration
	QuotaReleaseInterval   time.Duration
	QuotaReconcileInterval time.Duration
	QuotaReconcileGrace    time.Duration
	LibraryInterval        time.Duration
	RunResumeInterval      time.Duration

	// Observe, when set, is told of every tick of every scanner (metrics).
	Observe Observer
}

// Set is every scanner ffrun runs.
type Set struct {
	LeaseExpiry    *LeaseExpiry
	Delayed        *Delayed
	AttemptTimeout *AttemptTimeout
	Deadline       *Deadline
	Retention      *Retention
	Unblock        *Unblock
	BudgetReset    *BudgetReset
	QuotaRelease   *QuotaRelease
	QuotaReconcile *QuotaReconcile
	Library        *Library
	RunResume      *RunResume
}

// NewSet builds every scanner from cfg.
func NewSet(cfg SetConfig) (*Set, error) {
	var s Set
	var errs [11]error
	s.LeaseExpiry, errs[0] = NewLeaseExpiry(LeaseExpiryConfig{Store: cfg.Store, Interval: cfg.LeaseExpiryInterval, Limit: cfg.Limit, Logger: cfg.Logger})
	s.Delayed, errs[1] = NewDelayed(DelayedConfig{Store: cfg.Store, Interval: cfg.DelayedInterval, Limit: cfg.Limit, Logger: cfg.Logger})
	s.AttemptTimeout, errs[2] = NewAttemptTimeout(AttemptTimeoutConfig{Store: cfg.Store, Interval: cfg.AttemptTimeoutInterval, Limit: cfg.Limit, Logger: cfg.Logger})
	s.Deadline, errs[3] = NewDeadline(DeadlineConfig{Store: cfg.Store, Interval: cfg.DeadlineInterval, Limit: cfg.Limit, Logger: cfg.Logger})
	s.Retention, errs[4] = NewRetention(RetentionConfig{Store: cfg.Store, Interval: cfg.RetentionInterval, Limit: cfg.Limit, Age: cfg.RetentionAge, Logger: cfg.Logger})
	s.Unblock, errs[5] = NewUnblock(UnblockConfig{Store: cfg.Store, Interval: cfg.UnblockInterval, Limit: cfg.Limit, Logger: cfg.Logger})
	s.BudgetReset, errs[6] = NewBudgetReset(BudgetResetConfig{Store: cfg.Store, Interval: cfg.BudgetResetInterval, Limit: cfg.Limit, Logger: cfg.Logger})
	s.QuotaRelease, errs[7] = NewQuotaRelease(QuotaReleaseConfig{Store: cfg.Store, Interval: cfg.QuotaReleaseInterval, Limit: cfg.Limit, Logger: cfg.Logger})
	s.QuotaReconcile, errs[8] = NewQuotaReconcile(QuotaReconcileConfig{Store: cfg.Store, Interval: cfg.QuotaReconcileInterval, Grace: cfg.QuotaReconcileGrace, Limit: cfg.Limit, Logger: cfg.Logger})
	s.Library, errs[9] = NewLibrary(LibraryConfig{Store: cfg.Store, Interval: cfg.LibraryInterval, Logger: cfg.Logger})
	s.RunResume, errs[10] = NewRunResume(RunResumeConfig{Store: cfg.Store, Interval: cfg.RunResumeInterval, Limit: cfg.Limit, Logger: cfg.Logger})
	if err := errors.Join(errs[:]...); err != nil {
		return nil, err
	}
	for _, r := range s.runners() {
		r.observe = cfg.Observe
	}
	// Slots just freed go first to what waits for them: the executions
	// blocked by their quota, made eligible (older than any work created
	// since, so claimed first) by an unblock tick right away, rather than
	// at its next interval while new work takes the slots.
	s.QuotaRelease.worked = s.Unblock.Kick
	return &s, nil
}

type startStopper interface {
	Start(context.Context) error
	Stop(context.Context) error
}

func (s *Set) runners() []*runner {
	return []*runner{s.LeaseExpiry.runner, s.Delayed.runner, s.AttemptTimeout.runner, s.Deadline.runner, s.Retention.runner,
		s.Unblock.runner, s.BudgetReset.runner, s.QuotaRelease.runner, s.QuotaReconcile.runner, s.Library.runner,
		s.RunResume.runner}
}

// Names returns the names of the scanners of the set, as an Observer is
// told them (lease_expiry, delayed, ...).
func (s *Set) Names() []string {
	var names []string
	for _, r := range s.runners() {
		names = append(names, r.name)
	}
	return names
}

func (s *Set) all() []startStopper {
	return []startStopper{s.LeaseExpiry, s.Delayed, s.AttemptTimeout, s.Deadline, s.Retention, s.Unblock,
		s.BudgetReset, s.QuotaRelease, s.QuotaReconcile, s.Library, s.RunResume}
}

// Start starts every scanner. It is safe to call twice. When a scanner
// does not start (a Stop left its tick running and ctx ended first), it
// stops the scanners it started, waiting for them, and returns the error:
// a failed Start leaves none running.
func (s *Set) Start(ctx context.Context) error {
	all := s.all()
	for i, sc := range all {
		if err := sc.Start(ctx); err != nil {
			// Their loops end as soon as they are stopped: ctx, which has
			// ended, does not bound the wait.
			stopped := context.WithoutCancel(ctx)
			for _, started := range all[:i] {
				err = errors.Join(err, started.Stop(stopped))
			}
			return err
		}
	}
	return nil
}

// Stop stops every scanner and waits for them. It is safe to call twice.
func (s *Set) Stop(ctx context.Context) error {
	var errs []error
	for _, sc := range s.all() {
		errs = append(errs, sc.Stop(ctx))
	}
	return errors.Join(errs...)
}
