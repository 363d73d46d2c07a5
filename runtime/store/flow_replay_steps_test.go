package store

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

// failedWideRun stages src -> m0..m<width-1> -> sink, runs it with every m
// failing (sink is skipped: the run fails) and returns the run.
func (e *env) failedWideRun(width int) *Run {
	e.t.Helper()
	r := e.stage(bigCancelFlow(width, 0, 0), "")
	e.drive(func(g Grant) outcome { return outcome{fail: strings.HasPrefix(g.FlowNode, "m")} })
	if got := e.run(r.ID); got.State != RunFailed || got.Failed != width || got.Skipped != 1 {
		e.t.Fatalf("wide run = %s, %d failed, %d skipped", got.State, got.Failed, got.Skipped)
	}
	return r
}

// replayStep makes one ff_replay_run call, as a caller that stops after
// it would, and returns whether it said more.
func (e *env) replayStep(id RunID) bool {
	e.t.Helper()
	p, uuid, err := e.s.locate(ExecutionID(id))
	if err != nil {
		e.t.Fatal(err)
	}
	args := []string{uuid}
	if e.s.replayStep > 0 {
		args = append(args, "", strconv.Itoa(e.s.replayStep))
	}
	items, err := e.s.single(e.ctx, call{fn: "ff_replay_run", partition: p, args: args}, ExecutionID(id), "replay")
	if err != nil {
		e.t.Fatal(err)
	}
	more, _ := items[1].AsInt64()
	return more == 1
}

// replayDecided makes ff_replay_run calls, as replayStep does, until the
// replay of a run of more than a step's members is decided (the run is
// running, or ended again) and returns whether the last said more.
func (e *env) replayDecided(id RunID) bool {
	e.t.Helper()
	for range 1000 {
		more := e.replayStep(id)
		if e.runRecord(id)["deciding"] != "1" {
			return more
		}
		if !more {
			e.t.Fatal("a call said done while the replay is being decided")
		}
	}
	e.t.Fatal("the replay is still being decided after 1000 calls")
	return false
}

// wantNoSteppingLeft fails while a key of the stepping (a replay's
// decisions, the runs being cancelled or replayed) is left.
func (e *env) wantNoSteppingLeft() {
	e.t.Helper()
	for _, k := range e.keys() {
		if strings.HasSuffix(k, ":replay") || strings.HasSuffix(k, ":runs:replaying") || strings.HasSuffix(k, ":runs:cancelling") ||
			strings.HasSuffix(k, ":rd") || strings.HasSuffix(k, ":rq") || strings.HasSuffix(k, ":rdlist") || strings.HasSuffix(k, ":rdskip") {
			e.t.Fatalf("%s is left after the steps ended", k)
		}
	}
}

