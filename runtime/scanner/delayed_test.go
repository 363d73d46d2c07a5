package scanner

import (
	"testing"
	"time"

	"github.com/flowfabric/ff/runtime/store"
)

// A lane with more due delayed entries than the promoter's limit does not
// keep the other lanes waiting behind its backlog: once a call read some
// of its due entries, the lane is scored at its next entry, so the next
// call reads first another lane's entry due before that. (The lane kept
// its old score until its whole backlog was read: an entry due second,
// in lane b, waited for the ten of lane a due after it.)
func TestDelayedPromoterReadsLanesByNextEntry(t *testing.T) {
	t.Parallel()
	e := newRunEnv(t)
	mk := func(lane string) *store.Execution {
		t.Helper()
		x := create(t, e.s, store.CreateRequest{Lane: lane, Delay: time.Millisecond})
		time.Sleep(2 * time.Millisecond) // distinct due times, in creation order
		return x
	}
	mk("a")          // due first
	early := mk("b") // due second
	for range 10 {
		mk("a") // due after early
	}
	time.Sleep(5 * time.Millisecond)
	sc, err := NewDelayed(DelayedConfig{Store: e.s, Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, _, err := sc.RunOnce(e.ctx); err != nil {
			t.Fatal(err)
		}
	}
	x, err := e.s.GetExecution(e.ctx, early.ID)
	if err != nil {
		t.Fatal(err)
	}
	if x.State.Public != store.StateWaiting {
		t.Fatalf("after two promoter calls of limit 2, the entry due second (lane b) is %s: "+
			"lane a's backlog of entries due after it went first", x.State.Public)
	}
}

// A promoter call lists in B:due:delayed what its lanes' delayed indexes
// hold once its promotions left them: a lane whose last due entry it
// promoted is dropped, and a lane with a later entry is scored at that
// entry, even when the same call's look at the lane set (SEED_LANES
// members of B:lanes) comes to those lanes. (That look read the indexes
// before the call's removals: it listed again the lane just emptied, and
// put back the score of the entry just promoted.)
func TestDelayedPromoterListsWhatItLeft(t *testing.T) {
	t.Parallel()
	e := newRunEnv(t)
	emptied := create(t, e.s, store.CreateRequest{Lane: "a", Delay: time.Millisecond})
	now := create(t, e.s, store.CreateRequest{Lane: "b", Delay: time.Millisecond})
	create(t, e.s, store.CreateRequest{Lane: "b", Delay: time.Hour})
	time.Sleep(5 * time.Millisecond)
	res, err := e.s.PromoteDelayed(e.ctx, 0, 100)
	if err != nil || res.Processed != 2 {
		t.Fatalf("PromoteDelayed = %+v, %v; want the two due executions promoted", res, err)
	}
	waitState(t, e.s, emptied.ID, store.StateWaiting)
	waitState(t, e.s, now.ID, store.StateWaiting)
	base := e.prefix + "ff:{fp:0}:"
	later, err := e.c.Do(e.ctx, e.c.B().Zrange().Key(base+"q:default:b:delayed").Min("0").Max("-1").Withscores().Build()).AsZScores()
	if err != nil || len(later) != 1 {
		t.Fatalf("lane b's delayed index = %v, %v; want its later entry", later, err)
	}
	listed, err := e.c.Do(e.ctx, e.c.B().Zrange().Key(base+"due:delayed").Min("0").Max("-1").Withscores().Build()).AsZScores()
	if err != nil {
		t.Fatal(err)
	}
	if len(listed) != 1 || listed[0].Member != "default:b" || listed[0].Score != later[0].Score {
		t.Fatalf("after the promoter emptied lane a and read lane b's due entry, B:due:delayed lists %v; "+
			"want lane b alone, at its later entry's score %v", listed, later[0].Score)
	}
}
