package server_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/flowfabric/ff/runtime/server"
	"github.com/flowfabric/ff/runtime/server/servertest"
	"github.com/flowfabric/ff/runtime/wire"
)

// claimLeases creates n executions in lane and claims them through env.
func claimLeases(t *testing.T, env *servertest.Env, lane string, n int) []wire.Lease {
	t.Helper()
	ctx := ctxT(t)
	for range n {
		if _, _, err := env.Client.CreateExecution(ctx, wire.CreateExecution{Kind: "k", Lane: lane}); err != nil {
			t.Fatal(err)
		}
	}
	tasks, err := env.Client.Claim(ctx, wire.ClaimRequest{WorkerID: "w", Lanes: []string{lane}, Max: n})
	if err != nil || len(tasks) != n {
		t.Fatalf("claim: %d tasks, %v; want %d", len(tasks), err, n)
	}
	out := make([]wire.Lease, n)
	for i, tk := range tasks {
		out[i] = wire.Lease{ExecutionID: tk.ExecutionID, LeaseID: tk.LeaseID, Epoch: tk.Epoch}
	}
	return out
}

// ended sums up a watch's answer: execution id → error code.
func ended(res []wire.LeaseResult) map[string]string {
	out := map[string]string{}
	for _, r := range res {
		code := "ok"
		if !r.OK {
			code = "<no error>"
			if r.Error != nil {
				code = r.Error.Code
			}
		}
		out[r.ExecutionID] = code
	}
	return out
}

// TestWatchAnswersLeasesEndedBeforeIt: leases that ended before the watch
// came (a cancel, a revoke) are answered at once, with renew's codes,
// while the lease still held is left out; the wait is not waited.
func TestWatchAnswersLeasesEndedBeforeIt(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	ctx := ctxT(t)
	l := claimLeases(t, env, "before", 3)
	if _, err := env.Client.CancelExecution(ctx, l[0].ExecutionID, "stop"); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Client.RevokeLease(ctx, l[1].ExecutionID, "take it back"); err != nil {
		t.Fatal(err)
	}
	// Without the read before the wait it would answer nothing, once the
	// wait ended.
	res, err := env.Client.WatchLeases(ctx, wire.WatchRequest{WorkerID: "w", WaitMs: 20_000, Leases: l})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{l[0].ExecutionID: wire.CodeCancelled, l[1].ExecutionID: wire.CodeStaleLease}
	if diff := cmp.Diff(want, ended(res)); diff != "" {
		t.Fatalf("watch of leases ended before it (-want +got):\n%s", diff)
	}
	for _, r := range res {
		if r.Error.Details["state"] == nil || r.Error.Details["reason"] != "not_active" {
			t.Errorf("%s: details %v, want reason not_active and the state", r.ExecutionID, r.Error.Details)
		}
	}

	// wait_ms 0: one read, then the answer, empty while the lease is held.
	res, err = env.Client.WatchLeases(ctx, wire.WatchRequest{Leases: l[2:]})
	if err != nil || len(res) != 0 {
		t.Fatalf("watch without a wait of a lease held = %+v, %v; want no results", res, err)
	}
}

// waitWatching waits until env has n lease watches waiting (past their
// first read of the leases, so that only a notice can answer them).
func waitWatching(t *testing.T, env *servertest.Env, n float64) {
	t.Helper()
	eventually(t, 10*time.Second, "the watch waiting", func() (bool, string) {
		m := scrape(t, env, "")
		return m["ff_lease_watches_waiting"] == n, fmt.Sprint(m["ff_lease_watches_waiting"])
	})
}

// TestWatchAnswersEndsThroughAnotherServer: a watch waiting on server A
// is answered when server B, on the same Valkey, cancels one of its
// leases (the store's notice reaches every ffrun), then when B revokes
// another; each answer names that lease alone.
func TestWatchAnswersEndsThroughAnotherServer(t *testing.T) {
	t.Parallel()
	a := servertest.Start(t)
	b := servertest.Start(t, func(c *server.Config) { c.KeyPrefix = a.Config.KeyPrefix })
	ctx := ctxT(t)
	l := claimLeases(t, a, "across", 3)
	// watch watches leases through A, ends one through B once the watch
	// waits, and returns A's answer.
	watch := func(leases []wire.Lease, end func() error) map[string]string {
		t.Helper()
		type answer struct {
			res []wire.LeaseResult
			err error
		}
		answers := make(chan answer, 1)
		go func() {
			res, err := a.Client.WatchLeases(ctx, wire.WatchRequest{WorkerID: "w", WaitMs: 25_000, Leases: leases})
			answers <- answer{res, err}
		}()
		waitWatching(t, a, 1)
		if err := end(); err != nil {
			t.Fatal(err)
		}
		got := <-answers
		if got.err != nil {
			t.Fatal(got.err)
		}
		waitWatching(t, a, 0)
		return ended(got.res)
	}
	got := watch([]wire.Lease{l[0], l[2]}, func() error {
		_, err := b.Client.CancelExecution(ctx, l[0].ExecutionID, "stop")
		return err
	})
	if diff := cmp.Diff(map[string]string{l[0].ExecutionID: wire.CodeCancelled}, got); diff != "" {
		t.Fatalf("watch through A of a lease cancelled through B (-want +got):\n%s", diff)
	}
	got = watch([]wire.Lease{l[1], l[2]}, func() error {
		_, err := b.Client.RevokeLease(ctx, l[1].ExecutionID, "take it back")
		return err
	})
	if diff := cmp.Diff(map[string]string{l[1].ExecutionID: wire.CodeStaleLease}, got); diff != "" {
		t.Fatalf("watch through A of a lease revoked through B (-want +got):\n%s", diff)
	}
}

