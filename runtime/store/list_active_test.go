package store

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flowfabric/ff/runtime/internal/valkeytest"
	"github.com/google/go-cmp/cmp"
)

// Listing the running executions of a namespace reads each partition's
// lease index once (it holds every lane's running executions), not once
// per lane of the namespace: with 30 lanes it read the partition's whole
// lease index 30 times, each entry with an HMGET, to keep one lane's.
// Every running execution of the namespace is listed once across pages,
// none of another namespace, and none that is not running.
func TestListActiveReadsEachPartitionLeasesOnce(t *testing.T) {
	t.Parallel()
	e, addr := newEnvAlone(t, func(c *Config) { c.FlowPartitions = 2 })
	const lanes = 30
	var names []string
	for i := range lanes {
		names = append(names, "l"+strconv.Itoa(i))
		e.create(CreateRequest{Lane: names[i]})
		e.create(CreateRequest{Lane: names[i]}) // stays waiting
	}
	e.create(CreateRequest{Namespace: "other"})
	var want []ExecutionID
	for _, g := range e.claimAll(worker1, lanes, time.Minute, names...) {
		want = append(want, g.ExecutionID)
	}
	w := worker1
	w.Namespace = "other"
	if g := e.claimAll(w, 1, time.Minute); len(g) != 1 {
		t.Fatalf("claimed %d of namespace other", len(g))
	}
	if len(want) != lanes {
		t.Fatalf("claimed %d, want %d", len(want), lanes)
	}
	mon := valkeytest.StartMonitor(t, addr, e.c)
	from := mon.Mark()
	var got []ExecutionID
	req := ListRequest{Namespace: "default", State: StateActive, Limit: 7}
	pages := 0
	for ; ; pages++ {
		page, err := e.s.ListExecutions(e.ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range page.Executions {
			if x.State.Public != StateActive || x.Namespace != "default" {
				t.Errorf("listed %s: %s of %s", x.ID, x.State.Public, x.Namespace)
			}
			got = append(got, x.ID)
		}
		if page.Cursor == "" {
			break
		}
		req.Cursor = page.Cursor
	}
	to := mon.Mark()
	slices.Sort(want)
	slices.Sort(got)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("running executions listed (-want +got):\n%s", diff)
	}
	reads := 0
	for _, l := range mon.Lines(from, to) {
		if strings.Contains(l, `"ZRANGE"`) && strings.Contains(l, ":leases") {
			reads++
		}
	}
	// A page reads a partition's lease index at most twice (a full read
	// and one that finds the end), plus once per page it resumes in.
	if max := 2*2 + pages + 1; reads > max {
		t.Errorf("listing %d running executions of %d lanes in %d pages read a lease index %d times, want at most %d",
			lanes, lanes, pages+1, reads, max)
	}
}

// LeaseHolders names the instance holding each running execution's lease,
// and leaves out the ones that do not run.
func TestLeaseHolders(t *testing.T) {
	t.Parallel()
	e := onePartition(t)
	a := e.create(CreateRequest{})
	e.claim(a.ID, worker1, time.Minute)
	b := e.create(CreateRequest{})
	e.claim(b.ID, worker2, time.Minute)
	done := e.create(CreateRequest{})
	gd := e.claim(done.ID, worker1, time.Minute)
	waiting := e.create(CreateRequest{})
	if err := e.s.Complete(e.ctx, gd.Lease, nil); err != nil {
		t.Fatal(err)
	}
	got, err := e.s.LeaseHolders(e.ctx, []ExecutionID{a.ID, b.ID, waiting.ID, done.ID})
	if err != nil {
		t.Fatal(err)
	}
	want := map[ExecutionID]string{a.ID: worker1.InstanceID, b.ID: worker2.InstanceID}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("LeaseHolders (-want +got):\n%s", diff)
	}
	if got, err := e.s.LeaseHolders(e.ctx, nil); err != nil || len(got) != 0 {
		t.Fatalf("LeaseHolders(nil) = %v, %v", got, err)
	}
}
