package cron

import (
	"slices"
	"strings"
	"testing"
	"time"
	_ "time/tzdata" // zone data for machines without zoneinfo
)

func mustLoad(t testing.TB, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatalf("LoadLocation(%q): %v", name, err)
	}
	return loc
}

func mustParse(t testing.TB, expr string, loc *time.Location) *Schedule {
	t.Helper()
	s, err := Parse(expr, loc)
	if err != nil {
		t.Fatalf("Parse(%q): %v", expr, err)
	}
	return s
}

func mustTime(t testing.TB, value string) time.Time {
	t.Helper()
	tm, err := time.Parse(time.RFC3339Nano, value)
	if err != nil {
		t.Fatalf("time.Parse(%q): %v", value, err)
	}
	return tm
}

// set builds a bit set from values, for comparing parsed fields.
func set(values ...int) uint64 {
	var s uint64
	for _, v := range values {
		s |= 1 << v
	}
	return s
}

func span(lo, hi, step int) uint64 {
	var s uint64
	for v := lo; v <= hi; v += step {
		s |= 1 << v
	}
	return s
}

func TestParseFields(t *testing.T) {
	tests := []struct {
		expr                          string
		minute, hour, dom, month, dow uint64
		domStar, dowStar              bool
	}{
		{"* * * * *", span(0, 59, 1), span(0, 23, 1), span(1, 31, 1), span(1, 12, 1), span(0, 6, 1), true, true},
		{"5 4 3 2 1", set(5), set(4), set(3), set(2), set(1), false, false},
		{"*/15 0-23/6 1/10 */5 *", set(0, 15, 30, 45), set(0, 6, 12, 18), set(1, 11, 21, 31), set(1, 6, 11), span(0, 6, 1), false, true},
		{"1,2,5-7,50-59/3 1 * JAN,mar-May *", set(1, 2, 5, 6, 7, 50, 53, 56, 59), set(1), span(1, 31, 1), set(1, 3, 4, 5), span(0, 6, 1), true, true},
		{"0 0 * * 7", set(0), set(0), span(1, 31, 1), span(1, 12, 1), set(0), true, false},
		{"0 0 * * 0,7", set(0), set(0), span(1, 31, 1), span(1, 12, 1), set(0), true, false},
		{"0 0 * * 5-7", set(0), set(0), span(1, 31, 1), span(1, 12, 1), set(0, 5, 6), true, false},
		{"0 0 * * sun-SAT", set(0), set(0), span(1, 31, 1), span(1, 12, 1), span(0, 6, 1), true, false},
		{"0 0 * * */2", set(0), set(0), span(1, 31, 1), span(1, 12, 1), set(0, 2, 4, 6), true, false},
		{"0 0 */2 * mon", set(0), set(0), span(1, 31, 2), span(1, 12, 1), set(1), false, false},
		{" \t0\t\t0  1 1 *  ", set(0), set(0), set(1), set(1), span(0, 6, 1), false, true},
		{"@yearly", set(0), set(0), set(1), set(1), span(0, 6, 1), false, true},
		{"@annually", set(0), set(0), set(1), set(1), span(0, 6, 1), false, true},
		{"@monthly", set(0), set(0), set(1), span(1, 12, 1), span(0, 6, 1), false, true},
		{"@weekly", set(0), set(0), span(1, 31, 1), span(1, 12, 1), set(0), true, false},
		{"@daily", set(0), set(0), span(1, 31, 1), span(1, 12, 1), span(0, 6, 1), true, true},
		{"@MIDNIGHT", set(0), set(0), span(1, 31, 1), span(1, 12, 1), span(0, 6, 1), true, true},
		{"@hourly", set(0), span(0, 23, 1), span(1, 31, 1), span(1, 12, 1), span(0, 6, 1), true, true},
		{"59 23 31 12 6", set(59), set(23), set(31), set(12), set(6), false, false},
		{"007 08 09 010 00", set(7), set(8), set(9), set(10), set(0), false, false},
	}
	for _, tt := range tests {
		s, err := Parse(tt.expr, nil)
		if err != nil {
			t.Errorf("Parse(%q): %v", tt.expr, err)
			continue
		}
		if s.String() != tt.expr {
			t.Errorf("Parse(%q).String() = %q", tt.expr, s.String())
		}
		got := [5]uint64{s.minute, s.hour, s.dom, s.month, s.dow}
		want := [5]uint64{tt.minute, tt.hour, tt.dom, tt.month, tt.dow}
		for i, name := range []string{"minute", "hour", "day-of-month", "month", "day-of-week"} {
			if got[i] != want[i] {
				t.Errorf("Parse(%q) %s = %b, want %b", tt.expr, name, got[i], want[i])
			}
		}
		if s.domStar != tt.domStar || s.dowStar != tt.dowStar {
			t.Errorf("Parse(%q) domStar, dowStar = %v, %v, want %v, %v", tt.expr, s.domStar, s.dowStar, tt.domStar, tt.dowStar)
		}
		if s.loc != time.UTC {
			t.Errorf("Parse(%q, nil) zone = %v, want UTC", tt.expr, s.loc)
		}
	}
}

