package cron

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// oracleFires lists, sorted and without duplicates, the fire times of the
// cron schedule s from the wall times in [from, to) (UTC times read as wall
// times of s's zone), by looking at every minute. It states the rules
// directly and shares no code with Next: a wall time fires at its first
// occurrence, and a wall time that does not occur (it is in a gap) fires at
// the wall time read with the offset in effect two days before. The list
// holds every fire in [lo, hi): wall times outside the window fire outside.
func oracleFires(s *Schedule, from, to time.Time) (fires []time.Time, lo, hi time.Time) {
	loc := s.loc
	var offsets []int // every offset in effect around the window
	for u := from.Add(-72 * time.Hour); u.Before(to.Add(72 * time.Hour)); u = u.Add(time.Hour) {
		if _, off := u.In(loc).Zone(); !slices.Contains(offsets, off) {
			offsets = append(offsets, off)
		}
	}
	lo = from.Add(-time.Duration(slices.Min(offsets)) * time.Second)
	hi = to.Add(-time.Duration(slices.Max(offsets)) * time.Second)
	for w := from; w.Before(to); w = w.Add(time.Minute) {
		if s.minute&(1<<w.Minute()) == 0 || s.hour&(1<<w.Hour()) == 0 || s.month&(1<<int(w.Month())) == 0 {
			continue
		}
		domOK := s.dom&(1<<w.Day()) != 0
		dowOK := s.dow&(1<<int(w.Weekday())) != 0
		var day bool
		switch {
		case s.domStar && s.dowStar:
			day = true
		case s.domStar:
			day = dowOK
		case s.dowStar:
			day = domOK
		default:
			day = domOK || dowOK
		}
		if !day {
			continue
		}
		var fire time.Time
		for _, off := range offsets {
			u := w.Add(-time.Duration(off) * time.Second).In(loc)
			y, mo, d := u.Date()
			h, mi, sec := u.Clock()
			if time.Date(y, mo, d, h, mi, sec, 0, time.UTC).Equal(w) && (fire.IsZero() || u.Before(fire)) {
				fire = u
			}
		}
		if fire.IsZero() { // in a gap
			_, off := w.Add(-48 * time.Hour).In(loc).Zone()
			fire = w.Add(-time.Duration(off) * time.Second)
		}
		fires = append(fires, fire)
	}
	slices.SortFunc(fires, time.Time.Compare)
	return slices.CompactFunc(fires, time.Time.Equal), lo, hi
}

// transitions returns the instants in [a, b) at which loc's offset changes,
// to within 15 minutes.
func transitions(loc *time.Location, a, b time.Time) []time.Time {
	var out []time.Time
	_, prev := a.In(loc).Zone()
	for u := a; u.Before(b); u = u.Add(15 * time.Minute) {
		if _, off := u.In(loc).Zone(); off != prev {
			out = append(out, u)
			prev = off
		}
	}
	return out
}

// TestNextAgainstOracle compares Next with oracleFires around every change
// of offset in a year or so of zones with unusual ones: half-hour changes
// (Lord Howe), a skipped day (Apia, 2011), changes at midnight (Sao Paulo),
// offsets with 45 minutes (Chatham), negative summer time (Dublin), 3-hour
// changes (Casey), changes at 00:01 (St John's). Next is asked from instants
// spread over the two days around each change, and from each fire near the
// change and the instant before it, as a runner chaining fires does.
func TestNextAgainstOracle(t *testing.T) {
	exprs := []string{
		"* * * * *", "*/7 * * * *", "30 2 * * *", "0 * * * *", "15,45 1-3 * * *", "0 0 * * 0", "0 0 1-7 * 1",
		"59 23 * * *", "*/30 * * * *", "0 0 * * *", "30 0 * * *", "45 23 * * *", "0 12 * * *",
	}
	zones := []oracleZone{
		{"Australia/Lord_Howe", "2025-01-01", "2026-01-01"},
		{"Pacific/Apia", "2011-12-01", "2012-01-15"},
		{"America/Sao_Paulo", "2018-01-01", "2019-12-31"},
		{"Pacific/Chatham", "2025-01-01", "2026-01-01"},
		{"America/Havana", "2025-01-01", "2026-01-01"},
		{"Europe/Dublin", "2025-01-01", "2026-01-01"},
		{"America/New_York", "2026-01-01", "2027-01-01"},
		{"Antarctica/Casey", "2016-01-01", "2017-01-01"}, // 3 hours forward at midnight
		{"America/St_Johns", "1988-01-01", "1989-01-01"}, // 2-hour summer time, changes at 00:01
	}
	checkAgainstOracle(t, exprs, zones, 240*time.Hour) // enough for the weekly schedules
}

