package api_test

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/flowfabric/ff/runtime/server/servertest"
	"github.com/flowfabric/ff/runtime/wire"
)

// TestLargeAnswerSaysItsLength: a claim answer over net/http's 2 KiB
// chunking buffer comes with its Content-Length, not chunked, so that the
// client reads it into one buffer of that size.
func TestLargeAnswerSaysItsLength(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	input := `{"s":"` + strings.Repeat("x", 3000) + `"}`
	if _, _, err := env.Client.CreateExecution(context.Background(), wire.CreateExecution{Kind: "len.a", Input: json.RawMessage(input)}); err != nil {
		t.Fatal(err)
	}
	r := env.Do(t, "POST", "/v1/worker/claim", nil, `{"worker_id":"w","kinds":["len.a"],"max":4,"wait_ms":2000}`)
	if r.Status != 200 || !strings.Contains(r.Body, `"kind":"len.a"`) || len(r.Body) <= 2048 {
		t.Fatalf("claim = %d, %d bytes: %.200s", r.Status, len(r.Body), r.Body)
	}
	if got := r.Header.Get("Content-Length"); got != strconv.Itoa(len(r.Body)) {
		t.Errorf("Content-Length %q for an answer of %d bytes (Transfer-Encoding chunked when empty)", got, len(r.Body))
	}
}
