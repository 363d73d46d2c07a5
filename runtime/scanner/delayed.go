package scanner

import (
	"cmp"
	"context"
	"log/slog"
	"time"

	"github.com/flowfabric/ff/runtime/store"
)

// DelayedIntervalDefault is the default interval of the delayed promoter:
// short, because it bounds how late a delayed execution or a retry starts.
const DelayedIntervalDefault = 200 * time.Millisecond

// DelayedConfig configures NewDelayed.
type DelayedConfig struct {
	Store    *store.Store  // required
	Interval time.Duration // 0 = DelayedIntervalDefault
	Limit    int           // per partition and tick; 0 = LimitDefault
	Logger   *slog.Logger  // nil = discard
}

// Delayed makes due delayed executions (delay-until, retry backoff)
// eligible.
type Delayed struct{ *runner }

// NewDelayed returns a stopped delayed promoter.
func NewDelayed(cfg DelayedConfig) (*Delayed, error) {
	cfg.Interval = cmp.Or(cfg.Interval, DelayedIntervalDefault)
	cfg.Limit = cmp.Or(cfg.Limit, LimitDefault)
	if err := checkCommon("delayed", cfg.Store, cfg.Interval, cfg.Limit); err != nil {
		return nil, err
	}
	return &Delayed{newRunner("delayed", cfg.Store, cfg.Interval, cfg.Logger,
		func(ctx context.Context, p int) (store.ScanResult, error) {
			return cfg.Store.PromoteDelayed(ctx, p, cfg.Limit)
		})}, nil
}
