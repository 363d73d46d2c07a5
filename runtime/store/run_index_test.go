package store

import (
	"slices"
	"testing"

	"github.com/flowfabric/ff/compiler/plan"
	"github.com/google/go-cmp/cmp"
	"github.com/valkey-io/valkey-go"
)

// indexedFlow is a run staged in chunks (more than StageChunkExecs
// members): fanFlow's shape, src feeding m000..m<width-1>.
func indexedFlow(width int) *plan.Flow { return fanFlow("indexed", width) }

// failedSet is the run's failed set, sorted.
func (e *env) failedSet(id RunID) []string {
	e.t.Helper()
	got, err := e.c.Do(e.ctx, e.c.B().Smembers().Key(e.runKey(id)+":failed").Build()).AsStrSlice()
	if err != nil {
		e.t.Fatal(err)
	}
	slices.Sort(got)
	return got
}

// wantFailedSet fails unless run's failed set holds exactly the uuids of
// the members of whole that failed, expired or were cancelled.
func (e *env) wantFailedSet(whole *Run) {
	e.t.Helper()
	var want []string
	for _, n := range whole.Nodes {
		if failedState(n.State.Public) {
			_, uuid, _ := splitID(string(n.ExecutionID))
			want = append(want, uuid)
		}
	}
	slices.Sort(want)
	if diff := cmp.Diff(want, e.failedSet(whole.ID), cmp.Comparer(func(a, b []string) bool {
		return len(a) == 0 && len(b) == 0 || slices.Equal(a, b)
	})); diff != "" {
		e.t.Fatalf("the failed set of the %s run (-its failures +set):\n%s", whole.State, diff)
	}
}

// wantSameReads fails unless every read of run id says what whole says:
// GetRun, its pages of several sizes and GetRunOutcome.
func (e *env) wantSameReads(id RunID, whole *Run, how string) {
	e.t.Helper()
	got, err := e.s.GetRun(e.ctx, id)
	if err != nil {
		e.t.Fatalf("%s: %v", how, err)
	}
	if diff := cmp.Diff(whole, got); diff != "" {
		e.t.Fatalf("%s: GetRun (-want +got):\n%s", how, diff)
	}
	for _, limit := range []int{7, 250, len(whole.Nodes) - 1, RunPageMax} {
		if diff := cmp.Diff(whole.Nodes, e.readPages(id, whole, limit)); diff != "" {
			e.t.Fatalf("%s: pages of %d (-whole +pages):\n%s", how, limit, diff)
		}
	}
	out, err := e.s.GetRunOutcome(e.ctx, id)
	if err != nil {
		e.t.Fatalf("%s: %v", how, err)
	}
	want := *whole
	want.Nodes, want.Input = nil, nil
	switch {
	case whole.State == RunRunning:
		// As the record says: the result route answers it has not ended.
		want.ResultNode, want.ResultState, want.Failures = "", "", nil
	case whole.State == RunSucceeded && whole.Failures == nil:
		want.ResultState = "" // a clean success: its members are not read
	}
	if diff := cmp.Diff(&want, out); diff != "" {
		e.t.Fatalf("%s: GetRunOutcome (-want +got):\n%s", how, diff)
	}
}