func TestParseEvery(t *testing.T) {
	tests := []struct {
		expr string
		want int64
	}{
		{"@every 1s", 1},
		{"@every 90s", 90},
		{"@every 1m30s", 90},
		{"@every 1h", 3600},
		{"@EVERY\t2h45m", 9900},
		{"@every 1500ms", 0},
		{"@every 8784h", 366 * 86400},
	}
	for _, tt := range tests {
		s, err := Parse(tt.expr, nil)
		if tt.want == 0 {
			if err == nil {
				t.Errorf("Parse(%q) = nil error, want one", tt.expr)
			}
			continue
		}
		if err != nil {
			t.Errorf("Parse(%q): %v", tt.expr, err)
			continue
		}
		if s.every != tt.want {
			t.Errorf("Parse(%q) every = %d, want %d", tt.expr, s.every, tt.want)
		}
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		expr string
		want string // the whole message
	}{
		{"", "cron: empty expression"},
		{" \t ", "cron: empty expression"},
		{"61 * * * *", `cron: minute field "61": 61 is outside 0-59`},
		{"1,61 * * * *", `cron: minute field "1,61": 61 is outside 0-59`},
		{"* 24 * * *", `cron: hour field "24": 24 is outside 0-23`},
		{"* * 0 * *", `cron: day-of-month field "0": 0 is outside 1-31`},
		{"* * 32 * *", `cron: day-of-month field "32": 32 is outside 1-31`},
		{"* * * 13 *", `cron: month field "13": 13 is outside 1-12`},
		{"* * * * 8", `cron: day-of-week field "8": 8 is outside 0-7`},
		{"0 0 * * * *", "cron: want 5 fields (minute hour day-of-month month day-of-week), got 6"},
		{"0 0 * *", "cron: want 5 fields (minute hour day-of-month month day-of-week), got 4"},
		{"* * * * mon-", `cron: day-of-week field "mon-": range "mon-" is missing its end`},
		{"* * * * -mon", `cron: day-of-week field "-mon": range "-mon" is missing its start`},
		{"* * * * monday", `cron: day-of-week field "monday": "monday" is not a number or a day-of-week name`},
		{"* * * foo *", `cron: month field "foo": "foo" is not a number or a month name`},
		{"x * * * *", `cron: minute field "x": "x" is not a number`},
		{"5-3 * * * *", `cron: minute field "5-3": range "5-3" is empty (5 > 3)`},
		{"* * * * sat-sun", `cron: day-of-week field "sat-sun": range "sat-sun" is empty (6 > 0)`},
		{"*/0 * * * *", `cron: minute field "*/0": step 0 is outside 1-59`},
		{"*/60 * * * *", `cron: minute field "*/60": step 60 is outside 1-59`},
		{"*/ * * * *", `cron: minute field "*/": "*/" is missing its step`},
		{"/5 * * * *", `cron: minute field "/5": "/5" is missing its value`},
		{"*/2/3 * * * *", `cron: minute field "*/2/3": "*/2/3" has more than one '/'`},
		{"1-2-3 * * * *", `cron: minute field "1-2-3": range "1-2-3" has more than one '-'`},
		{"1,,2 * * * *", `cron: minute field "1,,2": empty list item`},
		{"*/x * * * *", `cron: minute field "*/x": step "x" is not a number`},
		{"+1 * * * *", `cron: minute field "+1": "+1" is not a number`},
		{"99999999999999999999 * * * *", `cron: minute field "99999999999999999999": 99999999999999999999 is outside 0-59`},
		{"*-5 * * * *", `cron: minute field "*-5": "*" is not a number`},
		{"? * * * *", `cron: minute field "?": "?" is not a number`},
		{"@every 1.5s", "cron: @every 1.5s: not a whole number of seconds"},
		{"@every 0s", "cron: @every 0s: must be at least 1s"},
		{"@every -1h", "cron: @every -1h: must be at least 1s"},
		{"@every 500ms", "cron: @every 500ms: must be at least 1s"},
		{"@every 8785h", "cron: @every 8785h: must be at most 366 days (8784h0m0s)"},
		{"@every", `cron: @every wants one duration, e.g. "@every 90s"`},
		{"@every 1h 2h", `cron: @every wants one duration, e.g. "@every 90s"`},
		{"@every soon", `cron: @every soon: not a duration: give hours, minutes and seconds, such as 90s, 15m or 36h`},
		{"@every 2d", `cron: @every 2d: not a duration: give hours, minutes and seconds, such as 90s, 15m or 36h`},
		{"@weekly 1", "cron: @weekly takes no arguments"},
		{"@fortnightly", `cron: unknown macro "@fortnightly" (want @yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly or @every)`},
		{"@reboot", `cron: unknown macro "@reboot" (want @yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly or @every)`},
		{"0 0 * * *\n", `cron: day-of-week field "*\n": "*\n" is not a number or a day-of-week name`},
	}
	for _, tt := range tests {
		s, err := Parse(tt.expr, nil)
		if err == nil {
			t.Errorf("Parse(%q) = %v, want error %q", tt.expr, s, tt.want)
			continue
		}
		if err.Error() != tt.want {
			t.Errorf("Parse(%q) error:\n got %s\nwant %s", tt.expr, err, tt.want)
		}
	}
}

