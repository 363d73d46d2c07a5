package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/flowfabric/ff/compiler/plan"
	"github.com/flowfabric/ff/runtime/api"
	"github.com/flowfabric/ff/runtime/cron"
	"github.com/flowfabric/ff/runtime/flowinput"
	"github.com/flowfabric/ff/runtime/store"
	"github.com/flowfabric/ff/runtime/wire"
)

// ScheduleIntervalDefault is how often ffrun looks for due schedules.
const ScheduleIntervalDefault = time.Second

// scheduleDueMax bounds the schedules one pass fires.
const scheduleDueMax = 100

// parseSchedule parses a stored schedule's expression in its time zone.
func parseSchedule(expr, tz string) (*cron.Schedule, error) {
	loc := time.UTC
	if tz != "" {
		l, err := time.LoadLocation(tz)
		if err != nil {
			return nil, fmt.Errorf("time zone %q: %w", tz, err)
		}
		loc = l
	}
	return cron.Parse(expr, loc)
}

// scheduleService implements api.ScheduleService over the store.
type scheduleService struct {
	st  *store.Store
	log *slog.Logger
}

func (s *scheduleService) PutSchedule(ctx context.Context, name string, req wire.PutSchedule) (*wire.Schedule, bool, error) {
	c, err := parseSchedule(req.Cron, req.Timezone) // checked by the API
	if err != nil {
		return nil, false, api.Errorf(400, wire.CodeValidation, "cron: %v", err)
	}
	created, err := s.st.PutSchedule(ctx, store.ScheduleSpec{Name: name, Template: req.Template, Cron: req.Cron,
		Timezone: req.Timezone, Namespace: req.Namespace, Input: req.Input}, c.Next(time.Now()))
	if err != nil {
		return nil, false, mapError(err)
	}
	s.log.InfoContext(ctx, "schedule put", slog.String("schedule", name), slog.String("template", req.Template),
		slog.String("cron", req.Cron), slog.String("timezone", req.Timezone), slog.Bool("created", created))
	out, err := s.GetSchedule(ctx, name)
	return out, created, err
}

func (s *scheduleService) GetSchedule(ctx context.Context, name string) (*wire.Schedule, error) {
	sc, err := s.st.GetSchedule(ctx, name)
	if errors.Is(err, store.ErrNotFound) {
		return nil, api.Errorf(404, wire.CodeNotFound, "no such schedule %q (GET /v1/schedules lists them)", name)
	}
	if err != nil {
		return nil, mapError(err)
	}
	w := toSchedule(*sc)
	return &w, nil
}

func (s *scheduleService) ListSchedules(ctx context.Context) (*wire.ScheduleList, error) {
	l, err := s.st.ListSchedules(ctx)
	if err != nil {
		return nil, mapError(err)
	}
	out := &wire.ScheduleList{Schedules: make([]wire.Schedule, len(l))}
	for i, sc := range l {
		out.Schedules[i] = toSchedule(sc)
	}
	return out, nil
}

func (s *scheduleService) DeleteSchedule(ctx context.Context, name string) error {
	ok, err := s.st.DeleteSchedule(ctx, name)
	if err != nil {
		return mapError(err)
	}
	if !ok {
		return api.Errorf(404, wire.CodeNotFound, "no such schedule %q", name)
	}
	s.log.InfoContext(ctx, "schedule deleted", slog.String("schedule", name))
	return nil
}

func toSchedule(sc store.Schedule) wire.Schedule {
	tz := sc.Timezone
	if tz == "" {
		tz = "UTC"
	}
	return wire.Schedule{Name: sc.Name, Template: sc.Template, Cron: sc.Cron, Timezone: tz, Input: rawJSON(sc.Input),
		Namespace: sc.Namespace, NextAt: timePtr(sc.NextAt), Fires: sc.Fires, LastFireAt: timePtr(sc.LastFireAt),
		LastRunID: string(sc.LastRun), LastError: sc.LastError, CreatedAt: timePtr(sc.CreatedAt), UpdatedAt: timePtr(sc.UpdatedAt)}
}

// scheduleRunner starts the runs of due schedules. Each pass reads the
// schedules whose next fire has come, stages a run of each with the
// idempotency key "schedule:<name>:<fire ms>" (two ffrun processes firing
// the same schedule at once start one run), and moves it to its first fire
// after now: fires missed while no ffrun ran are not made up, the oldest
// of them starts one run. A fire that cannot start a run for good (its
// template is not served here, its input no longer fits) is recorded with
// the reason and the schedule moves on; one that fails for a passing
// cause (Valkey unreachable) is tried again at the next pass.
type scheduleRunner struct {
	st        *store.Store
	flows     *flowService
	templates map[string]*plan.Flow
	every     time.Duration
	log       *slog.Logger

	cancel context.CancelFunc
	done   chan struct{}
}

