package api_test

import (
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/flowfabric/ff/runtime/server"
	"github.com/flowfabric/ff/runtime/server/servertest"
)

// TestRequestLogRemoteIsTheConnections: the request log's "remote" is the
// address of the connection, never one a client claims in
// X-Forwarded-For (which anyone probing or guessing the token could fill
// with another's address); the header, when sent, is logged apart as
// forwarded_for.
func TestRequestLogRemoteIsTheConnections(t *testing.T) {
	t.Parallel()
	var logs servertest.LogBuffer
	env := servertest.Start(t, func(c *server.Config) {
		c.Token = "s3cret-console-token"
		c.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	r := env.Do(t, http.MethodGet, "/v1/executions", map[string]string{"Authorization": "Bearer guess", "X-Forwarded-For": "203.0.113.7"}, "")
	if r.Status != http.StatusUnauthorized {
		t.Fatalf("wrong token: %d", r.Status)
	}
	var line string
	for range 100 { // the log line is written as the answer goes
		for _, l := range strings.Split(logs.String(), "\n") {
			if strings.Contains(l, "msg=request") && strings.Contains(l, "status=401") {
				line = l
			}
		}
		if line != "" {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !strings.Contains(line, "remote=127.0.0.1 ") || !strings.Contains(line, "forwarded_for=203.0.113.7") {
		t.Fatalf("request log line: want remote=127.0.0.1 (the connection's) and forwarded_for=203.0.113.7:\n%s", logs.String())
	}
}
