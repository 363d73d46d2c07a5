package client_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flowfabric/ff/runtime/client"
	"github.com/flowfabric/ff/runtime/server"
	"github.com/flowfabric/ff/runtime/server/servertest"
	"github.com/flowfabric/ff/runtime/wire"
)

// TestInputAtTheLimitWithHTML: an input of exactly the limit (1 MiB,
// spec/api.md: 413 for "an input/output over 1 MiB") is taken whatever it
// holds, and read back as it was sent. Encoded by encoding/json, the
// request carried <, > and & inside the json.RawMessage input as \u003c
// (six bytes for one): an input of HTML was measured by the server up to
// six times its size and refused, though the caller's input was within
// the limit.
func TestInputAtTheLimitWithHTML(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t, func(c *server.Config) { c.DisableScanners = true })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	in := json.RawMessage(`"` + strings.Repeat("<b>&", (1<<20-2)/4) + `"`)
	ex, _, err := env.Client.CreateExecution(ctx, wire.CreateExecution{Kind: "page", Input: in})
	if err != nil {
		t.Fatalf("CreateExecution with an input of %d bytes (the limit is %d): %v", len(in), 1<<20, err)
	}
	got, err := env.Client.GetExecution(ctx, ex.ID)
	if err != nil {
		t.Fatal(err)
	}
	var a, b string
	if json.Unmarshal(got.Input, &a) != nil || json.Unmarshal(in, &b) != nil || a != b {
		t.Errorf("the input read back differs from the one sent")
	}
}

// TestRequestsNotHTMLEscaped: the client sends inputs, the raw ones and
// those it encodes itself (a run's input), and other strings with <, >
// and & as they are, never as \u003c, \u003e, \u0026.
func TestRequestsNotHTMLEscaped(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var bodies [][]byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies = append(bodies, b)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if strings.HasPrefix(r.URL.Path, "/v1/templates/") {
			_, _ = io.WriteString(w, `{"id":"r.1","flow":"t","state":"running"}`)
			return
		}
		_, _ = io.WriteString(w, `{"execution":{"id":"1.x"},"created":true}`)
	}))
	defer srv.Close()
	c, err := client.New(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, _, err := c.CreateExecution(ctx, wire.CreateExecution{Kind: "page", Input: json.RawMessage(`"<b>&amp;</b>"`),
		Tags: map[string]string{"src": "<b>&"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.StageTemplate(ctx, "t", map[string]string{"html": "<b>&amp;</b>"}); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(bodies) != 2 {
		t.Fatalf("%d requests, want 2", len(bodies))
	}
	for _, b := range bodies {
		if !bytes.Contains(b, []byte(`<b>&amp;</b>`)) || bytes.Contains(b, []byte(`\u00`)) {
			t.Errorf("request body %s: want <, > and & as they are", b)
		}
	}
}
