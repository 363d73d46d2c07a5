package worker_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flowfabric/ff/runtime/worker"
)

// olderServer stands for a server older than kinds in heartbeats: it has
// the heartbeat route but decodes it strictly and answers the field with
// 400 unknown_field, as that server's decoding does; claims find nothing.
// With downFirst its first heartbeat answers 503 (not up yet). It counts
// the heartbeats without kinds and the claims.
type olderServer struct {
	URL           string
	plain, claims atomic.Int32
}

func newOlderServer(t *testing.T, downFirst bool) *olderServer {
	t.Helper()
	s := &olderServer{}
	var seen atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rw.Header().Set("Content-Type", "application/json")
		heartbeat := r.URL.Path == "/v1/workers/heartbeat"
		switch {
		case heartbeat && downFirst && seen.CompareAndSwap(false, true):
			rw.WriteHeader(http.StatusServiceUnavailable)
			rw.Write([]byte(`{"error":{"code":"unavailable","message":"not yet"}}`))
		case heartbeat && strings.Contains(string(body), `"kinds"`):
			rw.WriteHeader(http.StatusBadRequest)
			rw.Write([]byte(`{"error":{"code":"unknown_field","message":"unknown field \"kinds\"","details":{"field":"kinds"}}}`))
		case heartbeat:
			s.plain.Add(1)
			rw.Write([]byte(`{"registered":true}`))
		default: // claims: nothing to do
			s.claims.Add(1)
			time.Sleep(50 * time.Millisecond)
			rw.Write([]byte(`{}`))
		}
	}))
	t.Cleanup(srv.Close)
	s.URL = srv.URL
	return s
}

// runAgainst runs a worker of cfg, with a handler, for d.
func runAgainst(t *testing.T, cfg worker.Config, d time.Duration) {
	t.Helper()
	w, err := worker.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Handle("k", func(context.Context, *worker.Task) (json.RawMessage, error) { return nil, nil }); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	if err := w.Run(ctx); err != nil && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
		t.Fatalf("Run against a server without kinds in heartbeats: %v; want it to keep claiming", err)
	}
}

// The worker connects to an older server without its kinds and claims,
// instead of stopping at the refusal.
func TestWorkerAgainstServerThatDoesNotKnowKinds(t *testing.T) {
	t.Parallel()
	s := newOlderServer(t, false)
	runAgainst(t, worker.Config{URL: s.URL, Name: "w"}, 2*time.Second)
	if s.plain.Load() == 0 || s.claims.Load() == 0 {
		t.Fatalf("%d heartbeats without kinds and %d claims; want both", s.plain.Load(), s.claims.Load())
	}
}

// The same older server, first unreachable at connect (503): the later
// heartbeats fall back to no kinds as well.
func TestWorkerHeartbeatsFallBackAfterAFailedConnect(t *testing.T) {
	t.Parallel()
	s := newOlderServer(t, true)
	runAgainst(t, worker.Config{URL: s.URL, Name: "w", LeaseTTL: time.Second}, 3*time.Second)
	if s.plain.Load() < 2 {
		t.Fatalf("%d heartbeats without kinds after the failed connect; want them to fall back", s.plain.Load())
	}
}
