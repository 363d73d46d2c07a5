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

// A server older than kinds in heartbeats has the heartbeat route but
// decodes it strictly and answers the field with 400 unknown_field (the
// stub answers as that server's decoding does): the worker connects
// without its kinds and claims, instead of stopping at the refusal.
func TestWorkerAgainstServerThatDoesNotKnowKinds(t *testing.T) {
	t.Parallel()
	var plain, claims atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rw.Header().Set("Content-Type", "application/json")
		switch {
		case r.URL.Path == "/v1/workers/heartbeat" && strings.Contains(string(body), `"kinds"`):
			rw.WriteHeader(http.StatusBadRequest)
			rw.Write([]byte(`{"error":{"code":"unknown_field","message":"unknown field \"kinds\"","details":{"field":"kinds"}}}`))
		case r.URL.Path == "/v1/workers/heartbeat":
			plain.Add(1)
			rw.Write([]byte(`{"registered":true}`))
		default: // claims: nothing to do
			claims.Add(1)
			time.Sleep(50 * time.Millisecond)
			rw.Write([]byte(`{}`))
		}
	}))
	defer srv.Close()
	w, err := worker.New(worker.Config{URL: srv.URL, Name: "w"})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Handle("k", func(context.Context, *worker.Task) (json.RawMessage, error) { return nil, nil }); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := w.Run(ctx); err != nil && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
		t.Fatalf("Run against a server without kinds in heartbeats: %v; want it to keep claiming", err)
	}
	if plain.Load() == 0 || claims.Load() == 0 {
		t.Fatalf("%d heartbeats without kinds and %d claims; want both", plain.Load(), claims.Load())
	}
}

// The same older server, first unreachable at connect (503): the later
// heartbeats fall back to no kinds as well.
func TestWorkerHeartbeatsFallBackAfterAFailedConnect(t *testing.T) {
	t.Parallel()
	var first atomic.Bool
	var plain atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rw.Header().Set("Content-Type", "application/json")
		switch {
		case r.URL.Path == "/v1/workers/heartbeat" && first.CompareAndSwap(false, true):
			rw.WriteHeader(http.StatusServiceUnavailable)
			rw.Write([]byte(`{"error":{"code":"unavailable","message":"not yet"}}`))
		case r.URL.Path == "/v1/workers/heartbeat" && strings.Contains(string(body), `"kinds"`):
			rw.WriteHeader(http.StatusBadRequest)
			rw.Write([]byte(`{"error":{"code":"unknown_field","message":"unknown field \"kinds\"","details":{"field":"kinds"}}}`))
		case r.URL.Path == "/v1/workers/heartbeat":
			plain.Add(1)
			rw.Write([]byte(`{"registered":true}`))
		default:
			time.Sleep(50 * time.Millisecond)
			rw.Write([]byte(`{}`))
		}
	}))
	defer srv.Close()
	w, err := worker.New(worker.Config{URL: srv.URL, Name: "w", LeaseTTL: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Handle("k", func(context.Context, *worker.Task) (json.RawMessage, error) { return nil, nil }); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if err := w.Run(ctx); err != nil && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
		t.Fatalf("Run: %v", err)
	}
	if plain.Load() < 2 {
		t.Fatalf("%d heartbeats without kinds after the failed connect; want them to fall back", plain.Load())
	}
}
