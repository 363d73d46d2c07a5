package scanner

import (
	"cmp"
	"context"
	"log/slog"
	"time"

	"github.com/flowfabric/ff/runtime/store"
)

// BudgetResetIntervalDefault is the default interval of the budget reset
// scanner.
const BudgetResetIntervalDefault = time.Second

// BudgetResetConfig configures NewBudgetReset.
type BudgetResetConfig struct {
	Store    *store.Store  // required
	Interval time.Duration // 0 = BudgetResetIntervalDefault
	Limit    int           // per budget partition and tick; 0 = LimitDefault
	Logger   *slog.Logger  // nil = discard
}

// BudgetReset applies the scheduled resets of budgets with a reset
// interval: their usage goes back to zero, so executions blocked on them
// are unblocked by the Unblock scanner. It walks the budget partitions.
type BudgetReset struct{ *runner }

// NewBudgetReset returns a stopped budget reset scanner.
func NewBudgetReset(cfg BudgetResetConfig) (*BudgetReset, error) {
	cfg.Interval = cmp.Or(cfg.Interval, BudgetResetIntervalDefault)
	cfg.Limit = cmp.Or(cfg.Limit, LimitDefault)
	if err := checkCommon("budget reset", cfg.Store, cfg.Interval, cfg.Limit); err != nil {
		return nil, err
	}
	r := newRunner("budget_reset", cfg.Store, cfg.Interval, cfg.Logger,
		func(ctx context.Context, m int) (store.ScanResult, error) {
			return cfg.Store.ResetDueBudgets(ctx, m, cfg.Limit)
		})
	r.parts = cfg.Store.BudgetPartitions
	return &BudgetReset{r}, nil
}
