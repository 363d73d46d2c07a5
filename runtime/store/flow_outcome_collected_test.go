package store

import (
	"reflect"
	"testing"
	"time"
)

// TestFinishRunEndedMatchesRecord: the outcome a success that ends its run
// cleanly carries (FinishResult.RunEnded: ff_finish builds it from the run
// record it read before writing the run's end, with the fields that end
// writes) is the outcome read from the record afterwards, field by field:
// with and without a result exec, and with an idempotency key.
func TestFinishRunEndedMatchesRecord(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, result, key string
	}{
		{"result exec", "b", ""},
		{"no result exec", "", ""},
		{"idempotency key", "b", "k-1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := onePartition(t)
			f := flow7("chain", execs("a", "b"), "a->b")
			f.Result = tc.result
			r, _, err := e.s.StageFlow(e.ctx, StageRequest{Flow: f, Input: []byte(`{}`), IdempotencyKey: tc.key})
			if err != nil {
				t.Fatal(err)
			}
			a := e.claimP0(worker1, time.Minute)
			if len(a) != 1 || a[0].FlowNode != "a" {
				t.Fatalf("claim = %+v", a)
			}
			b := e.finishOK(a[0], `one`, handoff(1))
			if len(b) != 1 || b[0].FlowNode != "b" {
				t.Fatalf("hand-off = %+v", b)
			}
			res, _ := e.finishHandoffOne(Finish{Lease: b[0].Lease, Result: []byte(`two`)}, handoff(1))
			if res.Err != nil || res.RunEnded == nil {
				t.Fatalf("finish b = %+v", res)
			}
			got, err := e.s.GetRunOutcome(e.ctx, r.ID)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(res.RunEnded, got) {
				t.Fatalf("run ended with\n%+v\nrecord says\n%+v", *res.RunEnded, *got)
			}
			if got.State != RunSucceeded || got.EndedAt.IsZero() || (tc.result != "" && string(got.Result) != `two`) {
				t.Fatalf("outcome = %+v", *got)
			}
		})
	}
}
