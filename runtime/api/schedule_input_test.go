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
		{`{"day":"{{fire_date-1}}","until":"{{fire_date+7}}","year_ago":"{{fire_date-365}}"}`,
			`{"day":"2026-11-22","until":"2026-11-30","year_ago":"2025-11-23"}`},
		{`{"s":"{{fire_date-}}{{fire_date+12345}}"}`, `{"s":"{{fire_date-}}{{fire_date+12345}}"}`}, // not placeholders
		{`{"s":"no placeholder", "k" : 1}`, `{"s":"no placeholder", "k" : 1}`},                     // as it is, spacing too
		{`{"s":"{{fire_day}}"}`, `{"s":"{{fire_day}}"}`},                                           // not a placeholder
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

// A string value's "&", "<" and ">" are kept as they are, not
// re-encoded as \u0026 and the like (json.Marshal escapes HTML).
func TestScheduleInputKeepsHTMLChars(t *testing.T) {
	fire := time.Date(2026, 11, 23, 2, 0, 0, 0, time.UTC)
	in := `{"url":"https://x/?day={{fire_date}}&a=<b>"}`
	want := `{"url":"https://x/?day=2026-11-23&a=<b>"}`
	got, err := api.ScheduleInput([]byte(in), fire)
	if err != nil || string(got) != want {
		t.Errorf("ScheduleInput(%s) = %s, %v; want %s", in, got, err, want)
	}
}

// A placeholder written with escapes ("\u007b\u007bfire_date}}") is one:
// values are read as decoded, whatever the rest of the input holds.
func TestScheduleInputEscapedPlaceholder(t *testing.T) {
	fire := time.Date(2026, 11, 23, 2, 0, 0, 0, time.UTC)
	alone, _ := api.ScheduleInput([]byte(`{"b":"\u007b\u007bfire_date}}"}`), fire)
	with, _ := api.ScheduleInput([]byte(`{"a":"{{fire_date}}","b":"\u007b\u007bfire_date}}"}`), fire)
	t.Logf("alone: %s; with another: %s", alone, with)
	aloneFilled := string(alone) == `{"b":"2026-11-23"}`
	withFilled := string(with) == `{"a":"2026-11-23","b":"2026-11-23"}`
	if aloneFilled != withFilled {
		t.Errorf("the same value is filled in or not depending on the rest of the input")
	}
}
