package store

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// Schedules: put, read, list, due, a fire recorded once (a second process
// firing the same time finds it moved), a replacement keeping what the
// fires did, delete; refusals write nothing.
func TestSchedules(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	spec := ScheduleSpec{Name: "nightly", Template: "etl", Cron: "0 2 * * *", Timezone: "Europe/Berlin", Input: []byte(`{"day":"x"}`)}
	past := time.UnixMilli(time.Now().Add(-time.Minute).UnixMilli())
	created, err := e.s.PutSchedule(e.ctx, spec, past)
	if err != nil || !created {
		t.Fatalf("PutSchedule = %v, %v", created, err)
	}
	later := spec
	later.Name, later.Cron = "later", "@hourly"
	if _, err := e.s.PutSchedule(e.ctx, later, time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	never := spec
	never.Name = "never"
	if _, err := e.s.PutSchedule(e.ctx, never, time.Time{}); err != nil {
		t.Fatal(err)
	}
	got, err := e.s.GetSchedule(e.ctx, "nightly")
	if err != nil || got.Template != "etl" || got.Cron != "0 2 * * *" || got.Timezone != "Europe/Berlin" ||
		string(got.Input) != `{"day":"x"}` || !got.NextAt.Equal(past) || got.CreatedAt.IsZero() || got.Fires != 0 {
		t.Fatalf("GetSchedule = %+v, %v", got, err)
	}
	if n, err := e.s.GetSchedule(e.ctx, "never"); err != nil || !n.NextAt.IsZero() {
		t.Fatalf("a schedule that never fires: %+v, %v", n, err)
	}
	list, err := e.s.ListSchedules(e.ctx)
	if err != nil || len(list) != 3 || list[0].Name != "later" || list[1].Name != "never" || list[2].Name != "nightly" {
		t.Fatalf("ListSchedules = %+v, %v", list, err)
	}
	due, now, err := e.s.DueSchedules(e.ctx, 10)
	if err != nil || len(due) != 1 || due[0].Name != "nightly" || now.Before(past) {
		t.Fatalf("DueSchedules = %+v at %v, %v", due, now, err)
	}
	next := time.UnixMilli(time.Now().Add(24 * time.Hour).UnixMilli())
	if ok, err := e.s.ScheduleFired(e.ctx, "nightly", due[0].NextAt, next, "0.run", ""); err != nil || !ok {
		t.Fatalf("ScheduleFired = %v, %v", ok, err)
	}
	// The same fire recorded by another process: already moved.
	if ok, err := e.s.ScheduleFired(e.ctx, "nightly", due[0].NextAt, next.Add(time.Hour), "0.other", ""); err != nil || ok {
		t.Fatalf("a second ScheduleFired of the same time = %v, %v; want moved", ok, err)
	}
	got, _ = e.s.GetSchedule(e.ctx, "nightly")
	if !got.NextAt.Equal(next) || !got.LastFireAt.Equal(past) || got.LastRun != "0.run" || got.Fires != 1 {
		t.Fatalf("after the fire: %+v", got)
	}
	if due, _, err := e.s.DueSchedules(e.ctx, 10); err != nil || len(due) != 0 {
		t.Fatalf("due after the fire: %+v, %v", due, err)
	}
	// A replacement keeps what the fires did and takes its new time.
	spec.Cron = "0 3 * * *"
	if created, err := e.s.PutSchedule(e.ctx, spec, next.Add(time.Hour)); err != nil || created {
		t.Fatalf("replace = %v, %v", created, err)
	}
	got, _ = e.s.GetSchedule(e.ctx, "nightly")
	if got.Cron != "0 3 * * *" || got.LastRun != "0.run" || !got.NextAt.Equal(next.Add(time.Hour)) || got.Fires != 1 {
		t.Fatalf("after the replacement: %+v", got)
	}
	// A fire of the old time after the replacement does not move it back.
	if ok, err := e.s.ScheduleFired(e.ctx, "nightly", next, next.Add(48*time.Hour), "", "late"); err != nil || ok {
		t.Fatalf("a stale fire = %v, %v", ok, err)
	}
	before := e.keys()
	for _, bad := range []ScheduleSpec{
		{Name: "has space", Template: "etl", Cron: "@daily"},
		{Name: "team/nightly", Template: "etl", Cron: "@daily"},
		{Name: "x", Template: "", Cron: "@daily"},
		{Name: "x", Template: "etl", Cron: ""},
		{Name: "x", Template: "etl", Cron: strings.Repeat("*", MaxCronBytes+1)},
		{Name: "x", Template: "etl", Cron: "@daily", Namespace: "a:b"},
	} {
		var ve *ValidationError
		if _, err := e.s.PutSchedule(e.ctx, bad, next); !errors.As(err, &ve) {
			t.Errorf("PutSchedule(%+v) = %v, want a validation error", bad, err)
		}
	}
	if diff := strings.Join(e.extraKeys(before), ","); diff != "" {
		t.Fatalf("refused schedules wrote %s", diff)
	}
	if ok, err := e.s.DeleteSchedule(e.ctx, "nightly"); err != nil || !ok {
		t.Fatalf("DeleteSchedule = %v, %v", ok, err)
	}
	if ok, err := e.s.DeleteSchedule(e.ctx, "nightly"); err != nil || ok {
		t.Fatalf("DeleteSchedule again = %v, %v", ok, err)
	}
	if _, err := e.s.GetSchedule(e.ctx, "nightly"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("GetSchedule after delete: %v", err)
	}
	if ok, err := e.s.ScheduleFired(e.ctx, "nightly", next, next, "", ""); err != nil || ok {
		t.Fatalf("ScheduleFired of a deleted schedule = %v, %v", ok, err)
	}
}

// A staging may hold its idempotency key for less than the store's
// default (schedules do: one key per fire).
func TestStageIdempotencyTTL(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	f := flowOf("x", execs("a"))
	if _, _, err := e.s.StageFlow(e.ctx, StageRequest{Flow: f, Input: []byte(`{}`), IdempotencyKey: "k", IdempotencyTTL: 5 * time.Second}); err != nil {
		t.Fatal(err)
	}
	var ttl int64 = -3
	for _, k := range e.keys() {
		if strings.Contains(k, ":fidem:") {
			v, err := e.c.Do(e.ctx, e.c.B().Pttl().Key(k).Build()).AsInt64()
			if err != nil {
				t.Fatal(err)
			}
			ttl = v
		}
	}
	if ttl <= 0 || ttl > 5000 {
		t.Fatalf("the key's PTTL is %d ms, want at most 5000", ttl)
	}
	var ve *ValidationError
	if _, _, err := e.s.StageFlow(e.ctx, StageRequest{Flow: f, Input: []byte(`{}`), IdempotencyKey: "k2", IdempotencyTTL: time.Millisecond}); !errors.As(err, &ve) || ve.Field != "idempotency_ttl" {
		t.Fatalf("a TTL under a second: %v", err)
	}
}

// DueSchedules gives the fire time it found due, even when another process
// moved the schedule on before its record was read: the time read then is
// not due yet, and firing it would start a run early and record a fire
// whose next is itself.
func TestDueSchedulesKeepTheDueTime(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	due := time.UnixMilli(time.Now().Add(-time.Second).UnixMilli())
	if _, err := e.s.PutSchedule(e.ctx, ScheduleSpec{Name: "tick", Template: "etl", Cron: "@every 1h"}, due); err != nil {
		t.Fatal(err)
	}
	later := due.Add(time.Hour)
	e.s.hook = func(point, _ string) {
		if point == "due" {
			// Another process fires it meanwhile.
			if ok, err := e.s.ScheduleFired(e.ctx, "tick", due, later, "0.run", ""); err != nil || !ok {
				t.Errorf("the other process's fire: %v, %v", ok, err)
			}
		}
	}
	got, _, err := e.s.DueSchedules(e.ctx, 10)
	if err != nil || len(got) != 1 || !got[0].NextAt.Equal(due) {
		t.Fatalf("DueSchedules = %+v, %v; want tick due at %v", got, err, due)
	}
	e.s.hook = nil
	if ok, err := e.s.ScheduleFired(e.ctx, "tick", got[0].NextAt, later, "0.run", ""); err != nil || ok {
		t.Fatalf("recording the fire read = %v, %v; want it found moved", ok, err)
	}
}

// TestPutScheduleUnchangedKeepsItsFire: a put that repeats the stored
// definition (or only marks it declared) keeps the next fire; one that
// changes it sets the next fire anew.
func TestPutScheduleUnchangedKeepsItsFire(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	spec := ScheduleSpec{Name: "keep", Template: "tmpl", Cron: "0 3 * * *", Input: []byte(`{"a":1}`)}
	due := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	if _, err := e.s.PutSchedule(e.ctx, spec, due); err != nil {
		t.Fatal(err)
	}
	later := due.Add(48 * time.Hour)
	next := func() time.Time {
		t.Helper()
		sc, err := e.s.GetSchedule(e.ctx, "keep")
		if err != nil {
			t.Fatal(err)
		}
		return sc.NextAt
	}
	spec.Declared = true
	if created, err := e.s.PutSchedule(e.ctx, spec, later); err != nil || created || !next().Equal(due) {
		t.Fatalf("an unchanged put marking it declared: created %v, %v; next %v, want %v kept", created, err, next(), due)
	}
	if sc, _ := e.s.GetSchedule(e.ctx, "keep"); !sc.Declared {
		t.Fatal("the put did not mark it declared")
	}
	spec.Cron = "0 4 * * *"
	if _, err := e.s.PutSchedule(e.ctx, spec, later); err != nil || !next().Equal(later) {
		t.Fatalf("a changed put: %v; next %v, want %v", err, next(), later)
	}
}
