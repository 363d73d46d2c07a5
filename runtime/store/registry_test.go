package store

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestWorkerRegistry(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	gpu := WorkerIdentity{WorkerID: "g", InstanceID: "g-1", Namespace: "default", Capabilities: []string{"gpu", "eu"}}
	short := WorkerIdentity{WorkerID: "s", InstanceID: "s-1", Namespace: "default", Capabilities: []string{"arm"}}
	if reg, err := e.s.Heartbeat(e.ctx, Registration{Worker: gpu, Lanes: []string{"default"}, TTL: time.Minute}); err != nil || !reg {
		t.Fatalf("first Heartbeat = %v, %v", reg, err)
	}
	if reg, err := e.s.Heartbeat(e.ctx, Registration{Worker: gpu, Lanes: []string{"default"}, Kinds: []string{"b.k", "a.k", "a.k"}, TTL: time.Minute}); err != nil || reg {
		t.Fatalf("second Heartbeat = %v, %v", reg, err)
	}
	if _, err := e.s.Heartbeat(e.ctx, Registration{Worker: short, TTL: 100 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	union, err := e.s.CapabilityUnion(e.ctx, "default")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"arm", "eu", "gpu"}, union); diff != "" {
		t.Fatalf("union (-want +got):\n%s", diff)
	}
	time.Sleep(150 * time.Millisecond) // short expires
	ws, err := e.s.Workers(e.ctx, "default")
	if err != nil || len(ws) != 1 || ws[0].InstanceID != "g-1" || ws[0].Lanes[0] != "default" || !slices.Equal(ws[0].Kinds, []string{"a.k", "b.k"}) {
		t.Fatalf("Workers = %+v, %v; want g-1 of lane default with kinds a.k, b.k", ws, err)
	}
	if ns, err := e.s.Namespaces(e.ctx); err != nil || len(ns) != 1 || ns[0] != "default" {
		t.Fatalf("Namespaces = %v, %v", ns, err)
	}
	bad := gpu
	bad.Capabilities = []string{"has space"}
	if _, err := e.s.Heartbeat(e.ctx, Registration{Worker: bad}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("bad capability: %v", err)
	}
	if _, err := e.s.Heartbeat(e.ctx, Registration{Worker: gpu, Kinds: []string{"has space"}}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("bad kind: %v", err)
	}
}

