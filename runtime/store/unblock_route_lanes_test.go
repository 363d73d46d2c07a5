package store

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flowfabric/ff/runtime/internal/valkeytest"
)

// routeSeedLanes is ROUTE_SEED_LANES of lua/admission.lua: the lanes of
// the lane set one ff_unblock_route call looks at to list those with
// parked executions its namespace's list lacks.
const routeSeedLanes = 32

// newEnvAlone is newEnv on a dedicated server, for tests that watch
// everything the server runs (valkeytest.StartMonitor).
func newEnvAlone(t *testing.T, mod ...func(*Config)) (*env, string) {
	t.Helper()
	addr := valkeytest.Start(t)
	c := valkeytest.Client(t, addr)
	e := newEnv(t, append([]func(*Config){func(cfg *Config) { cfg.Client = c }}, mod...)...)
	e.c = c
	return e, addr
}

// parkRoute creates an execution of the lane needing gpu and parks it
// with a claim of a worker whose namespace has no gpu.
func (e *env) parkRoute(ns, lane string) *Execution {
	e.t.Helper()
	x := e.create(CreateRequest{Namespace: ns, Lane: lane, RequiredCapabilities: []string{"gpu"}})
	w := worker1
	w.Namespace = ns
	g, err := e.s.Claim(e.ctx, ClaimRequest{Partition: 0, Lanes: []string{lane}, Worker: w, Max: MaxClaim,
		LeaseTTL: time.Minute, RouteBlocking: true})
	if err != nil || len(g) != 0 {
		e.t.Fatalf("claim: %v %v", grantIDs(g), err)
	}
	e.wantState(x.ID, StateBlocked)
	return x
}

func (e *env) routeListed(ns string) []string {
	e.t.Helper()
	m, err := e.c.Do(e.ctx, e.c.B().Smembers().Key(e.s.k.base(0)+":route:"+ns).Build()).AsStrSlice()
	if err != nil {
		e.t.Fatal(err)
	}
	return m
}

// The route unblock of a namespace reads the lanes of that namespace that
// have something parked, whatever the other lanes of the partition: a
// namespace with one parked execution beside hundreds of lanes of another
// namespace costs a handful of commands (the seeding's look at about
// routeSeedLanes lanes included), none of them a read of the whole lane
// set or of another namespace's lane index. It read every lane of every namespace of the
// partition (SMEMBERS of the lane set), once per namespace with workers
// and partition every second: tens of milliseconds beside 30,000 lanes.
func TestUnblockRouteReadsOnlyTheNamespaceParkedLanes(t *testing.T) {
	t.Parallel()
	e, addr := newEnvAlone(t, func(c *Config) { c.FlowPartitions = 1 })
	const others = 200
	for i := range others {
		e.create(CreateRequest{Namespace: "busy", Lane: "l" + strconv.Itoa(i)})
	}
	x := e.parkRoute("default", "gpu-lane")
	e.create(CreateRequest{Namespace: "default", Lane: "idle"}) // a lane of the namespace with nothing parked

	// The seeding pass over the lane set lists nothing new here: run it
	// through once so that the call watched below is a steady one.
	for range others/routeSeedLanes + 2 {
		if _, err := e.s.UnblockRoute(e.ctx, 0, "default", []string{"cpu"}, 100, nil); err != nil {
			t.Fatal(err)
		}
	}
	mon := valkeytest.StartMonitor(t, addr, e.c)
	from := mon.Mark()
	res, err := e.s.UnblockRoute(e.ctx, 0, "default", []string{"gpu"}, 100, nil)
	if err != nil || res.Processed != 1 {
		t.Fatalf("UnblockRoute = %+v, %v; want x promoted", res, err)
	}
	cmds := mon.Between(from, mon.Mark())
	e.wantState(x.ID, StateWaiting)
	anchor := `"` + e.s.k.anchor(0) + `"`
	for _, c := range cmds {
		seeding := strings.HasPrefix(c, `"EXISTS" `) // the seeding's look at a lane's parked index
		if strings.Contains(c, ":q:busy:") && !seeding || strings.HasPrefix(c, `"SMEMBERS" `+anchor) {
			t.Errorf("the route unblock of namespace default ran %s", c)
		}
	}
	// The seeding reads about routeSeedLanes lanes (SSCAN's COUNT is a
	// hint), one EXISTS each; the rest is a few commands per parked lane.
	if max := 3*routeSeedLanes + 20; len(cmds) > max {
		t.Errorf("the route unblock ran %d commands beside %d lanes of another namespace, want at most %d:\n%s",
			len(cmds), others, max, strings.Join(cmds, "\n"))
	}
	// The lane read empty from its head leaves the list; the idle lane
	// never was in it.
	if got := e.routeListed("default"); len(got) != 0 {
		t.Errorf("B:route:default = %v after its only parked execution left, want empty", got)
	}
}

