package store

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

// scard returns the cardinality of set key.
func (e *env) scard(key string) int64 {
	e.t.Helper()
	n, err := e.c.Do(e.ctx, e.c.B().Scard().Key(key).Build()).AsInt64()
	if err != nil {
		e.t.Fatal(err)
	}
	return n
}

// oneOffLane creates one execution in lane, runs it to success and returns
// once it is terminal.
func (e *env) oneOffLane(ns, lane string) {
	e.t.Helper()
	x := e.create(CreateRequest{Namespace: ns, Lane: lane})
	w := worker1
	w.Namespace = ns
	p, _, _ := splitID(string(x.ID))
	g, err := e.s.Claim(e.ctx, ClaimRequest{Partition: p, Lanes: []string{lane}, Worker: w, Max: 1, LeaseTTL: time.Minute})
	if err != nil || len(g) != 1 || g[0].ExecutionID != x.ID {
		e.t.Fatalf("Claim = %+v, %v; want %s", g, err, x.ID)
	}
	if err := e.s.Complete(e.ctx, g[0].Lease, []byte("ok")); err != nil {
		e.t.Fatal(err)
	}
}

// pruneLanes runs PruneLanes on partition p until its pass is over and
// returns the lanes dropped.
func (e *env) pruneLanes(p, limit int) int {
	e.t.Helper()
	dropped := 0
	for range 1000 {
		res, err := e.s.PruneLanes(e.ctx, p, limit)
		if err != nil {
			e.t.Fatal(err)
		}
		dropped += res.Processed
		if !res.More {
			return dropped
		}
	}
	e.t.Fatal("PruneLanes does not converge")
	return 0
}

// lanesOf returns the members of partition p's lane set, sorted.
func (e *env) lanesOf(p int) []string {
	e.t.Helper()
	m, err := e.c.Do(e.ctx, e.c.B().Smembers().Key(e.s.k.anchor(p)).Build()).AsStrSlice()
	if err != nil {
		e.t.Fatal(err)
	}
	slices.Sort(m)
	return m
}

// Producers that use lanes that come and go (a lane per tenant, per
// customer, per deploy) leave the partition's lane set (the anchor B:lanes,
// which every scanner, listing and summary walks) bounded by the lanes that
// hold something: once retention deleted a lane's executions, PruneLanes
// drops the lane, so the set does not grow with every lane ever used.
func TestPruneLanesDropsLanesLeftEmpty(t *testing.T) {
	t.Parallel()
	e := onePartition(t)
	const rounds, perRound = 3, 40
	var sizes []int64
	for r := range rounds {
		for i := range perRound {
			e.oneOffLane("default", fmt.Sprintf("tenant-%d-%d", r, i))
		}
		if n := e.scard(e.s.k.anchor(0)); n != perRound {
			t.Fatalf("round %d: %d lanes listed before retention, want %d", r, n, perRound)
		}
		time.Sleep(3 * time.Millisecond)
		e.purgeAll(1000)
		if got := e.pruneLanes(0, 1000); got != perRound {
			t.Fatalf("round %d: PruneLanes dropped %d lanes, want %d", r, got, perRound)
		}
		// Every execution is gone, and so is every registry of them.
		for _, k := range e.keys() {
			if !strings.HasSuffix(k, "ff:config") && !strings.HasSuffix(k, "ff:libraries") && !claimMemory(k) {
				t.Fatalf("round %d: key left after retention: %s", r, k)
			}
		}
		sizes = append(sizes, e.scard(e.s.k.anchor(0)))
	}
	if sizes[rounds-1] > sizes[0] || sizes[0] != 0 {
		t.Errorf("lane set after each round of %d one-off lanes, every execution deleted by retention: %v members, want 0",
			perRound, sizes)
	}
}