// TestWorkerProfilesCollapseInstances: WorkerProfiles gives each distinct
// (lanes, capabilities, kinds) of the connected instances once, with how
// many instances have it, ordered by capabilities; expired instances are
// not in it.
func TestWorkerProfilesCollapseInstances(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	beat := func(id string, caps, lanes, kinds []string, ttl time.Duration) {
		t.Helper()
		w := WorkerIdentity{WorkerID: "w", InstanceID: id, Namespace: "default", Capabilities: caps}
		if _, err := e.s.Heartbeat(e.ctx, Registration{Worker: w, Lanes: lanes, Kinds: kinds, TTL: ttl}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 3 {
		beat(fmt.Sprintf("svc-%d", i), []string{"gpu"}, []string{"default"}, []string{"b.k", "a.k"}, time.Minute)
	}
	beat("any-1", nil, []string{"default", "batch"}, nil, time.Minute)
	beat("gone-1", []string{"arm"}, []string{"default"}, nil, 100*time.Millisecond)
	time.Sleep(150 * time.Millisecond) // gone-1 expires
	ps, err := e.s.WorkerProfiles(e.ctx, "default")
	if err != nil {
		t.Fatal(err)
	}
	want := []WorkerProfile{
		{Lanes: []string{"default", "batch"}, Instances: 1},
		{Lanes: []string{"default"}, Capabilities: []string{"gpu"}, Kinds: []string{"a.k", "b.k"}, Instances: 3},
	}
	if diff := cmp.Diff(want, ps); diff != "" {
		t.Fatalf("profiles (-want +got):\n%s", diff)
	}
	if union, err := e.s.CapabilityUnion(e.ctx, "default"); err != nil || !slices.Equal(union, []string{"gpu"}) {
		t.Fatalf("union %v, %v; want [gpu]", union, err)
	}
	if ps, err := e.s.WorkerProfiles(e.ctx, "nobody"); err != nil || len(ps) != 0 {
		t.Fatalf("profiles of a namespace without workers: %v, %v", ps, err)
	}
}

func TestRouteBlockingAndUnblock(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *Config) { c.FlowPartitions = 1 })
	needsGPU := e.create(CreateRequest{Priority: 900, RequiredCapabilities: []string{"gpu"}})
	plain := e.create(CreateRequest{Priority: 1})
	cpu := worker1
	claim := func(w WorkerIdentity, union []string) []Grant {
		t.Helper()
		g, err := e.s.Claim(e.ctx, ClaimRequest{Partition: 0, Lanes: []string{"default"}, Worker: w, Max: 5,
			RouteBlocking: true, NamespaceCapabilities: union})
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	// Another connected worker has gpu: the cpu worker leaves it alone.
	g := claim(cpu, []string{"gpu"})
	if diff := cmp.Diff([]ExecutionID{plain.ID}, grantIDs(g)); diff != "" {
		t.Fatalf("grants (-want +got):\n%s", diff)
	}
	e.wantState(needsGPU.ID, StateWaiting)
	// Nobody has gpu: it is parked with a reason.
	if g := claim(cpu, nil); len(g) != 0 {
		t.Fatalf("granted %v", grantIDs(g))
	}
	b := e.wantState(needsGPU.ID, StateBlocked)
	if b.State.BlockingReason != WaitingForCapableWorker || b.State.Eligibility != BlockedByRoute ||
		b.State.BlockingDetail != "no connected worker has gpu" || b.State.AttemptState != AttemptPendingFirst {
		t.Fatalf("blocked state = %+v", b.State)
	}
	// A gpu worker of another namespace changes nothing.
	if res, err := e.s.UnblockRoute(e.ctx, 0, "tenant-b", []string{"gpu"}, 10, nil); err != nil || res.Processed != 0 {
		t.Fatalf("UnblockRoute(other namespace) = %+v, %v", res, err)
	}
	if res, err := e.s.UnblockRoute(e.ctx, 0, "default", []string{"eu"}, 10, nil); err != nil || res.Processed != 0 {
		t.Fatalf("UnblockRoute(not covering) = %+v, %v", res, err)
	}
	e.wantState(needsGPU.ID, StateBlocked)
	// A gpu worker connects in the namespace: unblocked, then claimed.
	if res, err := e.s.UnblockRoute(e.ctx, 0, "default", []string{"eu", "gpu"}, 10, nil); err != nil || res.Processed != 1 {
		t.Fatalf("UnblockRoute = %+v, %v", res, err)
	}
	e.wantState(needsGPU.ID, StateWaiting)
	gw := worker2
	gw.Capabilities = []string{"gpu"}
	if g := claim(gw, []string{"gpu"}); len(g) != 1 || g[0].ExecutionID != needsGPU.ID {
		t.Fatalf("gpu worker granted %v", grantIDs(g))
	}
}

// A claim finds work it can run deep behind work only other connected
// workers can run: 300 executions needing gpu, then one a cpu worker can
// run, and one needing a capability nobody has (parked on the way).
func TestClaimLooksPastOthersWork(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *Config) { c.FlowPartitions = 1 })
	var reqs []CreateRequest
	for range 300 {
		reqs = append(reqs, CreateRequest{Kind: "k", Priority: 500, RequiredCapabilities: []string{"gpu"}})
	}
	if _, err := e.s.CreateMany(e.ctx, reqs); err != nil {
		t.Fatal(err)
	}
	nobody := e.create(CreateRequest{Priority: 400, RequiredCapabilities: []string{"tpu"}})
	mine := e.create(CreateRequest{Priority: 300})
	g, err := e.s.Claim(e.ctx, ClaimRequest{Partition: 0, Lanes: []string{"default"}, Worker: worker1, Max: 4,
		RouteBlocking: true, NamespaceCapabilities: []string{"gpu"}})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]ExecutionID{mine.ID}, grantIDs(g)); diff != "" {
		t.Fatalf("grants (-want +got):\n%s", diff)
	}
	e.wantState(nobody.ID, StateBlocked)
	// The gpu work stays for the gpu workers, in order.
	gpu := WorkerIdentity{WorkerID: "g", InstanceID: "g-1", Namespace: "default", Capabilities: []string{"gpu"}}
	claimed := 0
	for range 2 {
		claimed += len(e.claimAll(gpu, 150, time.Minute))
	}
	if claimed != 300 {
		t.Fatalf("gpu worker claimed %d, want 300", claimed)
	}
}

