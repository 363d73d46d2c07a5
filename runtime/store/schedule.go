package store

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/valkey-io/valkey-go"

	"github.com/flowfabric/ff/compiler/plan"
)

// Schedule limits.
const (
	// MaxSchedules bounds the schedules of a deployment (ListSchedules
	// reads them all).
	MaxSchedules = plan.MaxSchedules
	// MaxCronBytes bounds a schedule's expression and its time zone name.
	MaxCronBytes = 256
)

// ScheduleSpec is a schedule as PutSchedule takes it: runs of template
// Template, with Input, at the fire times of Cron in time zone Timezone.
// The store keeps the expression; the caller computes fire times.
type ScheduleSpec struct {
	Name      string
	Template  string
	Cron      string
	Timezone  string // IANA name; "" = UTC
	Namespace string // "" = the template's
	Input     []byte // JSON
	// Declared says ffrun put it from a .ff file's declaration; a put
	// through the API clears it.
	Declared bool
}

// Schedule is a stored schedule with its next fire and what its last fire
// did.
type Schedule struct {
	ScheduleSpec
	NextAt     time.Time // zero when it will not fire again
	Fires      int64     // fires recorded
	LastFireAt time.Time // the last fire's time (as scheduled, not as run)
	LastRun    RunID     // the run the last fire started
	LastError  string    // why the last fire started none
	CreatedAt  time.Time
	UpdatedAt  time.Time
}

// scheduleNever is the index score of a schedule with no next fire: past
// any time DueSchedules asks about (the year 9999).
const scheduleNever = int64(253402300799000)

func (k keys) schedule(name string) string { return k.prefix + "ff:{s}:schedule:" + name }
func (k keys) schedules() string           { return k.prefix + "ff:{s}:schedules" }

func nextScore(next time.Time) string {
	if next.IsZero() {
		return strconv.FormatInt(scheduleNever, 10)
	}
	return strconv.FormatInt(next.UnixMilli(), 10)
}

// PutSchedule creates or replaces schedule spec, to fire next at next (zero:
// never). It reports whether it was created. A replaced schedule keeps what
// its fires did and fires next at next.
func (s *Store) PutSchedule(ctx context.Context, spec ScheduleSpec, next time.Time) (bool, error) {
	if err := checkName("name", spec.Name); err != nil {
		return false, err
	}
	if strings.Contains(spec.Name, "/") {
		return false, invalid("name", "%q must not contain '/' (it is a path segment of the API)", spec.Name)
	}
	if err := checkName("template", spec.Template); err != nil {
		return false, err
	}
	if spec.Namespace != "" {
		if err := checkName("namespace", spec.Namespace); err != nil {
			return false, err
		}
	}
	if spec.Cron == "" || len(spec.Cron) > MaxCronBytes {
		return false, invalid("cron", "want an expression of 1..%d bytes", MaxCronBytes)
	}
	if len(spec.Timezone) > MaxCronBytes {
		return false, invalid("timezone", "longer than %d bytes", MaxCronBytes)
	}
	if err := checkPayload("input", spec.Input); err != nil {
		return false, err
	}
	// The limit is checked by the call (a replacement adds nothing).
	items, err := s.single(ctx, call{fn: "ff_schedule_put", keys: []string{s.k.schedule(spec.Name), s.k.schedules()},
		args: []string{spec.Name, spec.Template, spec.Cron, spec.Timezone, spec.Namespace, string(spec.Input), nextScore(next),
			strconv.Itoa(MaxSchedules), declaredSource(spec.Declared)}}, "", "put schedule")
	if err != nil {
		return false, err
	}
	return str(items[0]) == "created", nil
}

// declaredSource is ff_schedule_put's source argument.
func declaredSource(declared bool) string {
	if declared {
		return "declared"
	}
	return ""
}

// DeleteSchedule deletes a schedule; it reports whether there was one.
func (s *Store) DeleteSchedule(ctx context.Context, name string) (bool, error) {
	if err := checkName("name", name); err != nil {
		return false, err
	}
	items, err := s.single(ctx, call{fn: "ff_schedule_delete", keys: []string{s.k.schedule(name), s.k.schedules()},
		args: []string{name}}, "", "delete schedule")
	if err != nil {
		return false, err
	}
	return atoi64(str(items[0])) == 1, nil
}

// GetSchedule returns a schedule, or ErrNotFound.
func (s *Store) GetSchedule(ctx context.Context, name string) (*Schedule, error) {
	if err := checkName("name", name); err != nil {
		return nil, err
	}
	out, err := s.readSchedules(ctx, []string{name})
	if err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: schedule %s", ErrNotFound, name)
	}
	return &out[0], nil
}

