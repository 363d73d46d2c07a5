package scanner

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/flowfabric/ff/runtime/store"
)

// Defaults of the quota scanners.
const (
	// QuotaReleaseIntervalDefault is the default interval of the quota
	// release scanner: a slot owed a release waits at most about this long.
	QuotaReleaseIntervalDefault = 100 * time.Millisecond
	// QuotaReconcileIntervalDefault is the default interval of the quota
	// slot reconciler.
	QuotaReconcileIntervalDefault = 10 * time.Second
	// QuotaReconcileGraceDefault is how long after its admission, or after
	// a check found its holder running, the reconciler checks a slot's
	// holder (far longer than an admission takes to reach its claim).
	QuotaReconcileGraceDefault = 30 * time.Second
)

// QuotaReleaseConfig configures NewQuotaRelease.
type QuotaReleaseConfig struct {
	Store    *store.Store  // required
	Interval time.Duration // 0 = QuotaReleaseIntervalDefault
	Limit    int           // per flow partition and tick; 0 = LimitDefault
	Logger   *slog.Logger  // nil = discard
}

// QuotaRelease frees the quota slots of attempts that ended: every
// transition that ends an attempt holding slots queues their release on
// its flow partition in the same FCALL, and this scanner drains the queues
// (store.Store.DrainQuotaReleases).
type QuotaRelease struct{ *runner }

// NewQuotaRelease returns a stopped quota release scanner.
func NewQuotaRelease(cfg QuotaReleaseConfig) (*QuotaRelease, error) {
	cfg.Interval = cmp.Or(cfg.Interval, QuotaReleaseIntervalDefault)
	cfg.Limit = cmp.Or(cfg.Limit, LimitDefault)
	if err := checkCommon("quota release", cfg.Store, cfg.Interval, cfg.Limit); err != nil {
		return nil, err
	}
	return &QuotaRelease{newRunner("quota_release", cfg.Store, cfg.Interval, cfg.Logger,
		func(ctx context.Context, p int) (store.ScanResult, error) {
			return cfg.Store.DrainQuotaReleases(ctx, p, cfg.Limit)
		})}, nil
}

// QuotaReconcileConfig configures NewQuotaReconcile.
type QuotaReconcileConfig struct {
	Store    *store.Store  // required
	Interval time.Duration // 0 = QuotaReconcileIntervalDefault
	Grace    time.Duration // 0 = QuotaReconcileGraceDefault
	Limit    int           // slots checked per quota partition and tick; 0 = LimitDefault
	Logger   *slog.Logger  // nil = discard
}

// QuotaReconcile is the backstop against leaked quota slots: it frees
// slots not checked for Grace whose holder attempt is not running, and
// marks the others checked (store.Store.ReconcileQuotaSlots). It walks the
// quota partitions.
type QuotaReconcile struct{ *runner }

// NewQuotaReconcile returns a stopped quota slot reconciler.
func NewQuotaReconcile(cfg QuotaReconcileConfig) (*QuotaReconcile, error) {
	cfg.Interval = cmp.Or(cfg.Interval, QuotaReconcileIntervalDefault)
	cfg.Grace = cmp.Or(cfg.Grace, QuotaReconcileGraceDefault)
	cfg.Limit = cmp.Or(cfg.Limit, LimitDefault)
	if err := checkCommon("quota reconcile", cfg.Store, cfg.Interval, cfg.Limit); err != nil {
		return nil, err
	}
	if cfg.Grace < 0 {
		return nil, fmt.Errorf("scanner: quota reconcile: Config.Grace = %s, want at least 0", cfg.Grace)
	}
	r := newRunner("quota_reconcile", cfg.Store, cfg.Interval, cfg.Logger,
		func(ctx context.Context, q int) (store.ScanResult, error) {
			return cfg.Store.ReconcileQuotaSlots(ctx, q, cfg.Grace, cfg.Limit)
		})
	r.parts = cfg.Store.QuotaPartitions
	return &QuotaReconcile{r}, nil
}
