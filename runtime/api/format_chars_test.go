package api_test

import (
	"testing"

	"github.com/flowfabric/ff/runtime/server/servertest"
	"github.com/flowfabric/ff/runtime/wire"
)

// TestInvisibleCharactersRefused: a kind or a capability holding a
// Unicode format character (a zero-width space, a soft hyphen, a
// right-to-left override), which would look like another one in every
// listing, is refused with a 400 naming the field, by the rule ffc checks
// them with (plan.ValidateKind, plan.CheckCapability); nothing is written.
func TestInvisibleCharactersRefused(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	bidi := oneStep()
	bidi.Execs[0].Kind = "one.a\u202e"
	soft := oneStep()
	soft.Execs[0].Requires = []string{"gpu\u00ad"}
	const why = "contains the invisible Unicode format character"
	runChecks(t, env, "", []check{
		{"execution kind", "POST", "/v1/executions", `{"kind":"media.probe\u200b"}`, 400,
			wire.CodeValidation, "kind", []string{why + " U+200B"}},
		{"execution requires", "POST", "/v1/executions", `{"kind":"k","requires":["ok","gpu\u00ad"]}`, 400,
			wire.CodeValidation, "requires", []string{why + " U+00AD"}},
		{"batch item kind", "POST", "/v1/executions/batch", `{"executions":[{"kind":"k"},{"kind":"k\u200b"}]}`, 400,
			wire.CodeValidation, "executions[1].kind", []string{why + " U+200B"}},
		{"plan kind", "POST", "/v1/flows", `{"plan":` + planJSON(t, bidi) + `,"input":{"s":"x"}}`, 400,
			wire.CodeValidation, "plan.execs[0].kind", []string{why + " U+202E"}},
		{"plan requires", "POST", "/v1/flows", `{"plan":` + planJSON(t, soft) + `,"input":{"s":"x"}}`, 400,
			wire.CodeValidation, "plan.execs[0].requires", []string{why + " U+00AD"}},
		{"worker capabilities", "POST", "/v1/workers/heartbeat", `{"worker_id":"w","instance_id":"i","capabilities":["gpu\u200b"]}`, 400,
			wire.CodeValidation, "capabilities", []string{why + " U+200B"}},
		// The kinds a worker claims, hands off or advertises: the same rule
		// (plan.ValidateKind), or a worker would claim a kind no execution
		// can have.
		{"claim kinds", "POST", "/v1/worker/claim", `{"worker_id":"w","kinds":["k","media.probe\u200b"]}`, 400,
			wire.CodeValidation, "kinds[1]", []string{why + " U+200B"}},
		{"hand-off kinds", "POST", "/v1/worker/complete",
			`{"worker_id":"w","completions":[{"execution_id":"1.x","lease_id":"l","epoch":1}],"handoff":{"max":1,"kinds":["k\u202e"]}}`, 400,
			wire.CodeValidation, "handoff.kinds[0]", []string{why + " U+202E"}},
		{"heartbeat kinds", "POST", "/v1/workers/heartbeat", `{"worker_id":"w","instance_id":"i","kinds":["k\u00ad"]}`, 400,
			wire.CodeValidation, "kinds[0]", []string{why + " U+00AD"}},
	})
	assertNothingWritten(t, env)
}
