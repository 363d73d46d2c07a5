package server_test

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/flowfabric/ff/runtime/internal/valkeytest"
	"github.com/flowfabric/ff/runtime/server"
	"github.com/flowfabric/ff/runtime/server/servertest"
	"github.com/flowfabric/ff/runtime/wire"
)

// TestValkeyRefusingWritesAnswers503: a Valkey that answers but refuses
// writes -- demoted to a replica by a failover (READONLY), at maxmemory
// without eviction (OOM), short of the replicas min-replicas-to-write asks
// for (NOREPLICAS) -- is not ready to /readyz, and the API answers its
// refused writes 503 unavailable, which clients retry, as for a Valkey
// that is loading or failing over: not 500 internal, which they do not
// retry and which is logged as a server bug.
func TestValkeyRefusingWritesAnswers503(t *testing.T) {
	env, _ := servertest.StartOwnValkey(t)
	admin := valkeytest.Client(t, env.Config.ValkeyAddr)
	ctx := ctxT(t)
	if r := env.Do(t, http.MethodPost, "/v1/executions", nil, `{"kind":"k"}`); r.Status != http.StatusCreated && r.Status != http.StatusOK {
		t.Fatalf("create with Valkey up: %d %s", r.Status, r.Body)
	}
	for _, tc := range []struct {
		name        string
		refuse, fix []string
	}{
		// A primary that a failover demoted: a replica of a primary it
		// cannot reach keeps its data and refuses writes.
		{"readonly", []string{"REPLICAOF", "127.0.0.1", "1"}, []string{"REPLICAOF", "NO", "ONE"}},
		{"oom", []string{"CONFIG", "SET", "maxmemory", "1"}, []string{"CONFIG", "SET", "maxmemory", "0"}},
		{"noreplicas", []string{"CONFIG", "SET", "min-replicas-to-write", "1"}, []string{"CONFIG", "SET", "min-replicas-to-write", "0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := admin.Do(ctx, admin.B().Arbitrary(tc.refuse...).Build()).Error(); err != nil {
				t.Fatal(err)
			}
			defer func() {
				if err := admin.Do(ctx, admin.B().Arbitrary(tc.fix...).Build()).Error(); err != nil {
					t.Fatal(err)
				}
			}()
			if r := env.Do(t, http.MethodGet, "/readyz", nil, ""); r.Status != http.StatusServiceUnavailable {
				t.Fatalf("/readyz while Valkey refuses writes: %d, want 503", r.Status)
			}
			r := env.Do(t, http.MethodPost, "/v1/executions", nil, `{"kind":"k"}`)
			if r.Status != http.StatusServiceUnavailable || r.Err.Code != wire.CodeUnavailable {
				t.Errorf("create while Valkey refuses writes: %d %s; want 503 %s", r.Status, r.Body, wire.CodeUnavailable)
			}
		})
	}
}

// TestUnreadyProbesLogOnce: /readyz logs why it is not ready once per
// spell of unreadiness ("not ready"), and its 503 answers are not logged
// again by the error handler: an orchestrator probing every few seconds
// does not fill the log while Valkey refuses writes. The answer is still
// the error envelope, 503 unavailable.
func TestUnreadyProbesLogOnce(t *testing.T) {
	logs := &logBuffer{t: t}
	env, _ := servertest.StartOwnValkey(t, func(c *server.Config) {
		c.Logger = slog.New(slog.NewTextHandler(logs, nil))
	})
	admin := valkeytest.Client(t, env.Config.ValkeyAddr)
	ctx := ctxT(t)
	if err := admin.Do(ctx, admin.B().Arbitrary("REPLICAOF", "127.0.0.1", "1").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Do(context.Background(), admin.B().Arbitrary("REPLICAOF", "NO", "ONE").Build()) })
	const probes = 5
	for range probes {
		if r := env.Do(t, http.MethodGet, "/readyz", nil, ""); r.Status != http.StatusServiceUnavailable || r.Err.Code != wire.CodeUnavailable {
			t.Fatalf("/readyz while Valkey refuses writes: %d %s, want 503 %s", r.Status, r.Body, wire.CodeUnavailable)
		}
	}
	n := 0
	for line := range strings.Lines(logs.String()) {
		if strings.Contains(line, "path=/readyz") && (strings.Contains(line, "level=ERROR") || strings.Contains(line, "level=WARN")) {
			n++
		}
	}
	if n > 0 {
		t.Errorf("%d ERROR/WARN lines about path=/readyz for %d probes answered 503; want none (the reason is logged once, as \"not ready\")", n, probes)
	}
	if c := strings.Count(logs.String(), `level=WARN msg="not ready"`); c != 1 {
		t.Errorf("%d \"not ready\" warnings for %d probes, want 1", c, probes)
	}
}