// TestRunIndexedReads: a run staged in chunks keeps its flow order, and a
// failed set of the members that failed, expired or were cancelled, kept
// by the calls that end them and reset them (a replay); its reads (whole,
// pages, outcome) use them instead of its node map and say what the node
// map says; a run without them (staged before they existed), or whose
// failed set does not account for its failures (a member ended by a
// release before the set), is read by its node map all the same.
func TestRunIndexedReads(t *testing.T) {
	t.Parallel()
	e := onePartition(t)
	f := indexedFlow(StageChunkExecs)
	staged := e.stage(f, `"in"`)
	ids := map[string]ExecutionID{}
	for _, n := range staged.Nodes {
		ids[n.Name] = n.ExecutionID
	}
	key := e.runKey(staged.ID)
	order := e.wantOrderKey(staged, "a run staged in chunks")
	e.wantSameReads(staged.ID, e.run(staged.ID), "a staged run")

	// src succeeds, m010 is cancelled on its own, m003 and m007 fail:
	// sink's join can no longer hold, the run fails.
	e.finishOKOne(e.claimOne("src"), `"s"`)
	if _, err := e.s.Cancel(e.ctx, ids["m010"], "not this one"); err != nil {
		t.Fatal(err)
	}
	running := e.run(staged.ID)
	if running.State != RunRunning || len(running.Failures) != 1 {
		t.Fatalf("run %s with failures %+v", running.State, running.Failures)
	}
	e.wantFailedSet(running)
	e.wantSameReads(staged.ID, running, "a running run with a failure")
	e.drive(func(g Grant) outcome {
		return outcome{result: []byte(`"r"`), fail: g.FlowNode == "m003" || g.FlowNode == "m007"}
	})
	whole := e.run(staged.ID)
	if whole.State != RunFailed || len(whole.Failures) != 3 || whole.ResultState != StateSkipped {
		t.Fatalf("run %s, result %s, failures %+v", whole.State, whole.ResultState, whole.Failures)
	}
	e.wantFailedSet(whole)
	e.wantSameReads(staged.ID, whole, "a failed run")

	// Its reads need no node map.
	rename := func(from, to string) {
		t.Helper()
		if err := e.c.Do(e.ctx, e.c.B().Rename().Key(from).Newkey(to).Build()).Error(); err != nil {
			t.Fatal(err)
		}
	}
	rename(key+":nodes", key+":hidden")
	e.wantSameReads(staged.ID, whole, "a failed run without its node map")
	rename(key+":hidden", key+":nodes")

	// A failure the set lacks (a member a release before the set ended),
	// or one it lists that is none: read by the node map.
	saved := e.failedSet(staged.ID)
	_, m003, _ := splitID(string(ids["m003"]))
	_, m004, _ := splitID(string(ids["m004"]))
	for _, change := range []valkey.Completed{
		e.c.B().Srem().Key(key + ":failed").Member(m003).Build(),
		e.c.B().Sadd().Key(key + ":failed").Member(m004).Build(),
		e.c.B().Srem().Key(key + ":failed").Member(m003).Build(),
	} {
		if err := e.c.Do(e.ctx, change).Error(); err != nil {
			t.Fatal(err)
		}
		e.wantSameReads(staged.ID, whole, "a run whose failed set is off")
	}
	// A run staged before the order key and the set: read by its node map.
	if err := e.c.Do(e.ctx, e.c.B().Del().Key(key+":order", key+":failed").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	e.wantSameReads(staged.ID, whole, "a run without order key and failed set")
	if err := e.c.Do(e.ctx, e.c.B().Set().Key(key+":order").Value(order).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	if err := e.c.Do(e.ctx, e.c.B().Sadd().Key(key+":failed").Member(saved...).Build()).Error(); err != nil {
		t.Fatal(err)
	}

	// A replay (by steps: more than ReplayStepMembers members) resets the
	// failures, and takes them out of the set; the run then succeeds.
	if _, err := e.s.ReplayRun(e.ctx, staged.ID); err != nil {
		t.Fatal(err)
	}
	replayed := e.run(staged.ID)
	if replayed.State != RunRunning || len(replayed.Failures) != 0 {
		t.Fatalf("after the replay: run %s, failures %+v", replayed.State, replayed.Failures)
	}
	e.wantFailedSet(replayed)
	e.wantSameReads(staged.ID, replayed, "a replayed run")
	e.drive(func(Grant) outcome { return outcome{result: []byte(`"r"`)} })
	done := e.run(staged.ID)
	if done.State != RunSucceeded || done.Failures != nil || string(done.Result) != `"r"` {
		t.Fatalf("after the replay: run %s, failures %+v, result %s", done.State, done.Failures, done.Result)
	}
	e.wantFailedSet(done)
	e.wantSameReads(staged.ID, done, "a run that succeeded after its replay")

	// A cancelled run: every member is a failure.
	cancelled := e.stage(f, `"in"`)
	if _, err := e.s.CancelRun(e.ctx, cancelled.ID, "stop"); err != nil {
		t.Fatal(err)
	}
	all := e.run(cancelled.ID)
	if all.State != RunCancelled || len(all.Failures) != len(f.Execs) {
		t.Fatalf("cancelled run %s with %d failures", all.State, len(all.Failures))
	}
	e.wantFailedSet(all)
	e.wantSameReads(cancelled.ID, all, "a cancelled run")

	// Retention deletes them with their run.
	e.purgeAll(1000)
	e.wantPurged()
}

// hideKey renames key to key+":hidden" and returns what puts it back.
func (e *env) hideKey(key string) (restore func()) {
	e.t.Helper()
	rename := func(from, to string) {
		e.t.Helper()
		if err := e.c.Do(e.ctx, e.c.B().Rename().Key(from).Newkey(to).Build()).Error(); err != nil {
			e.t.Fatal(err)
		}
	}
	rename(key, key+":hidden")
	return func() { rename(key+":hidden", key) }
}

// TestRunIndexedReadsStagedInOneCall: a run staged in one call (no more
// than StageChunkExecs members) keeps its flow order as a run staged in
// chunks does, so its reads (whole, pages, outcome) need no node map, and
// say what its node map says; without the order key (a run staged before
// it existed) it is read by its node map; retention deletes the order key
// and the failed set with the run.
func TestRunIndexedReadsStagedInOneCall(t *testing.T) {
	t.Parallel()
	e := onePartition(t)
	staged := e.stage(pagedFlow(), `"in"`)
	key := e.runKey(staged.ID)
	e.wantOrderKey(staged, "a run staged in one call")
	// byNodes reads the run as one staged before the order key.
	byNodes := func() *Run {
		t.Helper()
		restore := e.hideKey(key + ":order")
		defer restore()
		return e.run(staged.ID)
	}
	// sameReads checks the reads with and without the node map against
	// the read by the node map.
	sameReads := func(how string) *Run {
		t.Helper()
		whole := byNodes()
		restore := e.hideKey(key + ":order")
		e.wantSameReads(staged.ID, whole, how+", without its order key")
		restore()
		e.wantSameReads(staged.ID, whole, how)
		restore = e.hideKey(key + ":nodes")
		e.wantSameReads(staged.ID, whole, how+", without its node map")
		restore()
		return whole
	}
	sameReads("a staged run")
	e.finishOKOne(e.claimOne("src"), `"s"`)
	e.drive(func(g Grant) outcome {
		return outcome{result: []byte(`"r"`), fail: g.FlowNode == "m03" || g.FlowNode == "m07"}
	})
	whole := sameReads("an ended run with failures")
	if whole.State != RunSucceeded || len(whole.Failures) != 2 || string(whole.Result) != `"r"` {
		t.Fatalf("run %s, failures %+v, result %s", whole.State, whole.Failures, whole.Result)
	}
	e.wantFailedSet(whole)

	e.purgeAll(1000)
	e.wantPurged()
}

// wantOrderKey checks that run staged (what was staged: its members in
// flow order) has its members in that order in its order key, and
// returns the key's value.
func (e *env) wantOrderKey(staged *Run, what string) string {
	e.t.Helper()
	order, err := e.c.Do(e.ctx, e.c.B().Get().Key(e.runKey(staged.ID)+":order").Build()).ToString()
	if err != nil {
		e.t.Fatalf("the order key of %s: %v", what, err)
	}
	want := ""
	for i, n := range staged.Nodes {
		if i > 0 {
			want += ","
		}
		_, uuid, _ := splitID(string(n.ExecutionID))
		want += n.Name + "=" + uuid
	}
	if order != want {
		e.t.Fatalf("order key of %s %.200q…, want the members in flow order %.200q…", what, order, want)
	}
	return order
}
