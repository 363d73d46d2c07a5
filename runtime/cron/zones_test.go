package cron

import (
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
		"59 23 * * *", "*/30 * * * *", "0 0 * * *", "30 0 * * *", "45 23 * * *", "0 12 * * *",
	}
	// The yearly schedules need a horizon of a year; the others, whose
	// fires come at least weekly, a horizon of ten days (an oracle over a
	// year of "* * * * *" lists half a million fires per change).
	yearly := []string{"0 0 31 12 *", "0 0 1 1 *"}
	zones := []oracleZone{
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
	checkAgainstOracle(t, exprs, zones, 240*time.Hour)
	checkAgainstOracle(t, yearly, zones, 400*24*time.Hour)
}