func TestNext(t *testing.T) {
	tests := []struct {
		expr string
		from string
		want string // "" for the zero Time
	}{
		// Every minute; strictly after, including sub-second parts.
		{"* * * * *", "2026-01-01T00:00:00Z", "2026-01-01T00:01:00Z"},
		{"* * * * *", "2026-01-01T00:00:59.999Z", "2026-01-01T00:01:00Z"},
		{"* * * * *", "2026-12-31T23:59:30Z", "2027-01-01T00:00:00Z"},
		// Steps and lists.
		{"*/15 * * * *", "2026-01-01T00:00:00Z", "2026-01-01T00:15:00Z"},
		{"*/15 * * * *", "2026-01-01T00:50:00Z", "2026-01-01T01:00:00Z"},
		{"10-50/20 * * * *", "2026-01-01T00:31:00Z", "2026-01-01T00:50:00Z"},
		{"10-50/20 * * * *", "2026-01-01T00:50:00Z", "2026-01-01T01:10:00Z"},
		{"45/10 * * * *", "2026-01-01T00:55:00Z", "2026-01-01T01:45:00Z"},
		{"0 9,17 * * *", "2026-01-01T09:00:00Z", "2026-01-01T17:00:00Z"},
		{"0 9,17 * * *", "2026-01-01T17:00:00Z", "2026-01-02T09:00:00Z"},
		{"30 */6 * * *", "2026-01-01T18:31:00Z", "2026-01-02T00:30:00Z"},
		// Day-of-month and day-of-week: either when both are restricted.
		// 2026-01-01 is a Thursday.
		{"0 0 13 * fri", "2026-01-01T00:00:00Z", "2026-01-02T00:00:00Z"}, // Friday 2nd
		{"0 0 13 * fri", "2026-01-09T00:00:00Z", "2026-01-13T00:00:00Z"}, // Tuesday 13th
		{"0 0 13 * *", "2026-01-01T00:00:00Z", "2026-01-13T00:00:00Z"},
		{"0 0 * * fri", "2026-01-02T00:00:00Z", "2026-01-09T00:00:00Z"},
		{"0 0 1 * mon", "2026-01-01T00:00:00Z", "2026-01-05T00:00:00Z"},
		{"0 0 1 * mon", "2026-01-26T00:00:00Z", "2026-02-01T00:00:00Z"},
		{"0 0 */10 * sun", "2026-01-01T00:00:00Z", "2026-01-04T00:00:00Z"},
		{"0 0 */10 * sun", "2026-01-04T00:00:00Z", "2026-01-11T00:00:00Z"},
		// "*/2" is restricted (POSIX); Vixie cron would want odd Mondays
		// (Monday 5th, then Monday 19th) for these two.
		{"0 0 */2 * mon", "2026-01-01T00:00:00Z", "2026-01-03T00:00:00Z"}, // Saturday 3rd
		{"0 0 */2 * mon", "2026-01-11T00:00:00Z", "2026-01-12T00:00:00Z"}, // Monday 12th
		// Month names and weekday names.
		{"0 12 1 mar *", "2026-01-01T00:00:00Z", "2026-03-01T12:00:00Z"},
		{"0 12 1 NOV-dec *", "2026-01-01T00:00:00Z", "2026-11-01T12:00:00Z"},
		{"0 12 1 NOV-dec *", "2026-12-01T12:00:00Z", "2027-11-01T12:00:00Z"},
		{"0 8 * * Mon-Fri", "2026-01-02T08:00:00Z", "2026-01-05T08:00:00Z"},
		// Sunday as 0 and as 7.
		{"0 0 * * 0", "2026-01-01T00:00:00Z", "2026-01-04T00:00:00Z"},
		{"0 0 * * 7", "2026-01-01T00:00:00Z", "2026-01-04T00:00:00Z"},
		{"0 0 * * 6-7", "2026-01-03T00:00:00Z", "2026-01-04T00:00:00Z"},
		{"0 0 * * 6-7", "2026-01-04T00:00:00Z", "2026-01-10T00:00:00Z"},
		// Leap days.
		{"0 0 29 2 *", "2026-01-01T00:00:00Z", "2028-02-29T00:00:00Z"},
		{"0 0 29 2 *", "2028-02-29T00:00:00Z", "2032-02-29T00:00:00Z"},
		{"0 0 29 2 *", "2099-01-01T00:00:00Z", ""}, // 2100 is not a leap year: 2104 is over 5 years on
		{"0 0 29 2 *", "2096-03-01T00:00:00Z", ""},
		{"0 0 29 2 *", "2399-03-01T00:00:00Z", "2400-02-29T00:00:00Z"},
		// Day 31 only in months that have it.
		{"0 0 31 * *", "2026-01-31T00:00:00Z", "2026-03-31T00:00:00Z"},
		{"0 0 31 * *", "2026-03-31T00:00:00Z", "2026-05-31T00:00:00Z"},
		{"0 0 31 * *", "2026-07-31T00:00:00Z", "2026-08-31T00:00:00Z"},
		{"0 0 30 * *", "2026-01-30T00:00:00Z", "2026-03-30T00:00:00Z"},
		// Macros.
		{"@yearly", "2026-01-01T00:00:00Z", "2027-01-01T00:00:00Z"},
		{"@monthly", "2026-01-15T00:00:00Z", "2026-02-01T00:00:00Z"},
		{"@weekly", "2026-01-01T00:00:00Z", "2026-01-04T00:00:00Z"},
		{"@daily", "2026-01-01T00:00:00Z", "2026-01-02T00:00:00Z"},
		{"@hourly", "2026-01-01T00:59:59Z", "2026-01-01T01:00:00Z"},
		// Impossible dates.
		{"0 0 30 2 *", "2026-01-01T00:00:00Z", ""},
		{"0 0 31 4,6,9,11 *", "2026-01-01T00:00:00Z", ""},
		// Impossible day-of-month but a day-of-week: either applies.
		{"0 0 30 2 mon", "2026-01-01T00:00:00Z", "2026-02-02T00:00:00Z"},
		// Before the epoch and at the start of the calendar.
		{"0 0 1 1 *", "1969-12-31T12:00:00Z", "1970-01-01T00:00:00Z"},
		{"0 0 * * *", "0001-01-01T00:00:00Z", "0001-01-02T00:00:00Z"},
		// @every is aligned to the Unix epoch.
		{"@every 90s", "1970-01-01T00:00:00Z", "1970-01-01T00:01:30Z"},
		{"@every 90s", "1970-01-01T00:01:29.999Z", "1970-01-01T00:01:30Z"},
		{"@every 90s", "1970-01-01T00:01:30Z", "1970-01-01T00:03:00Z"},
		{"@every 90s", "1969-12-31T23:59:00Z", "1970-01-01T00:00:00Z"},
		{"@every 90s", "1969-12-31T23:58:29Z", "1969-12-31T23:58:30Z"},
		{"@every 90s", "1969-12-31T23:58:30Z", "1970-01-01T00:00:00Z"},
		{"@every 90s", "2026-01-01T00:00:00Z", "2026-01-01T00:01:30Z"}, // 1767225600 = 90 * 19635840
		{"@every 7m", "2026-01-01T00:00:00Z", "2026-01-01T00:07:00Z"},  // 1767225600 = 420 * 4207680
		{"@every 7m", "2026-01-01T00:05:00Z", "2026-01-01T00:07:00Z"},
		{"@every 7m", "2026-01-01T00:07:00Z", "2026-01-01T00:14:00Z"},
		{"@every 11m", "2026-01-01T00:00:00Z", "2026-01-01T00:05:00Z"}, // 1767225600 = 660 * 2677614 + 360
		{"@every 24h", "2026-06-15T13:00:00Z", "2026-06-16T00:00:00Z"},
		{"@every 8784h", "1970-01-01T00:00:00Z", "1971-01-02T00:00:00Z"},
	}
	for _, tt := range tests {
		s := mustParse(t, tt.expr, nil)
		from := mustTime(t, tt.from)
		got := s.Next(from)
		if tt.want == "" {
			if !got.IsZero() {
				t.Errorf("%q.Next(%s) = %s, want the zero Time", tt.expr, tt.from, got.Format(time.RFC3339))
			}
			continue
		}
		want := mustTime(t, tt.want)
		if !got.Equal(want) {
			t.Errorf("%q.Next(%s) = %s, want %s", tt.expr, tt.from, got.Format(time.RFC3339Nano), tt.want)
		}
		if got.Location() != time.UTC {
			t.Errorf("%q.Next(%s) is in %v, want UTC", tt.expr, tt.from, got.Location())
		}
	}
}

