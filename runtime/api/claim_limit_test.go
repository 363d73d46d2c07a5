package api_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/flowfabric/ff/runtime/api"
	"github.com/flowfabric/ff/runtime/server/servertest"
	"github.com/flowfabric/ff/runtime/store"
	"github.com/flowfabric/ff/runtime/wire"
)

// TestClaimWithMaxKindsOfMaxLengthAccepted: the claim route
// validates up to store.MaxKinds kinds of up to api.KindMaxBytes each; a
// claim at those limits is valid and must not be refused for its size
// (the worker SDK sends such claims: worker.KindsMax).
func TestClaimWithMaxKindsOfMaxLengthAccepted(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	kinds := make([]string, store.MaxKinds)
	for i := range kinds {
		s := fmt.Sprintf(".%04d", i)
		kinds[i] = strings.Repeat("k", api.KindMaxBytes-len(s)) + s
	}
	// The same claim naming one kind is taken: only the size differs.
	one, err := json.Marshal(wire.ClaimRequest{WorkerID: "w", Kinds: kinds[:1], Max: 1})
	if err != nil {
		t.Fatal(err)
	}
	if r := do(t, env, "POST", "/v1/worker/claim", "", string(one)); r.status != 200 {
		t.Fatalf("claim naming one kind: %d %s %s", r.status, r.err.Code, r.err.Message)
	}
	body, err := json.Marshal(wire.ClaimRequest{WorkerID: "w", Kinds: kinds, Max: 1})
	if err != nil {
		t.Fatal(err)
	}
	r := do(t, env, "POST", "/v1/worker/claim", "", string(body))
	if r.status != 200 {
		t.Fatalf("claim of %d bytes naming %d kinds of %d bytes: %d %s %s", len(body), len(kinds), api.KindMaxBytes,
			r.status, r.err.Code, r.err.Message)
	}
}
