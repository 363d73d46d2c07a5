package store

import (
	"fmt"
	"strconv"
	"strings"
)

// wakeChannel is the pub/sub channel of wake-ups, after Config.KeyPrefix.
const wakeChannel = "ff:wake"

// Wake is one wake-up: executions of Namespace and Lane became eligible on
// Partition. Messages are "<partition>:<namespace>:<lane>"; names cannot
// contain ':'.
//
// A wake-up is published by every FCALL that makes at least one execution
// of a lane eligible, whether or not the lane's eligible index was empty
// before: create without delay, delayed promotion, a retry with zero
// backoff, requeue after lease expiry or revoke, a flow's roots and the
// members their upstreams' ends make eligible (dependency resolution; a
// member a hand-off grants at once is indexed nowhere and wakes nobody),
// a replay, and unblocking (budgets, quotas, routes). One message per lane
// per call (a batch create of 50 executions on one lane publishes once).
// Pub/sub is at most once: a lost message delays a claim until the
// long-poll's own timeout but never loses work.
type Wake struct {
	Partition int
	Namespace string
	Lane      string
}

// String returns the message form of w.
func (w Wake) String() string {
	return fmt.Sprintf("%d:%s:%s", w.Partition, w.Namespace, w.Lane)
}

// ParseWake parses a message published on the wake channel.
func ParseWake(msg string) (Wake, error) {
	p, rest, ok1 := strings.Cut(msg, ":")
	ns, lane, ok2 := strings.Cut(rest, ":")
	n, err := strconv.Atoi(p)
	if !ok1 || !ok2 || err != nil || n < 0 || ns == "" || lane == "" {
		return Wake{}, fmt.Errorf("store: malformed wake message %q", msg)
	}
	return Wake{Partition: n, Namespace: ns, Lane: lane}, nil
}