// TestNextZone checks schedules in named zones, and the choices made around
// daylight-saving changes. In 2026 New York springs forward on 8 March at
// 02:00 EST (to 03:00 EDT) and falls back on 1 November at 02:00 EDT (to
// 01:00 EST); Berlin springs forward on 29 March at 02:00 CET (to 03:00
// CEST) and falls back on 25 October at 03:00 CEST (to 02:00 CET).
func TestNextZone(t *testing.T) {
	ny := mustLoad(t, "America/New_York")
	berlin := mustLoad(t, "Europe/Berlin")
	apia := mustLoad(t, "Pacific/Apia")
	tests := []struct {
		zone *time.Location
		expr string
		from string
		want string
	}{
		// Plain days: the fields are wall-clock times.
		{ny, "0 9 * * *", "2026-01-05T00:00:00-05:00", "2026-01-05T09:00:00-05:00"},
		{ny, "0 9 * * *", "2026-07-05T00:00:00-04:00", "2026-07-05T09:00:00-04:00"},
		{berlin, "0 0 1 * *", "2026-01-31T22:30:00Z", "2026-02-01T00:00:00+01:00"},
		{berlin, "0 0 1 * *", "2026-01-31T23:30:00Z", "2026-03-01T00:00:00+01:00"},   // already 1 February in Berlin
		{berlin, "0 0 * * mon", "2026-01-04T23:30:00Z", "2026-01-12T00:00:00+01:00"}, // 00:30 Monday in Berlin: next Monday

		// Spring forward: a wall time in the gap moves forward by the gap.
		{ny, "30 2 * * *", "2026-03-08T00:00:00-05:00", "2026-03-08T03:30:00-04:00"},
		{ny, "30 2 * * *", "2026-03-08T03:30:00-04:00", "2026-03-09T02:30:00-04:00"},
		{ny, "30 2 * * *", "2026-03-08T03:04:00-04:00", "2026-03-08T03:30:00-04:00"}, // asked after the change
		{ny, "30 2 * * *", "2026-03-08T03:29:59-04:00", "2026-03-08T03:30:00-04:00"},
		{ny, "0 2 * * *", "2026-03-08T00:00:00-05:00", "2026-03-08T03:00:00-04:00"},
		{ny, "59 2 * * *", "2026-03-08T01:59:00-05:00", "2026-03-08T03:59:00-04:00"},
		{ny, "0 * * * *", "2026-03-08T01:00:00-05:00", "2026-03-08T03:00:00-04:00"},
		{ny, "0 * * * *", "2026-03-08T03:00:00-04:00", "2026-03-08T04:00:00-04:00"},
		{ny, "30 * * * *", "2026-03-08T01:30:00-05:00", "2026-03-08T03:30:00-04:00"},
		{ny, "30 * * * *", "2026-03-08T03:30:00-04:00", "2026-03-08T04:30:00-04:00"},
		{ny, "*/30 * * * *", "2026-03-08T01:30:00-05:00", "2026-03-08T03:00:00-04:00"},
		{ny, "*/30 * * * *", "2026-03-08T03:00:00-04:00", "2026-03-08T03:30:00-04:00"},
		{berlin, "30 2 * * *", "2026-03-29T00:00:00+01:00", "2026-03-29T03:30:00+02:00"},
		{berlin, "30 2 * * *", "2026-03-29T03:30:00+02:00", "2026-03-30T02:30:00+02:00"},
		{berlin, "0 2 29 3 *", "2026-01-01T00:00:00+01:00", "2026-03-29T03:00:00+02:00"},
		{berlin, "45 2 * * *", "2026-03-29T03:44:00+02:00", "2026-03-29T03:45:00+02:00"},
		{berlin, "45 2 * * *", "2026-03-29T03:45:00+02:00", "2026-03-30T02:45:00+02:00"},
		// Samoa skipped 30 December 2011 (-10:00 to +14:00): noon on the
		// missing day moves a day forward, onto noon on the 31st.
		{apia, "0 12 * * *", "2011-12-29T12:00:00-10:00", "2011-12-31T12:00:00+14:00"},
		{apia, "0 12 * * *", "2011-12-31T11:00:00+14:00", "2011-12-31T12:00:00+14:00"},
		{apia, "0 12 30 12 *", "2011-12-01T00:00:00-10:00", "2011-12-31T12:00:00+14:00"},

		// Fall back: a wall time that happens twice fires at its first occurrence.
		{ny, "30 1 * * *", "2026-11-01T00:00:00-04:00", "2026-11-01T01:30:00-04:00"},
		{ny, "30 1 * * *", "2026-11-01T01:30:00-04:00", "2026-11-02T01:30:00-05:00"},
		{ny, "30 1 * * *", "2026-11-01T01:10:00-05:00", "2026-11-02T01:30:00-05:00"}, // second pass: already fired
		{ny, "0 * * * *", "2026-11-01T01:00:00-04:00", "2026-11-01T02:00:00-05:00"},
		{ny, "*/30 * * * *", "2026-11-01T01:30:00-04:00", "2026-11-01T02:00:00-05:00"},
		{ny, "* * * * *", "2026-11-01T01:59:00-04:00", "2026-11-01T02:00:00-05:00"},
		{ny, "0 2 * * *", "2026-11-01T01:30:00-04:00", "2026-11-01T02:00:00-05:00"},
		{berlin, "30 2 * * *", "2026-10-25T00:00:00+02:00", "2026-10-25T02:30:00+02:00"},
		{berlin, "30 2 * * *", "2026-10-25T02:30:00+02:00", "2026-10-26T02:30:00+01:00"},
		{berlin, "30 2 * * *", "2026-10-25T02:00:00+01:00", "2026-10-26T02:30:00+01:00"},
		{berlin, "0 3 * * *", "2026-10-25T02:59:00+01:00", "2026-10-25T03:00:00+01:00"},

		// @every stays on the epoch grid whatever the zone.
		{ny, "@every 1h", "2026-03-08T01:30:00-05:00", "2026-03-08T03:00:00-04:00"},
		{ny, "@every 1h", "2026-11-01T01:30:00-04:00", "2026-11-01T01:00:00-05:00"},
		{ny, "@every 24h", "2026-01-05T12:00:00-05:00", "2026-01-05T19:00:00-05:00"},
		{berlin, "@every 90s", "1970-01-01T01:00:00+01:00", "1970-01-01T01:01:30+01:00"},
	}
	for _, tt := range tests {
		s := mustParse(t, tt.expr, tt.zone)
		from := mustTime(t, tt.from)
		got := s.Next(from)
		want := mustTime(t, tt.want)
		if !got.Equal(want) {
			t.Errorf("%s %q.Next(%s) = %s, want %s", tt.zone, tt.expr, tt.from, got.Format(time.RFC3339), tt.want)
		}
		if got.Location() != tt.zone {
			t.Errorf("%s %q.Next(%s) is in %v", tt.zone, tt.expr, tt.from, got.Location())
		}
		// The same instant in another zone gives the same answer.
		if other := s.Next(from.UTC()); !other.Equal(got) {
			t.Errorf("%s %q.Next(%s in UTC) = %s, want %s", tt.zone, tt.expr, tt.from, other, got)
		}
	}
}

