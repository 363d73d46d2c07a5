package cron

import (
	"testing"
	"time"
)

// FuzzParse checks that Parse never panics, and that for every schedule it
// accepts, Next moves strictly forward (or finds nothing) from instants
// around daylight-saving changes and the ends of the calendar.
func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		"* * * * *", "0 0 1 1 *", "*/15 * * * *", "10-50/20 1,2,3 * * *", "45/10 * * * *",
		"0 9-17/2 * JAN-mar mon-FRI", "0 0 13 * fri", "0 0 29 2 *", "0 0 30 2 *", "0 0 31 * *",
		"0 0 * * 7", "0 0 * * 0,7", "30 2 * * *", "30 1 * * sun", "\t0  0 * *\t*",
		"@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly",
		"@every 90s", "@every 1h", "@every 8784h", "@every 1.5s", "@every 0s", "@nope",
		"61 * * * *", "5-3 * * * *", "*/0 * * * *", "* * * * mon-", "0 0 * * * *", "", "1,,2 * * * *",
		"*/2/3 * * * *", "99999999999999999999 * * * *", "1-2-3 * * * *",
	} {
		f.Add(seed)
	}
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		f.Fatal(err)
	}
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		f.Fatal(err)
	}
	froms := []time.Time{
		{},
		time.Date(1969, 12, 31, 23, 59, 59, 500, time.UTC),
		time.Date(2026, 3, 8, 1, 59, 30, 0, ny),
		time.Date(2026, 3, 8, 3, 10, 0, 0, ny),
		time.Date(2026, 11, 1, 1, 30, 0, 0, ny),
		time.Date(2026, 11, 1, 6, 30, 0, 0, time.UTC), // 01:30 EST, the second pass
		time.Date(2026, 3, 29, 2, 0, 0, 0, time.UTC),
		time.Date(2026, 10, 25, 0, 59, 0, 0, time.UTC),
		time.Date(2028, 2, 28, 23, 59, 59, 999999999, time.UTC),
		time.Date(9999, 12, 31, 23, 59, 0, 0, time.UTC),
	}
	f.Fuzz(func(t *testing.T, expr string) {
		for _, loc := range []*time.Location{nil, ny, berlin} {
			s, err := Parse(expr, loc)
			if err != nil {
				if s != nil {
					t.Fatalf("Parse(%q) returned a schedule and error %v", expr, err)
				}
				if err.Error() == "" {
					t.Fatalf("Parse(%q) returned an empty error", expr)
				}
				return
			}
			if s.String() != expr {
				t.Fatalf("Parse(%q).String() = %q", expr, s.String())
			}
			for _, from := range froms {
				next := s.Next(from)
				if next.IsZero() {
					continue
				}
				if !next.After(from) {
					t.Fatalf("%s %q.Next(%s) = %s: not after", s.loc, expr, from, next)
				}
				if next.After(from.AddDate(searchYears, 0, 2)) {
					t.Fatalf("%s %q.Next(%s) = %s: more than %d years on", s.loc, expr, from, next, searchYears)
				}
				if next.Location() != s.loc {
					t.Fatalf("%s %q.Next(%s) is in %s", s.loc, expr, from, next.Location())
				}
				if s.every == 0 && loc == nil && !s.matchesWall(next) {
					t.Fatalf("%q.Next(%s) = %s does not match the fields", expr, from, next)
				}
				if again := s.Next(next); !again.IsZero() && !again.After(next) {
					t.Fatalf("%s %q.Next(%s) = %s: not after", s.loc, expr, next, again)
				}
			}
		}
	})
}
