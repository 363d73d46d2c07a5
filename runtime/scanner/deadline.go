package scanner

import (
	"cmp"
	"context"
	"log/slog"
	"time"

	"github.com/flowfabric/ff/runtime/store"
)

// DeadlineIntervalDefault is the default interval of the execution-deadline
// scanner.
const DeadlineIntervalDefault = time.Second

// DeadlineConfig configures NewDeadline.
type DeadlineConfig struct {
	Store    *store.Store  // required
	Interval time.Duration // 0 = DeadlineIntervalDefault
	Limit    int           // per partition and tick; 0 = LimitDefault
	Logger   *slog.Logger  // nil = discard
}

// Deadline ends executions whose execution deadline passed, whatever their
// state, with outcome expired.
type Deadline struct{ *runner }

// NewDeadline returns a stopped execution-deadline scanner.
func NewDeadline(cfg DeadlineConfig) (*Deadline, error) {
	cfg.Interval = cmp.Or(cfg.Interval, DeadlineIntervalDefault)
	cfg.Limit = cmp.Or(cfg.Limit, LimitDefault)
	if err := checkCommon("deadline", cfg.Store, cfg.Interval, cfg.Limit); err != nil {
		return nil, err
	}
	return &Deadline{newRunner("deadline", cfg.Store, cfg.Interval, cfg.Logger,
		func(ctx context.Context, p int) (store.ScanResult, error) {
			return cfg.Store.ExpireDeadlines(ctx, p, cfg.Limit)
		})}, nil
}
