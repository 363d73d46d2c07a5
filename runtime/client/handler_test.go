package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"testing"

	"github.com/flowfabric/ff/runtime/client"
	"github.com/flowfabric/ff/runtime/wire"
)

// TestHandlerTransport calls a handler through a Client without a network:
// the handler sees the request as a server would, and its answer, errors
// included, reaches the Client as over HTTP.
func TestHandlerTransport(t *testing.T) {
	var seen struct {
		method, uri, auth, remote string
		body                      wire.PutSchedule
	}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen.method, seen.uri, seen.auth, seen.remote = r.Method, r.RequestURI, r.Header.Get("Authorization"), r.RemoteAddr
		if r.Method == http.MethodGet {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			_, _ = io.WriteString(w, `{"error":{"code":"not_found","message":"no schedule \"b\""}}`)
			return
		}
		if err := json.NewDecoder(r.Body).Decode(&seen.body); err != nil {
			t.Errorf("decode: %v", err)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(wire.PutScheduleResponse{Schedule: wire.Schedule{Name: "nightly", Template: seen.body.Template}, Created: true})
	})
	c, err := client.New("http://in.process", client.WithToken("tok"), client.WithHTTPClient(&http.Client{Transport: client.HandlerTransport(h)}))
	if err != nil {
		t.Fatal(err)
	}
	s, created, err := c.PutSchedule(t.Context(), "nightly", wire.PutSchedule{Template: "etl", Cron: "@hourly"})
	if err != nil {
		t.Fatalf("PutSchedule: %v", err)
	}
	if !created || s.Name != "nightly" || s.Template != "etl" {
		t.Errorf("PutSchedule = %+v, created %v; want nightly of etl, created", s, created)
	}
	if seen.method != http.MethodPut || seen.uri != "/v1/schedules/nightly" || seen.auth != "Bearer tok" || seen.remote != "in-process" || seen.body.Cron != "@hourly" {
		t.Errorf("handler saw %+v", seen)
	}
	_, err = c.GetSchedule(t.Context(), "b")
	var ae *client.APIError
	if !errors.As(err, &ae) || ae.Status != http.StatusNotFound || ae.Code != "not_found" {
		t.Errorf("GetSchedule error = %v; want a 404 not_found APIError", err)
	}
}

// TestHandlerTransportCanceled: a request whose context ends while the
// handler serves it fails with the context's error, not the handler's
// answer.
func TestHandlerTransportCanceled(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cancel()
		w.WriteHeader(http.StatusOK)
	})
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://in.process/v1/x", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := client.HandlerTransport(h).RoundTrip(req)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("RoundTrip = %v, %v; want context.Canceled", resp, err)
	}
}
