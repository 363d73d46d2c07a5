package store

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/flowfabric/ff/compiler/plan"
	"github.com/flowfabric/ff/runtime/internal/valkeytest"
	"github.com/google/go-cmp/cmp"
	"github.com/valkey-io/valkey-go"
)

// stepped returns a store of e's keys whose replays go by steps of step
// members and edges (ff_replay_run's step argument): a small run's replay
// is then decided and applied by steps, as a run of more than
// ReplayStepMembers members is.
func (e *env) stepped(step int) *Store {
	e.t.Helper()
	s, err := Open(e.ctx, Config{Client: e.c, KeyPrefix: e.prefix, FlowPartitions: e.s.FlowPartitions(), Logger: testLogger(e.t)})
	if err != nil {
		e.t.Fatal(err)
	}
	s.replayStep = step
	return s
}

// replayView is what a replay leaves of a run: the record's counters and
// state, and per member its state and error, and with joins the join
// counters of one that is not ended (those of an ended member decided
// before all its upstreams ended depend on the order they ended in).
func (e *env) replayView(id RunID, joins bool) map[string]string {
	e.t.Helper()
	rec := e.runRecord(id)
	out := map[string]string{}
	for _, f := range []string{"state", "left", "failed", "skipped", "cancelled", "unhandled", "result_outcome", "replays", "cancelling"} {
		out["run."+f] = rec[f]
	}
	for _, n := range e.run(id).Nodes {
		p, uuid, _ := splitID(string(n.ExecutionID))
		v, err := e.c.Do(e.ctx, e.c.B().Hmget().Key(e.s.k.core(p, uuid)).Field("state", "deps_done", "deps_ok", "failure_reason").Build()).ToArray()
		if err != nil {
			e.t.Fatal(err)
		}
		if st, _ := v[0].ToString(); !joins || strings.HasPrefix(st, "terminal ") {
			v = []valkey.ValkeyMessage{v[0], v[3]}
		}
		var s []string
		for _, x := range v {
			t, _ := x.ToString()
			s = append(s, t)
		}
		out[n.Name] = fmt.Sprint(s)
	}
	return out
}

// A replay decided by steps (scan, walk in topological order, skips
// listed first) leaves every run exactly as the replay decided in one
// call does: random flows, two runs of each driven alike (outcomes by
// member name), some members cancelled by hand, replayed one way and the
// other, then driven and replayed again, for several rounds. (16 seeds
// here; 400 passed when the deciding by steps was written.)
func TestReplayDecidedByStepsAsInOneCall(t *testing.T) {
	t.Parallel()
	e := onePartition(t)
	for seed := uint64(0); seed < 16; seed++ {
		rng := rand.New(rand.NewPCG(seed, 5))
		var f *plan.Flow
		if seed%2 == 0 {
			f = fixpointFlow(rng)
		} else {
			f = randomFlow(rng, 8+rng.IntN(12))
			for i := range f.Execs {
				f.Execs[i].DeadlineMs, f.Execs[i].TimeoutMs = 0, 0
				f.Execs[i].Retry = plan.Retry{Attempts: 1}
			}
		}
		steps := e.stepped(1 + rng.IntN(4))
		one, by := e.stage(f, `{}`), e.stage(f, `{}`)
		failP := rng.Float64()
		for round := 0; round < 4; round++ {
			step := fmt.Sprintf("seed %d round %d (step %d)", seed, round, steps.replayStep)
			fails := map[string]bool{}
			for _, x := range f.Execs {
				fails[x.Name] = rng.Float64() < failP
			}
			if rng.IntN(4) == 0 { // a member cancelled by hand in both runs
				name := f.Execs[rng.IntN(len(f.Execs))].Name
				for _, id := range []RunID{one.ID, by.ID} {
					for _, n := range e.run(id).Nodes {
						if n.Name == name && !n.State.Public.Terminal() {
							if _, err := e.s.Cancel(e.ctx, n.ExecutionID, "by hand"); err != nil {
								t.Fatal(err)
							}
						}
					}
				}
			}
			e.drive(func(g Grant) outcome { return outcome{result: []byte(`1`), fail: fails[g.FlowNode]} })
			a, b := e.run(one.ID), e.run(by.ID)
			if a.State == RunRunning || b.State == RunRunning {
				for _, id := range []RunID{one.ID, by.ID} {
					if _, err := e.s.CancelRun(e.ctx, id, "end"); err != nil {
						t.Fatal(err)
					}
				}
				a = e.run(one.ID)
			}
			if diff := cmp.Diff(e.replayView(one.ID, false), e.replayView(by.ID, false)); diff != "" {
				t.Fatalf("%s: the two runs ended apart before the replay (-one +by):\n%s", step, diff)
			}
			if a.State == RunSucceeded {
				break
			}
			_, errOne := e.s.ReplayRun(e.ctx, one.ID)
			_, errBy := steps.ReplayRun(e.ctx, by.ID)
			if strings.ReplaceAll(fmt.Sprint(errOne), string(one.ID), "?") != strings.ReplaceAll(fmt.Sprint(errBy), string(by.ID), "?") {
				t.Fatalf("%s: replay in one call: %v; by steps: %v", step, errOne, errBy)
			}
			if diff := cmp.Diff(e.replayView(one.ID, true), e.replayView(by.ID, true)); diff != "" {
				t.Fatalf("%s: replayed (-in one call +by steps):\n%s", step, diff)
			}
			if errOne != nil {
				break
			}
			e.wantNoSteppingLeft()
			failP /= 2
		}
	}
}