// A lane stays listed while it holds something: an execution in any of its
// indexes, or one running (a running execution is in no lane index, only
// in B:leases, and comes back to its lane when its attempt ends: its retry
// must still be promoted, its end purged). A lane dropped is listed again
// by the next execution created in it.
func TestPruneLanesKeepsLanesInUse(t *testing.T) {
	t.Parallel()
	e := onePartition(t)
	w := worker1
	claim := func(lane string, id ExecutionID) Grant {
		t.Helper()
		g, err := e.s.Claim(e.ctx, ClaimRequest{Partition: 0, Lanes: []string{lane}, Worker: w, Max: 1, LeaseTTL: time.Minute})
		if err != nil || len(g) != 1 || g[0].ExecutionID != id {
			t.Fatalf("Claim(%s) = %+v, %v; want %s", lane, g, err, id)
		}
		return g[0]
	}
	running := e.create(CreateRequest{Lane: "running", Retry: RetryPolicy{Attempts: 2, Delay: 20 * time.Millisecond}})
	g := claim("running", running.ID)
	e.create(CreateRequest{Lane: "waiting"})
	e.create(CreateRequest{Lane: "later", Delay: time.Hour})
	done := e.create(CreateRequest{Lane: "done"})
	if err := e.s.Complete(e.ctx, claim("done", done.ID).Lease, nil); err != nil {
		t.Fatal(err)
	}
	e.oneOffLane("default", "gone")
	time.Sleep(3 * time.Millisecond)
	// Retention deletes what ended more than 3 ms ago: "gone" and "done".
	e.purgeAll(1000)
	if got := e.pruneLanes(0, 100); got != 2 {
		t.Fatalf("PruneLanes dropped %d lanes, want 2 (done, gone)", got)
	}
	want := []string{"default:later", "default:running", "default:waiting"}
	if got := e.lanesOf(0); !slices.Equal(got, want) {
		t.Fatalf("lanes %v, want %v", got, want)
	}
	// The running execution's retry comes back to its lane, which the
	// delayed promotion still walks.
	if res, err := e.s.Fail(e.ctx, g.Lease, "boom", true); err != nil || res.State != StateDelayed {
		t.Fatalf("Fail = %+v, %v; want delayed", res, err)
	}
	e.pruneLanes(0, 100)
	time.Sleep(30 * time.Millisecond)
	if res, err := e.s.PromoteDelayed(e.ctx, 0, 100); err != nil || res.Processed != 1 {
		t.Fatalf("PromoteDelayed = %+v, %v; want the retry promoted", res, err)
	}
	if err := e.s.Complete(e.ctx, claim("running", running.ID).Lease, nil); err != nil {
		t.Fatal(err)
	}
	// A lane used again is listed again.
	e.create(CreateRequest{Lane: "gone"})
	want = []string{"default:gone", "default:later", "default:running", "default:waiting"}
	if got := e.lanesOf(0); !slices.Equal(got, want) {
		t.Fatalf("lanes %v, want %v", got, want)
	}
}

