package flows

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/flowfabric/ff/compiler/plan"
	"github.com/flowfabric/ff/runtime/worker"
)

// Faults injects failures into the demo handlers so that tests can drive
// failure paths, retries and cancellation. Keys name an exec as
// "flow.exec", for example "nightly_etl.transform". The zero value injects
// nothing.
type Faults struct {
	// Fail makes every attempt of the exec fail with a retryable error.
	Fail map[string]bool
	// Permanent makes the exec fail with a permanent error (no retry).
	Permanent map[string]bool
	// FailTimes makes the first N attempts of the exec fail (retryably);
	// later attempts run normally.
	FailTimes map[string]int
	// Hang makes the exec block until its context is done, then return the
	// context's error: for cancellation and timeout tests.
	Hang map[string]bool
	// Delay is how long every handler waits (honouring its context) before
	// working; zero means no wait.
	Delay time.Duration
}

// Execs returns the names faults take, "<flow>.<exec>", of every exec of
// the example flows, sorted.
func Execs() ([]string, error) {
	var out []string
	for _, load := range []func() (*plan.Flow, error){AskPlan, FulfilOrderPlan, NightlyETLPlan, PublishPlan} {
		f, err := load()
		if err != nil {
			return nil, err
		}
		for _, x := range f.Execs {
			out = append(out, f.Name+"."+x.Name)
		}
	}
	slices.Sort(out)
	return out, nil
}

// Unknown returns the names f's fault sets hold that are no exec of the
// example flows (Execs), sorted: a fault on one of them would never fire.
func (f Faults) Unknown() ([]string, error) {
	execs, err := Execs()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, set := range []map[string]bool{f.Fail, f.Permanent, f.Hang} {
		for name := range set {
			if !slices.Contains(execs, name) {
				out = append(out, name)
			}
		}
	}
	for name := range f.FailTimes {
		if !slices.Contains(execs, name) {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// ErrInjected is the cause of every failure injected through Faults.
var ErrInjected = errors.New("injected failure")

// Demo implements the Handlers interface of every example flow without any
// network access. Results depend only on the inputs, so runs are
// repeatable. It records which execs ran and the notifications its alert
// handlers sent, for tests. A Demo is safe for concurrent use.
type Demo struct {
	faults Faults

	mu            sync.Mutex
	attempts      map[string]int // per "flow.exec", across runs
	calls         []string       // "flow.exec" of every call, in order
	notifications []string
	interrupted   []string // "flow.exec: cause" of hung handlers whose context ended
}

// NewDemo returns a Demo that injects the given faults.
func NewDemo(f Faults) *Demo {
	return &Demo{
		faults: Faults{
			Fail:      maps.Clone(f.Fail),
			Permanent: maps.Clone(f.Permanent),
			FailTimes: maps.Clone(f.FailTimes),
			Hang:      maps.Clone(f.Hang),
			Delay:     f.Delay,
		},
		attempts: map[string]int{},
	}
}

// Register binds the handlers of every example flow to w.
func (d *Demo) Register(w worker.Registrar) error {
	if err := RegisterPublish(w, Media{d}); err != nil {
		return err
	}
	if err := RegisterAsk(w, LLM{d}); err != nil {
		return err
	}
	if err := RegisterNightlyETL(w, ETL{d}); err != nil {
		return err
	}
	return RegisterFulfilOrder(w, Orders{d})
}

// Calls returns the execs called so far, as "flow.exec", in call order.
func (d *Demo) Calls() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.calls)
}

// Interrupted returns "flow.exec: cause" for every hung handler (Faults.Hang)
// whose context ended, in order: the cause says why (lease lost,
// cancelled, shutdown, timeout).
func (d *Demo) Interrupted() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.interrupted)
}

// Notifications returns the messages alert handlers have sent so far.
func (d *Demo) Notifications() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.notifications)
}

func (d *Demo) notify(format string, args ...any) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.notifications = append(d.notifications, fmt.Sprintf(format, args...))
}