// A replay whose caller stopped while it was being decided is decided and
// applied by ResumeRuns (the run is listed in B:runs:replaying from the
// first call); a new ReplayRun of a run being decided goes on with it
// rather than starting another.
func TestReplayDecidingResumed(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.s.replayStep = 20 // a run of more than 20 members is replayed by steps
	width := 100
	stopped := e.failedWideRun(width)
	e.replayStep(stopped.ID)
	e.replayStep(stopped.ID)
	if e.runRecord(stopped.ID)["deciding"] != "1" {
		t.Fatal("two calls decided a replay of more than a step's members")
	}
	p, _, _ := e.s.locate(ExecutionID(stopped.ID))
	for range 100 {
		if _, err := e.s.ResumeRuns(e.ctx, p, 0, ScanLimitMax); err != nil {
			t.Fatal(err)
		}
		if rec := e.runRecord(stopped.ID); rec["deciding"] != "1" && e.keyCount(":replay") == 0 {
			break
		}
	}
	e.wantNoSteppingLeft()
	if got := e.run(stopped.ID); got.State != RunRunning || got.Replays != 1 {
		t.Fatalf("after ResumeRuns: run %s with %d replays, want running, replayed once", got.State, got.Replays)
	}
	e.drive(func(Grant) outcome { return outcome{result: []byte(`"ok"`)} })

	again := e.failedWideRun(width)
	e.replayStep(again.ID)
	if _, err := e.s.ReplayRun(e.ctx, again.ID); err != nil {
		t.Fatalf("ReplayRun of a run being decided: %v", err)
	}
	e.wantNoSteppingLeft()
	if got := e.run(again.ID); got.State != RunRunning || got.Replays != 1 {
		t.Fatalf("after a second ReplayRun: run %s with %d replays, want running, replayed once", got.State, got.Replays)
	}
	e.drive(func(Grant) outcome { return outcome{result: []byte(`"ok"`)} })
	for _, id := range []RunID{stopped.ID, again.ID} { // every member ran again
		if got := e.run(id); got.State != RunSucceeded || got.Succeeded != got.Total {
			t.Fatalf("replayed run = %s, %d of %d succeeded", got.State, got.Succeeded, got.Total)
		}
	}
}