// A claim naming its kinds is granted only those, even deep behind other
// kinds; one naming none takes any; a hand-off honours the kinds too.
func TestClaimByKind(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *Config) { c.FlowPartitions = 1 })
	var reqs []CreateRequest
	for range 100 {
		reqs = append(reqs, CreateRequest{Kind: "resize", Priority: 500})
	}
	if _, err := e.s.CreateMany(e.ctx, reqs); err != nil {
		t.Fatal(err)
	}
	mail := e.create(CreateRequest{Kind: "mail", Priority: 400})
	claim := func(kinds ...string) []Grant {
		t.Helper()
		g, err := e.s.Claim(e.ctx, ClaimRequest{Partition: 0, Lanes: []string{"default"}, Worker: worker1, Max: 4, Kinds: kinds})
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	if diff := cmp.Diff([]ExecutionID{mail.ID}, grantIDs(claim("mail", "other"))); diff != "" {
		t.Fatalf("a mail worker's grants (-want +got):\n%s", diff)
	}
	if g := claim("mail"); len(g) != 0 {
		t.Fatalf("a mail worker with no mail left got %v", grantIDs(g))
	}
	g := claim()
	if len(g) != 4 {
		t.Fatalf("a worker naming no kinds got %d grants, want 4", len(g))
	}
	for _, x := range g {
		if x.Kind != "resize" {
			t.Fatalf("a worker naming no kinds got %+v", x)
		}
	}
	if _, err := e.s.Claim(e.ctx, ClaimRequest{Partition: 0, Lanes: []string{"default"}, Worker: worker1, Max: 1,
		Kinds: []string{"a,b"}}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("a kind with a comma: %v, want ErrInvalid", err)
	}

	// Hand-off: b's kind is not the finishing worker's. (b has a lane of
	// its own: the resize backlog would otherwise be ahead of it.)
	f := flowOf("two", execs("a", "b"), "a->b")
	f.Execs[0].Lane, f.Execs[1].Lane = "first", "second"
	r := e.stage(f, `{}`)
	a, err := e.s.Claim(e.ctx, ClaimRequest{Partition: 0, Lanes: []string{"first"}, Worker: worker1, Max: 1})
	if err != nil || len(a) != 1 {
		t.Fatalf("claim a = %v, %v", a, err)
	}
	h := handoff(1, "second")
	h.Kinds = []string{"two.a"}
	if got := e.finishOK(a[0], `1`, h); len(got) != 0 {
		t.Fatalf("handed off %v to a worker without its kind", grantIDs(got))
	}
	e.wantState(r.Nodes[1].ExecutionID, StateWaiting)
	// A worker with b's kind gets it (once the first b, older, is gone).
	if g, err := e.s.Claim(e.ctx, ClaimRequest{Partition: 0, Lanes: []string{"second"}, Worker: worker1, Max: 1}); err != nil || len(g) != 1 {
		t.Fatalf("claim the first b = %v, %v", g, err)
	}
	r = e.stage(f, `{}`)
	if a, err = e.s.Claim(e.ctx, ClaimRequest{Partition: 0, Lanes: []string{"first"}, Worker: worker1, Max: 1}); err != nil || len(a) != 1 {
		t.Fatalf("claim a = %v, %v", a, err)
	}
	h.Kinds = []string{"two.a", "two.b"}
	if got := e.finishOK(a[0], `1`, h); len(got) != 1 || got[0].ExecutionID != r.Nodes[1].ExecutionID {
		t.Fatalf("handed off %v, want b", grantIDs(got))
	}
}

