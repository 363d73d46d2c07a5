package scanner

import (
	"cmp"
	"context"
	"log/slog"
	"time"

	"github.com/flowfabric/ff/runtime/store"
)

// LeaseExpiryIntervalDefault is the default interval of the lease-expiry
// scanner.
const LeaseExpiryIntervalDefault = time.Second

// LeaseExpiryConfig configures NewLeaseExpiry.
type LeaseExpiryConfig struct {
	Store    *store.Store  // required
	Interval time.Duration // 0 = LeaseExpiryIntervalDefault
	Limit    int           // per partition and tick; 0 = LimitDefault
	Logger   *slog.Logger  // nil = discard
}

// LeaseExpiry requeues executions whose worker stopped renewing its lease:
// the interrupted attempt is not charged to the retry policy, and the
// execution is eligible again (a reclaim) until its reclaims exceed its
// max_reclaims, then it fails (reclaims_exhausted).
type LeaseExpiry struct{ *runner }

// NewLeaseExpiry returns a stopped lease-expiry scanner.
func NewLeaseExpiry(cfg LeaseExpiryConfig) (*LeaseExpiry, error) {
	cfg.Interval = cmp.Or(cfg.Interval, LeaseExpiryIntervalDefault)
	cfg.Limit = cmp.Or(cfg.Limit, LimitDefault)
	if err := checkCommon("lease expiry", cfg.Store, cfg.Interval, cfg.Limit); err != nil {
		return nil, err
	}
	return &LeaseExpiry{newRunner("lease_expiry", cfg.Store, cfg.Interval, cfg.Logger,
		func(ctx context.Context, p int) (store.ScanResult, error) {
			return cfg.Store.ExpireLeases(ctx, p, cfg.Limit)
		})}, nil
}