// ListSchedules returns every schedule, by name.
func (s *Store) ListSchedules(ctx context.Context) ([]Schedule, error) {
	names, err := s.c.Do(ctx, s.c.B().Zrange().Key(s.k.schedules()).Min("0").Max("-1").Build()).AsStrSlice()
	if err != nil {
		return nil, fmt.Errorf("store: list schedules: %w", err)
	}
	slices.Sort(names)
	return s.readSchedules(ctx, names)
}

// DueSchedules returns up to limit schedules whose next fire is at or
// before the server's clock, earliest first, and that clock. NextAt is the
// due fire time as read with the index, even when another process has
// moved the schedule on since (ScheduleFired then finds it moved): a fire
// time read later could be one that is not due yet.
func (s *Store) DueSchedules(ctx context.Context, limit int) ([]Schedule, time.Time, error) {
	now, err := s.serverTime(ctx)
	if err != nil {
		return nil, time.Time{}, err
	}
	due, err := s.c.Do(ctx, s.c.B().Zrangebyscore().Key(s.k.schedules()).Min("-inf").
		Max(strconv.FormatInt(now.UnixMilli(), 10)).Withscores().Limit(0, int64(limit)).Build()).AsZScores()
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("store: read due schedules: %w", err)
	}
	names := make([]string, len(due))
	at := make(map[string]time.Time, len(due))
	for i, z := range due {
		names[i], at[z.Member] = z.Member, time.UnixMilli(int64(z.Score))
	}
	if s.hook != nil {
		s.hook("due", strings.Join(names, ","))
	}
	out, err := s.readSchedules(ctx, names)
	for i := range out {
		out[i].NextAt = at[out[i].Name]
	}
	return out, now, err
}

// ScheduleFired records a fire of schedule name at fire (the time it was
// due at, as read) that started run (or failed with errText) and moves it
// to next (zero: never). It does nothing, and reports false, when the
// schedule no longer fires at fire: another process fired it, or it was
// replaced or deleted meanwhile.
func (s *Store) ScheduleFired(ctx context.Context, name string, fire, next time.Time, run RunID, errText string) (bool, error) {
	items, err := s.single(ctx, call{fn: "ff_schedule_fired", keys: []string{s.k.schedule(name), s.k.schedules()},
		args: []string{name, strconv.FormatInt(fire.UnixMilli(), 10), nextScore(next), string(run), errText}}, "", "record schedule fire")
	if err != nil {
		return false, err
	}
	return str(items[0]) == "advanced", nil
}

// NoteSchedule records why the due fire at fire of schedule name started no
// run yet (errText), leaving it due; it does nothing, and reports false,
// when the schedule no longer fires at fire.
func (s *Store) NoteSchedule(ctx context.Context, name string, fire time.Time, errText string) (bool, error) {
	items, err := s.single(ctx, call{fn: "ff_schedule_note", keys: []string{s.k.schedule(name), s.k.schedules()},
		args: []string{name, strconv.FormatInt(fire.UnixMilli(), 10), errText}}, "", "note schedule fire")
	if err != nil {
		return false, err
	}
	return str(items[0]) == "noted", nil
}

// Now returns the server's clock, which schedules' fire times go by.
func (s *Store) Now(ctx context.Context) (time.Time, error) { return s.serverTime(ctx) }

// readSchedules reads the records and next fires of names (those deleted
// meanwhile are left out).
func (s *Store) readSchedules(ctx context.Context, names []string) ([]Schedule, error) {
	if len(names) == 0 {
		return nil, nil
	}
	cmds := make(valkey.Commands, 0, 2*len(names))
	for _, n := range names {
		cmds = append(cmds, s.c.B().Hgetall().Key(s.k.schedule(n)).Build(), s.c.B().Zscore().Key(s.k.schedules()).Member(n).Build())
	}
	rs := s.c.DoMulti(ctx, cmds...)
	out := make([]Schedule, 0, len(names))
	for i, n := range names {
		f, err := rs[2*i].AsStrMap()
		if err != nil {
			return nil, fmt.Errorf("store: read schedule %s: %w", n, err)
		}
		score, err := rs[2*i+1].AsInt64()
		if valkey.IsValkeyNil(err) || len(f) == 0 {
			continue // deleted meanwhile
		}
		if err != nil {
			return nil, fmt.Errorf("store: read schedule %s: %w", n, err)
		}
		sc := Schedule{ScheduleSpec: ScheduleSpec{Name: n, Template: f["template"], Cron: f["cron"], Timezone: f["tz"],
			Namespace: f["ns"], Input: []byte(f["input"]), Declared: f["source"] == "declared"},
			Fires: atoi64(f["fires"]), LastFireAt: fromMs(f["last_fire_at"]), LastRun: RunID(f["last_run"]), LastError: f["last_error"],
			CreatedAt: fromMs(f["created_at"]), UpdatedAt: fromMs(f["updated_at"])}
		if score != scheduleNever {
			sc.NextAt = time.UnixMilli(score)
		}
		out = append(out, sc)
	}
	return out, nil
}