// matchesWall reports whether the cron fields match a wall-clock time.
func (s *Schedule) matchesWall(w time.Time) bool {
	return s.minute&(1<<w.Minute()) != 0 && s.hour&(1<<w.Hour()) != 0 &&
		s.month&(1<<int(w.Month())) != 0 && s.dayMatches(w.Year(), int(w.Month()), w.Day())
}

// bruteFires lists the fire times of a cron schedule in (from, to] by
// looking at every minute, for zones whose offsets are whole minutes. It
// states the rules directly: a wall time fires at its first occurrence, and
// wall times skipped by a gap fire as far after the instant before the gap
// as they are after its wall time.
func bruteFires(s *Schedule, from, to time.Time) []time.Time {
	var fires []time.Time
	u := from.Truncate(time.Minute).Add(-26 * time.Hour)
	wallOf := func(u time.Time) time.Time {
		y, mo, d := u.In(s.loc).Date()
		h, mi, sec := u.In(s.loc).Clock()
		return time.Date(y, mo, d, h, mi, sec, 0, time.UTC)
	}
	prevU, maxW := u, wallOf(u)
	for u = u.Add(time.Minute); !u.After(to); u = u.Add(time.Minute) {
		w := wallOf(u)
		for skipped := maxW.Add(time.Minute); skipped.Before(w); skipped = skipped.Add(time.Minute) {
			if s.matchesWall(skipped) {
				fires = append(fires, prevU.Add(skipped.Sub(maxW)))
			}
		}
		if w.After(maxW) {
			if s.matchesWall(w) {
				fires = append(fires, u)
			}
			maxW = w
		}
		prevU = u
	}
	slices.SortFunc(fires, time.Time.Compare)
	fires = slices.CompactFunc(fires, time.Time.Equal)
	return slices.DeleteFunc(fires, func(f time.Time) bool { return !f.After(from) || f.After(to) })
}