func newScheduleRunner(st *store.Store, flows *flowService, templates []*plan.Flow, every time.Duration, log *slog.Logger) *scheduleRunner {
	if every <= 0 {
		every = ScheduleIntervalDefault
	}
	r := &scheduleRunner{st: st, flows: flows, templates: map[string]*plan.Flow{}, every: every, log: log}
	for _, t := range templates {
		r.templates[t.Name] = t
	}
	return r
}

func (r *scheduleRunner) Start(ctx context.Context) error {
	ctx, r.cancel = context.WithCancel(context.WithoutCancel(ctx))
	r.done = make(chan struct{})
	go func() {
		defer close(r.done)
		t := time.NewTicker(r.every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			r.pass(ctx)
		}
	}()
	return nil
}

func (r *scheduleRunner) Stop(ctx context.Context) error {
	if r.cancel == nil {
		return nil
	}
	r.cancel()
	select {
	case <-r.done:
	case <-ctx.Done():
	}
	return nil
}

// pass fires the due schedules.
func (r *scheduleRunner) pass(ctx context.Context) {
	due, now, err := r.st.DueSchedules(ctx, scheduleDueMax)
	if err != nil {
		if ctx.Err() == nil {
			r.log.DebugContext(ctx, "schedules: read due", slog.Any("error", err))
		}
		return
	}
	for _, sc := range due {
		if ctx.Err() != nil {
			return
		}
		r.fire(ctx, sc, now)
	}
}

// fire starts the run of one due schedule and moves it on.
func (r *scheduleRunner) fire(ctx context.Context, sc store.Schedule, now time.Time) {
	fire := sc.NextAt
	var run store.RunID
	var why string
	c, err := parseSchedule(sc.Cron, sc.Timezone)
	if err != nil {
		why = err.Error() // not again: never fires until replaced
	} else {
		run, why, err = r.stage(ctx, sc, fire)
		if err != nil {
			if ctx.Err() == nil {
				r.log.WarnContext(ctx, "schedule fire failed; tried again", slog.String("schedule", sc.Name), slog.Any("error", err))
			}
			return
		}
	}
	var next time.Time
	if c != nil {
		next = c.Next(now)
	}
	moved, err := r.st.ScheduleFired(ctx, sc.Name, fire, next, run, why)
	if err != nil {
		if ctx.Err() == nil {
			r.log.WarnContext(ctx, "schedule fire not recorded; tried again", slog.String("schedule", sc.Name), slog.Any("error", err))
		}
		return
	}
	if !moved {
		return // fired by another process, or replaced meanwhile
	}
	if why != "" {
		r.log.WarnContext(ctx, "schedule fired without a run", slog.String("schedule", sc.Name), slog.Time("fire", fire),
			slog.String("reason", why), slog.Time("next", next))
		return
	}
	r.log.InfoContext(ctx, "schedule fired", slog.String("schedule", sc.Name), slog.String("run_id", string(run)),
		slog.Time("fire", fire), slog.Time("next", next))
}

// stage stages the run of a fire: the run, or why none can be (for good),
// or an error to try again.
func (r *scheduleRunner) stage(ctx context.Context, sc store.Schedule, fire time.Time) (store.RunID, string, error) {
	tmpl, ok := r.templates[sc.Template]
	if !ok {
		return "", fmt.Sprintf("no template %q is served (ffrun --flows)", sc.Template), nil
	}
	input := sc.Input
	if len(input) == 0 {
		input = []byte("null")
	}
	if err := flowinput.Flow(tmpl, "input", input); err != nil {
		return "", "the input does not fit the template: " + err.Error(), nil
	}
	w, _, err := r.flows.StageFlow(ctx, api.FlowRequest{Flow: tmpl, Shared: true, Input: input, Namespace: sc.Namespace,
		IdempotencyKey: "schedule:" + sc.Name + ":" + strconv.FormatInt(fire.UnixMilli(), 10)})
	if ae := (*api.Error)(nil); errors.As(err, &ae) && ae.Status < 500 {
		return "", ae.Message, nil
	}
	if err != nil {
		return "", "", err
	}
	return store.RunID(w.ID), "", nil
}