// A replay of a run of more than a step's members goes by steps: the
// first calls decide (the run keeps its ended state meanwhile, and
// nothing of it changes) and the last of them makes the run running; later
// calls reset its members, downstream first, so that members made eligible
// by a step can run and end before the last step and the run still ends as
// a replay in one call would. A replay whose caller stopped is finished by
// ResumeRuns.
func TestFlowReplayLargeRunInSteps(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	width := ReplayStepMembers + 100
	r := e.failedWideRun(width)
	if !e.replayStep(r.ID) {
		t.Fatal("the first call of a replay of more than a step's decisions said done")
	}
	if got := e.run(r.ID); got.State != RunFailed || got.Failed != width {
		t.Fatalf("after the first call: run %s with %d failed, want it as it ended while the replay is decided", got.State, got.Failed)
	}
	if !e.replayDecided(r.ID) {
		t.Fatal("the call that decided a replay of more than a step's decisions said done")
	}
	if got := e.run(r.ID); got.State != RunRunning || got.Done != 1 {
		t.Fatalf("once decided: run %s with %d done, want running with src done", got.State, got.Done)
	}
	if g := e.claimAll(worker1, 10, time.Minute); len(g) != 0 {
		t.Fatalf("claimed %v before any decision was applied", grantIDs(g))
	}
	if !e.replayStep(r.ID) {
		t.Fatal("the second call said done with decisions left")
	}
	// sink was reset first (it is downstream of every m): the m's of this
	// step run and succeed, and count in sink's join.
	var g []Grant
	for more := e.claimAll(worker1, 256, time.Minute); len(more) > 0; more = e.claimAll(worker1, 256, time.Minute) {
		g = append(g, more...)
	}
	if len(g) != ReplayStepMembers-1 {
		t.Fatalf("after the second call %d members are eligible, want %d", len(g), ReplayStepMembers-1)
	}
	var items []Finish
	for _, x := range g {
		items = append(items, Finish{Lease: x.Lease, Result: []byte(`"ok"`)})
	}
	if _, err := e.s.FinishMany(e.ctx, items); err != nil {
		t.Fatal(err)
	}
	p, _, _ := e.s.locate(ExecutionID(r.ID))
	if res, err := e.s.ResumeRuns(e.ctx, p, time.Hour, ScanLimitMax); err != nil || res.Processed != 0 {
		t.Fatalf("ResumeRuns(age 1h) = %+v, %v, want nothing done", res, err)
	}
	if _, err := e.s.ResumeRuns(e.ctx, p, 0, ScanLimitMax); err != nil {
		t.Fatal(err)
	}
	e.wantNoSteppingLeft()
	ran := e.drive(func(Grant) outcome { return outcome{result: []byte(`"ok"`)} })
	if len(ran) != width-(ReplayStepMembers-1)+1 {
		t.Fatalf("ran %d members after the steps, want the other m's and sink", len(ran))
	}
	got := e.run(r.ID)
	if got.State != RunSucceeded || got.Succeeded != got.Total || got.Replays != 1 {
		t.Fatalf("replayed run = %s, %d of %d succeeded, %d replays", got.State, got.Succeeded, got.Total, got.Replays)
	}
}

// ReplayRun takes every step itself; a run cancelled between two steps
// keeps what was not reset as it ended, and ends cancelled.
func TestFlowReplayStepsAndCancel(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	width := ReplayStepMembers + 50
	whole := e.failedWideRun(width)
	if _, err := e.s.ReplayRun(e.ctx, whole.ID); err != nil {
		t.Fatal(err)
	}
	e.wantNoSteppingLeft()
	e.drive(func(Grant) outcome { return outcome{result: []byte(`"ok"`)} })
	if got := e.run(whole.ID); got.State != RunSucceeded || got.Succeeded != got.Total {
		t.Fatalf("replayed run = %s, %d of %d succeeded", got.State, got.Succeeded, got.Total)
	}

	cut := e.failedWideRun(width)
	e.replayDecided(cut.ID)
	e.replayStep(cut.ID)
	if _, err := e.s.CancelRun(e.ctx, cut.ID, "enough"); err != nil {
		t.Fatal(err)
	}
	e.wantNoSteppingLeft()
	got := e.run(cut.ID)
	if got.State != RunCancelled {
		t.Fatalf("run cancelled during its replay = %s", got.State)
	}
	if g := e.claimAll(worker1, 10, time.Minute); len(g) != 0 {
		t.Fatalf("claimed %v from a cancelled run", grantIDs(g))
	}
	states := map[PublicState]int{}
	for _, n := range got.Nodes {
		states[n.State.Public]++
	}
	if states[StateCancelled] != ReplayStepMembers || states[StateFailed] != width-ReplayStepMembers+1 ||
		states[StateCompleted] != 1 {
		t.Fatalf("member states %v: want the reset ones cancelled, the others failed (and src completed)", states)
	}
	if _, err := e.s.ReplayRun(e.ctx, cut.ID); err != nil {
		t.Fatalf("replay of the run cancelled during a replay: %v", err)
	}
	e.drive(func(Grant) outcome { return outcome{result: []byte(`"ok"`)} })
	if got := e.run(cut.ID); got.State != RunSucceeded {
		t.Fatalf("run replayed again = %s", got.State)
	}
}
