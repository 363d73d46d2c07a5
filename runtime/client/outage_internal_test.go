package client

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"
)

// TestOutageGivesUpInTheCLIFormat: an outage that outlasted WaitOutageMax
// said "still failing after 2m0s" (Go's format) while ffrun's commands,
// which print this error, write every other time span as "2m00s". It now
// writes it as they do.
func TestOutageGivesUpInTheCLIFormat(t *testing.T) {
	o := Outage{since: time.Now().Add(-WaitOutageMax - time.Second), backoff: outageBackoffMin}
	down := &APIError{Status: http.StatusServiceUnavailable, Code: "unavailable", Message: "valkey unreachable"}
	err := o.Failed(context.Background(), down, time.Time{})
	if !errors.Is(err, down) {
		t.Fatalf("Failed = %v, want it to wrap the last failure", err)
	}
	if want := "still failing after 2m00s: "; len(err.Error()) < len(want) || err.Error()[:len(want)] != want {
		t.Errorf("Failed = %q, want it to start with %q", err, want)
	}
}
