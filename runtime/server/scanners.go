package server

import (
	"log/slog"
	"time"

	"github.com/flowfabric/ff/runtime/scanner"
	"github.com/flowfabric/ff/runtime/store"
)

// ScannerConfig tunes the background scanners; zero values take the
// scanner package's defaults.
type ScannerConfig struct {
	LeaseExpiry     time.Duration
	DelayedPromoter time.Duration
	AttemptTimeout  time.Duration
	Deadline        time.Duration
	Retention       time.Duration
	RetentionAge    time.Duration // how long terminal executions and ended flow runs are kept
	Unblock         time.Duration // admission unblock (and the park log)
	BudgetReset     time.Duration
	QuotaRelease    time.Duration
	QuotaReconcile  time.Duration
	Library         time.Duration // record of the library version in use (store.LibraryKeepInterval)
	RunResume       time.Duration // run cancels and replays by steps whose caller stopped
	Schedules       time.Duration // looking for due schedules (ScheduleIntervalDefault)
	Limit           int           // executions per partition and tick
}

// newScanners builds the scanners of runtime/scanner as one component.
func newScanners(st *store.Store, cfg ScannerConfig, log *slog.Logger, met *serverMetrics) ([]component, error) {
	set, err := scanner.NewSet(scanner.SetConfig{
		Store:                  st,
		Logger:                 log,
		Observe:                met.observeScanner,
		Limit:                  cfg.Limit,
		LeaseExpiryInterval:    cfg.LeaseExpiry,
		DelayedInterval:        cfg.DelayedPromoter,
		AttemptTimeoutInterval: cfg.AttemptTimeout,
		DeadlineInterval:       cfg.Deadline,
		RetentionInterval:      cfg.Retention,
		RetentionAge:           cfg.RetentionAge,
		UnblockInterval:        cfg.Unblock,
		BudgetResetInterval:    cfg.BudgetReset,
		QuotaReleaseInterval:   cfg.QuotaRelease,
		QuotaReconcileInterval: cfg.QuotaReconcile,
		LibraryInterval:        cfg.Library,
		RunResumeInterval:      cfg.RunResume,
	})
	if err != nil {
		return nil, err
	}
	met.knowScanners(set.Names())
	return []component{set}, nil
}
