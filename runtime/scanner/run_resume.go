package scanner

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/flowfabric/ff/runtime/store"
)

// Run resume defaults.
const (
	RunResumeIntervalDefault = 5 * time.Second
	// RunResumeAgeDefault is how long a run cancel or replay by steps may
	// go without a step before the scanner takes it over: its caller takes
	// the steps one after the other, milliseconds apart.
	RunResumeAgeDefault = 10 * time.Second
)

// RunResumeConfig configures NewRunResume.
type RunResumeConfig struct {
	Store    *store.Store  // required
	Interval time.Duration // 0 = RunResumeIntervalDefault
	Limit    int           // members per partition and tick; 0 = LimitDefault
	// Age is how long a cancel or replay goes without a step before the
	// scanner takes its next steps; 0 = RunResumeAgeDefault.
	Age    time.Duration
	Logger *slog.Logger // nil = discard
}

// RunResume finishes the run cancels and replays by steps whose caller
// stopped between two steps (store.Store.CancelRun, ReplayRun: ctx done,
// ffrun stopped), so that such a run does not stay running for ever with
// members that wait for dependencies that will not end (a cancel) or
// members not reset yet (a replay). Once it took a run over, it goes on
// with it a step per catch-up tick until the run's steps end (or a caller
// takes a step again), rather than an age apart.
type RunResume struct{ *runner }

// NewRunResume returns a stopped run-resume scanner.
func NewRunResume(cfg RunResumeConfig) (*RunResume, error) {
	cfg.Interval = cmp.Or(cfg.Interval, RunResumeIntervalDefault)
	cfg.Limit = cmp.Or(cfg.Limit, LimitDefault)
	cfg.Age = cmp.Or(cfg.Age, RunResumeAgeDefault)
	if err := checkCommon("run_resume", cfg.Store, cfg.Interval, cfg.Limit); err != nil {
		return nil, err
	}
	if cfg.Age < time.Millisecond {
		return nil, fmt.Errorf("scanner: run_resume: Config.Age = %s, want at least 1ms", cfg.Age)
	}
	return &RunResume{newRunner("run_resume", cfg.Store, cfg.Interval, cfg.Logger,
		func(ctx context.Context, p int) (store.ScanResult, error) {
			return cfg.Store.ResumeRuns(ctx, p, cfg.Age, cfg.Limit)
		})}, nil
}
