package scanner

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/flowfabric/ff/compiler/plan"
	"github.com/flowfabric/ff/lua"
	"github.com/flowfabric/ff/runtime/internal/valkeytest"
	"github.com/flowfabric/ff/runtime/store"
	"github.com/valkey-io/valkey-go"
)

// wideFlow is a flow of one source and n members downstream of it, each
// on success.
func wideFlow(n int) *plan.Flow {
	f := &plan.Flow{Schema: plan.SchemaVersion, Name: "wide", Namespace: "default", Lane: "default"}
	f.Execs = append(f.Execs, plan.Exec{Name: "src", Priority: plan.PriorityDefault, Retry: plan.Retry{Attempts: 1}})
	for i := range n {
		name := fmt.Sprintf("m%d", i)
		f.Execs = append(f.Execs, plan.Exec{Name: name, Priority: plan.PriorityDefault, Retry: plan.Retry{Attempts: 1}})
		f.Edges = append(f.Edges, plan.Edge{From: "src", To: name, On: plan.OnSuccess})
	}
	return f
}

// runEnv is a store of one flow partition on the shared server, with the
// client and key prefix under it, for calls made by hand.
type runEnv struct {
	t      *testing.T
	ctx    context.Context
	c      valkey.Client
	prefix string
	s      *store.Store
}

func newRunEnv(t *testing.T) *runEnv {
	t.Helper()
	ctx := context.Background()
	c := valkeytest.Client(t, valkeytest.Shared(t))
	prefix := valkeytest.Prefix(t)
	s, err := store.Open(ctx, store.Config{Client: c, KeyPrefix: prefix, FlowPartitions: 1})
	if err != nil {
		t.Fatal(err)
	}
	return &runEnv{t: t, ctx: ctx, c: c, prefix: prefix, s: s}
}

// fcall calls library function fn on run id's partition with the run's
// uuid and args, as a caller taking one step by hand does.
func (e *runEnv) fcall(fn string, id store.RunID, args ...string) []valkey.ValkeyMessage {
	e.t.Helper()
	p, uuid, ok := strings.Cut(string(id), ".")
	if !ok {
		e.t.Fatalf("run id %s", id)
	}
	anchor := e.prefix + "ff:{fp:" + p + "}:lanes"
	reply, err := e.c.Do(e.ctx, e.c.B().Fcall().Function(lua.Function(fn)).Numkeys(1).Key(anchor).
		Arg(append([]string{uuid}, args...)...).Build()).ToArray()
	if err != nil {
		e.t.Fatalf("%s = %v", fn, err)
	}
	return reply
}

// stage stages f and returns its run's id.
func (e *runEnv) stage(f *plan.Flow) store.RunID {
	e.t.Helper()
	r, _, err := e.s.StageFlow(e.ctx, store.StageRequest{Flow: f})
	if err != nil {
		e.t.Fatal(err)
	}
	return r.ID
}

// failedRun stages wideFlow(n) and fails its source, which ends the run
// failed (every other member skipped); it returns the run's id and the
// source's execution.
func (e *runEnv) failedRun(n int) (store.RunID, store.ExecutionID) {
	e.t.Helper()
	id := e.stage(wideFlow(n))
	g := claimAll(e.t, e.s, time.Minute)
	if len(g) != 1 {
		e.t.Fatalf("claimed %d, want the source", len(g))
	}
	if _, err := e.s.Fail(e.ctx, g[0].Lease, "boom", false); err != nil {
		e.t.Fatal(err)
	}
	if got, err := e.s.GetRun(e.ctx, id); err != nil || got.State != store.RunFailed {
		e.t.Fatalf("run %+v, %v; want failed", got, err)
	}
	return id, g[0].ExecutionID
}

