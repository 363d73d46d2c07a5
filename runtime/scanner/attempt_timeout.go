package scanner

import (
	"cmp"
	"context"
	"log/slog"
	"time"

	"github.com/flowfabric/ff/runtime/store"
)

// AttemptTimeoutIntervalDefault is the default interval of the
// attempt-timeout scanner.
const AttemptTimeoutIntervalDefault = time.Second

// AttemptTimeoutConfig configures NewAttemptTimeout.
type AttemptTimeoutConfig struct {
	Store    *store.Store  // required
	Interval time.Duration // 0 = AttemptTimeoutIntervalDefault
	Limit    int           // per partition and tick; 0 = LimitDefault
	Logger   *slog.Logger  // nil = discard
}

// AttemptTimeout fails running attempts that exceeded their execution's
// attempt timeout; they are retried per the retry policy.
type AttemptTimeout struct{ *runner }

// NewAttemptTimeout returns a stopped attempt-timeout scanner.
func NewAttemptTimeout(cfg AttemptTimeoutConfig) (*AttemptTimeout, error) {
	cfg.Interval = cmp.Or(cfg.Interval, AttemptTimeoutIntervalDefault)
	cfg.Limit = cmp.Or(cfg.Limit, LimitDefault)
	if err := checkCommon("attempt timeout", cfg.Store, cfg.Interval, cfg.Limit); err != nil {
		return nil, err
	}
	return &AttemptTimeout{newRunner("attempt_timeout", cfg.Store, cfg.Interval, cfg.Logger,
		func(ctx context.Context, p int) (store.ScanResult, error) {
			return cfg.Store.TimeoutAttempts(ctx, p, cfg.Limit)
		})}, nil
}
