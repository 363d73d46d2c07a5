package scanner

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/flowfabric/ff/runtime/store"
)

// Cancel resume defaults.
const (
	CancelResumeIntervalDefault = 5 * time.Second
	// CancelResumeAgeDefault is how long a run cancel by steps may go
	// without a step before the scanner takes it over: its caller takes
	// the steps one after the other, milliseconds apart.
	CancelResumeAgeDefault = 10 * time.Second
)

// CancelResumeConfig configures NewCancelResume.
type CancelResumeConfig struct {
	Store    *store.Store  // required
	Interval time.Duration // 0 = CancelResumeIntervalDefault
	Limit    int           // members per partition and tick; 0 = LimitDefault
	// Age is how long a cancel goes without a step before the scanner
	// takes its next steps; 0 = CancelResumeAgeDefault.
	Age    time.Duration
	Logger *slog.Logger // nil = discard
}

// CancelResume finishes the run cancels by steps whose caller stopped
// between two steps (store.Store.CancelRun: ctx done, ffrun stopped), so
// that such a run ends cancelled rather than running for ever with
// members that wait for dependencies that will not end.
type CancelResume struct{ *runner }

// NewCancelResume returns a stopped cancel-resume scanner.
func NewCancelResume(cfg CancelResumeConfig) (*CancelResume, error) {
	cfg.Interval = cmp.Or(cfg.Interval, CancelResumeIntervalDefault)
	cfg.Limit = cmp.Or(cfg.Limit, LimitDefault)
	cfg.Age = cmp.Or(cfg.Age, CancelResumeAgeDefault)
	if err := checkCommon("cancel_resume", cfg.Store, cfg.Interval, cfg.Limit); err != nil {
		return nil, err
	}
	if cfg.Age < time.Millisecond {
		return nil, fmt.Errorf("scanner: cancel_resume: Config.Age = %s, want at least 1ms", cfg.Age)
	}
	return &CancelResume{newRunner("cancel_resume", cfg.Store, cfg.Interval, cfg.Logger,
		func(ctx context.Context, p int) (store.ScanResult, error) {
			return cfg.Store.ResumeCancels(ctx, p, cfg.Age, cfg.Limit)
		})}, nil
}
