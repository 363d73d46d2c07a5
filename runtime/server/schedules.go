package server

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
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

// The idempotency key of a fire is held for twice the schedule's period,
// within these bounds, and a fire later than half of that is skipped as
// missed: a fire is only ever staged while its key is held, so no fire
// starts two runs (a process that staged and stopped before recording the
// fire leaves it to the next pass of any process). Not a day for every
// schedule: one every second would keep 86,400 keys.
const (
	scheduleKeyMin = 10 * time.Minute
	scheduleKeyMax = 24 * time.Hour
)

// scheduleRetryMax bounds the wait before a fire that failed for a passing
// cause (Valkey unreachable) is tried again; the wait doubles from one
// interval.
const scheduleRetryMax = time.Minute

// scheduleNoteEvery is how often at most a fire left to another process
// (or failing for a passing cause) rewrites its last_error with the same
// text.
const scheduleNoteEvery = time.Minute

// scheduleKeyPrefix starts the idempotency key of a scheduled run's fire,
// "ffrun-schedule:<name>:<fire ms>", and of a run of a schedule started by
// hand, "ffrun-schedule:<name>:now:<the caller's key, or a random one>".
// A schedule name holds no ':'.
const scheduleKeyPrefix = api.ScheduleKeyPrefix

// scheduleKeyNow follows a schedule's name in the key of a run started by
// hand; scheduleKeyHashed starts the key part that stands for a caller's
// key by its hash.
const (
	scheduleKeyNow    = "now:"
	scheduleKeyHashed = "sha256:"
)

// scheduledBy reads out of a run's idempotency key the schedule that
// staged it and, for a fire, the fire's time; manual reports a run
// started by hand (POST /v1/schedules/{name}/runs), whose key holds no
// time.
func scheduledBy(key string) (name string, fire time.Time, manual, ok bool) {
	rest, ok := strings.CutPrefix(key, scheduleKeyPrefix)
	name, rest, found := strings.Cut(rest, ":")
	if !ok || !found || name == "" {
		return "", time.Time{}, false, false
	}
	if strings.HasPrefix(rest, scheduleKeyNow) {
		return name, time.Time{}, true, true
	}
	ms, err := strconv.ParseInt(rest, 10, 64)
	if err != nil {
		return "", time.Time{}, false, false
	}
	return name, time.UnixMilli(ms), false, true
}

// parseSchedule parses a stored schedule's expression in its time zone.
func parseSchedule(expr, tz string) (*cron.Schedule, error) {
	loc, err := api.ScheduleZone(tz)
	if err != nil {
		return nil, err
	}
	return cron.Parse(expr, loc)
}

// scheduleService implements api.ScheduleService over the store.
type scheduleService struct {
	st        *store.Store
	flows     *flowService
	templates map[string]*plan.Flow // by name
	log       *slog.Logger
}

// templatesByName maps the served templates by name.
func templatesByName(ts []*plan.Flow) map[string]*plan.Flow {
	m := make(map[string]*plan.Flow, len(ts))
	for _, t := range ts {
		m[t.Name] = t
	}
	return m
}

func (s *scheduleService) PutSchedule(ctx context.Context, name string, req wire.PutSchedule) (*wire.Schedule, bool, error) {
	c, err := parseSchedule(req.Cron, req.Timezone) // checked by the API
	if err != nil {
		return nil, false, api.Errorf(400, wire.CodeValidation, "cron: %v", err)
	}
	// Valkey's clock, which the fires go by: a host clock ahead of it
	// would skip the first fire.
	now, err := s.st.Now(ctx)
	if err != nil {
		return nil, false, mapError(err)
	}
	next := c.Next(now)
	if next.IsZero() {
		e := api.Errorf(400, wire.CodeValidation, "cron: %q never fires within five years", req.Cron)
		e.Details = map[string]any{"field": "cron"}
		return nil, false, e
	}
	created, err := s.st.PutSchedule(ctx, store.ScheduleSpec{Name: name, Template: req.Template, Cron: req.Cron,
		Timezone: req.Timezone, Namespace: req.Namespace, Input: req.Input, Declared: req.Declared}, next)
	if err != nil {
		return nil, false, mapError(err)
	}
	if !registering(ctx) { // registerSchedules logs its puts, as "schedule registered"
		s.log.InfoContext(ctx, "schedule put", slog.String("schedule", name), slog.String("template", req.Template),
			slog.String("cron", req.Cron), slog.String("timezone", cmp.Or(req.Timezone, "UTC")), slog.Bool("created", created))
	}
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
	out := []wire.Schedule{toSchedule(*sc)}
	if err := s.lastRunStates(ctx, out); err != nil {
		return nil, err
	}
	return &out[0], nil
}