// TestClaimKindSetsCached: the library keeps the sets it builds from kind
// and capability lists between calls; many workers' lists (more than the
// cache holds, so it is dropped and refilled) never mix up what a claim
// may take.
func TestClaimKindSetsCached(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *Config) { c.FlowPartitions = 1 })
	mail := e.create(CreateRequest{Kind: "mail"})
	resize := e.create(CreateRequest{Kind: "resize", RequiredCapabilities: []string{"gpu"}})
	claim := func(caps []string, kinds ...string) []Grant {
		t.Helper()
		w := worker1
		w.Capabilities = caps
		g, err := e.s.Claim(e.ctx, ClaimRequest{Partition: 0, Lanes: []string{"default"}, Worker: w, Max: 2, Kinds: kinds})
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	for i := range 300 {
		if g := claim([]string{fmt.Sprint("cap", i)}, fmt.Sprint("kind", i), "other"); len(g) != 0 {
			t.Fatalf("list %d took %v", i, grantIDs(g))
		}
		if g := claim(nil, "resize"); len(g) != 0 {
			t.Fatalf("a worker without gpu took %v", grantIDs(g))
		}
	}
	if diff := cmp.Diff([]ExecutionID{resize.ID}, grantIDs(claim([]string{"gpu"}, "resize", "x"))); diff != "" {
		t.Fatalf("a gpu resize worker's grants (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]ExecutionID{mail.ID}, grantIDs(claim([]string{"gpu"}, "x", "mail"))); diff != "" {
		t.Fatalf("a mail worker's grants (-want +got):\n%s", diff)
	}
}

// The library keeps the index keys of lanes between calls, at most 4,096
// per partition, then starts again: executions in 2,100 lanes (over 4,096
// keys: eligible, then terminal) are created, claimed and finished, and
// they end completed with consistent indexes (every tenth is checked).
func TestManyLanesKeysCached(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *Config) { c.FlowPartitions = 1 })
	const n = 2100
	lanes := make([]string, n)
	reqs := make([]CreateRequest, n)
	for i := range n {
		lanes[i] = fmt.Sprint("lane", i)
		reqs[i] = CreateRequest{Kind: "k", Lane: lanes[i]}
	}
	var ids []ExecutionID
	for i := 0; i < n; i += 500 {
		res, err := e.s.CreateMany(e.ctx, reqs[i:min(i+500, n)])
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			if r.Err != nil {
				t.Fatal(r.Err)
			}
			ids = append(ids, r.Execution.ID)
		}
	}
	for i := 0; i < n; i += 64 {
		chunk := lanes[i:min(i+64, n)]
		g := e.claimAll(worker1, len(chunk), time.Minute, chunk...)
		if len(g) != len(chunk) {
			t.Fatalf("lanes %d..: %d grants, want %d", i, len(g), len(chunk))
		}
		items := make([]Finish, len(g))
		for j, x := range g {
			items[j] = Finish{Lease: x.Lease, Result: []byte(`1`)}
		}
		if _, err := e.s.FinishMany(e.ctx, items); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < n; i += 10 {
		e.wantState(ids[i], StateCompleted)
	}
	e.wantState(ids[n-1], StateCompleted)
}
