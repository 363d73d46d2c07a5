package api_test

import (
	"testing"
	"time"

	"github.com/flowfabric/ff/runtime/api"
)

// ScheduleInput fills the placeholders of string values with the fire's
// time in its zone, anywhere in the input, and leaves the rest alone.
func TestScheduleInput(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	fire := time.Date(2026, 11, 23, 2, 0, 0, 0, berlin)
	for _, tc := range []struct{ in, want string }{
		{`{"day":"{{fire_date}}"}`, `{"day":"2026-11-23"}`},
		{`{"at":"{{fire_time}}","n":12345678901234567890,"{{fire_date}}":["s3://logs/{{fire_date}}/x",1.5,true,null,{"deep":"{{fire_time}}"}]}`,
			`{"at":"2026-11-23T02:00:00+01:00","n":12345678901234567890,"{{fire_date}}":["s3://logs/2026-11-23/x",1.5,true,null,{"deep":"2026-11-23T02:00:00+01:00"}]}`},
		{`"{{fire_date}}"`, `"2026-11-23"`},
		{`{"s":"no placeholder", "k" : 1}`, `{"s":"no placeholder", "k" : 1}`}, // as it is, spacing too
		{`{"s":"{{fire_day}}"}`, `{"s":"{{fire_day}}"}`},                       // not a placeholder
	} {
		got, err := api.ScheduleInput([]byte(tc.in), fire)
		if err != nil || string(got) != tc.want {
			t.Errorf("ScheduleInput(%s) = %s, %v; want %s", tc.in, got, err, tc.want)
		}
	}
	if _, err := api.ScheduleInput([]byte(`{"s":"{{fire_date}}"`), fire); err == nil {
		t.Error("ScheduleInput of a broken JSON: no error")
	}
}
