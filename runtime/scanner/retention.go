package scanner

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/flowfabric/ff/runtime/store"
)

// Retention defaults.
const (
	RetentionIntervalDefault = time.Minute
	RetentionAgeDefault      = 24 * time.Hour
)

// RetentionConfig configures NewRetention.
type RetentionConfig struct {
	Store    *store.Store  // required
	Interval time.Duration // 0 = RetentionIntervalDefault
	Limit    int           // per partition and tick; 0 = LimitDefault
	// Age is how long a terminal execution, or an ended flow run with its
	// members, is kept; 0 = RetentionAgeDefault.
	Age    time.Duration
	Logger *slog.Logger // nil = discard
}

// Retention deletes flow runs that ended longer ago than the configured age
// with their members, then executions that have been terminal for longer
// than the age (a flow member only goes with its run), with all their
// keys, then stagings of large runs never committed
// (store.Store.PurgeTerminal).
type Retention struct{ *runner }

// NewRetention returns a stopped retention scanner.
func NewRetention(cfg RetentionConfig) (*Retention, error) {
	cfg.Interval = cmp.Or(cfg.Interval, RetentionIntervalDefault)
	cfg.Limit = cmp.Or(cfg.Limit, LimitDefault)
	cfg.Age = cmp.Or(cfg.Age, RetentionAgeDefault)
	if err := checkCommon("retention", cfg.Store, cfg.Interval, cfg.Limit); err != nil {
		return nil, err
	}
	if cfg.Age < time.Millisecond {
		return nil, fmt.Errorf("scanner: retention: Config.Age = %s, want at least 1ms", cfg.Age)
	}
	return &Retention{newRunner("retention", cfg.Store, cfg.Interval, cfg.Logger,
		func(ctx context.Context, p int) (store.ScanResult, error) {
			return cfg.Store.PurgeTerminal(ctx, p, cfg.Age, cfg.Limit)
		})}, nil
}
