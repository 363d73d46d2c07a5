package flows

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/flowfabric/ff/compiler/plan"
	"github.com/flowfabric/ff/runtime/worker"
)

// registrar is a fake worker.Registrar keeping the handlers by kind.
type registrar map[string]worker.Handler

func (r registrar) Handle(kind string, h worker.Handler) error {
	if _, dup := r[kind]; dup {
		return fmt.Errorf("kind %q registered twice", kind)
	}
	r[kind] = h
	return nil
}

// Outcomes of an exec in a local run.
const (
	pending   = ""
	succeeded = "succeeded"
	failed    = "failed"
	skipped   = "skipped"
)

// localRun is the record of one in-process run of a flow.
type localRun struct {
	state    map[string]string          // exec -> outcome
	output   map[string]json.RawMessage // exec -> output, for succeeded execs with one
	attempts map[string]int
	errs     map[string]error
}

// runLocal executes fl in this process through the handlers bound in r,
// one exec at a time, to check the example flows and their handlers
// together without a server. It follows the edge semantics of the
// language: an edge is satisfied when its upstream's outcome matches (done
// = succeeded or failed), dead once the upstream ended otherwise (a skip
// satisfies nothing); join all runs when every edge is satisfied, any when
// one is, N when N are; an exec whose join can no longer be met is skipped.
// Attempts follow the retry policy, without the delays; a permanent error
// stops retrying.
func runLocal(ctx context.Context, t *testing.T, r registrar, fl *plan.Flow, input any) *localRun {
	t.Helper()
	in, err := json.Marshal(input)
	if err != nil {
		t.Fatal(err)
	}
	run := &localRun{state: map[string]string{}, output: map[string]json.RawMessage{}, attempts: map[string]int{}, errs: map[string]error{}}
	incoming := map[string][]plan.Edge{}
	for _, e := range fl.Edges {
		incoming[e.To] = append(incoming[e.To], e)
	}
	for progress := true; progress; {
		progress = false
		for _, ex := range fl.Execs {
			if run.state[ex.Name] != pending {
				continue
			}
			edges := incoming[ex.Name]
			sat, dead := 0, 0
			for _, e := range edges {
				switch up := run.state[e.From]; {
				case up == pending:
				case up == succeeded && (e.On == plan.OnSuccess || e.On == plan.OnDone),
					up == failed && (e.On == plan.OnFailure || e.On == plan.OnDone):
					sat++
				default:
					dead++
				}
			}
			need := len(edges)
			switch ex.Join.Kind {
			case plan.JoinAny:
				need = min(1, len(edges))
			case plan.JoinCount:
				need = ex.Join.N
			}
			switch {
			case sat >= need:
				run.exec(ctx, t, r, fl, &ex, in)
			case len(edges)-dead < need:
				run.state[ex.Name] = skipped
			default:
				continue
			}
			progress = true
		}
	}
	for _, ex := range fl.Execs {
		if run.state[ex.Name] == pending {
			t.Fatalf("flow %s: exec %s never became runnable", fl.Name, ex.Name)
		}
	}
	return run
}

func (run *localRun) exec(ctx context.Context, t *testing.T, r registrar, fl *plan.Flow, ex *plan.Exec, flowInput json.RawMessage) {
	t.Helper()
	h, ok := r[ex.Kind]
	if !ok {
		t.Fatalf("flow %s: no handler for kind %q", fl.Name, ex.Kind)
	}
	var in json.RawMessage
	switch ex.InputFrom {
	case plan.InputFlow:
		in = flowInput
	case plan.InputExec:
		in = run.output[ex.InputExec]
	}
	ups := map[string]json.RawMessage{}
	for _, u := range ex.Upstreams {
		if out, ok := run.output[u]; ok {
			ups[u] = out
		}
	}
	for attempt := 1; attempt <= max(ex.Retry.Attempts, 1); attempt++ {
		run.attempts[ex.Name] = attempt
		out, err := h(ctx, worker.NewTestTask(in, ups))
		if err == nil {
			run.state[ex.Name] = succeeded
			if out != nil {
				run.output[ex.Name] = out
			}
			delete(run.errs, ex.Name)
			return
		}
		run.errs[ex.Name] = err
		if worker.IsPermanent(err) {
			break
		}
	}
	run.state[ex.Name] = failed
}

// result decodes the output of the flow's result exec into v and reports
// whether there was one.
func (run *localRun) result(t *testing.T, fl *plan.Flow, v any) bool {
	t.Helper()
	out, ok := run.output[fl.Result]
	if !ok {
		return false
	}
	if err := json.Unmarshal(out, v); err != nil {
		t.Fatalf("flow %s: result: %v", fl.Name, err)
	}
	return true
}
