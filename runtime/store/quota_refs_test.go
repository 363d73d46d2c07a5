package store

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/flowfabric/ff/compiler/plan"
	"github.com/google/go-cmp/cmp"
)

// An explicit key value ("gpu=x") on an unkeyed quota would make a subject
// of its own, with its own limits, outside the quota's cap: it is refused
// (field quotas, nothing written), and the cap holds.
func TestExplicitKeyOnUnkeyedQuotaRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *Config) { c.FlowPartitions = 1 })
	if _, err := e.s.UpsertQuota(e.ctx, QuotaSpec{ID: "default/gpu", Concurrency: 1}); err != nil {
		t.Fatal(err)
	}
	e.create(CreateRequest{Quotas: []string{"gpu"}})
	before := e.keys()
	for _, ref := range []string{"gpu=x", "default/gpu=y", "undefined=x"} {
		_, _, err := e.s.CreateExecution(e.ctx, CreateRequest{Kind: "test.kind", Quotas: []string{ref}})
		var ve *ValidationError
		if !errors.As(err, &ve) || ve.Field != "quotas" {
			t.Fatalf("CreateExecution(quotas %q) = %v, want a validation error of field quotas", ref, err)
		}
		if want := "is not keyed"; strings.HasPrefix(ref, "undefined") {
			if !strings.Contains(ve.Msg, "not defined") {
				t.Errorf("quotas %q: message %q does not say the quota is not defined", ref, ve.Msg)
			}
		} else if !strings.Contains(ve.Msg, want) {
			t.Errorf("quotas %q: message %q does not say %q", ref, ve.Msg, want)
		}
	}
	if diff := cmp.Diff(before, e.keys()); diff != "" {
		t.Fatalf("refused creates wrote keys (-before +after):\n%s", diff)
	}
	// In a batch, the item is refused on its own.
	res, err := e.s.CreateMany(e.ctx, []CreateRequest{
		{Kind: "test.kind", Quotas: []string{"gpu"}},
		{Kind: "test.kind", Quotas: []string{"gpu=z"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Err != nil || !errors.Is(res[1].Err, ErrInvalid) {
		t.Fatalf("batch: %v, %v; want the first created and gpu=z refused", res[0].Err, res[1].Err)
	}
	if g := e.claimAdm(worker1, 3, time.Minute); len(g) > 1 {
		t.Fatalf("%d attempts run at once under default/gpu (concurrency 1, unkeyed); GetQuota shows %+v",
			len(g), e.quota("default/gpu").Subjects)
	}
}

// A keyed quota of a flow member that takes an upstream's result is keyed
// by that result (the member's input, spec/language.md): the reference is
// deferred at staging ("<id>?<path>") and the key read when the member is
// first claimed. A member whose input lacks the key fails, naming it.
func TestStagedFlowDeferredQuotaKey(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *Config) { c.FlowPartitions = 1 })
	f := flowOf("x", execs("a", "b"), "a->b")
	f.Execs[1].Quotas = []string{"per_tenant"}
	f.QuotaDefs = []plan.Quota{{Name: "per_tenant", Concurrency: 1, Key: "tenant"}}
	stage := func() (a, b ExecutionID) {
		t.Helper()
		// The run's input has no tenant: only b's input matters.
		r, _, err := e.s.StageFlow(e.ctx, StageRequest{Flow: f, Input: []byte(`{"n":1}`)})
		if err != nil {
			t.Fatal(err)
		}
		return r.Nodes[0].ExecutionID, r.Nodes[1].ExecutionID
	}
	finish := func(id ExecutionID, result string) {
		t.Helper()
		gs := e.claimAdm(worker1, 10, time.Minute)
		if len(gs) != 1 || gs[0].ExecutionID != id {
			var got []ExecutionID
			for _, g := range gs {
				got = append(got, g.ExecutionID)
			}
			t.Fatalf("granted %v, want %s only", got, id)
		}
		if err := e.s.Complete(e.ctx, gs[0].Lease, []byte(result)); err != nil {
			t.Fatal(err)
		}
	}
	a, b := stage()
	if got := e.get(b).Quotas; !cmp.Equal(got, []string{"default/per_tenant?tenant"}) {
		t.Fatalf("staged quotas of b: %v, want the deferred reference", got)
	}
	finish(a, `{"tenant":"acme"}`)
	g := e.claimAdm(worker1, 10, time.Minute)
	if len(g) != 1 || g[0].ExecutionID != b {
		t.Fatalf("grants %v, want b", grantIDs(g))
	}
	if got := e.get(b).Quotas; !cmp.Equal(got, []string{"default/per_tenant=acme"}) {
		t.Fatalf("quotas of b once claimed: %v", got)
	}
	want := []QuotaSubject{{Key: "acme", Active: 1}}
	if diff := cmp.Diff(want, e.quota("default/per_tenant").Subjects); diff != "" {
		t.Fatalf("per-key state (-want +got):\n%s", diff)
	}

	// A second run of the same tenant waits for the slot.
	a2, b2 := stage()
	finish(a2, `{"tenant":"acme"}`)
	if g := e.claimAdm(worker1, 10, time.Minute); len(g) != 0 {
		t.Fatalf("grants %v while tenant acme holds its slot", grantIDs(g))
	}
	if v := e.wantState(b2, StateBlocked).State; !strings.Contains(v.BlockingDetail, "default/per_tenant=acme") {
		t.Fatalf("blocked b2: detail %q does not name the key", v.BlockingDetail)
	}

	// An input without the key: the member fails, naming quota and field.
	a3, b3 := stage()
	finish(a3, `{"other":1}`)
	if g := e.claimAdm(worker1, 10, time.Minute); len(g) != 0 {
		t.Fatalf("grants %v for a member without a key value", grantIDs(g))
	}
	x := e.wantState(b3, StateFailed)
	if !strings.HasPrefix(x.FailureReason, `quota_key_invalid: quota default/per_tenant: the input has no field "tenant"`) {
		t.Fatalf("failure reason %q", x.FailureReason)
	}

	// A member without input has nothing to read a key from: refused.
	none := flowOf("y", execs("a", "b"), "a->b")
	none.Execs[1].InputFrom = plan.InputNone
	none.Execs[1].Quotas = []string{"per_tenant"}
	none.QuotaDefs = f.QuotaDefs
	_, _, err := e.s.StageFlow(e.ctx, StageRequest{Flow: none, Input: []byte(`{"tenant":"acme"}`)})
	var ve *ValidationError
	if !errors.As(err, &ve) || ve.Field != "flow.execs[1].quotas" {
		t.Fatalf("keyed quota on a member without input: %v, want a validation error of flow.execs[1].quotas", err)
	}
}

// Staging keys a quota as its stored definition says when it exists (the
// definition admission enforces), not as the plan says: a plan declaring
// an unkeyed quota keyed cannot give its members subjects of their own.
func TestStagedFlowQuotaKeyedByStoredDefinition(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	if _, err := e.s.UpsertQuota(e.ctx, QuotaSpec{ID: "default/gpu", Concurrency: 1}); err != nil {
		t.Fatal(err)
	}
	f := flowOf("x", execs("a"))
	f.Execs[0].Quotas = []string{"gpu", "per_tenant"}
	f.QuotaDefs = []plan.Quota{{Name: "gpu", Concurrency: 5, Key: "tenant"}, {Name: "per_tenant", Concurrency: 1, Key: "tenant"}}
	r, _, err := e.s.StageFlow(e.ctx, StageRequest{Flow: f, Input: []byte(`{"tenant":"acme"}`)})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"default/gpu", "default/per_tenant=acme"}
	if diff := cmp.Diff(want, e.get(r.Nodes[0].ExecutionID).Quotas); diff != "" {
		t.Fatalf("member quotas (-want +got):\n%s", diff)
	}
	if q := e.quota("default/gpu"); q.Key != "" || q.Concurrency != 1 {
		t.Fatalf("the stored definition changed: %+v", q)
	}
}
