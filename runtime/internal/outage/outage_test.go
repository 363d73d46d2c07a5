package outage

import (
	"log/slog"
	"testing"
)

func TestLog(t *testing.T) {
	var l Log
	if l.Ended() {
		t.Error("Ended with no outage reports one ended")
	}
	for i, want := range []struct {
		level slog.Level
		first bool
	}{{slog.LevelWarn, true}, {slog.LevelDebug, false}, {slog.LevelDebug, false}} {
		if level, first := l.Failed(); level != want.level || first != want.first {
			t.Errorf("failure %d: %v %v, want %v %v", i, level, first, want.level, want.first)
		}
	}
	if !l.Ended() {
		t.Error("Ended after failures does not report the outage ended")
	}
	if l.Ended() {
		t.Error("a second Ended reports another outage ended")
	}
	if level, first := l.Failed(); level != slog.LevelWarn || !first {
		t.Errorf("the first failure after an outage ended: %v %v, want a new outage", level, first)
	}
}
