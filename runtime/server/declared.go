package server

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"reflect"

	"github.com/flowfabric/ff/compiler/plan"
	"github.com/flowfabric/ff/runtime/api"
	"github.com/flowfabric/ff/runtime/client"
	"github.com/flowfabric/ff/runtime/store"
	"github.com/flowfabric/ff/runtime/wire"
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

// registeringKey marks the context of the puts registerSchedules makes.
type registeringKey struct{}

// registering reports whether ctx is that of a put registerSchedules
// makes (the context crosses client.HandlerTransport, not the network).
func registering(ctx context.Context) bool {
	v, _ := ctx.Value(registeringKey{}).(bool)
	return v
}

// registerSchedules creates or replaces each declared schedule by calling
// the API in process (PUT /v1/schedules/{name} with token), so that a
// declared schedule gets exactly the checks of one put over HTTP: its
// template, expression, time zone and input. A schedule already stored
// as declared is left as it is, so that a restart keeps its next fire (a
// put moves it to the first fire after now, dropping one the process was
// down for). The first refusal ends the registration with the schedule's
// name and the API's message. templates gives each flow's namespace, the
// one a declared schedule's runs go to. Schedules stored as declared that
// these files do not declare (removed since, or another deployment's) are
// left as they are and logged at warn: they still fire.
func registerSchedules(ctx context.Context, h http.Handler, token string, schedules []plan.Schedule, templates []*plan.Flow, log *slog.Logger) error {
	if len(schedules) == 0 && len(templates) == 0 {
		return nil // not serving .ff files: nothing is declared here
	}
	cl, err := client.New("http://ffrun.in-process", client.WithToken(token),
		client.WithHTTPClient(&http.Client{Transport: client.HandlerTransport(h)}))
	if err != nil {
		return fmt.Errorf("register schedules: %w", err)
	}
	// No client sent these: kept out of the HTTP metrics, and logged
	// here only.
	ctx = context.WithValue(api.Uncounted(ctx), registeringKey{}, true)
	namespaces := make(map[string]string, len(templates))
	for _, f := range templates {
		namespaces[f.Name] = cmp.Or(f.Namespace, plan.DefaultNamespace)
	}
	for _, sc := range schedules {
		if cur, err := cl.GetSchedule(ctx, sc.Name); err == nil && sameSchedule(cur, sc, namespaces[sc.Flow]) {
			log.InfoContext(ctx, "schedule registered", slog.String("schedule", sc.Name), slog.String("flow", sc.Flow),
				slog.String("cron", sc.Cron), slog.String("timezone", cur.Timezone), slog.Bool("created", false), slog.Bool("unchanged", true))
			continue
		}
		got, created, err := cl.PutSchedule(ctx, sc.Name, wire.PutSchedule{
			Template: sc.Flow,
			Cron:     sc.Cron,
			Timezone: sc.Timezone,
			Input:    sc.Input,
			Declared: true,
		})
		if err != nil {
			var ae *client.APIError
			if errors.As(err, &ae) {
				return fmt.Errorf("register schedule %s of flow %s: refused: %s", sc.Name, sc.Flow, ae.Message)
			}
			return fmt.Errorf("register schedule %s of flow %s: %w", sc.Name, sc.Flow, err)
		}
		log.InfoContext(ctx, "schedule registered", slog.String("schedule", sc.Name), slog.String("flow", sc.Flow),
			slog.String("cron", sc.Cron), slog.String("timezone", got.Timezone), slog.Bool("created", created), slog.Bool("unchanged", false))
	}
	stored, err := cl.ListSchedules(ctx)
	if err != nil {
		return fmt.Errorf("register schedules: list the stored ones: %w", err)
	}
	declared := make(map[string]bool, len(schedules))
	for _, sc := range schedules {
		declared[sc.Name] = true
	}
	for _, s := range stored.Schedules {
		if s.Declared && !declared[s.Name] {
			log.WarnContext(ctx, "schedule declared in .ff files that these files do not declare: it still fires; "+
				"if it was removed, delete it (DELETE /v1/schedules/{name})", slog.String("schedule", s.Name), slog.String("template", s.Template))
		}
	}
	return nil
}

// sameSchedule reports whether the stored schedule cur is what sc
// declares: stored as declared (one put through the API the same way is
// put again, to mark it), template, expression, zone (UTC when none),
// input (as JSON values) and namespace (the template's: ns).
func sameSchedule(cur *wire.Schedule, sc plan.Schedule, ns string) bool {
	return cur.Declared && cur.Template == sc.Flow && cur.Cron == sc.Cron && cur.Timezone == cmp.Or(sc.Timezone, "UTC") &&
		cur.Namespace == ns && sameJSON(cur.Input, sc.Input)
}

// sameJSON reports whether a and b hold the same JSON value (absent and
// null alike).
func sameJSON(a, b json.RawMessage) bool {
	decode := func(r json.RawMessage) (any, bool) {
		if len(bytes.TrimSpace(r)) == 0 {
			return nil, true
		}
		dec := json.NewDecoder(bytes.NewReader(r))
		dec.UseNumber()
		var v any
		err := dec.Decode(&v)
		return v, err == nil
	}
	va, oka := decode(a)
	vb, okb := decode(b)
	return oka && okb && reflect.DeepEqual(va, vb)
}
