package store

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/flowfabric/ff/runtime/internal/valkeytest"
	"github.com/google/go-cmp/cmp"
	"github.com/valkey-io/valkey-go"

	"github.com/flowfabric/ff/compiler/plan"
)

// guardsFlow is src feeding n guards g0..g<n-1>, each with deadline: once
// src is cancelled, the guards are the members a cancel by steps leaves
// for its later steps, and they can all end by their deadline between
// two steps.
func guardsFlow(n int, deadline time.Duration) *plan.Flow {
	names := []string{"src"}
	var edges []string
	for i := range n {
		g := fmt.Sprintf("g%d", i)
		names = append(names, g)
		edges = append(edges, "src->"+g)
	}
	f := flowOf("guards", execs(names...), edges...)
	for i := range f.Execs {
		if f.Execs[i].Name != "src" {
			f.Execs[i].DeadlineMs = deadline.Milliseconds()
		}
	}
	return f
}

// endByDeadlinesBetweenSteps stages guardsFlow(n, 200ms), takes the first
// step of its cancel only (a caller that stopped after it) and lets every
// guard the step did not reach expire, which ends the run between two
// steps of its cancel. It returns the run and its partition.
func (e *env) endByDeadlinesBetweenSteps(n int) (*Run, int) {
	e.t.Helper()
	r := e.stage(guardsFlow(n, 200*time.Millisecond), "")
	if !e.cancelStep(r.ID, "stop it") {
		e.t.Fatal("the first step of the cancel said done (the test needs steps left)")
	}
	p, _, _ := e.s.locate(ExecutionID(r.ID))
	time.Sleep(250 * time.Millisecond)
	for i := 0; e.runRecord(r.ID)["state"] == string(RunRunning); i++ {
		if i == 20 {
			e.t.Fatal("the guards' deadlines did not end the run")
		}
		if _, err := e.s.ExpireDeadlines(e.ctx, p, ScanLimitMax); err != nil {
			e.t.Fatal(err)
		}
	}
	if rec := e.runRecord(r.ID); rec["state"] != string(RunCancelled) || rec["failed"] == "0" {
		e.t.Fatalf("run = %s with %s expired, want cancelled by the expiries between steps", rec["state"], rec["failed"])
	}
	return r, p
}

