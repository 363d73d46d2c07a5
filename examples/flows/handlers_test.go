package flows

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flowfabric/ff/runtime/worker"
)

func newDemo(t *testing.T, f Faults) (*Demo, worker.TestRegistrar) {
	t.Helper()
	d := NewDemo(f)
	r := worker.TestRegistrar{}
	if err := d.Register(r); err != nil {
		t.Fatalf("Register: %v", err)
	}
	return d, r
}

func TestRegisterEveryFlow(t *testing.T) {
	d, r := newDemo(t, Faults{})
	kinds := len(mustPlan(PublishPlan()).Execs) + len(mustPlan(AskPlan()).Execs) + len(mustPlan(NightlyETLPlan()).Execs) + len(mustPlan(FulfilOrderPlan()).Execs)
	if len(r) != kinds {
		t.Fatalf("registered %d kinds, want %d (one per exec)", len(r), kinds)
	}
	if err := d.Register(r); err == nil || !strings.Contains(err.Error(), "register flow publish") {
		t.Fatalf("registering twice: err = %v", err)
	}
}

var sampleClip = Clip{
	ID: "clip-1", URL: "s3://raw/clip-1.mov", Seconds: 42, Tags: []string{"cats"},
	Labels: map[string]string{"codec": "prores"},
	Taken:  time.Date(2026, 11, 20, 9, 30, 0, 0, time.UTC), TTL: 30 * 24 * time.Hour,
}

var sampleQuestion = Question{ID: "q-1", Tenant: "acme", Prompt: "  Why is   the sky blue? ", MaxTokens: 256}

func sampleOrder() Order {
	return Order{
		ID: "o-1001", CustomerID: "c-7",
		Items:      []LineItem{{SKU: "MUG-01", Quantity: 2, PriceCents: 1250}, {SKU: "TEA-07", Quantity: 1, PriceCents: 900}},
		TotalCents: 3400, Currency: "EUR", CardToken: "tok_visa",
		Address: Address{Name: "Ada", Street: "Hauptstr. 1", City: "Berlin", PostalCode: "10115", Country: "DE"},
		Placed:  time.Date(2026, 11, 21, 8, 0, 0, 0, time.UTC),
	}
}

func TestFaults(t *testing.T) {
	t.Run("hang until cancelled", func(t *testing.T) {
		d, r := newDemo(t, Faults{Hang: map[string]bool{"nightly_etl.load": true}})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		in, _ := json.Marshal(Staged{Source: "s", Day: "2026-11-20", Rows: 1})
		go func() {
			_, err := r["nightly_etl.load"](ctx, worker.NewTestTask(in, nil))
			done <- err
		}()
		select {
		case err := <-done:
			t.Fatalf("load returned before cancellation: %v", err)
		case <-time.After(20 * time.Millisecond):
		}
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want context.Canceled", err)
		}
		if diff := cmp.Diff([]string{"nightly_etl.load"}, d.Calls()); diff != "" {
			t.Fatalf("calls (-want +got):\n%s", diff)
		}
	})
	t.Run("injected failures", func(t *testing.T) {
		_, r := newDemo(t, Faults{Permanent: map[string]bool{"ask.prepare": true}, Fail: map[string]bool{"publish.probe": true}})
		q, _ := json.Marshal(sampleQuestion)
		_, err := r["ask.prepare"](context.Background(), worker.NewTestTask(q, nil))
		if !errors.Is(err, ErrInjected) || !worker.IsPermanent(err) {
			t.Fatalf("permanent fault: err = %v", err)
		}
		c, _ := json.Marshal(sampleClip)
		_, err = r["media.probe"](context.Background(), worker.NewTestTask(c, nil))
		if !errors.Is(err, ErrInjected) || worker.IsPermanent(err) {
			t.Fatalf("retryable fault: err = %v", err)
		}
	})
	t.Run("bad input is permanent", func(t *testing.T) {
		_, r := newDemo(t, Faults{})
		_, err := r["fulfil_order.check_order"](context.Background(), worker.NewTestTask(badOrder(t), nil))
		if !worker.IsPermanent(err) || !strings.Contains(err.Error(), "flow fulfil_order: exec check_order: the input does not match its type Order: input.items:") {
			t.Fatalf("err = %v", err)
		}
	})
}

// badOrder is sampleOrder as JSON with "many" for its list of items.
func badOrder(t *testing.T) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(sampleOrder())
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	m["items"] = "many"
	b, err = json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
