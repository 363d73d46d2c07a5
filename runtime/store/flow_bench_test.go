package store

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flowfabric/ff/compiler/plan"
	"github.com/flowfabric/ff/runtime/internal/valkeytest"
	"github.com/valkey-io/valkey-go"
)

// runFlows stages every flow, then 16 workers claim (up to 16 per call)
// and complete until every run ended; it returns the elapsed time.
func runFlows(b *testing.B, s *Store, flows []*plan.Flow) time.Duration {
	ctx := context.Background()
	start := time.Now()
	var ids []RunID
	for _, f := range flows {
		r, _, err := s.StageFlow(ctx, StageRequest{Flow: f, Shared: true, Input: []byte(`{}`)})
		if err != nil {
			b.Fatal(err)
		}
		ids = append(ids, r.ID)
	}
	var total int64
	for _, f := range flows {
		total += int64(len(f.Execs))
	}
	var done atomic.Int64
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Go(func() {
			benchWorker(b, s, w, total, &done, []byte(`{}`), 50*time.Microsecond, func(p int, id WorkerIdentity) ([]Grant, error) {
				return s.Claim(ctx, ClaimRequest{Partition: p, Lanes: []string{"default"}, Worker: id, Max: 16})
			})
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	for _, id := range ids {
		r, err := s.GetRun(ctx, id)
		if err != nil || r.State != RunSucceeded {
			b.Fatalf("run %s: %+v %v", id, r, err)
		}
	}
	return elapsed
}

// BenchmarkFlowChains runs 100 chains of 10 executions (store level, no
// HTTP) and reports chains/s.
//
//	go test -run '^$' -bench FlowChains -benchtime 1x ./runtime/store/
func BenchmarkFlowChains(b *testing.B) {
	c := valkeytest.Client(b, valkeytest.Start(b))
	s, err := Open(context.Background(), Config{Client: c})
	if err != nil {
		b.Fatal(err)
	}
	var flows []*plan.Flow
	for range 100 {
		var names, edges []string
		for i := range 10 {
			names = append(names, fmt.Sprintf("s%d", i))
			if i > 0 {
				edges = append(edges, names[i-1]+"->"+names[i])
			}
		}
		flows = append(flows, flowOf("chain", execs(names...), edges...))
	}
	b.ResetTimer()
	elapsed := runFlows(b, s, flows)
	b.ReportMetric(float64(len(flows))/elapsed.Seconds(), "chains/s")
}

// BenchmarkFlowDiamond runs one 1 → 1000 → 1 run and reports the time from
// stage to its end, and the server time of staging it.
//
//	go test -run '^$' -bench FlowDiamond -benchtime 1x ./runtime/store/
func BenchmarkFlowDiamond(b *testing.B) {
	c := valkeytest.Client(b, valkeytest.Start(b))
	s, err := Open(context.Background(), Config{Client: c})
	if err != nil {
		b.Fatal(err)
	}
	names := []string{"root", "sink"}
	var edges []string
	for i := range 1000 {
		m := fmt.Sprintf("m%04d", i)
		names = append(names, m)
		edges = append(edges, "root->"+m, m+"->sink")
	}
	f := flowOf("diamond", execs(names...), edges...)
	f.Execs[1].InputFrom = plan.InputNone
	fcallMicros(b, c)
	b.ResetTimer()
	elapsed := runFlows(b, s, []*plan.Flow{f})
	b.ReportMetric(float64(elapsed.Milliseconds()), "ms/run")
	stageStart := time.Now()
	if _, _, err := s.StageFlow(context.Background(), StageRequest{Flow: f}); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(time.Since(stageStart).Microseconds())/1000, "stage-ms")
}

// phaseEnd ends a phase of a benchmark: it returns the server time of the
// FCALLs since the last phase ended (fcallMicros), and, when
// FF_CALLGRIND is set (scripts/lua-cost.sh runs the server under
// callgrind), has callgrind write the phase's instruction counts to a
// file named after it. A value other than "1" is the --vgdb-prefix the
// server's valgrind was given: only that server dumps, not every
// callgrind run on the machine.
func phaseEnd(b *testing.B, c valkey.Client, name string) float64 {
	us := fcallMicros(b, c)
	if v := os.Getenv("FF_CALLGRIND"); v != "" {
		args := []string{"--dump=" + name}
		if v != "1" {
			args = append(args, "--vgdb-prefix="+v)
		}
		if out, err := exec.Command("callgrind_control", args...).CombinedOutput(); err != nil {
			b.Fatalf("callgrind_control: %v: %s", err, out)
		}
	}
	return us
}

// BenchmarkFlowPhases measures the server time per execution (INFO
// commandstats: FCALL, Lua included) of staging, claiming and finishing
// the members of b.N/10 chains of 10, one step of every chain at a time,
// with one execution per claim and per finish (as a worker running one
// chain step at a time does), next to the same for plain executions.
//
//	go test -run '^$' -bench FlowPhases -benchtime 2000x ./runtime/store/
//
// Server time moves with the machine's other load. scripts/lua-cost.sh
// runs this benchmark with the server under callgrind, which counts the
// instructions of each phase instead: the same to a fraction of a percent
// from run to run, so one run of each build compares two versions of the
// library.
func BenchmarkFlowPhases(b *testing.B) {
	ctx := context.Background()
	c := valkeytest.Client(b, valkeytest.Start(b))
	s, err := Open(ctx, Config{Client: c, FlowPartitions: 1})
	if err != nil {
		b.Fatal(err)
	}
	var names, edges []string
	for i := range 10 {
		names = append(names, fmt.Sprintf("s%d", i))
		if i > 0 {
			edges = append(edges, names[i-1]+"->"+names[i])
		}
	}
	f := flowOf("chain", execs(names...), edges...)
	runs := max(1, b.N/10)
	w := WorkerIdentity{WorkerID: "bench", InstanceID: "bench-1", Namespace: "default"}
	phaseEnd(b, c, "setup")
	b.ResetTimer()
	for range runs {
		if _, _, err := s.StageFlow(ctx, StageRequest{Flow: f, Shared: true, Input: []byte(`{}`)}); err != nil {
			b.Fatal(err)
		}
	}
	stage := phaseEnd(b, c, "stage")
	var claim, finish float64
	for range 10 {
		var leases []Lease
		for range runs {
			g, err := s.Claim(ctx, ClaimRequest{Partition: 0, Lanes: []string{"default"}, Worker: w, Max: 1})
			if err != nil || len(g) != 1 {
				b.Fatalf("claim: %d grants, %v", len(g), err)
			}
			leases = append(leases, g[0].Lease)
		}
		claim += phaseEnd(b, c, "claim")
		for _, l := range leases {
			if _, err := s.FinishMany(ctx, []Finish{{Lease: l, Result: []byte(`{"v":1}`)}}); err != nil {
				b.Fatal(err)
			}
		}
		finish += phaseEnd(b, c, "finish")
	}
	n := float64(runs * 10)
	// The same single-item calls on plain executions.
	for range runs * 10 {
		if _, _, err := s.CreateExecution(ctx, CreateRequest{Kind: "noop", Payload: []byte(`{}`)}); err != nil {
			b.Fatal(err)
		}
	}
	phaseEnd(b, c, "plain-create")
	var leases []Lease
	for range runs * 10 {
		g, err := s.Claim(ctx, ClaimRequest{Partition: 0, Lanes: []string{"default"}, Worker: w, Max: 1})
		if err != nil || len(g) != 1 {
			b.Fatalf("claim: %d grants, %v", len(g), err)
		}
		leases = append(leases, g[0].Lease)
	}
	plainClaim := phaseEnd(b, c, "plain-claim")
	for _, l := range leases {
		if _, err := s.FinishMany(ctx, []Finish{{Lease: l, Result: []byte(`{"v":1}`)}}); err != nil {
			b.Fatal(err)
		}
	}
	plainFinish := phaseEnd(b, c, "plain-finish")
	// Chains walked by hand-offs, 8 members per finish call (as a busy
	// worker reports): roots claimed, every other member handed off.
	for range runs {
		if _, _, err := s.StageFlow(ctx, StageRequest{Flow: f, Shared: true, Input: []byte(`{}`)}); err != nil {
			b.Fatal(err)
		}
	}
	var held []Lease
	for {
		g, err := s.Claim(ctx, ClaimRequest{Partition: 0, Lanes: []string{"default"}, Worker: w, Max: 64})
		if err != nil {
			b.Fatal(err)
		}
		if len(g) == 0 {
			break
		}
		for _, x := range g {
			held = append(held, x.Lease)
		}
	}
	phaseEnd(b, c, "handoff-stage-claim")
	walked := 0
	for len(held) > 0 {
		k := min(8, len(held))
		items := make([]Finish, k)
		for i, l := range held[:k] {
			items[i] = Finish{Lease: l, Result: []byte(`{"v":1}`)}
		}
		held = held[k:]
		_, g, err := s.FinishHandoff(ctx, items, &Handoff{Worker: w, Lanes: []string{"default"}, Max: k})
		if err != nil {
			b.Fatal(err)
		}
		walked += k
		for _, x := range g {
			held = append(held, x.Lease)
		}
	}
	if walked != runs*10 {
		b.Fatalf("hand-offs walked %d members, want %d", walked, runs*10)
	}
	handoff := phaseEnd(b, c, "handoff-finish")
	b.ReportMetric(stage/n, "stage-µs/exec")
	b.ReportMetric(handoff/n, "handoff-finish-µs/exec")
	b.ReportMetric(claim/n, "claim-µs/exec")
	b.ReportMetric(finish/n, "finish-µs/exec")
	b.ReportMetric(plainClaim/n, "plain-claim-µs/task")
	b.ReportMetric(plainFinish/n, "plain-finish-µs/task")
}

// BenchmarkFlowReplayLarge replays a cancelled run of 10,000 members (src
// -> 9,998 members -> sink) and reports the longest single FCALL of the
// replay and the time of its first call (which decides), from the
// server's SLOWLOG: what the replay holds Valkey for at once.
//
//	go test -run '^$' -bench FlowReplayLarge -benchtime 3x ./runtime/store/
func BenchmarkFlowReplayLarge(b *testing.B) {
	ctx := context.Background()
	c := valkeytest.Client(b, valkeytest.Start(b))
	s, err := Open(ctx, Config{Client: c, FlowPartitions: 1})
	if err != nil {
		b.Fatal(err)
	}
	f := bigCancelFlow(10_000-2, 0, 0)
	do := func(cmd valkey.Completed) valkey.ValkeyResult {
		r := c.Do(ctx, cmd)
		if err := r.Error(); err != nil {
			b.Fatal(err)
		}
		return r
	}
	var first, longest, calls float64
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		r, _, err := s.StageFlow(ctx, StageRequest{Flow: f, Shared: true, Input: []byte(`{}`)})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := s.CancelRun(ctx, r.ID, "bench"); err != nil {
			b.Fatal(err)
		}
		do(c.B().ConfigSet().ParameterValue().ParameterValue("slowlog-log-slower-than", "0").ParameterValue("slowlog-max-len", "100000").Build())
		do(c.B().SlowlogReset().Build())
		b.StartTimer()
		if _, err := s.ReplayRun(ctx, r.ID); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		entries, err := do(c.B().SlowlogGet().Count(100000).Build()).ToArray()
		if err != nil {
			b.Fatal(err)
		}
		do(c.B().ConfigSet().ParameterValue().ParameterValue("slowlog-log-slower-than", "10000").Build())
		// Newest first: the replay's first call is the last FCALL listed.
		var firstUs int64
		var each []int64
		for _, e := range entries {
			v, err := e.ToArray()
			if err != nil || len(v) < 4 {
				continue
			}
			args, _ := v[3].AsStrSlice()
			if len(args) < 2 || !strings.EqualFold(args[0], "FCALL") || !strings.HasPrefix(args[1], "ff_replay_run") {
				continue
			}
			us, _ := v[2].AsInt64()
			firstUs = us
			longest = max(longest, float64(us))
			each = append(each, us)
			calls++
		}
		first += float64(firstUs)
		if os.Getenv("FF_BENCH_CALLS") != "" {
			slices.Reverse(each)
			b.Logf("ff_replay_run calls, µs: %v", each)
		}
	}
	b.ReportMetric(first/float64(b.N)/1000, "first-call-ms")
	b.ReportMetric(longest/1000, "longest-call-ms")
	b.ReportMetric(calls/float64(b.N), "calls/replay")
}