// enter records a call of exec and applies the injected faults.
func (d *Demo) enter(ctx context.Context, exec string) error {
	d.mu.Lock()
	d.calls = append(d.calls, exec)
	d.attempts[exec]++
	attempt := d.attempts[exec]
	d.mu.Unlock()

	if d.faults.Hang[exec] {
		<-ctx.Done()
		d.mu.Lock()
		d.interrupted = append(d.interrupted, fmt.Sprintf("%s: %v", exec, context.Cause(ctx)))
		d.mu.Unlock()
		return ctx.Err()
	}
	if d.faults.Delay > 0 {
		t := time.NewTimer(d.faults.Delay)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	switch {
	case d.faults.Permanent[exec]:
		return worker.Permanent(fmt.Errorf("%s: %w", exec, ErrInjected))
	case d.faults.Fail[exec]:
		return fmt.Errorf("%s: attempt %d: %w", exec, attempt, ErrInjected)
	case attempt <= d.faults.FailTimes[exec]:
		return fmt.Errorf("%s: attempt %d of %d failing: %w", exec, attempt, d.faults.FailTimes[exec], ErrInjected)
	}
	return ctx.Err()
}

// hash returns a stable number derived from parts, standing in for what a
// real system would measure.
func hash(parts ...string) uint64 {
	h := fnv.New64a()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return h.Sum64()
}

// Media implements PublishHandlers: the media pipeline of media.ff.
type Media struct{ d *Demo }

var _ PublishHandlers = Media{}

// Probe checks that the clip is usable and tags it with its length class.
func (m Media) Probe(ctx context.Context, in Clip) (Clip, error) {
	if err := m.d.enter(ctx, "publish.probe"); err != nil {
		return Clip{}, err
	}
	if in.URL == "" || in.Seconds <= 0 {
		return Clip{}, worker.Permanent(fmt.Errorf("probe %s: not a playable clip (url %q, %gs)", in.ID, in.URL, in.Seconds))
	}
	class := "short"
	if in.Seconds > 600 {
		class = "long"
	}
	in.Tags = append(slices.Clone(in.Tags), "probed", class)
	return in, nil
}

// Transcode produces the H.264 rendition; clips labelled with codec
// "unsupported" fail permanently.
func (m Media) Transcode(ctx context.Context, in Clip, up PublishTranscodeUpstream) (Clip, error) {
	if err := m.d.enter(ctx, "publish.transcode"); err != nil {
		return Clip{}, err
	}
	if in.Labels["codec"] == "unsupported" {
		return Clip{}, worker.Permanent(fmt.Errorf("transcode %s: codec not supported", in.ID))
	}
	in.URL = strings.TrimSuffix(in.URL, ".mov") + ".h264.mp4"
	in.Labels = maps.Clone(in.Labels)
	if in.Labels == nil {
		in.Labels = map[string]string{}
	}
	in.Labels["codec"] = "h264"
	return in, nil
}

// Thumbnail renders a small preview image (a stand-in byte pattern).
func (m Media) Thumbnail(ctx context.Context, in Clip, up PublishThumbnailUpstream) (Clip, error) {
	if err := m.d.enter(ctx, "publish.thumbnail"); err != nil {
		return Clip{}, err
	}
	h := hash(in.ID, in.URL)
	in.Thumb = []byte{0x89, 'P', 'N', 'G', byte(h), byte(h >> 8), byte(h >> 16), byte(h >> 24)}
	return in, nil
}

// Publish combines the transcoded clip with the thumbnail and publishes it.
func (m Media) Publish(ctx context.Context, in Clip, up PublishPublishUpstream) (Clip, error) {
	if err := m.d.enter(ctx, "publish.publish"); err != nil {
		return Clip{}, err
	}
	if up.Thumbnail == nil {
		return Clip{}, errors.New("publish: thumbnail output missing")
	}
	in.Thumb = up.Thumbnail.Thumb
	in.Tags = append(slices.Clone(in.Tags), "published")
	return in, nil
}

// Alert tells the on-call channel that a transcode failed.
func (m Media) Alert(ctx context.Context, up PublishAlertUpstream) error {
	if err := m.d.enter(ctx, "publish.alert"); err != nil {
		return err
	}
	m.d.notify("publish: transcode failed")
	return nil
}

// Cleanup removes scratch files, whatever the outcome.
func (m Media) Cleanup(ctx context.Context, up PublishCleanupUpstream) error {
	return m.d.enter(ctx, "publish.cleanup")
}

// LLM implements AskHandlers: the model fan-out of llm.ff.
type LLM struct{ d *Demo }

var _ AskHandlers = LLM{}

// Prepare normalises the prompt and applies the default token limit.
func (l LLM) Prepare(ctx context.Context, in Question) (Question, error) {
	if err := l.d.enter(ctx, "ask.prepare"); err != nil {
		return Question{}, err
	}
	in.Prompt = strings.Join(strings.Fields(in.Prompt), " ")
	if in.Prompt == "" {
		return Question{}, worker.Permanent(fmt.Errorf("question %s: empty prompt", in.ID))
	}
	if in.MaxTokens <= 0 {
		in.MaxTokens = 1024
	}
	return in, nil
}

// draft stands in for a model call: the answer and its token counts
// depend only on the model and the prompt.
func (l LLM) draft(ctx context.Context, exec, model string, in Question, speed time.Duration) (Draft, error) {
	if err := l.d.enter(ctx, "ask."+exec); err != nil {
		return Draft{}, err
	}
	words := len(strings.Fields(in.Prompt))
	completion := min(int64(words*4+int(hash(model, in.Prompt)%64)), in.MaxTokens)
	d := Draft{
		Model:            model,
		Text:             fmt.Sprintf("[%s] answer to %q", model, in.Prompt),
		PromptTokens:     int64(words * 2),
		CompletionTokens: completion,
		Latency:          time.Duration(completion) * speed,
	}
	// What a model call costs counts against the flow's budgets (the
	// run's tokens and the fleet's daily tokens): the console's limits
	// page shows them move. A task made by worker.NewTestTask has no
	// server to report to.
	if t, ok := worker.TaskFrom(ctx); ok {
		if _, err := t.ReportUsage(ctx, "tokens", d.PromptTokens+d.CompletionTokens); err != nil && !errors.Is(err, worker.ErrNoServer) {
			return Draft{}, fmt.Errorf("%s: report usage: %w", exec, err)
		}
	}
	return d, nil
}

// DraftSmall asks the small, fast model.
func (l LLM) DraftSmall(ctx context.Context, in Question, up AskDraftSmallUpstream) (Draft, error) {
	return l.draft(ctx, "draft_small", "small-8b", in, 5*time.Millisecond)
}

// DraftLarge asks the large model.
func (l LLM) DraftLarge(ctx context.Context, in Question, up AskDraftLargeUpstream) (Draft, error) {
	return l.draft(ctx, "draft_large", "large-405b", in, 40*time.Millisecond)
}

// DraftCode asks the code-tuned model.
func (l LLM) DraftCode(ctx context.Context, in Question, up AskDraftCodeUpstream) (Draft, error) {
	return l.draft(ctx, "draft_code", "code-34b", in, 15*time.Millisecond)
}

// Judge scores the drafts that succeeded and picks the best; it fails
// permanently when none did.
func (l LLM) Judge(ctx context.Context, in Question, up AskJudgeUpstream) (Answer, error) {
	if err := l.d.enter(ctx, "ask.judge"); err != nil {
		return Answer{}, err
	}
	var drafts []Draft
	for _, d := range []*Draft{up.DraftSmall, up.DraftLarge, up.DraftCode} {
		if d != nil {
			drafts = append(drafts, *d)
		}
	}
	if len(drafts) == 0 {
		return Answer{}, worker.Permanent(fmt.Errorf("question %s: every draft failed", in.ID))
	}
	ans := Answer{QuestionID: in.ID, Drafts: drafts, Scores: map[string]float64{}}
	best := -1.0
	for _, d := range drafts {
		// Favour longer answers, penalise slow ones.
		score := float64(d.CompletionTokens) - d.Latency.Seconds()
		ans.Scores[d.Model] = score
		ans.TotalTokens += d.PromptTokens + d.CompletionTokens
		if score > best {
			best, ans.Text, ans.ChosenModel = score, d.Text, d.Model
		}
	}
	return ans, nil
}

// ETL implements NightlyETLHandlers: the warehouse load of etl.ff.
type ETL struct{ d *Demo }

var _ NightlyETLHandlers = ETL{}

// Extract copies the day's events into staging. Sources whose name
// contains "corrupt" yield many rejected rows.
func (e ETL) Extract(ctx context.Context, in Batch) (Staged, error) {
	if err := e.d.enter(ctx, "nightly_etl.extract"); err != nil {
		return Staged{}, err
	}
	if _, err := time.Parse(time.DateOnly, in.Day); err != nil {
		return Staged{}, worker.Permanent(fmt.Errorf("extract %s: bad day %q: %w", in.Source, in.Day, err))
	}
	rows := int64(1000 + hash(in.Source, in.Day)%9000)
	if in.ExpectedRows != nil {
		rows = *in.ExpectedRows
	}
	rejected := rows / 200
	if strings.Contains(in.Source, "corrupt") {
		rejected = rows / 4
	}
	return Staged{
		Source:   in.Source,
		Day:      in.Day,
		Location: fmt.Sprintf("staging/%s/%s.parquet", in.Source, in.Day),
		Rows:     rows,
		Rejected: rejected,
		Checksum: fmt.Sprintf("%016x", hash(in.Source, in.Day, "rows")),
	}, nil
}

// Validate fails permanently when more than 5% of the rows were rejected.
func (e ETL) Validate(ctx context.Context, in Staged, up NightlyETLValidateUpstream) (Staged, error) {
	if err := e.d.enter(ctx, "nightly_etl.validate"); err != nil {
		return Staged{}, err
	}
	if in.Rejected*20 > in.Rows {
		return Staged{}, worker.Permanent(fmt.Errorf("validate %s: %d of %d rows rejected", in.Location, in.Rejected, in.Rows))
	}
	return in, nil
}

// Transform drops the rejected rows and writes the warehouse layout.
func (e ETL) Transform(ctx context.Context, in Staged, up NightlyETLTransformUpstream) (Staged, error) {
	if err := e.d.enter(ctx, "nightly_etl.transform"); err != nil {
		return Staged{}, err
	}
	in.Rows -= in.Rejected
	in.Rejected = 0
	in.Location = strings.Replace(in.Location, "staging/", "transformed/", 1)
	return in, nil
}

// Load appends the transformed rows to the day's partition.
func (e ETL) Load(ctx context.Context, in Staged, up NightlyETLLoadUpstream) (Loaded, error) {
	if err := e.d.enter(ctx, "nightly_etl.load"); err != nil {
		return Loaded{}, err
	}
	day, err := time.Parse(time.DateOnly, in.Day)
	if err != nil {
		return Loaded{}, worker.Permanent(fmt.Errorf("load: bad day %q: %w", in.Day, err))
	}
	return Loaded{
		Table: "events_" + strings.ReplaceAll(in.Source, "-", "_"),
		Day:   in.Day,
		Rows:  in.Rows,
		// The nightly window closes at 02:00 UTC the next day.
		Finished: day.Add(26 * time.Hour),
	}, nil
}

// Quarantine moves a batch that failed validation aside for inspection.
func (e ETL) Quarantine(ctx context.Context, in Staged, up NightlyETLQuarantineUpstream) (Quarantined, error) {
	if err := e.d.enter(ctx, "nightly_etl.quarantine"); err != nil {
		return Quarantined{}, err
	}
	e.d.notify("nightly_etl: %s quarantined", in.Location)
	return Quarantined{
		Location: strings.Replace(in.Location, "staging/", "quarantine/", 1),
		Reason:   fmt.Sprintf("%d of %d rows rejected", in.Rejected, in.Rows),
	}, nil
}

// NotifyFailure pages the on-call engineer after a failed transform or
// load, with the failure: the upstream's error, which the task carries
// (worker.TaskFrom).
func (e ETL) NotifyFailure(ctx context.Context, up NightlyETLNotifyFailureUpstream) error {
	if err := e.d.enter(ctx, "nightly_etl.notify_failure"); err != nil {
		return err
	}
	var why []string
	if t, ok := worker.TaskFrom(ctx); ok {
		for _, exec := range []string{"transform", "load"} {
			// The other one was skipped (or had not ended): not news.
			if state, msg, ok := t.UpstreamError(exec); ok && state != "skipped" {
				why = append(why, fmt.Sprintf("%s %s: %s", exec, state, msg))
			}
		}
	}
	e.d.notify("nightly_etl: %s", cmp.Or(strings.Join(why, "; "), "transform or load failed"))
	return nil
}

// Cleanup removes the staging files.
func (e ETL) Cleanup(ctx context.Context, up NightlyETLCleanupUpstream) error {
	return e.d.enter(ctx, "nightly_etl.cleanup")
}

// Orders implements FulfilOrderHandlers: the order workflow of order.ff.
type Orders struct{ d *Demo }

var _ FulfilOrderHandlers = Orders{}

// shippable lists the countries the demo warehouse ships to.
var shippable = []string{"AT", "BE", "DE", "ES", "FR", "IT", "NL"}

// CheckOrder validates the order: items present and the total right.
func (o Orders) CheckOrder(ctx context.Context, in Order) (Order, error) {
	if err := o.d.enter(ctx, "fulfil_order.check_order"); err != nil {
		return Order{}, err
	}
	if len(in.Items) == 0 {
		return Order{}, worker.Permanent(fmt.Errorf("order %s: no items", in.ID))
	}
	var total int64
	for _, it := range in.Items {
		if it.Quantity <= 0 {
			return Order{}, worker.Permanent(fmt.Errorf("order %s: sku %s: quantity %d", in.ID, it.SKU, it.Quantity))
		}
		total += it.Quantity * it.PriceCents
	}
	if total != in.TotalCents {
		return Order{}, worker.Permanent(fmt.Errorf("order %s: total %d does not match the items (%d)", in.ID, in.TotalCents, total))
	}
	return in, nil
}

// ReserveStock reserves every item; SKUs starting with "OOS-" are out of
// stock.
func (o Orders) ReserveStock(ctx context.Context, in Order, up FulfilOrderReserveStockUpstream) (Reservation, error) {
	if err := o.d.enter(ctx, "fulfil_order.reserve_stock"); err != nil {
		return Reservation{}, err
	}
	r := Reservation{OrderID: in.ID, ReservationID: "res-" + in.ID, SKUs: map[string]int64{}}
	for _, it := range in.Items {
		if strings.HasPrefix(it.SKU, "OOS-") {
			return Reservation{}, worker.Permanent(fmt.Errorf("order %s: sku %s out of stock", in.ID, it.SKU))
		}
		r.SKUs[it.SKU] += it.Quantity
	}
	return r, nil
}

// AuthorizePayment places a hold on the card; the token "tok_declined" is
// declined.
func (o Orders) AuthorizePayment(ctx context.Context, in Order, up FulfilOrderAuthorizePaymentUpstream) (Payment, error) {
	if err := o.d.enter(ctx, "fulfil_order.authorize_payment"); err != nil {
		return Payment{}, err
	}
	if in.CardToken == "tok_declined" {
		return Payment{}, worker.Permanent(fmt.Errorf("order %s: card declined", in.ID))
	}
	return Payment{OrderID: in.ID, PaymentID: fmt.Sprintf("pay-%x", hash(in.ID, in.CardToken)%0xffffff), AmountCents: in.TotalCents}, nil
}

// CapturePayment captures the authorised amount once stock is reserved.
func (o Orders) CapturePayment(ctx context.Context, in Payment, up FulfilOrderCapturePaymentUpstream) (Payment, error) {
	if err := o.d.enter(ctx, "fulfil_order.capture_payment"); err != nil {
		return Payment{}, err
	}
	in.Captured = true
	return in, nil
}

// Ship books the parcel; only some countries are served.
func (o Orders) Ship(ctx context.Context, in Order, up FulfilOrderShipUpstream) (Shipment, error) {
	if err := o.d.enter(ctx, "fulfil_order.ship"); err != nil {
		return Shipment{}, err
	}
	if !slices.Contains(shippable, in.Address.Country) {
		return Shipment{}, worker.Permanent(fmt.Errorf("order %s: no carrier serves %q", in.ID, in.Address.Country))
	}
	return Shipment{
		OrderID:    in.ID,
		TrackingID: fmt.Sprintf("TRK%010d", hash(in.ID, in.Address.PostalCode)%10_000_000_000),
		Carrier:    "demo-post",
		ETA:        in.Placed.Add(72 * time.Hour),
	}, nil
}

// Confirm sends the confirmation with the payment and tracking ids.
func (o Orders) Confirm(ctx context.Context, in Shipment, up FulfilOrderConfirmUpstream) (Confirmation, error) {
	if err := o.d.enter(ctx, "fulfil_order.confirm"); err != nil {
		return Confirmation{}, err
	}
	if up.CapturePayment == nil {
		return Confirmation{}, errors.New("confirm: payment output missing")
	}
	return Confirmation{OrderID: in.OrderID, PaymentID: up.CapturePayment.PaymentID, TrackingID: in.TrackingID, ETA: in.ETA}, nil
}

// ReleaseStock gives the reserved stock back after a later failure.
func (o Orders) ReleaseStock(ctx context.Context, up FulfilOrderReleaseStockUpstream) error {
	if err := o.d.enter(ctx, "fulfil_order.release_stock"); err != nil {
		return err
	}
	if up.ReserveStock != nil {
		o.d.notify("fulfil_order: released %s", up.ReserveStock.ReservationID)
	}
	return nil
}

// VoidAuthorization drops the card hold when stock could not be reserved.
func (o Orders) VoidAuthorization(ctx context.Context, up FulfilOrderVoidAuthorizationUpstream) error {
	if err := o.d.enter(ctx, "fulfil_order.void_authorization"); err != nil {
		return err
	}
	if up.AuthorizePayment != nil {
		o.d.notify("fulfil_order: voided %s", up.AuthorizePayment.PaymentID)
	}
	return nil
}

// RefundPayment refunds a captured payment when shipping failed.
func (o Orders) RefundPayment(ctx context.Context, up FulfilOrderRefundPaymentUpstream) error {
	if err := o.d.enter(ctx, "fulfil_order.refund_payment"); err != nil {
		return err
	}
	if up.CapturePayment != nil {
		o.d.notify("fulfil_order: refunded %s (%d cents)", up.CapturePayment.PaymentID, up.CapturePayment.AmountCents)
	}
	return nil
}
