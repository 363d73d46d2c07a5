package worker

import "testing"

// TestLingerPokedByLastReport: a report loop lingering for the running
// handlers (reportLinger) is woken by the report that leaves none
// running, not by every report queued before it: each poke of a parked
// loop is a goroutine hand-off, once per attempt.
func TestLingerPokedByLastReport(t *testing.T) {
	const n = 3
	w := &Worker{
		slots:   make(chan struct{}, n),
		reports: make(chan report, n),
		quit:    make(chan struct{}),
		settled: make(chan struct{}, 1),
	}
	w.unreported.Store(n) // n handlers started, none reported
	for i := range n {
		w.settle(report{r: &running{}}, false)
		poked := false
		select {
		case <-w.settled:
			poked = true
		default:
		}
		if last := i == n-1; poked != last {
			t.Fatalf("report %d of %d: poked %v, want %v", i+1, n, poked, last)
		}
	}
	if len(w.reports) != n || len(w.slots) != n {
		t.Fatalf("%d reports queued and %d slots freed, want %d each", len(w.reports), len(w.slots), n)
	}
}
