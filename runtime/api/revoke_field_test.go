package api_test

import (
	"testing"

	"github.com/flowfabric/ff/runtime/server/servertest"
	"github.com/flowfabric/ff/runtime/wire"
)

// TestRevokeHalfLeaseNamesBodyField: spec/api.md says errors name
// the field "by its path from the body's top". The revoke-lease body is
// {"reason", "lease_id", "epoch"}: a body with only one of lease_id and
// epoch must name the missing member as the body spells it ("epoch",
// "lease_id"), not a "lease." path the body has no member for.
func TestRevokeHalfLeaseNamesBodyField(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	id := "1.00000000-0000-4000-8000-000000000000"
	runChecks(t, env, "", []check{
		{"lease_id without epoch", "POST", "/v1/executions/" + id + "/revoke-lease", `{"lease_id":"x"}`, 400,
			wire.CodeValidation, "epoch", nil},
		{"epoch without lease_id", "POST", "/v1/executions/" + id + "/revoke-lease", `{"epoch":1}`, 400,
			wire.CodeValidation, "lease_id", nil},
	})
}
