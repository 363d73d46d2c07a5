package worker_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flowfabric/ff/compiler/plan"
	"github.com/flowfabric/ff/runtime/client"
	"github.com/flowfabric/ff/runtime/internal/valkeytest"
	"github.com/flowfabric/ff/runtime/server/servertest"
	"github.com/flowfabric/ff/runtime/store"
	"github.com/flowfabric/ff/runtime/wire"
	"github.com/flowfabric/ff/runtime/worker"
)

func TestMain(m *testing.M) {
	code := m.Run()
	valkeytest.StopShared()
	os.Exit(code)
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// run starts w.Run and returns a stop function that cancels it and returns
// its error.
func run(t *testing.T, w *worker.Worker) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case err = <-done:
			case <-time.After(20 * time.Second):
				err = errors.New("worker did not stop")
			}
		})
		return err
	}
	t.Cleanup(func() { _ = stop() })
	return stop
}

func newWorker(t *testing.T, env *servertest.Env, mod func(*worker.Config)) *worker.Worker {
	t.Helper()
	cfg := worker.Config{
		URL:          env.URL,
		Token:        env.Config.Token,
		Name:         "test-worker",
		Concurrency:  4,
		LeaseTTL:     time.Second,
		ClaimWait:    2 * time.Second,
		DrainTimeout: 5 * time.Second,
		Logger:       servertest.Logger(t),
	}
	if mod != nil {
		mod(&cfg)
	}
	w, err := worker.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func waitResult(t *testing.T, env *servertest.Env, id string) *wire.ExecutionResult {
	t.Helper()
	r, err := env.Client.WaitResult(ctxT(t), id, 20*time.Millisecond)
	if err != nil {
		t.Fatalf("wait for %s: %v", id, err)
	}
	return r
}

func create(t *testing.T, env *servertest.Env, req wire.CreateExecution) string {
	t.Helper()
	ex, _, err := env.Client.CreateExecution(ctxT(t), req)
	if err != nil {
		t.Fatal(err)
	}
	return ex.ID
}

func TestLifecycleThroughWorker(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	w := newWorker(t, env, nil)
	err := w.Handle("greet", func(ctx context.Context, task *worker.Task) (json.RawMessage, error) {
		var in struct{ Name string }
		if err := json.Unmarshal(task.Input(), &in); err != nil {
			return nil, worker.Permanent(err)
		}
		if task.Kind() != "greet" || task.Attempt() != 1 || task.ID() == "" {
			return nil, fmt.Errorf("bad task accessors: %q %d %q", task.Kind(), task.Attempt(), task.ID())
		}
		return json.Marshal(map[string]string{"greeting": "hello " + in.Name})
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Handle("greet", func(context.Context, *worker.Task) (json.RawMessage, error) { return nil, nil }); err == nil {
		t.Fatal("registering a kind twice: want an error")
	}
	stop := run(t, w)
	ids := make([]string, 10)
	for i := range ids {
		ids[i] = create(t, env, wire.CreateExecution{Kind: "greet", Input: json.RawMessage(fmt.Sprintf(`{"name":"n%d"}`, i))})
	}
	for i, id := range ids {
		r := waitResult(t, env, id)
		want := &wire.ExecutionResult{ID: id, State: "completed", Result: json.RawMessage(fmt.Sprintf(`{"greeting":"hello n%d"}`, i))}
		if diff := cmp.Diff(want, r); diff != "" {
			t.Errorf("result %d (-want +got):\n%s", i, diff)
		}
	}
	if err := stop(); err != nil {
		t.Fatalf("drain: %v", err)
	}
}

func TestConfigValidation(t *testing.T) {
	tests := []struct {
		name string
		cfg  worker.Config
		want string
	}{
		{"no url", worker.Config{}, "Config.URL is required"},
		{"bad capability", worker.Config{URL: "http://x", Capabilities: []string{"a b"}}, "Config.Capabilities"},
		{"too many capabilities", worker.Config{URL: "http://x", Capabilities: make([]string, plan.MaxCapabilities+1)}, "Config.Capabilities"},
		{"concurrency", worker.Config{URL: "http://x", Concurrency: -1}, "Config.Concurrency"},
		{"lease", worker.Config{URL: "http://x", LeaseTTL: time.Millisecond}, "Config.LeaseTTL"},
		{"renew", worker.Config{URL: "http://x", LeaseTTL: time.Second, RenewInterval: 2 * time.Second}, "Config.RenewInterval"},
		{"lane", worker.Config{URL: "http://x", Lanes: []string{"a:b"}}, "Config.Lanes[0]"},
		// The server's rules: for names (runtime/api checkIdent) Unicode
		// whitespace and control characters, UTF-8; for namespaces and
		// lanes (checkName) letters, digits, '_', '-', '.' and '/' only.
		{"lane with line separator", worker.Config{URL: "http://x", Lanes: []string{"a\u2028b"}}, "Config.Lanes[0]"},
		{"namespace with colon", worker.Config{URL: "http://x", Namespace: "a:b"}, `Config.Namespace "a:b": only letters`},
		{"name with space", worker.Config{URL: "http://x", Name: "a b"}, "Config.Name"},
		{"name with no-break space", worker.Config{URL: "http://x", Name: "a\u00a0b"}, "Config.Name"},
		{"name with C1 control", worker.Config{URL: "http://x", Name: "a\u0085b"}, "Config.Name"},
		{"name not UTF-8", worker.Config{URL: "http://x", Name: "a\xffb"}, "Config.Name is not valid UTF-8"},
		{"name too long", worker.Config{URL: "http://x", Name: strings.Repeat("n", 116)}, "Config.Name is 116 bytes, the limit is 115"},
		{"name with comma", worker.Config{URL: "http://x", Name: "a,b"}, `Config.Name "a,b" contains a comma`},
		{"scheme", worker.Config{URL: "ftp://x"}, "scheme"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := worker.New(tt.cfg)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("New: %v, want an error mentioning %q", err, tt.want)
			}
		})
	}
}

// TestWorkerNameAsServerAllows: a worker id may hold ':' and be as long as
// the instance id derived from it (name, '-', 12 hex digits) may be.
func TestWorkerNameAsServerAllows(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	name := "host:1234-" + strings.Repeat("n", 115-len("host:1234-"))
	w := newWorker(t, env, func(c *worker.Config) { c.Name = name })
	_ = w.Handle("job", func(ctx context.Context, task *worker.Task) (json.RawMessage, error) {
		return json.RawMessage(`"ok"`), nil
	})
	run(t, w)
	id := create(t, env, wire.CreateExecution{Kind: "job"})
	if r := waitResult(t, env, id); r.State != "completed" || string(r.Result) != `"ok"` {
		t.Fatalf("result %+v", r)
	}
	ws, err := env.Client.Workers(ctxT(t), "")
	if err != nil {
		t.Fatal(err)
	}
	if len(ws.Workers) != 1 || ws.Workers[0].WorkerID != name || len(ws.Workers[0].InstanceID) != 128 {
		t.Fatalf("workers: %+v", ws)
	}
	// It registered the kinds it has handlers for (wait hints use them).
	if got := ws.Workers[0].Kinds; len(got) != 1 || got[0] != "job" {
		t.Fatalf("the worker registered kinds %v, want [job]", got)
	}
}

func TestRetryWithBackoffThenSuccess(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	var calls atomic.Int32
	w := newWorker(t, env, nil)
	_ = w.Handle("flaky", func(ctx context.Context, task *worker.Task) (json.RawMessage, error) {
		n := calls.Add(1)
		if int(n) != task.Attempt() {
			return nil, worker.Permanent(fmt.Errorf("attempt %d on call %d", task.Attempt(), n))
		}
		if n < 3 {
			return nil, fmt.Errorf("transient %d", n)
		}
		return json.RawMessage(`"done"`), nil
	})
	run(t, w)
	id := create(t, env, wire.CreateExecution{Kind: "flaky", Retry: &plan.Retry{Attempts: 5, Backoff: plan.BackoffExponential, DelayMs: 50, MaxDelayMs: 200}})
	r := waitResult(t, env, id)
	if r.State != "completed" || string(r.Result) != `"done"` {
		t.Fatalf("result %+v", r)
	}
	ex, err := env.Client.GetExecution(ctxT(t), id)
	if err != nil {
		t.Fatal(err)
	}
	if ex.Attempt != 3 || calls.Load() != 3 {
		t.Fatalf("attempts %d, handler calls %d, want 3 and 3", ex.Attempt, calls.Load())
	}
}

func TestRetriesExhaustedAndPermanent(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	var calls, permCalls atomic.Int32
	w := newWorker(t, env, nil)
	_ = w.Handle("broken", func(ctx context.Context, task *worker.Task) (json.RawMessage, error) {
		calls.Add(1)
		return nil, errors.New("always broken")
	})
	_ = w.Handle("fatal", func(ctx context.Context, task *worker.Task) (json.RawMessage, error) {
		permCalls.Add(1)
		return nil, worker.Permanent(errors.New("bad input"))
	})
	_ = w.Handle("panics", func(ctx context.Context, task *worker.Task) (json.RawMessage, error) {
		panic("boom")
	})
	run(t, w)
	retry := &plan.Retry{Attempts: 3, Backoff: plan.BackoffFixed, DelayMs: 20}
	broken := create(t, env, wire.CreateExecution{Kind: "broken", Retry: retry})
	fatal := create(t, env, wire.CreateExecution{Kind: "fatal", Retry: retry})
	panics := create(t, env, wire.CreateExecution{Kind: "panics"})
	if r := waitResult(t, env, broken); r.State != "failed" || !strings.Contains(r.Error, "always broken") {
		t.Fatalf("broken: %+v", r)
	}
	if calls.Load() != 3 {
		t.Fatalf("broken handler ran %d times, want 3", calls.Load())
	}
	if r := waitResult(t, env, fatal); r.State != "failed" || !strings.Contains(r.Error, "bad input") {
		t.Fatalf("fatal: %+v", r)
	}
	if permCalls.Load() != 1 {
		t.Fatalf("permanent failure ran %d times, want 1", permCalls.Load())
	}
	if r := waitResult(t, env, panics); r.State != "failed" || !strings.Contains(r.Error, "boom") {
		t.Fatalf("panics: %+v", r)
	}
	// The worker survived the panic.
	ok := create(t, env, wire.CreateExecution{Kind: "fatal"})
	if r := waitResult(t, env, ok); r.State != "failed" {
		t.Fatalf("after panic: %+v", r)
	}
}

func TestCancelWhileRunning(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	started := make(chan string, 1)
	cause := make(chan error, 1)
	w := newWorker(t, env, func(c *worker.Config) { c.LeaseTTL = 600 * time.Millisecond })
	_ = w.Handle("slow", func(ctx context.Context, task *worker.Task) (json.RawMessage, error) {
		started <- task.ID()
		<-ctx.Done()
		cause <- context.Cause(ctx)
		return nil, ctx.Err()
	})
	run(t, w)
	id := create(t, env, wire.CreateExecution{Kind: "slow"})
	select {
	case got := <-started:
		if got != id {
			t.Fatalf("started %s, want %s", got, id)
		}
	case <-ctxT(t).Done():
		t.Fatal("handler never started")
	}
	ex, err := env.Client.CancelExecution(ctxT(t), id, "user asked")
	if err != nil {
		t.Fatal(err)
	}
	if ex.State != "cancelled" {
		t.Fatalf("state after cancel %q", ex.State)
	}
	select {
	case c := <-cause:
		if !errors.Is(c, worker.ErrCancelled) {
			t.Fatalf("handler context cause %v, want ErrCancelled", c)
		}
	case <-ctxT(t).Done():
		t.Fatal("handler context was not cancelled")
	}
	if r := waitResult(t, env, id); r.State != "cancelled" {
		t.Fatalf("result after cancel: %+v", r)
	}
}

// TestKilledWorkerTaskCompletedOnce: a worker that dies mid-task (it claims
// and never reports) loses the lease when it expires; another worker
// completes the task exactly once, and the dead worker's late report is
// rejected.
func TestKilledWorkerTaskCompletedOnce(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	ctx := ctxT(t)
	id := create(t, env, wire.CreateExecution{Kind: "job", Retry: &plan.Retry{Attempts: 3, DelayMs: 10}})
	// The doomed worker: claims with a short lease, then vanishes.
	tasks, err := env.Client.Claim(ctx, wire.ClaimRequest{WorkerID: "doomed", WaitMs: 2000, LeaseMs: 200})
	if err != nil || len(tasks) != 1 {
		t.Fatalf("doomed claim: %+v %v", tasks, err)
	}
	dead := wire.Lease{ExecutionID: tasks[0].ExecutionID, LeaseID: tasks[0].LeaseID, Epoch: tasks[0].Epoch}

	var runs atomic.Int32
	w := newWorker(t, env, nil)
	_ = w.Handle("job", func(ctx context.Context, task *worker.Task) (json.RawMessage, error) {
		runs.Add(1)
		return json.RawMessage(fmt.Sprintf(`{"attempt":%d}`, task.Attempt())), nil
	})
	run(t, w)
	r := waitResult(t, env, id)
	if r.State != "completed" || string(r.Result) != `{"attempt":2}` {
		t.Fatalf("result %+v", r)
	}
	if runs.Load() != 1 {
		t.Fatalf("handler ran %d times, want 1", runs.Load())
	}
	_, err = env.Client.CompleteOne(ctx, dead, json.RawMessage(`"late"`))
	var ae *client.APIError
	if !errors.As(err, &ae) || ae.Status != 409 || ae.Code != wire.CodeStaleLease {
		t.Fatalf("late completion of the dead worker: %v, want 409 %s", err, wire.CodeStaleLease)
	}
	r2 := waitResult(t, env, id)
	if diff := cmp.Diff(r, r2); diff != "" {
		t.Fatalf("result changed by a stale completion (-want +got):\n%s", diff)
	}
}

// TestDrainFinishesInFlight: cancelling Run lets a running handler finish
// and report.
func TestDrainFinishesInFlight(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	started := make(chan struct{})
	release := make(chan struct{})
	w := newWorker(t, env, nil)
	_ = w.Handle("job", func(ctx context.Context, task *worker.Task) (json.RawMessage, error) {
		close(started)
		<-release
		return json.RawMessage(`"finished"`), nil
	})
	stop := run(t, w)
	id := create(t, env, wire.CreateExecution{Kind: "job"})
	<-started
	stopped := make(chan error, 1)
	go func() { stopped <- stop() }()
	time.Sleep(50 * time.Millisecond) // let the drain begin
	close(release)
	if err := <-stopped; err != nil {
		t.Fatalf("drain: %v", err)
	}
	if r := waitResult(t, env, id); r.State != "completed" || string(r.Result) != `"finished"` {
		t.Fatalf("result %+v", r)
	}
	// After the drain nothing more is claimed.
	next := create(t, env, wire.CreateExecution{Kind: "job"})
	time.Sleep(100 * time.Millisecond)
	ex, err := env.Client.GetExecution(ctxT(t), next)
	if err != nil || ex.State != "waiting" {
		t.Fatalf("after drain: %v %+v", err, ex)
	}
}

// TestBadOutputFailsOnlyItsTask: an output that is not JSON or too large
// fails that attempt permanently; outputs reported in the same batch are
// unaffected.
func TestBadOutputFailsOnlyItsTask(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	w := newWorker(t, env, nil)
	_ = w.Handle("out", func(ctx context.Context, task *worker.Task) (json.RawMessage, error) {
		switch string(task.Input()) {
		case `"bad"`:
			return json.RawMessage(`{not json`), nil
		case `"big"`:
			return json.RawMessage(`"` + strings.Repeat("x", worker.OutputMaxBytes) + `"`), nil
		}
		return json.RawMessage(`"fine"`), nil
	})
	run(t, w)
	retry := &plan.Retry{Attempts: 3}
	bad := create(t, env, wire.CreateExecution{Kind: "out", Input: json.RawMessage(`"bad"`), Retry: retry})
	big := create(t, env, wire.CreateExecution{Kind: "out", Input: json.RawMessage(`"big"`), Retry: retry})
	good := create(t, env, wire.CreateExecution{Kind: "out", Input: json.RawMessage(`"good"`)})
	if r := waitResult(t, env, bad); r.State != "failed" || !strings.Contains(r.Error, "not valid JSON") {
		t.Errorf("bad output: %+v", r)
	}
	if r := waitResult(t, env, big); r.State != "failed" || !strings.Contains(r.Error, "limit") {
		t.Errorf("big output: %+v", r)
	}
	if r := waitResult(t, env, good); r.State != "completed" || string(r.Result) != `"fine"` {
		t.Errorf("good output: %+v", r)
	}
}

// TestStoppedWorkerMidTask: a worker stopped while its handler hangs (it
// ignores its context) stops renewing; the lease expires, another worker
// completes the task once, and the hung handler's late result is dropped.
func TestStoppedWorkerMidTask(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	id := create(t, env, wire.CreateExecution{Kind: "job", Retry: &plan.Retry{Attempts: 3, DelayMs: 10}})

	hung := make(chan struct{})
	release := make(chan struct{})
	releaseOnce := sync.OnceFunc(func() { close(release) })
	t.Cleanup(releaseOnce)
	returned := make(chan struct{})
	a := newWorker(t, env, func(c *worker.Config) {
		c.Name, c.LeaseTTL, c.DrainTimeout = "a", 300*time.Millisecond, 50*time.Millisecond
	})
	_ = a.Handle("job", func(ctx context.Context, task *worker.Task) (json.RawMessage, error) {
		defer close(returned)
		close(hung)
		<-release // ignores ctx: a stuck handler
		return json.RawMessage(`"from a"`), nil
	})
	stopA := run(t, a)
	<-hung
	if err := stopA(); err == nil {
		t.Fatal("stopping a worker with a stuck handler: want a drain timeout error")
	}

	var runs atomic.Int32
	b := newWorker(t, env, func(c *worker.Config) { c.Name = "b" })
	_ = b.Handle("job", func(ctx context.Context, task *worker.Task) (json.RawMessage, error) {
		runs.Add(1)
		return json.RawMessage(`"from b"`), nil
	})
	run(t, b)
	r := waitResult(t, env, id)
	if r.State != "completed" || string(r.Result) != `"from b"` || runs.Load() != 1 {
		t.Fatalf("result %+v after %d runs of b", r, runs.Load())
	}

	// The hung handler returns now: its late result must not replace b's.
	releaseOnce()
	select {
	case <-returned:
	case <-time.After(5 * time.Second):
		t.Fatal("the released handler did not return")
	}
	time.Sleep(200 * time.Millisecond) // time for a late report, were one sent
	r = waitResult(t, env, id)
	if r.State != "completed" || string(r.Result) != `"from b"` || runs.Load() != 1 {
		t.Fatalf("after a's late result: %+v, %d runs of b", r, runs.Load())
	}
}

// TestRevokedLeaseCancelsHandler: an operator revoke makes the next renew
// fail; the handler sees ErrLeaseLost and the task runs again.
// With one slot the renewal finds out; with more, the worker may claim the
// execution again first and must cancel the superseded attempt itself.
func TestRevokedLeaseCancelsHandler(t *testing.T) {
	for _, slots := range []int{1, 4} {
		t.Run(fmt.Sprint("slots=", slots), func(t *testing.T) {
			t.Parallel()
			testRevokedLease(t, slots)
		})
	}
}

func testRevokedLease(t *testing.T, slots int) {
	env := servertest.Start(t)
	started := make(chan int, 2)
	cause := make(chan error, 1)
	w := newWorker(t, env, func(c *worker.Config) { c.LeaseTTL, c.Concurrency = 600*time.Millisecond, slots })
	_ = w.Handle("job", func(ctx context.Context, task *worker.Task) (json.RawMessage, error) {
		started <- task.Attempt()
		if task.Attempt() > 1 {
			return json.RawMessage(`"second"`), nil
		}
		<-ctx.Done()
		cause <- context.Cause(ctx)
		return nil, ctx.Err()
	})
	run(t, w)
	id := create(t, env, wire.CreateExecution{Kind: "job", Retry: &plan.Retry{Attempts: 3}})
	if a := <-started; a != 1 {
		t.Fatalf("first attempt %d", a)
	}
	if _, err := env.Client.RevokeLease(ctxT(t), id, "test"); err != nil {
		t.Fatal(err)
	}
	select {
	case c := <-cause:
		if !errors.Is(c, worker.ErrLeaseLost) {
			t.Fatalf("cause %v, want ErrLeaseLost", c)
		}
	case <-ctxT(t).Done():
		t.Fatal("handler context not cancelled after revoke")
	}
	if r := waitResult(t, env, id); r.State != "completed" || string(r.Result) != `"second"` {
		t.Fatalf("result %+v", r)
	}
}

// Two workers with handlers for different kinds share a lane: each gets
// only its own kinds, so no task fails for want of a handler.
func TestWorkersShareALaneByKind(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	var wrong atomic.Int64
	start := func(name, kind string) {
		w := newWorker(t, env, func(c *worker.Config) { c.Name = name })
		if err := w.Handle(kind, func(_ context.Context, task *worker.Task) (json.RawMessage, error) {
			if task.Kind() != kind {
				wrong.Add(1)
			}
			return json.Marshal(name)
		}); err != nil {
			t.Fatal(err)
		}
		run(t, w)
	}
	start("mailer", "mail")
	start("resizer", "resize")
	var ids []string
	want := map[string]string{}
	for i := range 40 {
		kind, by := "mail", `"mailer"`
		if i%2 == 1 {
			kind, by = "resize", `"resizer"`
		}
		id := create(t, env, wire.CreateExecution{Kind: kind, Retry: &plan.Retry{Attempts: 1}})
		ids = append(ids, id)
		want[id] = by
	}
	for _, id := range ids {
		r := waitResult(t, env, id)
		if r.State != "completed" || string(r.Result) != want[id] {
			t.Fatalf("%s: %+v, want completed by %s", id, r, want[id])
		}
	}
	if n := wrong.Load(); n != 0 {
		t.Fatalf("%d tasks reached a handler of another kind", n)
	}
}

// A worker with more handler kinds than a claim may name (a flow of more
// than store.MaxKinds executions) claims without a kinds filter instead of
// being refused on every claim.
func TestWorkerWithMoreKindsThanAClaimMayName(t *testing.T) {
	t.Parallel()
	if worker.KindsMax != store.MaxKinds {
		t.Fatalf("worker.KindsMax %d, store.MaxKinds %d", worker.KindsMax, store.MaxKinds)
	}
	env := servertest.Start(t)
	w := newWorker(t, env, nil)
	for i := range worker.KindsMax + 1 {
		kind := fmt.Sprintf("k%d", i)
		if err := w.Handle(kind, func(context.Context, *worker.Task) (json.RawMessage, error) {
			return json.Marshal(kind)
		}); err != nil {
			t.Fatal(err)
		}
	}
	run(t, w)
	for _, kind := range []string{"k0", fmt.Sprintf("k%d", worker.KindsMax)} {
		id := create(t, env, wire.CreateExecution{Kind: kind, Retry: &plan.Retry{Attempts: 1}})
		if r := waitResult(t, env, id); r.State != "completed" || string(r.Result) != `"`+kind+`"` {
			t.Fatalf("%s: %+v, want completed with %q", kind, r, kind)
		}
	}
}

// A claim the server refuses as a bad request can never succeed: Run
// stops and returns the server's reason instead of retrying silently. (A
// kind the server refuses is refused by the connect already, whose
// heartbeat names the kinds as the claims do; Handle refuses the kinds
// the server's rule does, plan.ValidateKind, so here a server stricter
// than that refuses one.)
func TestRunReturnsWhenClaimIsABadRequest(t *testing.T) {
	t.Parallel()
	strict := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		rw.Header().Set("Content-Type", "application/json")
		rw.WriteHeader(http.StatusBadRequest)
		rw.Write([]byte(`{"error":{"code":"validation_failed","message":"kinds[0]: \"mail\" is not served here","details":{"field":"kinds[0]"}}}`))
	}))
	defer strict.Close()
	w, err := worker.New(worker.Config{URL: strict.URL, Name: "w"})
	if err != nil {
		t.Fatal(err)
	}
	h := func(context.Context, *worker.Task) (json.RawMessage, error) { return nil, nil }
	if err := w.Handle("mail,urgent", h); err == nil || !strings.Contains(err.Error(), "comma") {
		t.Fatalf("Handle(mail,urgent) = %v; want the kind refused for its comma", err)
	}
	if err := w.Handle("mail", h); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- w.Run(ctxT(t)) }()
	select {
	case err := <-done:
		var ae *client.APIError
		if !errors.As(err, &ae) || ae.Status != 400 || !strings.Contains(err.Error(), "connect refused") {
			t.Fatalf("Run: %v; want the connect's 400", err)
		}
		if !strings.Contains(ae.Message, "not served here") {
			t.Fatalf("Run: %v; want the server's reason", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run still retrying a claim refused as a bad request")
	}

	// A server whose heartbeat route is missing (an older one) is claimed
	// from anyway; its claim's 400 stops Run the same way.
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/worker/claim" {
			http.NotFound(rw, r)
			return
		}
		rw.Header().Set("Content-Type", "application/json")
		rw.WriteHeader(http.StatusBadRequest)
		rw.Write([]byte(`{"error":{"code":"validation_failed","message":"invalid kinds: not this one"}}`))
	}))
	defer srv.Close()
	old, err := worker.New(worker.Config{URL: srv.URL, Name: "w"})
	if err != nil {
		t.Fatal(err)
	}
	if err := old.Handle("k", func(context.Context, *worker.Task) (json.RawMessage, error) { return nil, nil }); err != nil {
		t.Fatal(err)
	}
	var ae *client.APIError
	if err := old.Run(ctxT(t)); !errors.As(err, &ae) || ae.Status != 400 || !strings.Contains(err.Error(), "claim refused") ||
		!strings.Contains(ae.Message, "not this one") {
		t.Fatalf("Run against a server without heartbeats: %v; want the claim's 400", err)
	}
}

// answer is a JSON answer of status with body to request r, for a test
// transport that answers in place of the server; header adds header
// pairs (name, value, ...).
func answer(r *http.Request, status int, body string, header ...string) *http.Response {
	h := http.Header{"Content-Type": {"application/json"}}
	for i := 0; i+1 < len(header); i += 2 {
		h.Add(header[i], header[i+1])
	}
	return &http.Response{StatusCode: status, Header: h, Body: io.NopCloser(strings.NewReader(body)), Request: r}
}

// readAnswer reads the whole body of resp, a real server's answer a test
// transport looks into, and gives resp a body that reads the same again.
func readAnswer(resp *http.Response) ([]byte, error) {
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	return body, nil
}