// TestNextAgainstBruteForce compares Next with a minute-by-minute scan
// around every daylight-saving change of 2026 in both zones.
func TestNextAgainstBruteForce(t *testing.T) {
	windows := []struct {
		zone string
		day  string // a day with a change
	}{
		{"America/New_York", "2026-03-08T00:00:00-05:00"},
		{"America/New_York", "2026-11-01T00:00:00-04:00"},
		{"Europe/Berlin", "2026-03-29T00:00:00+01:00"},
		{"Europe/Berlin", "2026-10-25T00:00:00+02:00"},
	}
	exprs := []string{
		"* * * * *", "*/30 * * * *", "0 * * * *", "45 * * * *", "*/7 1-3 * * *",
		"0 2 * * *", "30 2 * * *", "59 1 * * *", "0 3 * * *", "30 1 * * *", "0,30 0-4 * * sun",
	}
	for _, w := range windows {
		loc := mustLoad(t, w.zone)
		day := mustTime(t, w.day)
		from, to := day.Add(-12*time.Hour), day.Add(36*time.Hour)
		for _, expr := range exprs {
			s := mustParse(t, expr, loc)
			end := to.Add(26 * time.Hour)
			fires := bruteFires(s, from.Add(-26*time.Hour), end)
			for q := from; q.Before(to); q = q.Add(7*time.Minute + 13*time.Second) {
				i, _ := slices.BinarySearchFunc(fires, q, func(f, q time.Time) int {
					if f.After(q) {
						return 1
					}
					return -1
				})
				got := s.Next(q)
				if i == len(fires) {
					if !got.After(end) {
						t.Fatalf("%s %q.Next(%s) = %s, brute force says none up to %s", w.zone, expr, q.In(loc).Format(time.RFC3339), got.Format(time.RFC3339), end.In(loc).Format(time.RFC3339))
					}
					continue
				}
				if !got.Equal(fires[i]) {
					t.Fatalf("%s %q.Next(%s) = %s, brute force says %s", w.zone, expr, q.In(loc).Format(time.RFC3339), got.Format(time.RFC3339), fires[i].In(loc).Format(time.RFC3339))
				}
			}
		}
	}
}

