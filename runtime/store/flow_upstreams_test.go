package store

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestFlowStagedRunUpstreamsNotShared: the run
// StageFlow returns belongs to its caller. Its members' Upstreams must not
// be the prepared plan's slice: a caller that edits one run's Upstreams
// (the run is an ordinary *Run it owns) must not change the upstreams of
// the next run staged from the same shared plan.
func TestFlowStagedRunUpstreamsNotShared(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	f := flowOf("shared", execs("a", "b"), "a->b on failure")
	stage := func() *Run {
		t.Helper()
		run, created, err := e.s.StageFlow(e.ctx, StageRequest{Flow: f, Shared: true, Input: []byte(`"in"`)})
		if err != nil || !created {
			t.Fatalf("StageFlow = %v, %v", created, err)
		}
		return run
	}
	ups := func(r *Run) []RunEdge {
		for _, n := range r.Nodes {
			if n.Name == "b" {
				return n.Upstreams
			}
		}
		t.Fatalf("run %s has no member b", r.ID)
		return nil
	}
	first := stage()
	want := []RunEdge{{Name: "a", On: "failure"}}
	if diff := cmp.Diff(want, ups(first)); diff != "" {
		t.Fatalf("first run's upstreams (-want +got):\n%s", diff)
	}
	// The caller edits its own run.
	ups(first)[0] = RunEdge{Name: "edited", On: "success"}
	second := stage()
	if diff := cmp.Diff(want, ups(second)); diff != "" {
		t.Errorf("a second run of the shared plan, after the first run's caller edited its run (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(ups(e.run(second.ID)), ups(second)); diff != "" {
		t.Errorf("second staged run differs from GetRun (-GetRun +StageFlow):\n%s", diff)
	}
}