// keyCount counts e's keys ending with suffix.
func (e *env) keyCount(suffix string) int {
	e.t.Helper()
	n := 0
	for _, k := range e.keys() {
		if strings.HasSuffix(k, suffix) {
			n++
		}
	}
	return n
}

// A replay decided by steps that finds a member's record gone (retention
// deleted it) is refused as a replay in one call is, and changes nothing:
// the run stays as it ended, listed for retention.
func TestReplayDecidingOfPurgedMembers(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.s.replayStep = 20
	r := e.failedWideRun(100)
	victim := e.run(r.ID).Nodes[60]
	p, uuid, _ := e.s.locate(victim.ExecutionID)
	if err := e.c.Do(e.ctx, e.c.B().Del().Key(e.s.k.core(p, uuid)).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	before := e.runRecord(r.ID)
	_, err := e.s.ReplayRun(e.ctx, r.ID)
	var se *StateError
	if !errors.As(err, &se) || !strings.Contains(err.Error(), "purged") {
		t.Fatalf("ReplayRun of a run with a member purged = %v, want the purged refusal", err)
	}
	if diff := cmp.Diff(before, e.runRecord(r.ID)); diff != "" {
		t.Fatalf("run record after the refused replay (-before +after):\n%s", diff)
	}
	e.wantNoSteppingLeft()
}

// Every call of a replay by steps does about a step's work whatever the
// run's shape: a member with 600 out-edges (the wide run's src) is walked
// over several calls, and no call runs more than a few commands per
// member or edge of its step.
func TestReplayStepsBoundEveryCall(t *testing.T) {
	t.Parallel()
	e, addr := newEnvAlone(t)
	e.s.replayStep = 50
	r := e.failedWideRun(600)
	mon := valkeytest.StartMonitor(t, addr, e.c)
	from := mon.Mark()
	if _, err := e.s.ReplayRun(e.ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	lines := mon.Lines(from, mon.Mark())
	calls, most, cur := 0, 0, -1
	for _, l := range lines {
		switch {
		case strings.Contains(l, `"FCALL"`) && strings.Contains(l, `"ff_replay_run`):
			calls++
			cur = 0
		case strings.Contains(l, " lua] ") && cur >= 0:
			cur++
			most = max(most, cur)
		default:
			cur = -1
		}
	}
	if calls < 600*2/50 {
		t.Fatalf("%d ff_replay_run calls for a replay of 602 members and 1,200 edges by steps of 50", calls)
	}
	if max := 50*8 + 40; most > max {
		t.Fatalf("a call of the replay by steps of 50 ran %d commands, want at most %d", most, max)
	}
	if got := e.run(r.ID); got.State != RunRunning {
		t.Fatalf("run %s after the replay", got.State)
	}
}

// A replay decided by steps whose walk cannot reach every member (a
// record whose upstream count disagrees with its edges: it never becomes
// ready) is refused as a purged run is, and changes nothing: it does not
// leave the run running with members nothing will reset.
func TestReplayDecidingOfInconsistentRecords(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.s.replayStep = 20
	r := e.failedWideRun(100)
	var sink RunNode
	for _, n := range e.run(r.ID).Nodes {
		if n.Name == "sink" {
			sink = n
		}
	}
	p, uuid, _ := e.s.locate(sink.ExecutionID)
	if err := e.c.Do(e.ctx, e.c.B().Hincrby().Key(e.s.k.core(p, uuid)).Field("deps_total").Increment(1).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	before := e.runRecord(r.ID)
	_, err := e.s.ReplayRun(e.ctx, r.ID)
	if err == nil || !strings.Contains(err.Error(), "purged") {
		t.Fatalf("ReplayRun of a run whose records disagree = %v, want the purged refusal", err)
	}
	if diff := cmp.Diff(before, e.runRecord(r.ID)); diff != "" {
		t.Fatalf("run record after the refused replay (-before +after):\n%s", diff)
	}
	e.wantNoSteppingLeft()
}