// TestNextStrictlyIncreasing follows hourly and half-hourly schedules through
// a whole year in both zones: every fire is after the one before, and each
// zone fires once per wall-clock slot except the slots pushed onto an
// existing fire by the spring-forward gap (02:00 -> 03:00, 02:30 -> 03:30).
func TestNextStrictlyIncreasing(t *testing.T) {
	tests := []struct {
		expr      string
		slots     int // wall-clock slots in 2026
		gapMerges int // slots in the gap that land on another slot's fire
	}{
		{"0 * * * *", 365 * 24, 1},
		{"*/30 * * * *", 365 * 48, 2},
		{"@every 1h", 365 * 24, 0}, // 8760 real hours, whatever the wall clock does
	}
	for _, zone := range []string{"America/New_York", "Europe/Berlin"} {
		loc := mustLoad(t, zone)
		start := time.Date(2026, 1, 1, 0, 0, 0, 0, loc)
		end := time.Date(2027, 1, 1, 0, 0, 0, 0, loc)
		for _, tt := range tests {
			s := mustParse(t, tt.expr, loc)
			count := 0
			prev := start.Add(-time.Nanosecond)
			for {
				next := s.Next(prev)
				if !next.After(prev) {
					t.Fatalf("%s %q.Next(%s) = %s: not after", zone, tt.expr, prev, next)
				}
				if !next.Before(end) {
					break
				}
				if again := s.Next(next); !again.After(next) {
					t.Fatalf("%s %q: Next(%s) = %s: not after", zone, tt.expr, next, again)
				}
				count++
				prev = next
			}
			if want := tt.slots - tt.gapMerges; count != want {
				t.Errorf("%s %q fired %d times in 2026, want %d", zone, tt.expr, count, want)
			}
		}
	}
}

// TestNextImpossible checks that schedules that never fire return the zero
// Time, quickly.
func TestNextImpossible(t *testing.T) {
	loc := mustLoad(t, "Europe/Berlin")
	for _, expr := range []string{"0 0 30 2 *", "0 0 31 2,4,6,9,11 *", "* * 31 11 *"} {
		s := mustParse(t, expr, loc)
		for _, from := range []time.Time{time.Date(2026, 5, 1, 0, 0, 0, 0, loc), {}, time.Date(9999, 12, 31, 23, 59, 0, 0, time.UTC)} {
			if got := s.Next(from); !got.IsZero() {
				t.Errorf("%q.Next(%s) = %s, want the zero Time", expr, from, got)
			}
		}
	}
}

// TestNextSameEverywhere checks that the answer depends on the instant, not
// on the zone or monotonic reading of the time passed in.
func TestNextSameEverywhere(t *testing.T) {
	loc := mustLoad(t, "America/New_York")
	berlin := mustLoad(t, "Europe/Berlin")
	for _, expr := range []string{"*/5 * * * *", "0 2 * * *", "@every 90s", "0 0 29 2 *"} {
		a := mustParse(t, expr, loc)
		b := mustParse(t, expr, loc)
		now := time.Now() // carries a monotonic reading
		want := a.Next(now)
		for _, from := range []time.Time{now.Round(0), now.UTC(), now.In(berlin)} {
			if got := b.Next(from); !got.Equal(want) {
				t.Errorf("%q.Next(%s) = %s, want %s", expr, from, got, want)
			}
		}
	}
}

