package store

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestMaxSchedulesUnderConcurrentPuts: concurrent puts at the limit do not
// take the store above MaxSchedules (the call counts); a replacement at the
// limit is taken, a new schedule refused naming the limit.
func TestMaxSchedulesUnderConcurrentPuts(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	next := time.Now().Add(time.Hour)
	for i := range MaxSchedules - 1 {
		spec := ScheduleSpec{Name: fmt.Sprintf("s%d", i), Template: "etl", Cron: "@hourly", Input: []byte(`null`)}
		if _, err := e.s.PutSchedule(e.ctx, spec, next); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	for i := range 32 {
		wg.Go(func() {
			spec := ScheduleSpec{Name: fmt.Sprintf("race%d", i), Template: "etl", Cron: "@hourly", Input: []byte(`null`)}
			_, _ = e.s.PutSchedule(e.ctx, spec, next)
		})
	}
	wg.Wait()
	l, err := e.s.ListSchedules(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(l) != MaxSchedules {
		t.Fatalf("%d schedules stored, want the limit, %d", len(l), MaxSchedules)
	}
	if _, err := e.s.PutSchedule(e.ctx, ScheduleSpec{Name: "s0", Template: "etl", Cron: "@daily"}, next); err != nil {
		t.Fatalf("a replacement at the limit: %v", err)
	}
	var ve *ValidationError
	if _, err := e.s.PutSchedule(e.ctx, ScheduleSpec{Name: "one-more", Template: "etl", Cron: "@daily"}, next); !errors.As(err, &ve) ||
		ve.Field != "name" || !strings.Contains(ve.Msg, "the limit is 1000") {
		t.Fatalf("a new schedule over the limit: %v", err)
	}
}
