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
// (store.Store.PurgeTerminal). Once a partition's purge caught up, it
// drops the lanes left holding nothing from the partition's lane set
// (store.Store.PruneLanes); once per tick, before the partitions, it drops
// the namespaces without a connected worker (store.Store.PruneNamespaces).
// So the registries the other scanners walk hold what is in use, not
// every lane and namespace ever seen.
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
	r := newRunner("retention", cfg.Store, cfg.Interval, cfg.Logger,
		func(ctx context.Context, p int) (store.ScanResult, error) {
			res, err := cfg.Store.PurgeTerminal(ctx, p, cfg.Age, cfg.Limit)
			if err != nil || res.More {
				return res, err // the lanes wait until the purge caught up
			}
			pruned, err := cfg.Store.PruneLanes(ctx, p, cfg.Limit)
			if err != nil {
				return res, fmt.Errorf("prune lanes: %w", err)
			}
			return store.ScanResult{Processed: res.Processed + pruned.Processed, More: pruned.More}, nil
		})
	r.prepare = func(ctx context.Context) error {
		if _, err := cfg.Store.PruneNamespaces(ctx); err != nil {
			return fmt.Errorf("prune namespaces: %w", err)
		}
		return nil
	}
	return &Retention{r}, nil
}