// TestEveryAligned checks that @every fires only on multiples of its
// interval since the epoch, and never skips one.
func TestEveryAligned(t *testing.T) {
	loc := mustLoad(t, "America/New_York")
	for _, d := range []string{"1s", "7s", "90s", "1h", "13h", "24h", "1000h"} {
		s := mustParse(t, "@every "+d, loc)
		step := int64(mustDuration(t, d) / time.Second)
		for q := time.Date(1969, 6, 1, 0, 0, 0, 0, time.UTC); q.Year() < 2040; q = q.Add(17*time.Hour + 29*time.Minute + 123456789) {
			got := s.Next(q)
			if got.Unix()%step != 0 || got.Nanosecond() != 0 {
				t.Fatalf("@every %s: Next(%s) = %s is not a multiple of %ds", d, q, got, step)
			}
			if !got.After(q) || got.Add(-time.Duration(step)*time.Second).After(q) {
				t.Fatalf("@every %s: Next(%s) = %s is not the first multiple after", d, q, got)
			}
		}
	}
}

func mustDuration(t *testing.T, s string) time.Duration {
	t.Helper()
	d, err := time.ParseDuration(s)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestWallInstant checks the conversion of wall times to instants on its
// own, including the example of the package documentation.
func TestWallInstant(t *testing.T) {
	ny := mustLoad(t, "America/New_York")
	berlin := mustLoad(t, "Europe/Berlin")
	tests := []struct {
		zone  *time.Location
		wall  string // as a UTC time
		want  string
		moved bool
	}{
		{ny, "2026-03-08T02:30:00Z", "2026-03-08T03:30:00-04:00", true},  // gap
		{ny, "2026-03-08T01:59:00Z", "2026-03-08T01:59:00-05:00", false}, // before the gap
		{ny, "2026-03-08T03:00:00Z", "2026-03-08T03:00:00-04:00", false}, // after the gap
		{ny, "2026-11-01T01:30:00Z", "2026-11-01T01:30:00-04:00", false}, // overlap: first
		{ny, "2026-11-01T02:00:00Z", "2026-11-01T02:00:00-05:00", false},
		{berlin, "2026-03-29T02:00:00Z", "2026-03-29T03:00:00+02:00", true},
		{berlin, "2026-10-25T02:59:00Z", "2026-10-25T02:59:00+02:00", false},
		{time.UTC, "2026-06-01T00:00:00Z", "2026-06-01T00:00:00Z", false},
	}
	for _, tt := range tests {
		got, moved := wallInstant(mustTime(t, tt.wall), tt.zone)
		if got.Format(time.RFC3339) != tt.want || moved != tt.moved {
			t.Errorf("wallInstant(%s %s) = %s, %t, want %s, %t", tt.wall, tt.zone, got.Format(time.RFC3339), moved, tt.want, tt.moved)
		}
	}
}

func BenchmarkNext(b *testing.B) {
	ny := mustLoad(b, "America/New_York")
	from := time.Date(2026, 3, 1, 12, 34, 56, 0, ny)
	for _, expr := range []string{"* * * * *", "*/15 9-17 * * mon-fri", "0 0 29 2 *", "0 0 30 2 *", "30 2 * * *", "@every 90s"} {
		s := mustParse(b, expr, ny)
		b.Run(strings.ReplaceAll(expr, " ", "_"), func(b *testing.B) {
			for b.Loop() {
				s.Next(from)
			}
		})
	}
}

// BenchmarkNextGap asks for fires next to spring-forward gaps, where wall
// times in the gap fire among the real ones after it.
func BenchmarkNextGap(b *testing.B) {
	for _, bm := range []struct{ zone, expr, from string }{
		{"America/New_York", "* * * * *", "2026-03-08T01:59:30-05:00"},
		{"Australia/Lord_Howe", "*/7 * * * *", "2025-10-05T02:41:56+11:00"},
		{"Pacific/Apia", "* * * * *", "2011-12-31T12:00:00+14:00"}, // a day skipped
	} {
		s := mustParse(b, bm.expr, mustLoad(b, bm.zone))
		from := mustTime(b, bm.from)
		b.Run(bm.zone, func(b *testing.B) {
			for b.Loop() {
				s.Next(from)
			}
		})
	}
}

// TestNextOddOffset checks a zone whose offset was not a whole number of
// minutes (Amsterdam, +00:19:32 until 1937): fires are at whole minutes of
// its wall clock.
func TestNextOddOffset(t *testing.T) {
	loc := mustLoad(t, "Europe/Amsterdam")
	s := mustParse(t, "*/10 12 * * *", loc)
	from := time.Date(1930, 1, 15, 12, 5, 0, 0, time.UTC) // 12:24:32 local (AMT)
	want := []string{"12:30:00", "12:40:00", "12:50:00", "12:00:00"}
	for i, w := range want {
		next := s.Next(from)
		if got := next.Format(time.TimeOnly); got != w || !next.After(from) {
			t.Fatalf("fire %d: Next(%s) = %s, want %s local", i, from, next, w)
		}
		if _, off := next.Zone(); off%60 == 0 {
			t.Fatalf("fire %d: %s: want an offset with seconds", i, next)
		}
		from = next
	}
}
