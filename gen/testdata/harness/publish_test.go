// TestGeneratedCodeBuilds copies this file into the package that checks
// the generated code, with MEDIA_IMPORT_PATH replaced by the import path of
// the code generated for issue 2's example (flow "publish"), then runs
// `go test` on it: it drives the generated RegisterPublish through a fake
// worker.Registrar and checks decoding, encoding, upstream access and
// permanent failures on bad input.
package check

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	media "MEDIA_IMPORT_PATH"

	"github.com/flowfabric/ff/compiler/plan"
	"github.com/flowfabric/ff/runtime/client"
	"github.com/flowfabric/ff/runtime/worker"
)

// handlers records what each method received.
type handlers struct {
	publishUp  media.PublishPublishUpstream
	alertUp    media.PublishAlertUpstream
	cleanupRan bool
	failProbe  error
}

func (h *handlers) Probe(ctx context.Context, in media.Clip) (media.Clip, error) {
	if h.failProbe != nil {
		return media.Clip{}, h.failProbe
	}
	in.Tags = append(in.Tags, "probed")
	return in, nil
}

func (h *handlers) Transcode(ctx context.Context, in media.Clip, up media.PublishTranscodeUpstream) (media.Clip, error) {
	in.URL += ".mp4"
	return in, nil
}

func (h *handlers) Thumbnail(ctx context.Context, in media.Clip, up media.PublishThumbnailUpstream) (media.Clip, error) {
	in.Thumb = []byte{1, 2, 3}
	return in, nil
}

func (h *handlers) Publish(ctx context.Context, in media.Clip, up media.PublishPublishUpstream) (media.Clip, error) {
	h.publishUp = up
	if up.Thumbnail != nil {
		in.Thumb = up.Thumbnail.Thumb
	}
	return in, nil
}

func (h *handlers) Alert(ctx context.Context, up media.PublishAlertUpstream) error {
	h.alertUp = up
	return nil
}

func (h *handlers) Cleanup(ctx context.Context, up media.PublishCleanupUpstream) error {
	h.cleanupRan = true
	return nil
}

func register(t *testing.T, h *handlers) worker.TestRegistrar {
	t.Helper()
	r := worker.TestRegistrar{}
	if err := media.RegisterPublish(r, h); err != nil {
		t.Fatalf("RegisterPublish: %v", err)
	}
	return r
}

func clipJSON(t *testing.T, c media.Clip) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

var sample = media.Clip{
	ID: "c1", URL: "s3://in/c1", Seconds: 12.5, Tags: []string{"cat"},
	Labels: map[string]string{"lang": "en"},
	Taken:  time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC), TTL: 90 * time.Second,
}

func TestRegisterBindsEveryKind(t *testing.T) {
	r := register(t, &handlers{})
	var got []string
	for k := range r {
		got = append(got, k)
	}
	slices.Sort(got)
	want := []string{"media.probe", "publish.alert", "publish.cleanup", "publish.publish", "publish.thumbnail", "publish.transcode"}
	if !slices.Equal(got, want) {
		t.Fatalf("kinds = %v, want %v", got, want)
	}
	// A second registration on the same worker fails with context.
	err := media.RegisterPublish(r, &handlers{})
	if err == nil || !strings.Contains(err.Error(), `register flow publish: exec probe (kind "media.probe")`) {
		t.Fatalf("second RegisterPublish: got %v", err)
	}
}

func TestHandlerDecodesAndEncodes(t *testing.T) {
	r := register(t, &handlers{})
	out, err := r["media.probe"](context.Background(), worker.NewTestTask(clipJSON(t, sample), nil))
	if err != nil {
		t.Fatal(err)
	}
	var got media.Clip
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	if got.ID != "c1" || !slices.Equal(got.Tags, []string{"cat", "probed"}) || got.TTL != 90*time.Second || !got.Taken.Equal(sample.Taken) {
		t.Fatalf("output = %+v", got)
	}
	// Optional fields left empty are omitted from the JSON.
	if strings.Contains(string(out), `"thumb"`) || strings.Contains(string(out), `"meta"`) {
		t.Fatalf("empty optional fields encoded: %s", out)
	}
}

func TestBadInputIsPermanent(t *testing.T) {
	r := register(t, &handlers{})
	for _, in := range []string{`{"seconds": "long"}`, `not json`, ``} {
		_, err := r["media.probe"](context.Background(), worker.NewTestTask(json.RawMessage(in), nil))
		if err == nil || !worker.IsPermanent(err) {
			t.Fatalf("input %q: err = %v, want a permanent error", in, err)
		}
		if !strings.Contains(err.Error(), "flow publish: exec probe: the input does not match its type Clip: input") {
			t.Fatalf("input %q: message %q does not name flow and exec", in, err)
		}
	}
	long := strings.Replace(string(clipJSON(t, sample)), `"seconds":12.5`, `"seconds":"long"`, 1)
	_, err := r["media.probe"](context.Background(), worker.NewTestTask(json.RawMessage(long), nil))
	if err == nil || !strings.Contains(err.Error(), "input.seconds: want float, got a string") {
		t.Fatalf("message %v does not name the field", err)
	}
	// A field spelt in another case, which encoding/json would take, or
	// an unknown field, which it would drop, fails too.
	for _, in := range []string{
		strings.Replace(string(clipJSON(t, sample)), `"seconds":`, `"Seconds":`, 1),
		strings.Replace(string(clipJSON(t, sample)), `"seconds":`, `"length":1,"seconds":`, 1),
	} {
		_, err := r["media.probe"](context.Background(), worker.NewTestTask(json.RawMessage(in), nil))
		if !worker.IsPermanent(err) || !strings.Contains(err.Error(), "flow publish: exec probe: the input does not match its type Clip: input.") {
			t.Fatalf("input %s: err = %v, want a permanent mismatch", in, err)
		}
	}
}

