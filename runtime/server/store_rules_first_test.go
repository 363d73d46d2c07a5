package server_test

import (
	"context"
	"net/http"
	"slices"
	"testing"

	"github.com/valkey-io/valkey-go"

	"github.com/flowfabric/ff/runtime/server"
	"github.com/flowfabric/ff/runtime/server/servertest"
	"github.com/flowfabric/ff/runtime/wire"
)

// storeKeys returns every key of env's prefix, sorted: what a refused
// request must leave as it found it.
func storeKeys(t *testing.T, env *servertest.Env) []string {
	t.Helper()
	vk, err := valkey.NewClient(valkey.ClientOption{InitAddress: []string{env.Config.ValkeyAddr}, DisableCache: true, ForceSingleClient: true})
	if err != nil {
		t.Fatal(err)
	}
	defer vk.Close()
	var keys []string
	var cursor uint64
	for {
		e, err := vk.Do(context.Background(), vk.B().Scan().Cursor(cursor).Match(env.Config.KeyPrefix+"*").Count(1000).Build()).AsScanEntry()
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, e.Elements...)
		if cursor = e.Cursor; cursor == 0 {
			break
		}
	}
	slices.Sort(keys)
	return keys
}

// TestBatchCreateAppliesStoreRulesFirst: "Every item is validated first;
// one bad item fails the whole request with 400 … executions[i].<field>,
// and nothing is written" (Batch create), for the rules the store applies
// too: a kind holding a comma (plan.ValidateKind) and an idempotency key
// holding a control character (store.IdempotencyKeyProblem). A single
// create is refused the same way, naming the field alone.
func TestBatchCreateAppliesStoreRulesFirst(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t, func(c *server.Config) { c.DisableScanners = true })
	before := storeKeys(t, env)
	for _, c := range []struct{ item, field string }{
		{`{"kind":"a,b"}`, "kind"},
		{`{"kind":"ok","idempotency_key":"a\u0001b"}`, "idempotency_key"},
		{`{"kind":"ok","idempotency_key":"a\u007fb"}`, "idempotency_key"},
	} {
		body := `{"executions":[{"kind":"ok"},` + c.item + `]}`
		res := env.Do(t, http.MethodPost, "/v1/executions/batch", nil, body)
		if want := "executions[1]." + c.field; res.Status != http.StatusBadRequest || res.Err.Code != wire.CodeValidation || res.Field() != want {
			t.Errorf("POST /v1/executions/batch %s = %d %s, want 400 validation_failed naming %s", body, res.Status, clipBody(res.Body), want)
		}
		res = env.Do(t, http.MethodPost, "/v1/executions", nil, c.item)
		if res.Status != http.StatusBadRequest || res.Err.Code != wire.CodeValidation || res.Field() != c.field {
			t.Errorf("POST /v1/executions %s = %d %s, want 400 validation_failed naming %s", c.item, res.Status, clipBody(res.Body), c.field)
		}
	}
	if after := storeKeys(t, env); !slices.Equal(before, after) {
		t.Errorf("refused creates wrote keys: before %v, after %v", before, after)
	}
}

// TestPutBudgetNamesBadDimensionName: a dimension name is checked with
// the store's rule for budget, quota and dimension names
// (store.ResourceNameProblem: letters, digits, '_', '-', '.') before
// anything is written, and the refusal names the dimension by its path,
// not "dimensions" as the store would.
func TestPutBudgetNamesBadDimensionName(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t, func(c *server.Config) { c.DisableScanners = true })
	before := storeKeys(t, env)
	for _, name := range []string{"gpu+cpu", "gpü", "a b", "tokens:in"} {
		body := `{"name":"gpu","dimensions":[{"name":"minutes","hard":10},{"name":"` + name + `","hard":5}]}`
		res := env.Do(t, http.MethodPut, "/v1/budgets", nil, body)
		if res.Status != http.StatusBadRequest || res.Err.Code != wire.CodeValidation || res.Field() != "dimensions[1].name" {
			t.Errorf("PUT /v1/budgets with dimension %q = %d %s, want 400 validation_failed naming dimensions[1].name",
				name, res.Status, clipBody(res.Body))
		}
	}
	if after := storeKeys(t, env); !slices.Equal(before, after) {
		t.Errorf("refused PUTs wrote keys: before %v, after %v", before, after)
	}
}
