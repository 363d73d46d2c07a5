package api

import (
	"sort"
	"testing"
	"time"

	"github.com/flowfabric/ff/runtime/wire"
)

// TestDurationBucketsTellLongPollsApart: the request duration histogram
// puts a long-poll that waited its whole wait, up to the longest the API
// allows (claims, lease watches, run results: 60 s), in a finite bucket
// of its own, apart from one answered after half of it, and apart from a
// request that outlived every wait (stuck). With 30 s as the top bound, a
// 31 s claim and a 60 s one were both +Inf.
func TestDurationBucketsTellLongPollsApart(t *testing.T) {
	bucket := func(d time.Duration) int { return sort.SearchFloat64s(httpDurationBounds, d.Seconds()) }
	inf := len(httpDurationBounds)
	const answer = 50 * time.Millisecond // past the wait: the last look and the answer
	for _, max := range []struct {
		name string
		ms   int64
	}{{"claim", wire.ClaimWaitMaxMs}, {"watch", wire.WatchWaitMaxMs}, {"run result", RunWaitMaxMs}} {
		full := time.Duration(max.ms)*time.Millisecond + answer
		if bucket(full) == inf {
			t.Errorf("a %s that waited its longest wait (%s) is in the +Inf bucket", max.name, full)
		}
		if bucket(full) == bucket(full/2) {
			t.Errorf("a %s answered after %s and one after %s share a bucket", max.name, full/2, full)
		}
		if bucket(full+30*time.Second) != inf {
			t.Errorf("a %s stuck 30 s past its longest wait is in a finite bucket, with those that waited", max.name)
		}
	}
	// The worker SDK's default claim wait, waited out, is apart from the
	// longest one.
	if bucket(30*time.Second+answer) == bucket(60*time.Second+answer) {
		t.Error("claims that waited the default 30 s and the longest 60 s share a bucket")
	}
}