// A large run whose cancel's caller stopped after the first step, and
// whose members the cancel had not reached all expired by their deadline,
// ends cancelled between two steps of its cancel. Replayed afterwards, it
// runs again, and the run-resume scanner leaves it alone: the end of the
// run removed what the cancel by steps had left (its B:runs:cancelling
// entry and cancel_cursor), and the scanner only goes on with a cancel
// under way, never starts one.
func TestResumeLeavesARunReplayedAfterItsCancelEnded(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r, p := e.endByDeadlinesBetweenSteps(2 * CancelStepMembers)
	if _, err := e.s.ReplayRun(e.ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	if got := e.run(r.ID); got.State != RunRunning {
		t.Fatalf("replayed run = %s", got.State)
	}
	if _, err := e.s.ResumeRuns(e.ctx, p, 0, ScanLimitMax); err != nil {
		t.Fatal(err)
	}
	got := e.run(r.ID)
	if got.State != RunRunning || got.Cancelled != 0 || e.runRecord(r.ID)["cancelling"] == "1" {
		reasons := map[string]int{}
		for _, n := range got.Nodes {
			reasons[string(n.State.Public)+" "+fmt.Sprintf("%q", n.Error)]++
		}
		t.Fatalf("after ResumeRuns the replayed run is %s, cancelling %q, members %v: it cancelled a replay nobody cancelled",
			got.State, e.runRecord(r.ID)["cancelling"], reasons)
	}
}

// A run that ended cancelled between two steps of its cancel, and that
// retention then deleted, leaves nothing in B:runs:cancelling; the
// run-resume scanner, even with a limit of 1, goes on with another run's
// stalled cancel until it ends.
func TestResumeIsNotStarvedByRunsRetentionDeleted(t *testing.T) {
	t.Parallel()
	e := onePartition(t)
	r, p := e.endByDeadlinesBetweenSteps(2 * CancelStepMembers)
	if _, ok := e.runRecord(r.ID)["cancel_cursor"]; !ok {
		t.Log("cancel_cursor was cleaned at the end (fine)")
	}
	// Retention deletes the ended run.
	time.Sleep(5 * time.Millisecond)
	for i := 0; len(e.runRecord(r.ID)) != 0 && i < 20; i++ {
		if _, err := e.s.PurgeTerminal(e.ctx, p, time.Millisecond, ScanLimitMax); err != nil {
			t.Fatal(err)
		}
	}
	if len(e.runRecord(r.ID)) != 0 {
		t.Fatal("retention kept the run")
	}
	// Another large run whose cancel's caller stopped after its first
	// step, on the same (only) partition.
	other := e.stage(bigCancelFlow(2*CancelStepMembers, 0, 0), "")
	if !e.cancelStep(other.ID, "other") {
		t.Fatal("the other run's cancel ended in one step")
	}
	for range 10 {
		if _, err := e.s.ResumeRuns(e.ctx, p, 0, 1); err != nil {
			t.Fatal(err)
		}
	}
	var left []string
	for _, k := range e.keys() {
		if strings.HasSuffix(k, ":runs:cancelling") {
			ids, err := e.c.Do(e.ctx, e.c.B().Zrange().Key(k).Min("0").Max("-1").Build()).AsStrSlice()
			if err != nil {
				t.Fatal(err)
			}
			left = append(left, ids...)
		}
	}
	_, uuid, _ := e.s.locate(ExecutionID(r.ID))
	for _, id := range left {
		if id == uuid {
			t.Fatalf("B:runs:cancelling keeps %s, a run retention deleted, after 10 ResumeRuns calls "+
				"(the other run's cancel: %s, %d of %d cancelled)", uuid, e.run(other.ID).State,
				e.run(other.ID).Cancelled, e.run(other.ID).Total)
		}
	}
}

// CancelRuns (POST /v1/flows/cancel) of a run that a replay by steps made
// running, before a step reset any member (no member is live), reports
// the run cancelled: the cancel's first reply says the run was running,
// whatever it had to cancel.
func TestCancelRunsReportsAReplayingRunAsCancelled(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.failedWideRun(ReplayStepMembers + 100)
	if !e.replayDecided(r.ID) {
		t.Fatal("the replay went in one call")
	}
	if got := e.run(r.ID); got.State != RunRunning {
		t.Fatalf("run = %s once the replay was decided", got.State)
	}
	cancelled, errs := e.s.CancelRuns(e.ctx, []RunID{r.ID}, "bulk")
	if errs[0] != nil {
		t.Fatal(errs[0])
	}
	got := e.run(r.ID)
	if got.State != RunCancelled {
		t.Fatalf("run = %s after CancelRuns", got.State)
	}
	if !cancelled[0] {
		t.Fatalf("CancelRuns: cancelled = false for a run that was running and is now %s (the API says it had ended)", got.State)
	}
}

// wideRandomFlow is a random DAG of n members, each with up to three
// upstreams among the 40 members before it (random conditions and joins),
// so that a replay of it decides for more than a step's members and its
// steps split diamonds, chains and members with several upstreams.
func wideRandomFlow(rng *rand.Rand, n int) *plan.Flow {
	var names []string
	for i := range n {
		names = append(names, fmt.Sprintf("m%d", i))
	}
	f := flowOf("widerand", execs(names...))
	ons := []string{plan.OnSuccess, plan.OnSuccess, plan.OnFailure, plan.OnDone}
	for to := 4; to < n; to++ {
		seen := map[int]bool{}
		for range 1 + rng.IntN(3) {
			from := max(0, to-40) + rng.IntN(min(to, 40))
			if seen[from] {
				continue
			}
			seen[from] = true
			f.Edges = append(f.Edges, plan.Edge{From: names[from], To: names[to], On: ons[rng.IntN(len(ons))]})
			f.Execs[to].Upstreams = append(f.Execs[to].Upstreams, names[from])
		}
		if k := len(f.Execs[to].Upstreams); k > 1 {
			switch rng.IntN(3) {
			case 0:
				f.Execs[to].Join = plan.Join{Kind: plan.JoinAny}
			case 1:
				f.Execs[to].Join = plan.Join{Kind: plan.JoinCount, N: 1 + rng.IntN(k)}
			}
		}
	}
	return f
}

// finishSome claims up to max eligible members and finishes them, each
// failing with probability failP, some with a hand-off whose grants are
// finished the same way; it returns how many it finished.
func (e *env) finishSome(rng *rand.Rand, max int, failP float64) int {
	e.t.Helper()
	gs := e.claimAll(worker1, max, time.Minute)
	n := 0
	for len(gs) > 0 {
		var items []Finish
		for _, g := range gs {
			if rng.Float64() < failP {
				items = append(items, Finish{Lease: g.Lease, Failed: true, Error: "boom"})
			} else {
				items = append(items, Finish{Lease: g.Lease, Result: []byte(`1`)})
			}
		}
		n += len(items)
		var h *Handoff
		if rng.IntN(2) == 0 {
			h = handoff(1 + rng.IntN(3))
		}
		_, grants, err := e.s.FinishHandoff(e.ctx, items, h)
		if err != nil {
			e.t.Fatal(err)
		}
		gs = grants
	}
	return n
}

// A replay by steps of large random DAGs (diamonds, chains, members with
// several upstreams some kept and some reset, join any and join N), with
// members made eligible by a step claimed and finished (successes,
// failures, hand-offs) between steps, ends at a fixpoint of the edge rules
// with counters matching the members, as a replay in one call does
// (TestReplayReachesAFixpoint); after the last step no member waits for an
// edge already decided.
func TestReplayStepsRandomWideDAGs(t *testing.T) {
	t.Parallel()
	e := onePartition(t)
	stepped := 0
	for seed := uint64(0); seed < 1; seed++ {
		rng := rand.New(rand.NewPCG(seed, 5))
		f := wideRandomFlow(rng, 650)
		r := e.stage(f, `{}`)
		failP := 0.4
		for round := 0; round < 3; round++ {
			step := fmt.Sprintf("seed %d round %d", seed, round)
			e.drive(func(Grant) outcome { return outcome{result: []byte(`1`), fail: rng.Float64() < failP} })
			run := e.checkFixpoint(step, f, r.ID)
			e.checkRunInvariants(step, f, r.ID, false)
			if run.State != RunFailed {
				break
			}
			steps := 0
			for more := e.replayStep(r.ID); more; more = e.replayStep(r.ID) {
				steps++
				e.finishSome(rng, 1+rng.IntN(256), failP)
				if rec := e.runRecord(r.ID); rec["state"] != string(RunRunning) && rec["deciding"] != "1" {
					t.Fatalf("%s: run %s between two replay steps", step, rec["state"])
				}
			}
			if steps > 0 {
				stepped++
			}
			e.wantNoSteppingLeft()
			failP /= 3
		}
		e.drive(func(Grant) outcome { return outcome{result: []byte(`1`)} })
		e.checkFixpoint(fmt.Sprintf("seed %d end", seed), f, r.ID)
		e.checkRunInvariants(fmt.Sprintf("seed %d end", seed), f, r.ID, false)
	}
	if stepped == 0 {
		t.Fatal("no replay went by steps (the test needs some)")
	}
	t.Logf("%d replays by steps", stepped)
}

// hookClient passes every command to its Client and, after the first
// reply to an FCALL of function fn (alone or in a pipeline) after which
// when (if set) holds, runs hook once: another client's calls that land
// between two rounds of the store's own step loop.
type hookClient struct {
	valkey.Client
	fn    string
	calls int
	when  func() bool
	hook  func()
	fired bool
}

func (h *hookClient) seen(cmd valkey.Completed) bool {
	args := cmd.Commands()
	return len(args) > 1 && args[0] == "FCALL" && strings.HasPrefix(args[1], h.fn)
}

func (h *hookClient) after(n int) {
	if n == 0 {
		return
	}
	h.calls += n
	if h.hook == nil || h.fired || h.when != nil && !h.when() {
		return
	}
	h.fired = true
	h.hook()
}

func (h *hookClient) Do(ctx context.Context, cmd valkey.Completed) valkey.ValkeyResult {
	n := 0
	if h.seen(cmd) {
		n = 1
	}
	resp := h.Client.Do(ctx, cmd)
	h.after(n)
	return resp
}

func (h *hookClient) DoMulti(ctx context.Context, cmds ...valkey.Completed) []valkey.ValkeyResult {
	n := 0
	for _, c := range cmds {
		if h.seen(c) {
			n++
		}
	}
	resp := h.Client.DoMulti(ctx, cmds...)
	h.after(n)
	return resp
}

// hooked returns a hookClient on e's client that runs its hook after the
// first reply to fn, and a store of e's keys that talks through it.
func (e *env) hooked(fn string) (*hookClient, *Store) {
	e.t.Helper()
	h := &hookClient{Client: e.c, fn: fn}
	s, err := Open(e.ctx, Config{Client: h, KeyPrefix: e.prefix, FlowPartitions: 4, Logger: testLogger(e.t)})
	if err != nil {
		e.t.Fatal(err)
	}
	return h, s
}

// A ReplayRun by steps during which another caller cancels the run (a
// cancel stops a replay by steps at once) ends with the run cancelled:
// its next call goes on only with its own replay (the generation of its
// first reply), finds it stopped, and does not start another; it answers
// that a cancel stopped the replay (the run is cancelled), not that the
// run was replayed.
func TestReplayRunStopsWhenItsRunIsCancelledBetweenSteps(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.failedWideRun(ReplayStepMembers + 100)
	h, hs := e.hooked("ff_replay_run")
	h.when = func() bool { return e.runRecord(r.ID)["state"] == string(RunRunning) } // decided
	h.hook = func() {
		if _, err := e.s.CancelRun(e.ctx, r.ID, "stop the replay"); err != nil {
			t.Error(err)
		}
		if got := e.run(r.ID); got.State != RunCancelled {
			t.Errorf("run = %s after the concurrent CancelRun", got.State)
		}
	}
	answer, err := hs.ReplayRun(e.ctx, r.ID)
	got := e.run(r.ID)
	if got.State != RunCancelled || got.Replays != 1 {
		t.Fatalf("ReplayRun = %v; the run cancelled during its replay's steps is %s, replayed %d times (%d ff_replay_run calls)",
			err, got.State, got.Replays, h.calls)
	}
	var se *StateError
	if !errors.As(err, &se) || se.Reason != ReasonReplayCancelled || se.State != PublicState(RunCancelled) || !se.Run ||
		!strings.Contains(err.Error(), "stopped by a cancel") || answer != nil {
		t.Fatalf("ReplayRun of a run cancelled between its steps = %v (answered a run: %t); want a StateError saying a cancel stopped it",
			err, answer != nil)
	}
}

// A cancel that lands while a replay is being decided stops it before
// it changed anything: the run stays as it ended, with nothing of the
// deciding left, and the replay's next call (its generation) does not
// start it again; ReplayRun answers that the replay was dropped (the run
// is as it ended), not that it was replayed.
func TestReplayRunStopsWhenCancelledWhileDecided(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.failedWideRun(ReplayStepMembers + 100)
	before := e.replayView(r.ID, true)
	h, hs := e.hooked("ff_replay_run")
	h.hook = func() { // after the first call: deciding
		if e.runRecord(r.ID)["deciding"] != "1" {
			t.Error("the replay's first call did not start deciding it")
		}
		got, err := e.s.CancelRun(e.ctx, r.ID, "stop the replay")
		if err != nil || got.State != RunFailed {
			t.Errorf("CancelRun while the replay is decided = %+v, %v; want the run as it ended", got, err)
		}
	}
	answer, err := hs.ReplayRun(e.ctx, r.ID)
	var se *StateError
	if !errors.As(err, &se) || se.Reason != ReasonReplayDropped || se.State != PublicState(RunFailed) || !se.Run ||
		!strings.Contains(err.Error(), "nothing was replayed") || answer != nil {
		t.Fatalf("ReplayRun whose deciding a cancel dropped = %v (answered a run: %t); want a StateError saying nothing was replayed",
			err, answer != nil)
	}
	if diff := cmp.Diff(before, e.replayView(r.ID, true)); diff != "" {
		t.Fatalf("the run after a replay cancelled while decided (-before +after):\n%s", diff)
	}
	e.wantNoSteppingLeft()
	p, uuid, _ := e.s.locate(ExecutionID(r.ID))
	if _, err := e.c.Do(e.ctx, e.c.B().Zscore().Key(e.s.k.base(p)+":runs:ended").Member(uuid).Build()).AsFloat64(); err != nil {
		t.Fatalf("the run is not back in B:runs:ended (retention would keep it for ever): %v", err)
	}
}

// A CancelRun by steps whose run ends between two of its calls (the
// members it had not reached expire) and is replayed by another caller
// leaves the replay running: its next call goes on only with its own
// cancel (the generation of its first reply), and that one is over.
func TestCancelRunStopsWhenItsRunEndedAndWasReplayed(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.stage(guardsFlow(2*CancelStepMembers, 200*time.Millisecond), "")
	p, _, _ := e.s.locate(ExecutionID(r.ID))
	h, hs := e.hooked("ff_cancel_run")
	h.hook = func() {
		time.Sleep(250 * time.Millisecond)
		for i := 0; e.runRecord(r.ID)["state"] == string(RunRunning) && i < 20; i++ {
			if _, err := e.s.ExpireDeadlines(e.ctx, p, ScanLimitMax); err != nil {
				t.Error(err)
			}
		}
		if _, err := e.s.ReplayRun(e.ctx, r.ID); err != nil {
			t.Errorf("replay of the run ended between two cancel steps: %v", err)
		}
		if got := e.run(r.ID); got.State != RunRunning || got.Replays != 1 {
			t.Errorf("replayed run = %s, %d replays", got.State, got.Replays)
		}
	}
	if _, err := hs.CancelRun(e.ctx, r.ID, "stop it"); err != nil {
		t.Fatal(err)
	}
	if got := e.run(r.ID); got.State != RunRunning || got.Cancelled != 0 {
		t.Fatalf("the replay made between two steps of a cancel is %s with %d members cancelled, after %d ff_cancel_run calls",
			got.State, got.Cancelled, h.calls)
	}
}

// Two ReplayRun of one large failed run at once (two users, or a client
// that retried its request): the second takes steps of the first's replay
// and may take its last; the first's next call then finds its replay done
// and answers success, the run running and replayed once.
func TestReplayRunSucceedsWhenAnotherTookItsLastStep(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.failedWideRun(ReplayStepMembers + 100)
	h, hs := e.hooked("ff_replay_run")
	h.hook = func() {
		if _, err := e.s.ReplayRun(e.ctx, r.ID); err != nil {
			t.Logf("the second ReplayRun: %v", err)
		}
	}
	_, err := hs.ReplayRun(e.ctx, r.ID)
	got := e.run(r.ID)
	if err != nil {
		t.Fatalf("ReplayRun = %v, though the run it replayed is %s with %d replays and no step left", err, got.State, got.Replays)
	}
}

// A large failed run replayed by steps and cancelled after one step ends
// cancelled with counters that match its members: those the replay had
// reset end cancelled, the others stay failed and are counted failed (the
// cancel settles the decisions the replay had not applied).
func TestCancelDuringReplayStepsKeepsCountersTrue(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.failedWideRun(ReplayStepMembers + 100)
	e.replayDecided(r.ID)
	e.replayStep(r.ID)
	if _, err := e.s.CancelRun(e.ctx, r.ID, "enough"); err != nil {
		t.Fatal(err)
	}
	got := e.run(r.ID)
	failed, ended := 0, 0
	for _, n := range got.Nodes {
		if n.State.Lifecycle == LifecycleTerminal {
			ended++
		}
		if n.State.Outcome == OutcomeFailed {
			failed++
		}
	}
	if got.State != RunCancelled || ended != got.Total {
		t.Fatalf("run %s with %d of %d members ended", got.State, ended, got.Total)
	}
	if got.Done != ended || got.Failed != failed {
		t.Fatalf("ended run %s says done %d failed %d cancelled %d of %d; its members: %d ended, %d failed",
			got.State, got.Done, got.Failed, got.Cancelled, got.Total, ended, failed)
	}
}

// A cancel by steps of a large random DAG caught mid-run (members
// running, delayed by a retry backoff, eligible, pending; `on failure` and
// `on done` edges, join any and join N; short deadlines on some members):
// between its steps the deadline, lease, timeout and promotion scanners
// run and members expire, yet nothing can be claimed and no member
// succeeds or becomes eligible; the run ends cancelled with every member
// ended and no mark of the stepping left.
func TestCancelStepsNothingStartsBetweenSteps(t *testing.T) {
	t.Parallel()
	e := onePartition(t)
	rng := rand.New(rand.NewPCG(7, 7))
	f := wideRandomFlow(rng, 2*CancelStepMembers+100)
	for i := range f.Execs {
		x := &f.Execs[i]
		switch rng.IntN(4) {
		case 0:
			x.DeadlineMs = int64(150 + rng.IntN(150))
		case 1:
			x.Retry = plan.Retry{Attempts: 3, DelayMs: 50}
		}
	}
	r := e.stage(f, `{}`)
	// Run part of it: some succeed, some fail (retries wait), some stay
	// claimed.
	for range 3 {
		e.finishSome(rng, 64, 0.3)
	}
	held := e.claimAll(worker1, 20, time.Second)
	before := map[string]PublicState{}
	for _, n := range e.run(r.ID).Nodes {
		before[n.Name] = n.State.Public
	}
	if !e.cancelStep(r.ID, "stop") {
		t.Fatal("the cancel ended in one call")
	}
	for _, g := range held {
		if err := e.s.Complete(e.ctx, g.Lease, []byte(`1`)); err == nil {
			t.Fatalf("%s completed after the first cancel step", g.FlowNode)
		}
	}
	scan := func() {
		time.Sleep(60 * time.Millisecond)
		for _, sc := range []func() (ScanResult, error){
			func() (ScanResult, error) { return e.s.ExpireDeadlines(e.ctx, 0, ScanLimitMax) },
			func() (ScanResult, error) { return e.s.PromoteDelayed(e.ctx, 0, ScanLimitMax) },
			func() (ScanResult, error) { return e.s.ExpireLeases(e.ctx, 0, ScanLimitMax) },
			func() (ScanResult, error) { return e.s.TimeoutAttempts(e.ctx, 0, ScanLimitMax) },
		} {
			if _, err := sc(); err != nil {
				t.Fatal(err)
			}
		}
		if g := e.claimAll(worker1, 100, time.Minute); len(g) != 0 {
			t.Fatalf("claimed %v between cancel steps", grantIDs(g))
		}
		for _, n := range e.run(r.ID).Nodes {
			if n.State.Public == StateCompleted && before[n.Name] != StateCompleted {
				t.Fatalf("%s succeeded between cancel steps", n.Name)
			}
			if n.State.Eligibility == EligibleNow {
				t.Fatalf("%s eligible between cancel steps", n.Name)
			}
		}
	}
	scan()
	for i := 0; e.cancelStep(r.ID, "other reason"); i++ {
		if i > 20 {
			t.Fatal("the cancel did not end in 20 steps")
		}
		scan()
	}
	got := e.run(r.ID)
	if got.State != RunCancelled || got.Done != got.Total {
		t.Fatalf("run = %s, %d of %d done", got.State, got.Done, got.Total)
	}
	e.checkRunInvariants("after the cancel", f, r.ID, true)
	expired := 0
	for _, n := range got.Nodes {
		if n.State.Public == StateExpired && before[n.Name] != StateExpired {
			expired++
		}
	}
	if expired == 0 {
		t.Fatal("no member expired between the steps (the test needs some)")
	}
	for _, n := range got.Nodes {
		if n.State.Public == StateCancelled && n.Error != "stop" {
			t.Fatalf("%s cancelled with %q", n.Name, n.Error)
		}
	}
	if _, ok := e.runRecord(r.ID)["cancel_cursor"]; ok {
		t.Fatal("cancel_cursor left")
	}
	e.wantNoSteppingLeft()
}

// hmgetCalls is the server's count of HMGET calls (commands run inside
// functions included).
func hmgetCalls(t *testing.T, c valkey.Client) int64 {
	t.Helper()
	info, err := c.Do(context.Background(), c.B().Info().Section("commandstats").Build()).ToString()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_hmget:calls="); ok {
			v, _, _ := strings.Cut(rest, ",")
			var n int64
			fmt.Sscan(v, &n)
			return n
		}
	}
	return 0
}

