package ffctl

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/flowfabric/ff/runtime/internal/timespan"
)

// TestClipKeepsUTF8: clip shortens the error and wait hint columns of
// ffrun get; it sliced bytes, so an error in French or Japanese was cut
// inside a character. It now cuts at a character boundary.
func TestClipKeepsUTF8(t *testing.T) {
	for _, s := range []string{
		strings.Repeat("é", 80),       // 2 bytes each: byte 100 is a boundary, 99 is not
		"x" + strings.Repeat("é", 80), // byte 100 falls inside an é
		strings.Repeat("日本語のエラー", 10), // 3 bytes each
		"a" + strings.Repeat("🚀", 60), // 4 bytes each
		"ab" + strings.Repeat("€ rejected ", 20),
	} {
		for _, n := range []int{80, 100, 200} {
			got := clip(s, n)
			if !utf8.ValidString(got) || len(got) > n+len("…") || len(s) > n && !strings.HasSuffix(got, "…") {
				t.Errorf("clip(%q…, %d) = %q: want valid UTF-8 of at most %d bytes and …", string([]rune(s)[:4]), n, got, n)
			}
		}
	}
	if got := clip("short", 10); got != "short" {
		t.Errorf("clip(short, 10) = %q", got)
	}
}

// TestWatchTimeColumn: Follow prints the time since it started in a
// column of six; as whole milliseconds, from ten seconds on ("10109ms")
// it pushed every line right. It now keeps within the column.
func TestWatchTimeColumn(t *testing.T) {
	for _, c := range []struct {
		d    time.Duration
		want string
	}{
		{0, "0ms"},
		{999 * time.Millisecond, "999ms"},
		{9999 * time.Millisecond, "9999ms"},
		{10109 * time.Millisecond, "10.1s"},
		{59999 * time.Millisecond, "59.9s"},
		{80 * time.Second, "1m20s"},
		{59*time.Minute + 59*time.Second, "59m59s"},
		{3*time.Hour + 5*time.Minute, "3h05m"},
	} {
		// since measures from now: allow the test's own few milliseconds.
		got := since(time.Now().Add(-c.d))
		if len(got) > 6 || (got != c.want && c.d >= 10*time.Second) || (c.d < 10*time.Second && !strings.HasSuffix(got, "ms")) {
			t.Errorf("since(%v ago) = %q, want %q within the %%6s column", c.d, got, c.want)
		}
	}
}

// TestDurationsOneRule: ffrun get printed a member that took no time as
// "0s" and one that took a millisecond as "1ms" (time.Duration's String),
// and watch wrote its times another way again. Every time span a
// command prints is now written by one rule, Follow's.
func TestDurationsOneRule(t *testing.T) {
	from := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		d    time.Duration
		want string
	}{
		{0, "0ms"},
		{time.Millisecond, "1ms"},
		{1500 * time.Microsecond, "1ms"},
		{9999 * time.Millisecond, "9999ms"},
		{12345 * time.Millisecond, "12.3s"},
		{80 * time.Second, "1m20s"},
		{3*time.Hour + 5*time.Minute, "3h05m"},
	} {
		to := from.Add(c.d)
		if got := took(&from, &to); got != c.want {
			t.Errorf("took(%v) = %q, want %q", c.d, got, c.want)
		}
		if got := timespan.Format(c.d); got != c.want {
			t.Errorf("timespan.Format(%v) = %q, want %q", c.d, got, c.want)
		}
	}
	if got := took(&from, nil); got != "-" {
		t.Errorf("took of a member not ended = %q, want -", got)
	}
}