// oracleZone is a zone and the span, [a, b) as dates, whose changes of
// offset checkAgainstOracle looks at.
type oracleZone struct {
	name string
	a, b string
}

// checkAgainstOracle compares Next with oracleFires around every change of
// offset of zones, for each of exprs: Next is asked from instants spread
// over the two days around each change, and from each fire near the change
// and the instant before it, as a runner chaining fires does. The oracle
// lists the fires from three days before a change to horizon after it.
func checkAgainstOracle(t *testing.T, exprs []string, zones []oracleZone, horizon time.Duration) {
	t.Helper()
	const around = 26 * time.Hour // Next is asked this far either side of a change
	for _, z := range zones {
		loc := mustLoad(t, z.name)
		trs := transitions(loc, mustTime(t, z.a+"T00:00:00Z"), mustTime(t, z.b+"T00:00:00Z"))
		if len(trs) == 0 {
			t.Fatalf("%s: no changes of offset", z.name)
		}
		for _, expr := range exprs {
			s := mustParse(t, expr, loc)
			for _, tr := range trs {
				// Wall times from three days before the change to horizon
				// after it.
				from, to := tr.Add(-around), tr.Add(around)
				wall := wallOf(tr.In(loc)).Truncate(time.Minute)
				fires, lo, hi := oracleFires(s, wall.Add(-72*time.Hour), wall.Add(horizon))
				check := func(q time.Time) {
					t.Helper()
					i, _ := slices.BinarySearchFunc(fires, q, func(f, q time.Time) int {
						if f.After(q) {
							return 1
						}
						return -1
					})
					if q.Before(lo) || i == len(fires) || !fires[i].Before(hi) {
						t.Fatalf("%s %q: the oracle's fires, complete from %s to %s, have no answer for %s", z.name, expr, lo, hi, q)
					}
					if got := s.Next(q); !got.Equal(fires[i]) {
						t.Errorf("%s %q.Next(%s) = %s, oracle %s", z.name, expr, q.In(loc).Format(time.RFC3339Nano), got.In(loc).Format(time.RFC3339), fires[i].In(loc).Format(time.RFC3339))
					}
				}
				for q := from; q.Before(to); q = q.Add(23*time.Minute + 7*time.Second) {
					check(q)
				}
				// Chained from each fire through the change, and through a
				// gap's length after it, where moved fires are.
				_, before := tr.Add(-time.Hour).In(loc).Zone()
				_, after := tr.In(loc).Zone()
				gap := time.Duration(max(after-before, 0)) * time.Second
				for _, f := range fires {
					if f.Before(tr.Add(-time.Hour)) || f.After(tr.Add(gap+time.Hour)) {
						continue
					}
					check(f)
					check(f.Add(-time.Nanosecond))
				}
			}
		}
	}
}

// TestNextHalfHourGap follows "*/7 * * * *" through the gap on Lord Howe
// Island, whose clocks spring forward 30 minutes (02:00 to 02:30) on
// 2025-10-05, as a runner does: each fire from the one before. The wall
// times in the gap (02:00 02:07 02:14 02:21 02:28) fire 30 minutes later,
// among the real wall times after the gap, and none is skipped.
func TestNextHalfHourGap(t *testing.T) {
	loc := mustLoad(t, "Australia/Lord_Howe")
	s := mustParse(t, "*/7 * * * *", loc)
	at := time.Date(2025, 10, 5, 1, 50, 0, 0, loc)
	var got []string
	for range 13 {
		next := s.Next(at)
		if !next.After(at) {
			t.Fatalf("Next(%s) = %s: not after", at, next)
		}
		at = next
		got = append(got, at.Format("15:04"))
	}
	want := "[01:56 02:30 02:35 02:37 02:42 02:44 02:49 02:51 02:56 02:58 03:00 03:07 03:14]"
	if fmt.Sprint(got) != want {
		t.Fatalf("fires from 01:50 = %v, want %s", got, want)
	}
}
