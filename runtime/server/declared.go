package server

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/flowfabric/ff/compiler/plan"
	"github.com/flowfabric/ff/runtime/store"
)

// RegisterDeclared creates or updates the shared budgets and the quotas the
// flows declare, in each flow's namespace: what `ffrun --flows` serves.
// An existing budget keeps its usage and an existing quota its windows and
// slots; only their definitions follow the .ff files. Run-scoped budgets
// are created per run when it is staged, not here.
func RegisterDeclared(ctx context.Context, st *store.Store, flows []*plan.Flow, log *slog.Logger) error {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	done := map[string]bool{}
	for _, f := range flows {
		ns := f.Namespace
		if ns == "" {
			ns = plan.DefaultNamespace
		}
		for _, b := range f.BudgetDefs {
			if b.Scope == plan.ScopeRun {
				continue
			}
			spec := store.BudgetSpecFromPlan(ns, b, "")
			if done["b "+spec.ID] {
				continue
			}
			done["b "+spec.ID] = true
			created, err := st.UpsertBudget(ctx, spec)
			if err != nil {
				return fmt.Errorf("register budget %s of flow %s: %w", spec.ID, f.Name, err)
			}
			log.InfoContext(ctx, "budget registered", slog.String("budget", spec.ID), slog.Bool("created", created))
		}
		for _, q := range f.QuotaDefs {
			spec := store.QuotaSpecFromPlan(ns, q)
			if done["q "+spec.ID] {
				continue
			}
			done["q "+spec.ID] = true
			created, err := st.UpsertQuota(ctx, spec)
			if err != nil {
				return fmt.Errorf("register quota %s of flow %s: %w", spec.ID, f.Name, err)
			}
			log.InfoContext(ctx, "quota registered", slog.String("quota", spec.ID), slog.Bool("created", created))
		}
	}
	return nil
}
