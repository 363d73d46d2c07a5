package cron

import (
	"strings"
	"testing"
	"time"
)

// TestZone: "" and "UTC" are UTC, an IANA name loads, "Local" and an
// unknown name are refused with a message that says what to write.
func TestZone(t *testing.T) {
	for _, tz := range []string{"", "UTC"} {
		if loc, err := Zone(tz); err != nil || loc != time.UTC {
			t.Errorf("Zone(%q) = %v, %v; want UTC", tz, loc, err)
		}
	}
	if loc, err := Zone("Europe/Berlin"); err != nil || loc.String() != "Europe/Berlin" {
		t.Errorf("Zone(Europe/Berlin) = %v, %v", loc, err)
	}
	for tz, want := range map[string]string{
		"Local":         `"Local" is each host's own zone`,
		"europe/berlin": `"europe/berlin" is not a time zone name (IANA names, which are case-sensitive`,
	} {
		if _, err := Zone(tz); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Zone(%q) error = %v; want %q", tz, err, want)
		}
	}
}

// TestFillInput: placeholders in string values are filled in with the
// fire's time in its zone; keys and other values are kept, and an input
// without a placeholder comes back as it was.
func TestFillInput(t *testing.T) {
	fire := time.Date(2026, 3, 1, 2, 0, 0, 0, mustLoad(t, "Europe/Berlin"))
	got, err := FillInput([]byte(`{"{{fire_date}}": ["{{fire_date-1}}", "{{fire_date+31}} <&>", 1.5, null], "t": "{{fire_time}}"}`), fire)
	want := `{"t":"2026-03-01T02:00:00+01:00","{{fire_date}}":["2026-02-28","2026-04-01 <&>",1.5,null]}`
	if err != nil || string(got) != want {
		t.Errorf("FillInput = %s, %v; want %s", got, err, want)
	}
	same := []byte(`{ "a": "no placeholder" }`)
	if got, err := FillInput(same, fire); err != nil || string(got) != string(same) {
		t.Errorf("FillInput without a placeholder = %s, %v; want it unchanged", got, err)
	}
	if _, err := FillInput([]byte(`{"a":`), fire); err == nil || !strings.HasPrefix(err.Error(), "not JSON: ") {
		t.Errorf("FillInput of broken JSON: %v", err)
	}
}

func TestUnknownPlaceholders(t *testing.T) {
	for s, want := range map[string]string{
		"{{fire_time}} {{fire_date}} {{fire_date-1}} {{fire_date+30}}": "",
		"{{fire_dat-1}}":                       "{{fire_dat-1}}",
		"Hello {{name}}, {{fire_date}}":        "{{name}}",
		"{{fire_date+1d}} and {{ fire_time }}": "{{fire_date+1d}},{{ fire_time }}",
		"{ {not} } {{}}":                       "{{}}",
		"no braces":                            "",
	} {
		if got := strings.Join(UnknownPlaceholders(s), ","); got != want {
			t.Errorf("UnknownPlaceholders(%q) = %q, want %q", s, got, want)
		}
	}
}