// A lane whose parked executions were parked before B:route:<ns> existed
// (by an older release) or left it by any drift is listed again by the
// seeding pass over the lane set, so its executions are still promoted.
func TestUnblockRouteSeedsLanesMissingFromTheList(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *Config) { c.FlowPartitions = 1 })
	const others = 150
	for i := range others {
		e.create(CreateRequest{Namespace: "busy", Lane: "l" + strconv.Itoa(i)})
	}
	x := e.parkRoute("default", "gpu-lane")
	if err := e.c.Do(e.ctx, e.c.B().Del().Key(e.s.k.base(0)+":route:default").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	calls := 0
	for e.get(x.ID).State.Public != StateWaiting {
		if calls++; calls > 4*(others/routeSeedLanes+1) {
			t.Fatalf("x still parked after %d route unblock calls with gpu connected", calls-1)
		}
		if _, err := e.s.UnblockRoute(e.ctx, 0, "default", []string{"gpu"}, 100, nil); err != nil {
			t.Fatal(err)
		}
	}
}

// A lane whose parked executions all left by another way than the route
// unblock (here a cancel) leaves the list at the next call that reads it;
// a park lists it again.
func TestUnblockRouteListFollowsTheLane(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *Config) { c.FlowPartitions = 1 })
	x := e.parkRoute("default", "gpu-lane")
	if got := e.routeListed("default"); len(got) != 1 || got[0] != "gpu-lane" {
		t.Fatalf("B:route:default = %v after a park, want [gpu-lane]", got)
	}
	if _, err := e.s.Cancel(e.ctx, x.ID, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := e.s.UnblockRoute(e.ctx, 0, "default", []string{"cpu"}, 100, nil); err != nil {
		t.Fatal(err)
	}
	if got := e.routeListed("default"); len(got) != 0 {
		t.Fatalf("B:route:default = %v once its lane's index is empty, want empty", got)
	}
	y := e.parkRoute("default", "gpu-lane")
	if got := e.routeListed("default"); len(got) != 1 {
		t.Fatalf("B:route:default = %v after a park, want [gpu-lane]", got)
	}
	if res, err := e.s.UnblockRoute(e.ctx, 0, "default", []string{"gpu"}, 100, nil); err != nil || res.Processed != 1 {
		t.Fatalf("UnblockRoute = %+v, %v", res, err)
	}
	e.wantState(y.ID, StateWaiting)
}

// A namespace whose workers are gone runs no route unblock, so nothing
// reads its list: when retention finds the lane empty, it drops it from
// the lane set and from the namespace's list, leaving no key behind.
func TestPruneLanesDropsTheLaneFromTheRouteList(t *testing.T) {
	t.Parallel()
	e := onePartition(t)
	x := e.parkRoute("gone", "gpu-lane")
	if _, err := e.s.Cancel(e.ctx, x.ID, ""); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Millisecond)
	e.purgeAll(1000)
	if got := e.pruneLanes(0, 1000); got != 1 {
		t.Fatalf("PruneLanes dropped %d lanes, want 1", got)
	}
	for _, k := range e.keys() {
		if strings.Contains(k, ":route:") {
			t.Errorf("key left after retention: %s", k)
		}
	}
}
