package store

import (
	"fmt"
	"strings"
	"testing"
)

// After 'released', a third staging takes the key before the second
// staging call: that call answers 'duplicate', and StageFlow returns the
// third run (not created), which has its run-scoped budget; a chunked
// run's staging is dropped.
func TestStagingReleasedThenTakenByThirdStaging(t *testing.T) {
	t.Parallel()
	for _, size := range []int{1, StageChunkExecs + 5} {
		t.Run(fmt.Sprintf("%d execs", size), func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			f := budgetFlowOf(size)
			if _, _, err := e.s.StageFlow(e.ctx, StageRequest{Flow: f, Input: []byte(`{}`), IdempotencyKey: "k"}); err != nil {
				t.Fatal(err)
			}
			var third *Run
			var hook func(point, run string)
			hook = func(point, run string) {
				switch point {
				case "stage":
					for _, k := range e.keys() {
						if strings.Contains(k, ":fidem:") {
							if err := e.c.Do(e.ctx, e.c.B().Del().Key(k).Build()).Error(); err != nil {
								t.Error(err)
							}
						}
					}
				case "resources":
					if third != nil {
						return
					}
					e.s.hook = nil
					r, created, err := e.s.StageFlow(e.ctx, StageRequest{Flow: f, Input: []byte(`{}`), IdempotencyKey: "k"})
					if err != nil || !created {
						t.Fatalf("third staging = %v, %v", created, err)
					}
					third = r
					e.s.hook = hook
				}
			}
			e.s.hook = hook
			r, created, err := e.s.StageFlow(e.ctx, StageRequest{Flow: f, Input: []byte(`{}`), IdempotencyKey: "k"})
			if err != nil || created || third == nil || r.ID != third.ID {
				t.Fatalf("staging = %v created=%v err=%v, want the third run %v", r, created, err, third)
			}
			if b, err := e.s.GetBudget(e.ctx, RunBudgetID("default", "per_run", third.ID)); err != nil || b.Dimensions[0].Hard != 10 {
				t.Fatalf("run budget of the third run = %+v, %v", b, err)
			}
			for _, k := range e.keys() {
				if strings.HasSuffix(k, ":staged") {
					t.Errorf("staging left behind: %s", k)
				}
			}
		})
	}
}
