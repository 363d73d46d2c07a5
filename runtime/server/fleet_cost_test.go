package server

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flowfabric/ff/compiler/plan"
	"github.com/flowfabric/ff/runtime/api"
	"github.com/flowfabric/ff/runtime/internal/valkeytest"
	"github.com/flowfabric/ff/runtime/scheduler"
	"github.com/flowfabric/ff/runtime/store"
	"github.com/flowfabric/ff/runtime/wire"
	"github.com/valkey-io/valkey-go"
)

// wideRun is a flow of n independent roots of kind "fresh.kind" in lane
// default: once staged, every member waits for a worker.
func wideRun(n int) *plan.Flow {
	f := &plan.Flow{Schema: plan.SchemaVersion, Name: "wide", Namespace: "default", Lane: "default"}
	for i := range n {
		f.Execs = append(f.Execs, plan.Exec{Name: fmt.Sprintf("m%04d", i), Kind: "fresh.kind", Lane: "default",
			Priority: plan.PriorityDefault, InputFrom: plan.InputNone, Join: plan.Join{Kind: plan.JoinAll},
			Retry: plan.Retry{Attempts: 1, Backoff: plan.BackoffFixed}})
	}
	return f
}

// allocatedBy returns the bytes the process allocated while fn ran.
func allocatedBy(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// commandCalls returns the calls of each named command (INFO
// commandstats, summed over the nodes c talks to), in the order named.
func commandCalls(t *testing.T, ctx context.Context, c valkey.Client, names ...string) []int {
	t.Helper()
	out := make([]int, len(names))
	for _, node := range c.Nodes() {
		info, err := node.Do(ctx, node.B().Info().Section("commandstats").Build()).ToString()
		if err != nil {
			t.Fatal(err)
		}
		for i, name := range names {
			if m := regexp.MustCompile(`cmdstat_` + name + `:calls=(\d+)`).FindStringSubmatch(info); m != nil {
				n, _ := strconv.Atoi(m[1])
				out[i] += n
			}
		}
	}
	return out
}

// TestRunReadHintsDoNotGrowWithWorkerFleet: the wait hints of a run's
// members are worded from a summary of the namespace's workers in which
// the instances of one worker collapse, once per distinct lane, kind and
// capabilities: reading a run of 400 members that no worker handles costs
// about the same with 100 instances of a worker of 100 kinds connected as
// with one, and says the same.
func TestRunReadHintsDoNotGrowWithWorkerFleet(t *testing.T) {
	vk := valkeytest.Client(t, valkeytest.Shared(t))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	st, err := store.Open(ctx, store.Config{Client: vk, KeyPrefix: valkeytest.Prefix(t), FlowPartitions: 1})
	if err != nil {
		t.Fatal(err)
	}
	const members, kinds = 400, 100
	run, _, err := st.StageFlow(ctx, store.StageRequest{Flow: wideRun(members)})
	if err != nil {
		t.Fatal(err)
	}
	var ks []string
	for i := range kinds {
		ks = append(ks, fmt.Sprintf("svc.kind%03d", i))
	}
	connect := func(from, to int) {
		t.Helper()
		for i := from; i < to; i++ {
			_, err := st.Heartbeat(ctx, store.Registration{Worker: store.WorkerIdentity{WorkerID: "svc",
				InstanceID: fmt.Sprintf("svc-%03d", i), Namespace: "default"}, Lanes: []string{"default"}, Kinds: ks, TTL: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	const want = "no connected worker of namespace default that takes lane default has a handler for kind fresh.kind " +
		"(they handle svc.kind000, svc.kind001, svc.kind002, svc.kind003, svc.kind004 and 95 more)"
	read := func() uint64 {
		t.Helper()
		f := &flowService{st: st, hints: newWaitHints(st)}
		var w *wire.FlowRun
		n := allocatedBy(func() {
			if w, err = f.GetRun(ctx, string(run.ID), api.ExecsPage{}); err != nil {
				t.Fatal(err)
			}
		})
		if len(w.Execs) != members {
			t.Fatalf("%d members read, want %d", len(w.Execs), members)
		}
		for _, m := range w.Execs {
			if m.Blocked != want {
				t.Fatalf("member %s: hint %q, want %q", m.Name, m.Blocked, want)
			}
		}
		return n
	}
	connect(0, 1)
	one := read()
	connect(1, 100)
	fleet := read()
	t.Logf("GetRun of %d waiting members: %d KiB allocated with 1 instance, %d KiB with 100 instances (same kinds)",
		members, one>>10, fleet>>10)
	if fleet > 3*one {
		t.Errorf("GetRun of a run of %d waiting members allocated %d KiB with 1 instance of %d kinds connected and %d KiB "+
			"with 100 instances of the same worker", members, one>>10, kinds, fleet>>10)
	}
}

// TestWaitHintsFromTheSummarySayWhatEachWorkerSays: the hint worded from
// the summary of a namespace's worker profiles is the one a walk over
// every connected instance gives (the reference below), for random
// fleets, lanes, kinds and capabilities.
func TestWaitHintsFromTheSummarySayWhatEachWorkerSays(t *testing.T) {
	t.Parallel()
	type instance struct{ lanes, kinds, caps []string }
	// reference words the hint by looking at every instance.
	reference := func(ws []instance, ns, lane, kind string, caps []string) string {
		if len(ws) == 0 {
			return fmt.Sprintf("no worker is connected to namespace %s", ns)
		}
		var lanes, kinds []string
		inLane, handles := false, false
		for _, w := range ws {
			if !slices.Contains(w.lanes, lane) {
				lanes = append(lanes, w.lanes...)
				continue
			}
			inLane = true
			if len(w.kinds) == 0 || slices.Contains(w.kinds, kind) {
				handles = true
				if covers(w.caps, caps) {
					return ""
				}
				continue
			}
			kinds = append(kinds, w.kinds...)
		}
		if handles {
			return fmt.Sprintf("no connected worker of namespace %s that takes lane %s and handles kind %s has the capabilities it requires (%s): workers with them lack its handler",
				ns, lane, kind, strings.Join(caps, ", "))
		}
		if !inLane {
			slices.Sort(lanes)
			return fmt.Sprintf("no connected worker of namespace %s takes lane %s (they take %s)", ns, lane, strings.Join(slices.Compact(lanes), ", "))
		}
		slices.Sort(kinds)
		kinds = slices.Compact(kinds)
		they := strings.Join(kinds[:min(len(kinds), hintKindsShown)], ", ")
		if len(kinds) > hintKindsShown {
			they += fmt.Sprintf(" and %d more", len(kinds)-hintKindsShown)
		}
		return fmt.Sprintf("no connected worker of namespace %s that takes lane %s has a handler for kind %s (they handle %s)", ns, lane, kind, they)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	subset := func(of []string, max int) []string {
		var out []string
		for _, s := range of {
			if len(out) < max && rng.IntN(2) == 0 {
				out = append(out, s)
			}
		}
		return out
	}
	allLanes := []string{"a", "b", "c"}
	allKinds := []string{"k1", "k2", "k3", "k4", "k5", "k6", "k7", "k8"}
	allCaps := []string{"arm", "gpu", "ssd"}
	for round := range 300 {
		var ws []instance
		for range rng.IntN(6) {
			w := instance{lanes: subset(allLanes, 2), caps: subset(allCaps, 3)}
			if rng.IntN(4) > 0 {
				w.kinds = subset(allKinds, 7)
			}
			for range 1 + rng.IntN(3) { // instances of one worker
				ws = append(ws, w)
			}
		}
		// The profiles, as Store.WorkerProfiles gives them.
		count := map[string]int{}
		byKey := map[string]instance{}
		for _, w := range ws {
			k := strings.Join(w.caps, ",") + "|" + strings.Join(w.lanes, ",") + "|" + strings.Join(w.kinds, ",")
			count[k]++
			byKey[k] = w
		}
		var ps []store.WorkerProfile
		for _, k := range slices.Sorted(maps.Keys(count)) {
			w := byKey[k]
			ps = append(ps, store.WorkerProfile{Lanes: w.lanes, Capabilities: w.caps, Kinds: w.kinds, Instances: count[k]})
		}
		sum := summarize(ps)
		for _, lane := range append(allLanes, "d") {
			for _, kind := range append(allKinds, "k9") {
				for _, caps := range [][]string{nil, {"gpu"}, {"arm", "gpu"}, {"ssd"}} {
					got, want := sum.hint("ns", lane, kind, caps), reference(ws, "ns", lane, kind, caps)
					if got != want {
						t.Fatalf("round %d, workers %+v, lane %s kind %s caps %v:\n got %q\nwant %q", round, ws, lane, kind, caps, got, want)
					}
				}
			}
		}
	}
}

// TestFleetConnectReadsTheRegistryOnce: a worker instance's connect adds
// its capabilities to the scheduler's cached capability union instead of
// reading every instance of the namespace again, and unblocks routes only
// when it brought a capability the union lacked. A fleet connecting beside
// instances already listed reads the registry once (each instance's
// capabilities only, never its record with its kinds), and runs the
// unblock once; an instance bringing a new capability still promotes at
// once the executions parked for it.
func TestFleetConnectReadsTheRegistryOnce(t *testing.T) {
	vk := valkeytest.Client(t, valkeytest.Start(t))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const partitions = 4
	st, err := store.Open(ctx, store.Config{Client: vk, FlowPartitions: partitions})
	if err != nil {
		t.Fatal(err)
	}
	sched, err := scheduler.New(scheduler.Config{Store: st, ResyncInterval: time.Hour, UnionTTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if err := sched.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sched.Stop(context.Background()) })
	a := newAdmissionService(slog.New(slog.DiscardHandler), st, sched)
	var kinds []string
	for i := range 200 {
		kinds = append(kinds, fmt.Sprintf("svc.kind%03d", i))
	}
	const listed, fleet = 300, 300
	// Instances listed by another ffrun: this one has no union cached.
	for i := range listed {
		if _, err := st.Heartbeat(ctx, store.Registration{Worker: store.WorkerIdentity{WorkerID: "svc",
			InstanceID: fmt.Sprintf("old-%04d", i), Namespace: "default", Capabilities: []string{"gpu"}},
			Lanes: []string{"default"}, Kinds: kinds, TTL: time.Minute}); err != nil {
			t.Fatal(err)
		}
	}
	names := []string{"hgetall", "hget", "hmget", "fcall"}
	before := commandCalls(t, ctx, vk, names...)
	unblocked := 0
	for i := range fleet {
		res, err := a.Heartbeat(ctx, wire.WorkerHeartbeat{WorkerID: "svc", InstanceID: fmt.Sprintf("new-%04d", i), Namespace: "default",
			Lanes: []string{"default"}, Capabilities: []string{"gpu"}, Kinds: kinds, TTLMs: 60_000})
		if err != nil || !res.Registered {
			t.Fatalf("connect %d: %+v, %v", i, res, err)
		}
		unblocked += res.Unblocked
	}
	after := commandCalls(t, ctx, vk, names...)
	hgetall, reads, fcalls := after[0]-before[0], after[1]+after[2]-before[1]-before[2], after[3]-before[3]
	t.Logf("%d connects beside %d listed instances: %d HGETALL, %d HGET/HMGET, %d FCALL", fleet, listed, hgetall, reads, fcalls)
	if hgetall != 0 || reads > listed+1 {
		t.Errorf("%d connects beside %d listed instances read %d instance records and %d instances' fields, "+
			"want the capabilities of each once", fleet, listed, hgetall, reads)
	}
	if fcalls > fleet+partitions {
		t.Errorf("%d connects (one heartbeat each) ran %d functions: the unblock ran on more than the first", fleet, fcalls)
	}

	// An execution parked for a capability no instance has is promoted by
	// the connect of the first instance that has it.
	ex, _, err := st.CreateExecution(ctx, store.CreateRequest{Kind: "k", Lane: "default", RequiredCapabilities: []string{"tpu"}})
	if err != nil {
		t.Fatal(err)
	}
	if g, err := sched.Claim(ctx, scheduler.Request{Worker: store.WorkerIdentity{WorkerID: "svc", InstanceID: "new-0000",
		Namespace: "default", Capabilities: []string{"gpu"}}, Lanes: []string{"default"}, Max: 1, LeaseTTL: time.Minute}); err != nil || len(g) != 0 {
		t.Fatalf("gpu claim: %v %v", g, err)
	}
	if got, err := st.GetExecution(ctx, ex.ID); err != nil || got.State.BlockingReason != store.WaitingForCapableWorker {
		t.Fatalf("after the gpu claim: %+v %v, want parked for a capable worker", got.State, err)
	}
	res, err := a.Heartbeat(ctx, wire.WorkerHeartbeat{WorkerID: "tpu", InstanceID: "tpu-1", Namespace: "default",
		Lanes: []string{"default"}, Capabilities: []string{"tpu"}, TTLMs: 60_000})
	if err != nil || !res.Registered || res.Unblocked != 1 {
		t.Fatalf("tpu connect: %+v, %v; want registered, 1 unblocked", res, err)
	}
	if got, err := st.GetExecution(ctx, ex.ID); err != nil || got.State.Public != store.StateWaiting {
		t.Fatalf("after the tpu worker connected: %+v %v, want waiting", got.State, err)
	}
}

// TestRunReadCostPerMember: GET /v1/flows/{id} of a run of plan.MaxExecs
// members answers its first page of store.RunPageMax members, in two
// pipelined rounds: the run's record, its order key and its failed set
// (the flow order and the failures), then one HMGET per member of the
// page (no read of the other members, no member's output read), with an
// answer of a few hundred bytes per member of the page; it allocates much
// less than reading the whole run did.
func TestRunReadCostPerMember(t *testing.T) {
	vk := valkeytest.Client(t, valkeytest.Start(t))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	st, err := store.Open(ctx, store.Config{Client: vk, FlowPartitions: 1})
	if err != nil {
		t.Fatal(err)
	}
	const members, page = plan.MaxExecs, store.RunPageMax
	run, _, err := st.StageFlow(ctx, store.StageRequest{Flow: wideRun(members)})
	if err != nil {
		t.Fatal(err)
	}
	f := &flowService{st: st, hints: newWaitHints(st)}
	before := valkeytest.CommandCalls(t, vk)
	var w *wire.FlowRun
	alloc := allocatedBy(func() {
		if w, err = f.GetRun(ctx, string(run.ID), api.ExecsPage{}); err != nil {
			t.Fatal(err)
		}
	})
	calls := valkeytest.CommandCalls(t, vk) - before
	body, err := json.Marshal(w)
	if err != nil {
		t.Fatal(err)
	}
	// What the route read and answered before its members were paged.
	var whole wire.FlowRun
	wholeAlloc := allocatedBy(func() {
		r, err := st.GetRun(ctx, run.ID)
		if err != nil {
			t.Fatal(err)
		}
		whole = toFlowRun(r, true)
	})
	t.Logf("GetRun of %d members: a page of %d, %d commands, %d KiB allocated (the whole run: %d KiB), an answer of %d KiB",
		members, len(w.Execs), calls, alloc>>10, wholeAlloc>>10, len(body)>>10)
	if len(w.Execs) != page || w.ExecsNextCursor == "" || len(whole.Execs) != members {
		t.Fatalf("GetRun of %d members answered %d of them, next cursor %q", members, len(w.Execs), w.ExecsNextCursor)
	}
	if calls > page+10 {
		t.Errorf("GetRun of %d members ran %d commands", members, calls)
	}
	if len(body) > 400*page {
		t.Errorf("GetRun of %d members answers %d bytes", members, len(body))
	}
	if alloc > wholeAlloc*2/3 {
		t.Errorf("GetRun of a page of %d of %d members allocated %d KiB, reading the whole run %d KiB", page, members, alloc>>10, wholeAlloc>>10)
	}
}

// BenchmarkRunAnswer builds the answer of GET /v1/flows/{id} for a run of
// 10,000 members (src -> 9,998 members -> sink), JSON included: "whole"
// is what the route did before its members were paged (every member
// read, converted and encoded), "page" the default page of 1,000 members,
// "page-of-1" execs_limit=1.
//
//	go test -run '^$' -bench RunAnswer -benchmem ./runtime/server/
func BenchmarkRunAnswer(b *testing.B) {
	ctx := context.Background()
	vk := valkeytest.Client(b, valkeytest.Start(b))
	st, err := store.Open(ctx, store.Config{Client: vk, FlowPartitions: 1})
	if err != nil {
		b.Fatal(err)
	}
	f := wideRun(10_000)
	f.Execs[0].Name, f.Execs[1].Name = "src", "sink"
	for i := 2; i < len(f.Execs); i++ {
		f.Execs[i].Upstreams = []string{"src"}
		f.Edges = append(f.Edges, plan.Edge{From: "src", To: f.Execs[i].Name, On: plan.OnSuccess},
			plan.Edge{From: f.Execs[i].Name, To: "sink", On: plan.OnSuccess})
		f.Execs[1].Upstreams = append(f.Execs[1].Upstreams, f.Execs[i].Name)
	}
	run, _, err := st.StageFlow(ctx, store.StageRequest{Flow: f})
	if err != nil {
		b.Fatal(err)
	}
	fs := &flowService{st: st, hints: newWaitHints(st)}
	encode := func(w *wire.FlowRun) int {
		var buf strings.Builder
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(w); err != nil {
			b.Fatal(err)
		}
		return buf.Len()
	}
	for _, bc := range []struct {
		name    string
		members int
		answer  func() (*wire.FlowRun, error)
	}{
		{"whole", 10_000, func() (*wire.FlowRun, error) {
			r, err := st.GetRun(ctx, run.ID)
			if err != nil {
				return nil, err
			}
			w := toFlowRun(r, true)
			return &w, nil
		}},
		{"page", store.RunPageMax, func() (*wire.FlowRun, error) { return fs.GetRun(ctx, string(run.ID), api.ExecsPage{}) }},
		{"page-of-1", 1, func() (*wire.FlowRun, error) { return fs.GetRun(ctx, string(run.ID), api.ExecsPage{Limit: 1}) }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			size := 0
			for b.Loop() {
				w, err := bc.answer()
				if err != nil || len(w.Execs) != bc.members {
					b.Fatalf("%+v %v", w, err)
				}
				size = encode(w)
			}
			b.ReportMetric(float64(size)/1024, "answer-KiB")
		})
	}
}
