// Package outage keeps the failures of one spell of trouble (Valkey
// unreachable, restarting, refusing writes) from flooding the log at the
// rate of what fails: the first failure of an outage is logged at warn
// level, the next ones at debug level, until a success ends the outage.
//
// Each component that logs its own failures (the API's 503 answers, the
// /metrics scrape, the batch calls' items) keeps a Log of its own.
package outage

import (
	"log/slog"
	"sync/atomic"
)

// Log records whether an outage is under way. The zero value is ready to
// use, with no outage; it is safe for concurrent use.
type Log struct{ down atomic.Bool }

// Failed records a failure and returns the level to log it at: warn for
// the first of an outage, debug for the next ones; first says which.
func (l *Log) Failed() (level slog.Level, first bool) {
	if l.down.Swap(true) {
		return slog.LevelDebug, false
	}
	return slog.LevelWarn, true
}

// Ended records a success: the next failure starts a new outage. It
// reports whether this one ended an outage (worth a line at info level
// for those that say so).
func (l *Log) Ended() bool { return l.down.Swap(false) }