// TestWatchValidation: bad watch requests are 400s with stable codes, the
// field named; wait_ms is capped at wire.WatchWaitMaxMs, which is taken.
func TestWatchValidation(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	l := claimLeases(t, env, "valid", 1)[0]
	lease := fmt.Sprintf(`{"execution_id":%q,"lease_id":%q,"epoch":%d}`, l.ExecutionID, l.LeaseID, l.Epoch)
	for _, c := range []struct {
		path, body, code, field string
	}{
		{"/v1/worker/watch", `{"leases":`, wire.CodeInvalidJSON, ""},
		{"/v1/worker/watch", `{"leases":[` + lease + `],"extra":1}`, wire.CodeUnknownField, "extra"},
		{"/v1/worker/watch?x=1", `{"leases":[` + lease + `]}`, wire.CodeUnknownField, "x"},
		{"/v1/worker/watch", `{"leases":[]}`, wire.CodeValidation, "leases"},
		{"/v1/worker/watch", `{}`, wire.CodeValidation, "leases"},
		{"/v1/worker/watch", `{"leases":[{"execution_id":"","lease_id":"x","epoch":1}]}`, wire.CodeValidation, "leases[0].execution_id"},
		{"/v1/worker/watch", `{"leases":[{"execution_id":"1.x","lease_id":"","epoch":1}]}`, wire.CodeValidation, "leases[0].lease_id"},
		{"/v1/worker/watch", `{"leases":[{"execution_id":"1.x","lease_id":"x","epoch":0}]}`, wire.CodeValidation, "leases[0].epoch"},
		{"/v1/worker/watch", `{"leases":[` + lease + `,` + lease + `]}`, wire.CodeValidation, "leases[1].execution_id"},
		{"/v1/worker/watch", `{"leases":[` + lease + `],"wait_ms":-1}`, wire.CodeValidation, "wait_ms"},
		{"/v1/worker/watch", `{"leases":[` + lease + `],"wait_ms":60001}`, wire.CodeValidation, "wait_ms"},
		{"/v1/worker/watch", `{"worker_id":"a,b","leases":[` + lease + `]}`, wire.CodeValidation, "worker_id"},
	} {
		res := env.Do(t, http.MethodPost, c.path, nil, c.body)
		if res.Status != http.StatusBadRequest || res.Err.Code != c.code || res.Field() != c.field {
			t.Errorf("POST %s %s = %d %s (field %q), want 400 %s naming %q", c.path, c.body, res.Status, res.Err.Code, res.Field(), c.code, c.field)
		}
	}
	if res := env.Do(t, http.MethodGet, "/v1/worker/watch", nil, ""); res.Status != http.StatusMethodNotAllowed {
		t.Errorf("GET /v1/worker/watch = %d %s, want 405", res.Status, res.Err.Code)
	}
	// The cap itself is taken: an unknown execution answers at once.
	res := env.Do(t, http.MethodPost, "/v1/worker/watch", nil,
		`{"leases":[{"execution_id":"1.00000000-0000-4000-8000-000000000000","lease_id":"x","epoch":1}],"wait_ms":60000}`)
	if res.Status != http.StatusOK || res.Body != `{"results":[{"execution_id":"1.00000000-0000-4000-8000-000000000000","ok":false,`+
		`"error":{"code":"not_found","message":"no such execution \"1.00000000-0000-4000-8000-000000000000\""}}]}`+"\n" {
		t.Errorf("watch of an unknown execution with wait_ms 60000 = %d %s", res.Status, res.Body)
	}
}

// TestWatchReplacedByTheSameInstance: a new watch of a worker instance
// answers the one it replaces at once, with no results (its worker need
// not cancel it, which would close its HTTP/1.1 connection), and is
// answered itself by a lease's end; a watch of another instance, or one
// that names none, is not replaced.
func TestWatchReplacedByTheSameInstance(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	ctx := ctxT(t)
	l := claimLeases(t, env, "replace", 2)
	type answer struct {
		res []wire.LeaseResult
		err error
	}
	watch := func(instance string, leases []wire.Lease) chan answer {
		ch := make(chan answer, 1)
		go func() {
			res, err := env.Client.WatchLeases(ctx, wire.WatchRequest{WorkerID: "w", InstanceID: instance, WaitMs: 30_000, Leases: leases})
			ch <- answer{res, err}
		}()
		return ch
	}
	first := watch("w-1", l[:1])
	other := watch("w-2", l[1:])
	unnamed := watch("", l)
	waitWatching(t, env, 3)
	second := watch("w-1", l)
	a := <-first
	if a.err != nil || len(a.res) != 0 {
		t.Fatalf("the replaced watch answered %+v, %v; want no results", a.res, a.err)
	}
	waitWatching(t, env, 3) // second, other and unnamed
	if _, err := env.Client.CancelExecution(ctx, l[1].ExecutionID, "stop"); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{l[1].ExecutionID: wire.CodeCancelled}
	for name, ch := range map[string]chan answer{"second": second, "other instance": other, "unnamed": unnamed} {
		a := <-ch
		if a.err != nil {
			t.Fatalf("%s watch: %v", name, a.err)
		}
		if diff := cmp.Diff(want, ended(a.res)); diff != "" {
			t.Errorf("%s watch (-want +got):\n%s", name, diff)
		}
	}
}