// Whatever the operations and whenever PruneLanes runs, every execution
// that exists is in a lane its partition lists (so the scanners that walk
// the lane set reach it).
func TestPruneLanesNeverDropsALaneWithAnExecution(t *testing.T) {
	t.Parallel()
	e := onePartition(t)
	rng := rand.New(rand.NewPCG(3, 4))
	lanes := []string{"a", "b", "c", "d", "e", "f", "g", "h"}
	type running struct {
		lane string
		g    Grant
	}
	var ids []ExecutionID
	var leases []running
	for step := range 300 {
		lane := lanes[rng.IntN(len(lanes))]
		switch rng.IntN(7) {
		case 0:
			x := e.create(CreateRequest{Lane: lane, Retry: RetryPolicy{Attempts: 2, Delay: time.Millisecond},
				Delay: time.Duration(rng.IntN(2)) * time.Millisecond})
			ids = append(ids, x.ID)
		case 2:
			if _, err := e.s.PromoteDelayed(e.ctx, 0, 100); err != nil {
				t.Fatal(err)
			}
			g, err := e.s.Claim(e.ctx, ClaimRequest{Partition: 0, Lanes: []string{lane}, Worker: worker1, Max: 1, LeaseTTL: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			for _, x := range g {
				leases = append(leases, running{lane, x})
			}
		case 3:
			if len(leases) > 0 {
				i := rng.IntN(len(leases))
				r := leases[i]
				leases = slices.Delete(leases, i, i+1)
				var err error
				if rng.IntN(2) == 0 {
					err = e.s.Complete(e.ctx, r.g.Lease, nil)
				} else {
					_, err = e.s.Fail(e.ctx, r.g.Lease, "boom", true)
				}
				if err != nil {
					t.Fatal(err)
				}
			}
		case 4:
			if _, err := e.s.PurgeTerminal(e.ctx, 0, time.Millisecond, 100); err != nil {
				t.Fatal(err)
			}
		case 5, 6:
			if _, err := e.s.PruneLanes(e.ctx, 0, 1+rng.IntN(3)); err != nil {
				t.Fatal(err)
			}
		}
		listed := e.lanesOf(0)
		for _, id := range ids {
			x, err := e.s.GetExecution(e.ctx, id)
			if err != nil {
				continue // deleted by retention
			}
			if !slices.Contains(listed, x.Namespace+":"+x.Lane) {
				t.Fatalf("step %d: %s (%s) is in lane %s, which the partition no longer lists (%v)",
					step, id, x.State.Public, x.Lane, listed)
			}
		}
	}
}

// PruneLanes walks a large lane set a part per call, from where the last
// call stopped (the cursor is kept in B:lanes:sweep while a pass is under
// way, and deleted at its end), and says More while the pass goes on and
// drops lanes.
func TestPruneLanesWalksTheSetInParts(t *testing.T) {
	t.Parallel()
	e := onePartition(t)
	const lanes, limit = 600, 50
	members := make([]string, lanes)
	for i := range members {
		members[i] = fmt.Sprintf("default:l%d", i)
	}
	if err := e.c.Do(e.ctx, e.c.B().Sadd().Key(e.s.k.anchor(0)).Member(members...).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	sweep := e.s.k.anchor(0) + ":sweep"
	calls, dropped, sawCursor := 0, 0, false
	for {
		res, err := e.s.PruneLanes(e.ctx, 0, limit)
		if err != nil {
			t.Fatal(err)
		}
		calls++
		dropped += res.Processed
		if res.Processed > 4*limit {
			t.Fatalf("one call dropped %d lanes, limit %d", res.Processed, limit)
		}
		if n, err := e.c.Do(e.ctx, e.c.B().Exists().Key(sweep).Build()).AsInt64(); err == nil && n == 1 {
			sawCursor = true
		}
		if !res.More {
			break
		}
		if calls > 100 {
			t.Fatal("PruneLanes does not converge")
		}
	}
	if dropped != lanes || e.scard(e.s.k.anchor(0)) != 0 {
		t.Fatalf("dropped %d of %d lanes in %d calls, %d left", dropped, lanes, calls, e.scard(e.s.k.anchor(0)))
	}
	if calls < lanes/(4*limit) || !sawCursor {
		t.Fatalf("%d calls, cursor seen %v: want the set walked a part per call", calls, sawCursor)
	}
	if n, _ := e.c.Do(e.ctx, e.c.B().Exists().Key(sweep).Build()).AsInt64(); n != 0 {
		t.Fatal("the cursor is left after the pass ended")
	}
}

// ff_prune_lanes refuses a limit outside 1..1000 and writes nothing.
func TestPruneLanesRefusesABadLimit(t *testing.T) {
	t.Parallel()
	e := onePartition(t)
	e.create(CreateRequest{})
	for _, limit := range []string{"0", "1001", "x", "1.5"} {
		e.refusedUnchanged("ff_prune_lanes "+limit, call{fn: "ff_prune_lanes", args: []string{limit}}, "limit")
	}
}

// Workers in namespaces that are used for a while and then abandoned (a
// namespace per tenant, per preview environment, per test run) do not stay
// in <prefix>ff:namespaces, what the unblock scanner walks every second,
// nor leave their {w:<ns>}:workers registry: PruneNamespaces (the retention
// scanner) drops a namespace once it has no connected worker, so both stay
// bounded by the namespaces with workers. The namespace summaries list the
// namespaces with lanes or workers, so an abandoned one leaves them too.
func TestPruneNamespacesDropsNamespacesWithoutWorkers(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const rounds, perRound = 3, 20
	var sizes, zsets []int64
	for r := range rounds {
		for i := range perRound {
			w := WorkerIdentity{WorkerID: "w", InstanceID: fmt.Sprintf("i-%d-%d", r, i), Namespace: fmt.Sprintf("env-%d-%d", r, i)}
			if _, err := e.s.Heartbeat(e.ctx, Registration{Worker: w, Lanes: []string{"default"}, TTL: LeaseTTLMin}); err != nil {
				t.Fatal(err)
			}
		}
		// A live worker elsewhere, registered before they expire.
		if _, err := e.s.Heartbeat(e.ctx, Registration{Worker: worker1, TTL: time.Minute}); err != nil {
			t.Fatal(err)
		}
		if n, err := e.s.PruneNamespaces(e.ctx); err != nil || n != 0 {
			t.Fatalf("round %d: PruneNamespaces = %d, %v while every worker is connected, want 0", r, n, err)
		}
		time.Sleep(LeaseTTLMin + 50*time.Millisecond) // every one of them expired
		if n, err := e.s.PruneNamespaces(e.ctx); err != nil || n != perRound {
			t.Fatalf("round %d: PruneNamespaces = %d, %v; want %d", r, n, err, perRound)
		}
		ns, err := e.s.Namespaces(e.ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(ns, []string{worker1.Namespace}) {
			t.Fatalf("round %d: Namespaces = %v, want only %s", r, ns, worker1.Namespace)
		}
		sum, err := e.s.NamespaceSummaries(e.ctx, NamespaceOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(sum) != 1 || sum[0].Name != worker1.Namespace || sum[0].Workers != 1 {
			t.Fatalf("round %d: summaries %+v, want only %s with its worker", r, sum, worker1.Namespace)
		}
		sizes = append(sizes, e.scard(e.s.k.namespaces()))
		n := int64(0)
		for _, k := range e.keys() {
			if strings.HasSuffix(k, "}:workers") {
				n++
			}
		}
		zsets = append(zsets, n)
	}
	if sizes[rounds-1] > sizes[0] || zsets[rounds-1] > zsets[0] || sizes[0] != 1 || zsets[0] != 1 {
		t.Errorf("after each round of %d namespaces whose only worker vanished (1 namespace with a live worker): "+
			"the namespace set holds %v members and %v {w:<ns>}:workers keys remain, want 1 each",
			perRound, sizes, zsets)
	}
	// A namespace dropped comes back with its next heartbeat.
	w := WorkerIdentity{WorkerID: "w", InstanceID: "back", Namespace: "env-0-0"}
	if _, err := e.s.Heartbeat(e.ctx, Registration{Worker: w, TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if ns, err := e.s.Namespaces(e.ctx); err != nil || !slices.Equal(ns, []string{worker1.Namespace, "env-0-0"}) {
		t.Fatalf("Namespaces = %v, %v after a heartbeat in env-0-0", ns, err)
	}
}

// The unblock scanner's cursor keeps nothing of what is gone: the laps of
// the route-blocked indexes of a namespace the scanner no longer walks
// (KeepNamespaces, each tick), and those of the budget and quota blocked
// indexes of a lane its partition no longer lists (UnblockAdmission on
// that partition; other partitions' are left alone).
func TestUnblockCursorForgetsWhatIsGone(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *Config) { c.FlowPartitions = 2 })
	c := &UnblockCursor{}
	c.setRouteLap(routeGroup{0, "a"}, "l", lap{off: 3, end: 9})
	c.setRouteLap(routeGroup{1, "b"}, "l", lap{off: 3, end: 9})
	c.KeepNamespaces([]string{"a"})
	if len(c.lanes) != 1 || c.routeLaps(routeGroup{0, "a"}) == nil {
		t.Fatalf("route laps %v after keeping namespace a, want a's only", c.lanes)
	}
	x := e.create(CreateRequest{})
	p, _ := x.ID.Partition()
	gone := e.s.k.lane(p, "default", "gone", indexBlockedQuota)
	other := e.s.k.lane(1-p, "default", "gone", indexBlockedQuota)
	for _, k := range []string{gone, other} {
		c.set(k, lap{off: 2, end: 5})
	}
	if _, err := e.s.UnblockAdmission(e.ctx, AdmissionUnblock{Partition: p, Limit: 100, Cursor: c}); err != nil {
		t.Fatal(err)
	}
	if _, ok := c.offsets[other]; !ok || len(c.offsets) != 1 {
		t.Fatalf("offsets %v after a pass over partition %d, want only %s's", c.offsets, p, other)
	}
}
