package flows

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/flowfabric/ff/runtime/wire"
	"github.com/flowfabric/ff/runtime/worker"
)

// TestNotifyFailureNamesTheFailure: the generated binding of the
// on-call notice, called directly with a task from NewTestFlowTask, gives
// the method its task through its context: the notice names the failed
// exec and its error, not the skipped one; without errors it says what
// it said before.
func TestNotifyFailureNamesTheFailure(t *testing.T) {
	d, r := newDemo(t, Faults{})
	h := r["nightly_etl.notify_failure"]
	if h == nil {
		t.Fatal("no handler for nightly_etl.notify_failure")
	}
	errs := map[string]wire.UpstreamError{
		"transform": {State: "failed", Error: "etl.transform: bad row 7"},
		"load":      {State: "skipped", Error: "its join can no longer be satisfied"},
	}
	if _, err := h(context.Background(), worker.NewTestFlowTask(nil, nil, errs)); err != nil {
		t.Fatal(err)
	}
	if _, err := h(context.Background(), worker.NewTestTask(nil, nil)); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"nightly_etl: transform failed: etl.transform: bad row 7",
		"nightly_etl: transform or load failed",
	}
	if diff := cmp.Diff(want, d.Notifications()); diff != "" {
		t.Fatalf("notices (-want +got):\n%s", diff)
	}
}
