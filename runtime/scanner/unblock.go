package scanner

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/flowfabric/ff/runtime/store"
)

// UnblockIntervalDefault is the default interval of the unblock scanner.
const UnblockIntervalDefault = time.Second

// UnblockConfig configures NewUnblock.
type UnblockConfig struct {
	Store    *store.Store  // required
	Interval time.Duration // 0 = UnblockIntervalDefault
	Limit    int           // per partition, namespace and tick; 0 = LimitDefault
	Logger   *slog.Logger  // nil = discard
}

// Unblock makes blocked executions eligible again when their reason
// cleared: a connected worker of their namespace now covers their
// capabilities (store.Store.UnblockRoute), no budget of theirs is at a hard
// limit any more, or their quota subjects have room
// (store.Store.UnblockAdmission). Each tick reads, per namespace, the union
// of its connected workers' capabilities once, and the budgets at a hard
// limit once; a failure to read either leaves what depends on it blocked
// (nothing is unblocked on a guess). The partitions of a tick share one
// quota room (store.QuotaRoom), so a freed slot wakes one execution, not
// one per partition; the tick starts at the partition after the one the
// last tick started at, so no partition's blocked executions always have
// the first pick of the room. The scanner keeps one store.UnblockCursor
// across ticks, so a long line of executions that stay blocked is read a
// share at a time and never hides one behind it whose reason cleared
// (the cursor lives in this process only: another ffrun's scanner, with
// a cursor of its own, only changes which entries a tick looks at first).
type Unblock struct {
	*runner
	unions       map[string][]string // namespace -> capability union, per tick
	breached     []store.BudgetBreach
	budgetsKnown bool
	room         *store.QuotaRoom     // per tick
	cursor       *store.UnblockCursor // across ticks; used by the scanner's goroutine only
}

// NewUnblock returns a stopped unblock scanner.
func NewUnblock(cfg UnblockConfig) (*Unblock, error) {
	cfg.Interval = cmp.Or(cfg.Interval, UnblockIntervalDefault)
	cfg.Limit = cmp.Or(cfg.Limit, LimitDefault)
	if err := checkCommon("unblock", cfg.Store, cfg.Interval, cfg.Limit); err != nil {
		return nil, err
	}
	u := &Unblock{cursor: &store.UnblockCursor{}}
	u.runner = newRunner("unblock", cfg.Store, cfg.Interval, cfg.Logger,
		func(ctx context.Context, p int) (store.ScanResult, error) {
			var total store.ScanResult
			var errs []error
			for ns, union := range u.unions {
				res, err := cfg.Store.UnblockRoute(ctx, p, ns, union, cfg.Limit, u.cursor)
				if err != nil {
					errs = append(errs, fmt.Errorf("namespace %s: %w", ns, err))
					continue
				}
				total.Processed += res.Processed
				total.More = total.More || res.More
			}
			res, err := cfg.Store.UnblockAdmission(ctx, store.AdmissionUnblock{Partition: p, Limit: cfg.Limit,
				Breached: u.breached, BudgetsKnown: u.budgetsKnown, Room: u.room, Cursor: u.cursor})
			if err != nil {
				errs = append(errs, fmt.Errorf("budgets and quotas: %w", err))
			}
			total.Processed += res.Processed
			total.More = total.More || res.More
			return total, errors.Join(errs...)
		})
	u.rotate = true
	u.prepare = func(ctx context.Context) error {
		u.room = &store.QuotaRoom{}
		var berr error
		u.breached, berr = cfg.Store.BreachedBudgets(ctx)
		u.budgetsKnown = berr == nil
		if berr != nil {
			berr = fmt.Errorf("breached budgets: %w", berr)
		}
		namespaces, err := cfg.Store.Namespaces(ctx)
		u.unions = make(map[string][]string, len(namespaces))
		if err != nil {
			return errors.Join(berr, err)
		}
		u.cursor.KeepNamespaces(namespaces) // nothing kept of namespaces gone
		errs := []error{berr}
		for _, ns := range namespaces {
			union, err := cfg.Store.CapabilityUnion(ctx, ns)
			if err != nil {
				errs = append(errs, fmt.Errorf("namespace %s: %w", ns, err))
				continue
			}
			u.unions[ns] = union
		}
		return errors.Join(errs...)
	}
	return u, nil
}