// ticks makes sc's ticks as the running scanner makes them: one, then a
// catch-up tick for as long as a tick says more (at most limit ticks). It
// returns how many it made.
func ticks(t *testing.T, sc *RunResume, limit int) int {
	t.Helper()
	n := 0
	for n < limit {
		_, more, err := sc.RunOnce(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		n++
		if !more {
			break
		}
	}
	return n
}

// wantCancelled fails unless run id ended cancelled with every member
// cancelled for reason.
func (e *runEnv) wantCancelled(id store.RunID, reason string) {
	e.t.Helper()
	got, err := e.s.GetRun(e.ctx, id)
	if err != nil {
		e.t.Fatal(err)
	}
	if got.State != store.RunCancelled || got.Cancelled != got.Total {
		e.t.Fatalf("run %s with %d of %d members cancelled, want cancelled whole", got.State, got.Cancelled, got.Total)
	}
	for _, n := range got.Nodes {
		if n.Error != reason {
			e.t.Fatalf("%s ended with %q, want the first call's reason %q", n.Name, n.Error, reason)
		}
	}
}

// A run cancel by steps whose caller stopped after its first step (here:
// one ff_cancel_run call made by hand) is finished by the run-resume
// scanner: the run ends cancelled with every member cancelled.
func TestRunResumeScanner(t *testing.T) {
	t.Parallel()
	e := newRunEnv(t)
	id := e.stage(wideFlow(store.CancelStepMembers + 50))
	reply := e.fcall("ff_cancel_run", id, "left halfway", "")
	if len(reply) != 6 {
		t.Fatalf("ff_cancel_run = %v", reply)
	}
	if more, _ := reply[3].AsInt64(); more != 1 {
		t.Fatal("the first step of a cancel by steps said done")
	}
	sc, err := NewRunResume(RunResumeConfig{Store: e.s, Interval: fast, Age: time.Millisecond, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	run(t, sc)
	deadline := time.Now().Add(5 * time.Second)
	for {
		got, err := e.s.GetRun(e.ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if got.State == store.RunCancelled {
			e.wantCancelled(id, "left halfway")
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("run still %s with %d of %d cancelled", got.State, got.Cancelled, got.Total)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Once the scanner took over a stalled cancel by steps (its last step is
// older than the age), it goes on with it until it ends: each tick it
// takes a step of says more, and the run stays due for the catch-up tick
// (a step of the scanner does not count as the caller's, after which the
// scanner waits an age again: a stalled cancel of 10,000 members took a
// hundred ages).
func TestRunResumeFinishesTakenOverCancel(t *testing.T) {
	t.Parallel()
	e := newRunEnv(t)
	id := e.stage(wideFlow(store.CancelStepMembers + 300))
	// The caller's first step, then it stops.
	reply := e.fcall("ff_cancel_run", id, "stopped caller", "")
	if more, _ := reply[3].AsInt64(); more != 1 {
		t.Fatal("the first step of a cancel by steps said done")
	}
	const age = 2 * time.Second
	sc, err := NewRunResume(RunResumeConfig{Store: e.s, Age: age, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(age + 100*time.Millisecond) // the caller's step is older than the age now
	n := ticks(t, sc, 100)
	got, err := e.s.GetRun(e.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != store.RunCancelled {
		t.Fatalf("after the scanner took the stalled cancel over and its %d tick(s) ended, the run is %s "+
			"with %d of %d members cancelled", n, got.State, got.Cancelled, got.Total)
	}
	e.wantCancelled(id, "stopped caller")
}

// The same for a replay by steps: once taken over, its deciding and then
// its applying go on, tick after tick, until the members that run again
// (reset last) are reset.
func TestRunResumeFinishesTakenOverReplay(t *testing.T) {
	t.Parallel()
	e := newRunEnv(t)
	id, src := e.failedRun(store.ReplayStepMembers + 100)
	// The caller's first step, then it stops.
	reply := e.fcall("ff_replay_run", id, "")
	if more, _ := reply[2].AsInt64(); more != 1 {
		t.Fatalf("the first step of a replay by steps said done: %v", reply)
	}
	const age = 2 * time.Second
	sc, err := NewRunResume(RunResumeConfig{Store: e.s, Age: age, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(age + 100*time.Millisecond)
	n := ticks(t, sc, 100)
	x, err := e.s.GetExecution(e.ctx, src)
	if err != nil {
		t.Fatal(err)
	}
	got, err := e.s.GetRun(e.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if x.State.Public != store.StateWaiting || got.State != store.RunRunning || got.Replays != 1 {
		t.Fatalf("after the scanner took the stalled replay over and its %d tick(s) ended, the failed source is %s "+
			"and the run %s with %d replays, want the source waiting in the run replayed once", n, x.State.Public, got.State, got.Replays)
	}
}

// A caller that goes on with its cancel by steps while the scanner takes
// steps of it too (each caller step followed by a scanner call that finds
// the run due: age 0) is not misled: it goes on from where the scanner
// left the scan, its last reply says the run is cancelled and no more, and
// every member is cancelled with the first call's reason.
func TestRunResumeInterleavesWithCancelCaller(t *testing.T) {
	t.Parallel()
	e := newRunEnv(t)
	id := e.stage(wideFlow(4 * store.CancelStepMembers))
	reply := e.fcall("ff_cancel_run", id, "both", "")
	gen, err := reply[4].ToString()
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		if i == 100 {
			t.Fatal("the cancel did not end in 100 steps of its caller")
		}
		res, err := e.s.ResumeRuns(e.ctx, 0, 0, 100)
		if err != nil {
			t.Fatal(err)
		}
		if res.Processed == 0 && i == 0 {
			t.Fatal("the scanner took no step of the cancel")
		}
		reply = e.fcall("ff_cancel_run", id, "ignored", gen)
		if more, _ := reply[3].AsInt64(); more == 0 {
			break
		}
	}
	if state, _ := reply[1].ToString(); state != string(store.RunCancelled) {
		t.Fatalf("the caller's last reply says the run is %q, want cancelled", state)
	}
	e.wantCancelled(id, "both")
	if res, err := e.s.ResumeRuns(e.ctx, 0, 0, 100); err != nil || res.Processed != 0 || res.More {
		t.Fatalf("ResumeRuns after the end = %+v, %v; want nothing left", res, err)
	}
}

// The same for a replay by steps: the caller's steps and the scanner's
// alternate over the deciding and the applying; the caller's last reply
// says no more, and the replay is whole (every member waits again, the
// source eligible, the run replayed once).
func TestRunResumeInterleavesWithReplayCaller(t *testing.T) {
	t.Parallel()
	e := newRunEnv(t)
	id, src := e.failedRun(3 * store.ReplayStepMembers)
	reply := e.fcall("ff_replay_run", id, "")
	gen, err := reply[3].ToString()
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		if i == 100 {
			t.Fatal("the replay did not end in 100 steps of its caller")
		}
		if _, err := e.s.ResumeRuns(e.ctx, 0, 0, 100); err != nil {
			t.Fatal(err)
		}
		reply = e.fcall("ff_replay_run", id, gen)
		if more, _ := reply[2].AsInt64(); more == 0 {
			break
		}
	}
	got, err := e.s.GetRun(e.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != store.RunRunning || got.Replays != 1 || got.Done != 0 {
		t.Fatalf("run %s, %d replays, %d of %d done; want running, replayed once, nothing done", got.State, got.Replays, got.Done, got.Total)
	}
	for _, n := range got.Nodes {
		want := store.StatePending
		if n.ExecutionID == src {
			want = store.StateWaiting
		}
		if n.State.Public != want {
			t.Fatalf("%s is %s after the replay, want %s", n.Name, n.State.Public, want)
		}
	}
	if res, err := e.s.ResumeRuns(e.ctx, 0, 0, 100); err != nil || res.Processed != 0 || res.More {
		t.Fatalf("ResumeRuns after the end = %+v, %v; want nothing left", res, err)
	}
}

func TestRunResumeConfigRefused(t *testing.T) {
	t.Parallel()
	s := openStore(t, 1)
	if _, err := NewRunResume(RunResumeConfig{Store: s, Age: time.Microsecond}); err == nil ||
		!strings.Contains(err.Error(), "Config.Age") {
		t.Fatalf("NewRunResume(Age 1µs) = %v, want an error naming Config.Age", err)
	}
}