// ff_resume_runs looks at about its limit of members in all: a stalled
// cancel's step counts the members its scan read, not those it cancelled,
// so ten stalled runs whose next members had already ended cost about
// the limit's worth of reads, not limit²/2.
func TestResumeRunsReadsAboutItsLimit(t *testing.T) {
	t.Parallel()
	c := valkeytest.Client(t, valkeytest.Start(t))
	s, err := Open(context.Background(), Config{Client: c, KeyPrefix: "rv:", FlowPartitions: 1, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, ctx: context.Background(), c: c, s: s, prefix: "rv:"}
	// 2*CancelStepMembers roots and 10 sinks after root r0: the first
	// cancel call cancels every root; sinks wait for later steps.
	var names, edges []string
	for i := range 2 * CancelStepMembers {
		names = append(names, fmt.Sprintf("r%d", i))
	}
	for i := range 10 {
		names = append(names, fmt.Sprintf("sink%d", i))
		edges = append(edges, fmt.Sprintf("r0->sink%d", i))
	}
	const runs, limit = 10, 10
	for n := 0; n < runs; {
		r := e.stage(flowOf("roots", execs(names...), edges...), "")
		if e.cancelStep(r.ID, "stop") {
			n++
		}
	}
	before := hmgetCalls(t, c)
	res, err := s.ResumeRuns(e.ctx, 0, 0, limit)
	if err != nil {
		t.Fatal(err)
	}
	read := hmgetCalls(t, c) - before
	if read > 3*limit {
		t.Fatalf("ResumeRuns(limit %d) = %+v made %d HMGET calls (a member read each, and one per run record): "+
			"far more than about %d members", limit, res, read, limit)
	}
}

// A caller going on with an old cancel (its generation from before the
// run ended and was replayed) while a newer cancel of the run is under way
// stops, and leaves the newer cancel's cursor and its B:runs:cancelling
// entry alone: that cancel goes on from where it was, and the run-resume
// scanner still finds it if its own caller stops.
func TestStaleCancelContinuationLeavesTheCurrentCancel(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r, p := e.endByDeadlinesBetweenSteps(2 * CancelStepMembers)
	if _, err := e.s.ReplayRun(e.ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	if !e.cancelStep(r.ID, "the second cancel") {
		t.Fatal("the second cancel ended in one step (the test needs steps left)")
	}
	cursor := e.runRecord(r.ID)["cancel_cursor"]
	_, uuid, _ := e.s.locate(ExecutionID(r.ID))
	items, err := e.s.single(e.ctx, call{fn: "ff_cancel_run", partition: p, args: []string{uuid, "the first cancel", "0"}}, ExecutionID(r.ID), "cancel")
	if err != nil {
		t.Fatal(err)
	}
	if more, _ := items[2].AsInt64(); more != 0 {
		t.Fatal("a continuation of the first cancel (generation 0) took a step of the second")
	}
	if got := e.runRecord(r.ID)["cancel_cursor"]; got != cursor {
		t.Fatalf("cancel_cursor = %q after the stale continuation, want the second cancel's %q", got, cursor)
	}
	entries, err := e.c.Do(e.ctx, e.c.B().Zrange().Key(e.s.k.base(p)+":runs:cancelling").Min("0").Max("-1").Build()).AsStrSlice()
	if err != nil || len(entries) != 1 || entries[0] != uuid {
		t.Fatalf("B:runs:cancelling = %v, %v after the stale continuation, want the second cancel's run", entries, err)
	}
	for i := 0; e.runRecord(r.ID)["state"] == string(RunRunning); i++ {
		if i == 20 {
			t.Fatal("the second cancel did not end")
		}
		e.cancelStep(r.ID, "")
	}
	for _, n := range e.run(r.ID).Nodes {
		if n.State.Public == StateCancelled && n.Error != "the second cancel" {
			t.Fatalf("%s cancelled with %q, want the second cancel's reason", n.Name, n.Error)
		}
	}
}
