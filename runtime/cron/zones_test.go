package cron

import (
	"slices"
	"testing"
	"time"
)

// TestNextAgainstOracle's check on changes of offset it does not cover:
// Ramadan's summer time taken back and restored (Casablanca: a fall-back
// in spring), a 2-hour gap at 01:00 UTC (Troll), a skipped day
// (Kiritimati, 1994-12-31), permanent changes without a way back (Moscow
// 2011 and 2014), changes at 24:00 (Santiago), at 00:00 (Tehran 2022) and
// by 30 minutes at 02:30 (Caracas 2007, 2016).
func TestNextAgainstOracleMoreZones(t *testing.T) {
	exprs := []string{
		"* * * * *", "*/7 * * * *", "30 2 * * *", "0 * * * *", "15,45 1-3 * * *", "0 0 * * 0", "0 0 1-7 * 1",
		"59 23 * * *", "*/30 * * * *", "0 0 * * *", "30 0 * * *", "45 23 * * *", "0 12 * * *", "0 0 31 12 *", "0 0 1 1 *",
	}
	zones := []struct {
		name string
		a, b string
	}{
		{"Africa/Casablanca", "2025-01-01", "2026-01-01"},
		{"Antarctica/Troll", "2025-01-01", "2026-01-01"},
		{"Pacific/Kiritimati", "1994-12-01", "1995-01-15"},
		{"Europe/Moscow", "2011-01-01", "2011-12-31"},
		{"Europe/Moscow", "2014-10-01", "2014-11-30"},
		{"America/Santiago", "2025-01-01", "2026-01-01"},
		{"Asia/Tehran", "2022-01-01", "2023-01-01"},
		{"America/Caracas", "2007-12-01", "2008-01-01"},
		{"America/Caracas", "2016-04-01", "2016-06-01"},
	}
	const around = 26 * time.Hour
	for _, z := range zones {
		loc := mustLoad(t, z.name)
		trs := transitions(loc, mustTime(t, z.a+"T00:00:00Z"), mustTime(t, z.b+"T00:00:00Z"))
		if len(trs) == 0 {
			t.Fatalf("%s: no changes of offset between %s and %s", z.name, z.a, z.b)
		}
		for _, expr := range exprs {
			s := mustParse(t, expr, loc)
			for _, tr := range trs {
				from, to := tr.Add(-around), tr.Add(around)
				wall := wallOf(tr.In(loc)).Truncate(time.Minute)
				fires, lo, hi := oracleFires(s, wall.Add(-72*time.Hour), wall.Add(24*400*time.Hour))
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
						t.Errorf("%s %q.Next(%s) = %s, oracle %s", z.name, expr, q.In(loc).Format(time.RFC3339Nano),
							got.In(loc).Format(time.RFC3339), fires[i].In(loc).Format(time.RFC3339))
					}
				}
				for q := from; q.Before(to); q = q.Add(23*time.Minute + 7*time.Second) {
					check(q)
				}
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
