package ffctl

import (
	"testing"
	"time"
)

// TestZoned: a next fire on a whole minute reads to the minute, one with
// seconds (an @every schedule) to the second, in the schedule's zone.
func TestZoned(t *testing.T) {
	at := time.Date(2026, 11, 22, 16, 19, 0, 0, time.UTC)
	sec := at.Add(35 * time.Second)
	for _, tc := range []struct {
		t    *time.Time
		tz   string
		want string
	}{
		{&at, "UTC", "2026-11-22 16:19 UTC"},
		{&sec, "UTC", "2026-11-22 16:19:35 UTC"},
		{&at, "Asia/Tokyo", "2026-11-23 01:19 JST"},
		{nil, "UTC", "-"},
	} {
		if got := zoned(tc.t, tc.tz); got != tc.want {
			t.Errorf("zoned(%v, %s) = %q, want %q", tc.t, tc.tz, got, tc.want)
		}
	}
}
