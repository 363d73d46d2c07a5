package api

import (
	"encoding/json"
	"sync"

	"github.com/flowfabric/ff/compiler/plan"
	"github.com/flowfabric/ff/runtime/flowinput"
)

// Limits of the cache of staged plans.
const (
	// planCacheMaxBytes bounds the JSON of a plan the stage route caches:
	// larger plans are decoded and validated on every call.
	planCacheMaxBytes = 256 << 10
	// planCacheMaxEntries bounds the plans the stage route caches.
	planCacheMaxEntries = 128
	// planCacheMaxTotalBytes bounds the JSON of all the cached plans
	// together (their decoded values take a few times more).
	planCacheMaxTotalBytes = 8 << 20
)

// stageBody is the body of POST /v1/flows as the stage route decodes it
// once the plan is cut out: wire.StageFlow without the plan, whose members
// it counts (TestStageBodyMatchesWire keeps the two types in step).
type stageBody struct {
	Plan           planCount       `json:"plan"`
	Input          json.RawMessage `json:"input,omitempty"`
	Namespace      string          `json:"namespace,omitempty"`
	IdempotencyKey string          `json:"idempotency_key,omitempty"`
}

// planCount counts the plan members of a body (JSON object keys match
// field names regardless of case): a body naming the plan twice is left to
// the decoding of wire.StageFlow, which merges the two.
type planCount int

// UnmarshalJSON counts one member.
func (n *planCount) UnmarshalJSON([]byte) error {
	*n++
	return nil
}

// planCache holds plans that decoded and validated, keyed by their exact
// JSON text: staging the same plan again skips both. Only valid plans are
// cached, so a bad plan is refused with the same error every time. Each
// comes with the checker of its runs' input (runPlan), prepared once.
//
// A cached *plan.Flow is shared by every run staged from the same text,
// concurrently: nothing downstream of the stage route (input checks,
// FlowService.StageFlow, the store) may modify a plan it is given.
type planCache struct {
	mu    sync.Mutex
	plans map[string]runPlan
	bytes int // of the keys
}

// runPlan is a valid plan that runs are staged from (a cached plan, a
// template) with the checker of their input: nil for a flow without an
// input type, or when none could be prepared (checkRunInput then checks
// with flowinput.Flow).
type runPlan struct {
	flow  *plan.Flow
	input *flowinput.Checker
}

// newRunPlan prepares the input checker of fl, a valid plan.
func newRunPlan(fl *plan.Flow) runPlan {
	rp := runPlan{flow: fl}
	if fl.Input != nil {
		// Validate checked the types, so this does not fail; if it did,
		// the input would be checked by flowinput.Flow, which says why.
		rp.input, _ = flowinput.NewTypes(fl.Types).Checker(fl.Input)
	}
	return rp
}

// get returns the valid plan whose JSON is text (flow nil when there is
// none).
func (pc *planCache) get(text []byte) runPlan {
	if len(text) > planCacheMaxBytes {
		return runPlan{}
	}
	pc.mu.Lock()
	defer pc.mu.Unlock()
	return pc.plans[string(text)]
}

// add caches rp, a valid plan decoded from text, making room when the
// cache is full. It reports whether rp is now the cached plan of text
// (and so shared by the runs staged from it).
func (pc *planCache) add(text []byte, rp runPlan) bool {
	if len(text) > planCacheMaxBytes {
		return false
	}
	pc.mu.Lock()
	defer pc.mu.Unlock()
	if pc.plans == nil {
		pc.plans = make(map[string]runPlan, planCacheMaxEntries)
	}
	if _, ok := pc.plans[string(text)]; ok {
		return false // another request cached its own copy first
	}
	// Evict plans, whichever the map yields first, until this one fits.
	for k := range pc.plans {
		if len(pc.plans) < planCacheMaxEntries && pc.bytes+len(text) <= planCacheMaxTotalBytes {
			break
		}
		delete(pc.plans, k)
		pc.bytes -= len(k)
	}
	pc.plans[string(text)] = rp
	pc.bytes += len(text)
	return true
}

// len returns the number of cached plans.
func (pc *planCache) len() int {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	return len(pc.plans)
}

// decodePlan decodes the JSON text of a plan as strictly as the body
// decoding of wire.StageFlow does (decodeBody: no unknown field, no
// trailing data). It reports only success: on failure the caller decodes
// the whole body again for the error to give.
func decodePlan(text []byte) (*plan.Flow, bool) {
	var fl *plan.Flow
	if err := decodeBody(text, false, &fl); err != nil {
		return nil, false
	}
	return fl, fl != nil
}
