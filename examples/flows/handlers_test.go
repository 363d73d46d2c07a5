package flows

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flowfabric/ff/runtime/worker"
)

func newDemo(t *testing.T, f Faults) (*Demo, registrar) {
	t.Helper()
	d := NewDemo(f)
	r := registrar{}
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

func states(run *localRun, names ...string) map[string]string {
	out := map[string]string{}
	for _, n := range names {
		out[n] = run.state[n]
	}
	return out
}

func TestPublishFlow(t *testing.T) {
	ctx := context.Background()
	t.Run("success", func(t *testing.T) {
		d, r := newDemo(t, Faults{})
		run := runLocal(ctx, t, r, mustPlan(PublishPlan()), sampleClip)
		want := map[string]string{"probe": succeeded, "transcode": succeeded, "thumbnail": succeeded, "publish": succeeded, "alert": skipped, "cleanup": succeeded}
		if diff := cmp.Diff(want, run.state); diff != "" {
			t.Fatalf("states (-want +got):\n%s", diff)
		}
		var got Clip
		if !run.result(t, mustPlan(PublishPlan()), &got) {
			t.Fatal("no result")
		}
		if got.URL != "s3://raw/clip-1.h264.mp4" || !slices.Equal(got.Tags, []string{"cats", "probed", "short", "published"}) || len(got.Thumb) == 0 {
			t.Fatalf("result = %+v", got)
		}
		if n := d.Notifications(); len(n) != 0 {
			t.Fatalf("notifications on success: %v", n)
		}
	})
	t.Run("transcode fails", func(t *testing.T) {
		d, r := newDemo(t, Faults{})
		clip := sampleClip
		clip.Labels = map[string]string{"codec": "unsupported"}
		run := runLocal(ctx, t, r, mustPlan(PublishPlan()), clip)
		want := map[string]string{"probe": succeeded, "transcode": failed, "thumbnail": succeeded, "publish": skipped, "alert": succeeded, "cleanup": succeeded}
		if diff := cmp.Diff(want, run.state); diff != "" {
			t.Fatalf("states (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]string{"publish: transcode failed"}, d.Notifications()); diff != "" {
			t.Fatalf("notifications (-want +got):\n%s", diff)
		}
	})
	t.Run("probe retried", func(t *testing.T) {
		_, r := newDemo(t, Faults{FailTimes: map[string]int{"publish.probe": 2}})
		run := runLocal(ctx, t, r, mustPlan(PublishPlan()), sampleClip)
		if run.state["probe"] != succeeded || run.attempts["probe"] != 3 {
			t.Fatalf("probe %s after %d attempts, want success on the third", run.state["probe"], run.attempts["probe"])
		}
	})
}

var sampleQuestion = Question{ID: "q-1", Tenant: "acme", Prompt: "  Why is   the sky blue? ", MaxTokens: 256}

func TestAskFlow(t *testing.T) {
	ctx := context.Background()
	t.Run("all drafts", func(t *testing.T) {
		_, r := newDemo(t, Faults{})
		run := runLocal(ctx, t, r, mustPlan(AskPlan()), sampleQuestion)
		var ans Answer
		if !run.result(t, mustPlan(AskPlan()), &ans) {
			t.Fatalf("no result: %v", run.errs)
		}
		if ans.QuestionID != "q-1" || len(ans.Drafts) != 3 || len(ans.Scores) != 3 || ans.ChosenModel == "" || ans.TotalTokens <= 0 {
			t.Fatalf("answer = %+v", ans)
		}
		if !strings.Contains(ans.Text, `"Why is the sky blue?"`) {
			t.Fatalf("prompt not normalised: %q", ans.Text)
		}
		// Deterministic: a second run gives the same answer.
		_, r2 := newDemo(t, Faults{})
		var again Answer
		runLocal(ctx, t, r2, mustPlan(AskPlan()), sampleQuestion).result(t, mustPlan(AskPlan()), &again)
		if diff := cmp.Diff(ans, again); diff != "" {
			t.Fatalf("second run differs (-first +second):\n%s", diff)
		}
	})
	t.Run("one draft fails", func(t *testing.T) {
		_, r := newDemo(t, Faults{Permanent: map[string]bool{"ask.draft_large": true}})
		run := runLocal(ctx, t, r, mustPlan(AskPlan()), sampleQuestion)
		var ans Answer
		if !run.result(t, mustPlan(AskPlan()), &ans) {
			t.Fatalf("no result: %v", run.errs)
		}
		if len(ans.Drafts) != 2 || ans.ChosenModel == "large-405b" {
			t.Fatalf("answer = %+v", ans)
		}
	})
	t.Run("every draft fails", func(t *testing.T) {
		_, r := newDemo(t, Faults{Fail: map[string]bool{"ask.draft_small": true, "ask.draft_large": true, "ask.draft_code": true}})
		run := runLocal(ctx, t, r, mustPlan(AskPlan()), sampleQuestion)
		if run.state["judge"] != failed || !worker.IsPermanent(run.errs["judge"]) {
			t.Fatalf("judge %s (%v), want a permanent failure", run.state["judge"], run.errs["judge"])
		}
		if run.attempts["draft_small"] != 4 {
			t.Fatalf("draft_small attempts = %d, want 4 (its retry policy)", run.attempts["draft_small"])
		}
	})
}

func TestNightlyETLFlow(t *testing.T) {
	ctx := context.Background()
	names := []string{"extract", "validate", "transform", "load", "quarantine", "notify_failure", "cleanup"}
	for _, tt := range []struct {
		name          string
		batch         Batch
		faults        Faults
		want          map[string]string
		notifications []string
	}{
		{
			name:  "success",
			batch: Batch{Source: "clickstream", Day: "2026-11-20"},
			want: map[string]string{"extract": succeeded, "validate": succeeded, "transform": succeeded, "load": succeeded,
				"quarantine": skipped, "notify_failure": skipped, "cleanup": succeeded},
		},
		{
			name:  "validation fails: quarantine",
			batch: Batch{Source: "corrupt-feed", Day: "2026-11-20"},
			want: map[string]string{"extract": succeeded, "validate": failed, "transform": skipped, "load": skipped,
				"quarantine": succeeded, "notify_failure": skipped, "cleanup": succeeded},
			notifications: []string{"nightly_etl: staging/corrupt-feed/2026-11-20.parquet quarantined"},
		},
		{
			name:   "transform fails: notify",
			batch:  Batch{Source: "clickstream", Day: "2026-11-20"},
			faults: Faults{Permanent: map[string]bool{"nightly_etl.transform": true}},
			want: map[string]string{"extract": succeeded, "validate": succeeded, "transform": failed, "load": skipped,
				"quarantine": skipped, "notify_failure": succeeded, "cleanup": succeeded},
			notifications: []string{"nightly_etl: transform or load failed"},
		},
		{
			name:   "load fails after retries: notify",
			batch:  Batch{Source: "clickstream", Day: "2026-11-20"},
			faults: Faults{Fail: map[string]bool{"nightly_etl.load": true}},
			want: map[string]string{"extract": succeeded, "validate": succeeded, "transform": succeeded, "load": failed,
				"quarantine": skipped, "notify_failure": succeeded, "cleanup": succeeded},
			notifications: []string{"nightly_etl: transform or load failed"},
		},
		{
			name:  "bad day: extract fails, everything skipped",
			batch: Batch{Source: "clickstream", Day: "yesterday"},
			want: map[string]string{"extract": failed, "validate": skipped, "transform": skipped, "load": skipped,
				"quarantine": skipped, "notify_failure": skipped, "cleanup": skipped},
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d, r := newDemo(t, tt.faults)
			run := runLocal(ctx, t, r, mustPlan(NightlyETLPlan()), tt.batch)
			if diff := cmp.Diff(tt.want, states(run, names...)); diff != "" {
				t.Fatalf("states (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.notifications, d.Notifications()); diff != "" {
				t.Fatalf("notifications (-want +got):\n%s", diff)
			}
		})
	}
	t.Run("result", func(t *testing.T) {
		_, r := newDemo(t, Faults{FailTimes: map[string]int{"nightly_etl.extract": 2}})
		rows := int64(5000)
		run := runLocal(ctx, t, r, mustPlan(NightlyETLPlan()), Batch{Source: "click-stream", Day: "2026-11-20", ExpectedRows: &rows})
		var got Loaded
		if !run.result(t, mustPlan(NightlyETLPlan()), &got) {
			t.Fatalf("no result: %v", run.errs)
		}
		want := Loaded{Table: "events_click_stream", Day: "2026-11-20", Rows: 5000 - 25, Finished: time.Date(2026, 11, 21, 2, 0, 0, 0, time.UTC)}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("result (-want +got):\n%s", diff)
		}
		if run.attempts["extract"] != 3 {
			t.Fatalf("extract attempts = %d, want 3", run.attempts["extract"])
		}
	})
}

func sampleOrder() Order {
	return Order{
		ID: "o-1001", CustomerID: "c-7",
		Items:      []LineItem{{SKU: "MUG-01", Quantity: 2, PriceCents: 1250}, {SKU: "TEA-07", Quantity: 1, PriceCents: 900}},
		TotalCents: 3400, Currency: "EUR", CardToken: "tok_visa",
		Address: Address{Name: "Ada", Street: "Hauptstr. 1", City: "Berlin", PostalCode: "10115", Country: "DE"},
		Placed:  time.Date(2026, 11, 21, 8, 0, 0, 0, time.UTC),
	}
}

func TestFulfilOrderFlow(t *testing.T) {
	ctx := context.Background()
	names := []string{"check_order", "reserve_stock", "authorize_payment", "capture_payment", "ship", "confirm", "release_stock", "void_authorization", "refund_payment"}
	for _, tt := range []struct {
		name          string
		change        func(o *Order)
		want          map[string]string
		notifications []string
	}{
		{
			name:   "success",
			change: func(o *Order) {},
			want: map[string]string{"check_order": succeeded, "reserve_stock": succeeded, "authorize_payment": succeeded, "capture_payment": succeeded,
				"ship": succeeded, "confirm": succeeded, "release_stock": skipped, "void_authorization": skipped, "refund_payment": skipped},
		},
		{
			name:   "card declined: release the stock",
			change: func(o *Order) { o.CardToken = "tok_declined" },
			want: map[string]string{"check_order": succeeded, "reserve_stock": succeeded, "authorize_payment": failed, "capture_payment": skipped,
				"ship": skipped, "confirm": skipped, "release_stock": succeeded, "void_authorization": skipped, "refund_payment": skipped},
			notifications: []string{"fulfil_order: released res-o-1001"},
		},
		{
			name:   "out of stock: void the authorisation",
			change: func(o *Order) { o.Items[0].SKU = "OOS-MUG-01" },
			want: map[string]string{"check_order": succeeded, "reserve_stock": failed, "authorize_payment": succeeded, "capture_payment": skipped,
				"ship": skipped, "confirm": skipped, "release_stock": skipped, "void_authorization": succeeded, "refund_payment": skipped},
		},
		{
			name:   "cannot ship: release and refund",
			change: func(o *Order) { o.Address.Country = "US" },
			want: map[string]string{"check_order": succeeded, "reserve_stock": succeeded, "authorize_payment": succeeded, "capture_payment": succeeded,
				"ship": failed, "confirm": skipped, "release_stock": succeeded, "void_authorization": skipped, "refund_payment": succeeded},
		},
		{
			name:   "wrong total: nothing else runs",
			change: func(o *Order) { o.TotalCents = 1 },
			want: map[string]string{"check_order": failed, "reserve_stock": skipped, "authorize_payment": skipped, "capture_payment": skipped,
				"ship": skipped, "confirm": skipped, "release_stock": skipped, "void_authorization": skipped, "refund_payment": skipped},
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d, r := newDemo(t, Faults{})
			o := sampleOrder()
			tt.change(&o)
			run := runLocal(ctx, t, r, mustPlan(FulfilOrderPlan()), o)
			if diff := cmp.Diff(tt.want, states(run, names...)); diff != "" {
				t.Fatalf("states (-want +got):\n%s", diff)
			}
			if tt.name == "success" {
				var c Confirmation
				if !run.result(t, mustPlan(FulfilOrderPlan()), &c) || c.OrderID != "o-1001" || c.PaymentID == "" || !strings.HasPrefix(c.TrackingID, "TRK") ||
					!c.ETA.Equal(o.Placed.Add(72*time.Hour)) {
					t.Fatalf("confirmation = %+v", c)
				}
			}
			if tt.notifications != nil {
				if diff := cmp.Diff(tt.notifications, d.Notifications()); diff != "" {
					t.Fatalf("notifications (-want +got):\n%s", diff)
				}
			}
		})
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
		_, err := r["fulfil_order.check_order"](context.Background(), worker.NewTestTask(json.RawMessage(`{"items": "many"}`), nil))
		if !worker.IsPermanent(err) || !strings.Contains(err.Error(), "flow fulfil_order: exec check_order: decode input") || !strings.Contains(err.Error(), "items") {
			t.Fatalf("err = %v", err)
		}
	})
}
