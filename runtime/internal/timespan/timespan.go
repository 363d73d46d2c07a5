// Package timespan writes a time span as every ffrun command and the Go
// client's messages write one, in at most six characters up to 99 hours.
package timespan

import (
	"fmt"
	"time"
)

// Format writes d as whole milliseconds up to 10 s ("0ms", "9999ms"),
// then tenths of a second ("59.9s"), minutes and seconds ("59m59s"),
// hours and minutes ("99h59m"), each cut, not rounded.
func Format(d time.Duration) string {
	switch {
	case d < 10*time.Second:
		return fmt.Sprintf("%dms", d.Milliseconds())
	case d < time.Minute:
		return fmt.Sprintf("%d.%ds", d/time.Second, d%time.Second/(100*time.Millisecond))
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", d/time.Minute, d%time.Minute/time.Second)
	}
	return fmt.Sprintf("%dh%02dm", d/time.Hour, d%time.Hour/time.Minute)
}