// BenchmarkRunRead reads a staged run of 10,000 members (src -> 9,998
// members -> sink): whole (GetRun, what GET /v1/flows/{id} read before its
// members were paged), its first page and a page in the middle (GetRunPage
// of RunPageMax members), with the bytes and allocations of each read;
// then the outcome (GetRunOutcome, the result route's read) of a run of
// the same plan that failed (src failed, every other member skipped) and
// of one that was cancelled (every member a failure).
//
//	go test -run '^$' -bench RunRead -benchmem ./runtime/store/
func BenchmarkRunRead(b *testing.B) {
	ctx := context.Background()
	c := valkeytest.Client(b, valkeytest.Start(b))
	s, err := Open(ctx, Config{Client: c, FlowPartitions: 1})
	if err != nil {
		b.Fatal(err)
	}
	f := bigCancelFlow(10_000-2, 0, 0)
	// The failed run's src is the only eligible member when it is
	// claimed, and fails.
	failed, _, err := s.StageFlow(ctx, StageRequest{Flow: f, Shared: true, Input: []byte(`{}`)})
	if err != nil {
		b.Fatal(err)
	}
	g, err := s.Claim(ctx, ClaimRequest{Partition: 0, Lanes: []string{"default"}, Worker: worker1, Max: 1})
	if err != nil || len(g) != 1 || !strings.HasSuffix(string(failed.ID), "."+g[0].FlowID) {
		b.Fatalf("claim: %+v %v", g, err)
	}
	if _, err := s.Fail(ctx, g[0].Lease, "src failed", false); err != nil {
		b.Fatal(err)
	}
	r, _, err := s.StageFlow(ctx, StageRequest{Flow: f, Shared: true, Input: []byte(`{}`)})
	if err != nil {
		b.Fatal(err)
	}
	cancelled, _, err := s.StageFlow(ctx, StageRequest{Flow: f, Shared: true, Input: []byte(`{}`)})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := s.CancelRun(ctx, cancelled.ID, "bench"); err != nil {
		b.Fatal(err)
	}
	middle := ""
	for range 5 {
		page, err := s.GetRunPage(ctx, r.ID, middle, 0)
		if err != nil {
			b.Fatal(err)
		}
		middle = page.NextCursor
	}
	for _, bc := range []struct {
		name    string
		members int // read with it (Nodes); -1 for an outcome
		read    func() (*Run, error)
	}{
		{"whole", 10_000, func() (*Run, error) { return s.GetRun(ctx, r.ID) }},
		{"first-page", RunPageMax, func() (*Run, error) { return s.GetRunPage(ctx, r.ID, "", 0) }},
		{"middle-page", RunPageMax, func() (*Run, error) { return s.GetRunPage(ctx, r.ID, middle, 0) }},
		{"page-of-1", 1, func() (*Run, error) { return s.GetRunPage(ctx, r.ID, "", 1) }},
		{"outcome-failed", -1, func() (*Run, error) { return s.GetRunOutcome(ctx, failed.ID) }},
		{"outcome-cancelled", -1, func() (*Run, error) { return s.GetRunOutcome(ctx, cancelled.ID) }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				run, err := bc.read()
				if err != nil {
					b.Fatal(err)
				}
				switch {
				case bc.members >= 0 && len(run.Nodes) != bc.members:
					b.Fatalf("%d members", len(run.Nodes))
				case bc.members < 0 && run.State == RunFailed && (len(run.Failures) != 1 || run.Failures[0].Error != "src failed"):
					b.Fatalf("failures %+v", run.Failures)
				case bc.members < 0 && run.State == RunCancelled && len(run.Failures) != 10_000:
					b.Fatalf("%d failures", len(run.Failures))
				case bc.members < 0 && run.State != RunFailed && run.State != RunCancelled:
					b.Fatalf("run %s", run.State)
				}
			}
		})
	}
}