func TestHandlerErrorPassesThrough(t *testing.T) {
	boom := errors.New("probe: codec not supported")
	r := register(t, &handlers{failProbe: boom})
	_, err := r["media.probe"](context.Background(), worker.NewTestTask(clipJSON(t, sample), nil))
	if !errors.Is(err, boom) || worker.IsPermanent(err) {
		t.Fatalf("err = %v, want the handler's own retryable error", err)
	}
}

func TestUpstreamsAreDecoded(t *testing.T) {
	h := &handlers{}
	r := register(t, h)
	thumb := sample
	thumb.Thumb = []byte("png")
	trans := sample
	trans.URL = "s3://out/c1.mp4"
	ups := map[string]json.RawMessage{"thumbnail": clipJSON(t, thumb), "transcode": clipJSON(t, trans)}
	out, err := r["publish.publish"](context.Background(), worker.NewTestTask(clipJSON(t, trans), ups))
	if err != nil {
		t.Fatal(err)
	}
	if h.publishUp.Thumbnail == nil || string(h.publishUp.Thumbnail.Thumb) != "png" {
		t.Fatalf("up.Thumbnail = %+v", h.publishUp.Thumbnail)
	}
	if h.publishUp.Transcode == nil || h.publishUp.Transcode.URL != "s3://out/c1.mp4" {
		t.Fatalf("up.Transcode = %+v", h.publishUp.Transcode)
	}
	var got media.Clip
	if err := json.Unmarshal(out, &got); err != nil || string(got.Thumb) != "png" {
		t.Fatalf("output = %s (%v)", out, err)
	}

	// An upstream that produced nothing (here: transcode failed, so alert
	// runs) is a nil field.
	out, err = r["publish.alert"](context.Background(), worker.NewTestTask(nil, nil))
	if err != nil || out != nil {
		t.Fatalf("alert: out %s err %v, want no output and no error", out, err)
	}
	if h.alertUp.Transcode != nil {
		t.Fatalf("alert saw a transcode output: %+v", h.alertUp.Transcode)
	}

	// A malformed upstream output is a permanent failure naming it.
	_, err = r["publish.publish"](context.Background(),
		worker.NewTestTask(clipJSON(t, trans), map[string]json.RawMessage{"transcode": json.RawMessage(`[1]`)}))
	if !worker.IsPermanent(err) || !strings.Contains(err.Error(), "flow publish: exec publish: the output of upstream transcode does not match its type Clip: transcode: want Clip (an object), got an array") {
		t.Fatalf("err = %v", err)
	}
}

func TestNoInputNoOutputExec(t *testing.T) {
	h := &handlers{}
	r := register(t, h)
	out, err := r["publish.cleanup"](context.Background(), worker.NewTestTask(nil, nil))
	if err != nil || out != nil || !h.cleanupRan {
		t.Fatalf("cleanup: out %s err %v ran %v", out, err, h.cleanupRan)
	}
}

// stager is a fake client.Stager that records what it was asked to stage.
type stager struct {
	flow     *plan.Flow
	planJSON []byte
	input    any
	opts     client.StageOptions
}

func (s *stager) StageFlow(ctx context.Context, flow *plan.Flow, input any, opts ...client.StageOption) (*client.Run, error) {
	s.flow, s.input = flow, input
	for _, o := range opts {
		o(&s.opts)
	}
	return &client.Run{ID: "run-1", Flow: flow.Name}, nil
}

func (s *stager) StageFlowJSON(ctx context.Context, planJSON []byte, input any, opts ...client.StageOption) (*client.Run, error) {
	s.planJSON, s.input = planJSON, input
	for _, o := range opts {
		o(&s.opts)
	}
	return &client.Run{ID: "run-1", Flow: "publish"}, nil
}

func TestStagePublish(t *testing.T) {
	s := &stager{}
	run, err := media.StagePublish(context.Background(), s, sample, client.WithIdempotencyKey("k1"))
	if err != nil {
		t.Fatal(err)
	}
	// StagePublish sends the embedded plan as it is, through StageFlowJSON.
	if run.ID != "run-1" || s.flow != nil || string(s.planJSON) != media.PublishPlanJSON || s.opts.IdempotencyKey != "k1" {
		t.Fatalf("run %+v flow %v plan %.40q opts %+v", run.Run, s.flow, s.planJSON, s.opts)
	}
	if in, ok := s.input.(media.Clip); !ok || in.ID != "c1" {
		t.Fatalf("input = %#v", s.input)
	}
	// The plan sent is the one PublishPlan returns.
	want, err := media.PublishPlan()
	if err != nil {
		t.Fatal(err)
	}
	var sent plan.Flow
	if err := json.Unmarshal(s.planJSON, &sent); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(&sent, want) {
		t.Fatalf("staged plan differs from PublishPlan():\n got %+v\nwant %+v", &sent, want)
	}
	// Each call returns a fresh plan: changing one does not change the next.
	want.Execs[0].Name = "changed"
	again, err := media.PublishPlan()
	if err != nil {
		t.Fatal(err)
	}
	if again.Execs[0].Name == "changed" {
		t.Fatal("PublishPlan returned shared state")
	}
}