// lastRunStates fills in the state of each schedule's last run, in one
// round trip.
func (s *scheduleService) lastRunStates(ctx context.Context, scs []wire.Schedule) error {
	var ids []store.RunID
	var at []int
	for i, sc := range scs {
		if sc.LastRunID != "" {
			ids = append(ids, store.RunID(sc.LastRunID))
			at = append(at, i)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	states, err := s.st.RunStates(ctx, ids)
	if err != nil {
		return mapError(err)
	}
	for j, i := range at {
		scs[i].LastRunState = string(states[j])
	}
	return nil
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
	if err := s.lastRunStates(ctx, out.Schedules); err != nil {
		return nil, err
	}
	return out, nil
}

func (s *scheduleService) DeleteSchedule(ctx context.Context, name string) error {
	ok, err := s.st.DeleteSchedule(ctx, name)
	if err != nil {
		return mapError(err)
	}
	if !ok {
		return api.Errorf(404, wire.CodeNotFound, "no such schedule %q (GET /v1/schedules lists them)", name)
	}
	s.log.InfoContext(ctx, "schedule deleted", slog.String("schedule", name))
	return nil
}

func (s *scheduleService) RunSchedule(ctx context.Context, name, key string, wait time.Duration) (*wire.FlowRun, bool, error) {
	sc, err := s.st.GetSchedule(ctx, name)
	if errors.Is(err, store.ErrNotFound) {
		return nil, false, api.Errorf(404, wire.CodeNotFound, "no such schedule %q (GET /v1/schedules lists them)", name)
	}
	if err != nil {
		return nil, false, mapError(err)
	}
	// What a fire checks before it stages (scheduleRunner.fire); a fire
	// leaves a schedule that fails them to another process, a request is
	// told.
	tmpl, ok := s.templates[sc.Template]
	if !ok {
		return nil, false, api.Errorf(409, wire.CodeConflict,
			"schedule %q runs template %q, which this ffrun does not serve (--flows): ask one that does", name, sc.Template)
	}
	c, err := parseSchedule(sc.Cron, sc.Timezone)
	if err != nil {
		return nil, false, api.Errorf(409, wire.CodeConflict, "schedule %q cannot run here: %v", name, err)
	}
	now, err := s.st.Now(ctx) // the clock fires go by
	if err != nil {
		return nil, false, mapError(err)
	}
	input := sc.Input
	if len(input) == 0 {
		input = []byte("null")
	}
	if input, err = api.ScheduleInput(input, now.In(c.Location())); err != nil {
		return nil, false, api.Errorf(409, wire.CodeConflict, "schedule %q: its input: %v", name, err)
	}
	if err := flowinput.Flow(tmpl, "input", input); err != nil {
		return nil, false, api.Errorf(409, wire.CodeConflict,
			"schedule %q: its input does not fit template %q as this ffrun serves it: %v", name, sc.Template, err)
	}
	if key == "" {
		key = randomKey()
	}
	full := scheduleKeyPrefix + name + ":" + scheduleKeyNow + key
	if len(full) > store.MaxIdempotencyKeyBytes || strings.HasPrefix(key, scheduleKeyHashed) {
		// A caller's key within the API's limit that the prefix pushes
		// past the store's stands for itself by its hash; so does one
		// that looks like such a stand-in, so that two keys never meet.
		sum := sha256.Sum256([]byte(key))
		full = scheduleKeyPrefix + name + ":" + scheduleKeyNow + scheduleKeyHashed + hex.EncodeToString(sum[:])
	}
	w, created, err := s.flows.StageFlow(ctx, api.FlowRequest{Flow: tmpl, Shared: true, Input: input, Namespace: sc.Namespace,
		IdempotencyKey: full, Wait: wait})
	if err != nil {
		return nil, false, err
	}
	s.log.InfoContext(ctx, "schedule run by hand", slog.String("schedule", name), slog.String("run_id", w.ID),
		slog.Bool("created", created))
	return w, created, nil
}

// randomKey is the key part of a run started by hand without a key of
// the caller's: 96 random bits.
func randomKey() string {
	var b [12]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return hex.EncodeToString(b[:])
}

func toSchedule(sc store.Schedule) wire.Schedule {
	tz := sc.Timezone
	if tz == "" {
		tz = "UTC"
	}
	return wire.Schedule{Name: sc.Name, Template: sc.Template, Cron: sc.Cron, Timezone: tz, Input: rawJSON(sc.Input),
		Namespace: sc.Namespace, Declared: sc.Declared, NextAt: timePtr(sc.NextAt), Fires: sc.Fires, LastFireAt: timePtr(sc.LastFireAt),
		LastRunID: string(sc.LastRun), LastError: sc.LastError, CreatedAt: timePtr(sc.CreatedAt), UpdatedAt: timePtr(sc.UpdatedAt)}
}

// scheduleRunner starts the runs of due schedules. Each pass reads the
// schedules whose next fire has come and, for each:
//   - a fire later than half its key's lifetime (the process was down) is
//     skipped as missed, and the schedule moves on;
//   - a fire this process cannot start (it does not serve the template, or
//     the input does not fit its version of it, or the zone is unknown
//     here) is left due for another process, with the reason in
//     last_error;
//   - else the run is staged as a template run with the idempotency key
//     "ffrun-schedule:<name>:<fire ms>" (two processes firing at once
//     start one run), and the schedule moves to its first fire after now
//     (missed fires are not made up) with the run recorded. A staging the
//     store refuses for good is recorded as last_error and the schedule
//     moves on; one failing for a passing cause is tried again later,
//     backing off.
type scheduleRunner struct {
	st        *store.Store
	flows     *flowService
	templates map[string]*plan.Flow
	every     time.Duration
	log       *slog.Logger

	// Per schedule name, used by the pass goroutine only: when a fire that
	// failed for a passing cause may be tried again, and the last note.
	retry map[string]scheduleRetry
	noted map[string]scheduleNote

	loop
}

type scheduleRetry struct {
	at   time.Time
	wait time.Duration
}

type scheduleNote struct {
	why string
	at  time.Time
}

func newScheduleRunner(st *store.Store, flows *flowService, templates map[string]*plan.Flow, every time.Duration, log *slog.Logger) *scheduleRunner {
	if every <= 0 {
		every = ScheduleIntervalDefault
	}
	r := &scheduleRunner{st: st, flows: flows, templates: templates, every: every, log: log,
		retry: map[string]scheduleRetry{}, noted: map[string]scheduleNote{}}
	r.loop.name, r.loop.interval, r.loop.tick = "schedule runner", every, r.pass
	return r
}

// pass fires the due schedules (all of them: one left to another process
// must not hide the others).
func (r *scheduleRunner) pass(ctx context.Context) {
	due, now, err := r.st.DueSchedules(ctx, store.MaxSchedules)
	if err != nil {
		if ctx.Err() == nil {
			r.log.DebugContext(ctx, "schedules: read due", slog.Any("error", err))
		}
		return
	}
	if len(due) == 0 {
		clear(r.retry)
		clear(r.noted)
		return
	}
	for _, sc := range due {
		if ctx.Err() != nil {
			return
		}
		if rt, ok := r.retry[sc.Name]; ok && time.Now().Before(rt.at) {
			continue
		}
		r.fire(ctx, sc, now)
	}
}

// fire handles one due schedule.
func (r *scheduleRunner) fire(ctx context.Context, sc store.Schedule, now time.Time) {
	fire := sc.NextAt
	// Staging and recording go together, a stop does not split them (one
	// between them would leave the fire to be staged again later, its key
	// still held, so the same run; but there is no need). Logs go quiet
	// once the runner is stopped (ctx).
	op, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	c, err := parseSchedule(sc.Cron, sc.Timezone)
	if err != nil {
		r.note(op, ctx, sc, fire, "not fired here: "+err.Error())
		return
	}
	keyTTL := scheduleKeyMax
	if after := c.Next(fire); !after.IsZero() {
		keyTTL = min(max(2*after.Sub(fire), scheduleKeyMin), scheduleKeyMax)
	}
	var run store.RunID
	var why string
	if late := now.Sub(fire); late > keyTTL/2 {
		why = fmt.Sprintf("missed: no ffrun fired it within %s of its time (it was %s late)", keyTTL/2, late.Round(time.Second))
	} else {
		tmpl, ok := r.templates[sc.Template]
		if !ok {
			r.note(op, ctx, sc, fire, fmt.Sprintf("waiting for an ffrun that serves template %q (--flows): this one does not", sc.Template))
			return
		}
		input := sc.Input
		if len(input) == 0 {
			input = []byte("null")
		}
		input, err = api.ScheduleInput(input, fire.In(c.Location()))
		if err != nil {
			r.note(op, ctx, sc, fire, "waiting for a new input: "+err.Error())
			return
		}
		if err := flowinput.Flow(tmpl, "input", input); err != nil {
			r.note(op, ctx, sc, fire, "waiting for a template whose input this fits (or a new input): "+err.Error())
			return
		}
		w, _, err := r.flows.StageFlow(op, api.FlowRequest{Flow: tmpl, Shared: true, Input: input, Namespace: sc.Namespace,
			IdempotencyKey: scheduleKeyPrefix + sc.Name + ":" + strconv.FormatInt(fire.UnixMilli(), 10), IdempotencyTTL: keyTTL})
		switch ae := (*api.Error)(nil); {
		case errors.As(err, &ae) && ae.Status < 500:
			why = ae.Message // refused for good: every process would be
		case err != nil:
			r.backOff(sc.Name)
			r.note(op, ctx, sc, fire, "not started yet, tried again: "+err.Error())
			if ctx.Err() == nil {
				r.log.WarnContext(ctx, "schedule fire failed; tried again", slog.String("schedule", sc.Name), slog.Any("error", err))
			}
			return
		default:
			run = store.RunID(w.ID)
		}
	}
	next := c.Next(now)
	if !next.IsZero() && !next.After(fire) {
		next = c.Next(fire) // now read before the fire's time: never record a fire as its own next
	}
	moved, err := r.st.ScheduleFired(op, sc.Name, fire, next, run, why)
	if err != nil {
		r.backOff(sc.Name)
		if ctx.Err() == nil {
			r.log.WarnContext(ctx, "schedule fire not recorded; tried again", slog.String("schedule", sc.Name),
				slog.String("run_id", string(run)), slog.Any("error", err))
		}
		return
	}
	delete(r.retry, sc.Name)
	delete(r.noted, sc.Name)
	switch {
	case ctx.Err() != nil:
		// Stopped meanwhile: the fire is recorded, the log is quiet.
	case !moved && run != "":
		// Recorded by another process (the same run, by its key), or the
		// schedule was replaced or deleted after it was read.
		r.log.DebugContext(ctx, "schedule fire recorded elsewhere or schedule changed", slog.String("schedule", sc.Name),
			slog.String("run_id", string(run)), slog.Time("fire", fire))
	case !moved:
	case why != "":
		r.log.WarnContext(ctx, "schedule fired without a run", slog.String("schedule", sc.Name), slog.Time("fire", fire),
			slog.String("reason", why), slog.Time("next", next))
	default:
		r.log.InfoContext(ctx, "schedule fired", slog.String("schedule", sc.Name), slog.String("run_id", string(run)),
			slog.Time("fire", fire), slog.Time("next", next))
	}
}

// note records why a due fire started no run yet, at most once per
// scheduleNoteEvery with the same text (the store call on op, the log
// while ctx lives).
func (r *scheduleRunner) note(op, ctx context.Context, sc store.Schedule, fire time.Time, why string) {
	if n, ok := r.noted[sc.Name]; ok && n.why == why && time.Since(n.at) < scheduleNoteEvery {
		return
	}
	r.noted[sc.Name] = scheduleNote{why: why, at: time.Now()}
	if _, err := r.st.NoteSchedule(op, sc.Name, fire, why); err != nil && ctx.Err() == nil {
		r.log.DebugContext(ctx, "schedules: note", slog.String("schedule", sc.Name), slog.Any("error", err))
	}
}

// backOff delays the next try of a schedule's fire, doubling the wait.
func (r *scheduleRunner) backOff(name string) {
	rt := r.retry[name]
	rt.wait = min(max(2*rt.wait, r.every), scheduleRetryMax)
	rt.at = time.Now().Add(rt.wait)
	r.retry[name] = rt
}
