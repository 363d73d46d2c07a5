package server_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/flowfabric/ff/runtime/server"
	"github.com/flowfabric/ff/runtime/server/servertest"
	"github.com/flowfabric/ff/runtime/wire"
)

// hostDo sends method path to env with the Host header host.
func hostDo(t *testing.T, env *servertest.Env, method, path, host string) (int, wire.ErrorEnvelope) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctxT(t), method, env.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = host
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	var env2 wire.ErrorEnvelope
	if res.StatusCode >= 400 {
		if err := json.Unmarshal(body, &env2); err != nil {
			t.Fatalf("%s %s (Host %s): %d %s: not an error envelope", method, path, host, res.StatusCode, body)
		}
	}
	return res.StatusCode, env2
}

// TestNoTokenServesLoopbackHostsOnly: without a token, ffrun answers only
// requests addressed to localhost or an IP address, API and console alike:
// a page whose host name was made to resolve to ffrun's address (DNS
// rebinding) names its own host, and is refused with 403 forbidden
// before anything is read or done. With a token, any host name is served.
func TestNoTokenServesLoopbackHostsOnly(t *testing.T) {
	t.Parallel()
	open := servertest.Start(t)
	port := open.URL[strings.LastIndexByte(open.URL, ':'):]
	for _, host := range []string{"localhost" + port, "LOCALHOST", "127.0.0.1" + port, "[::1]" + port, "[::1]", "192.0.2.10:8080", "10.1.2.3"} {
		if status, _ := hostDo(t, open, http.MethodGet, "/v1/executions", host); status != http.StatusOK {
			t.Errorf("Host %s: %d; want 200", host, status)
		}
	}
	for _, host := range []string{"attacker.example" + port, "attacker.example", "localhost.attacker.example", "127.0.0.1.nip.io" + port} {
		for _, path := range []string{"/v1/executions", "/ui/runs", "/healthz"} {
			status, e := hostDo(t, open, http.MethodGet, path, host)
			if status != http.StatusForbidden || e.Error.Code != wire.CodeForbidden || !strings.Contains(e.Error.Message, "FF_API_TOKEN") {
				t.Errorf("GET %s with Host %s: %d %+v; want 403 forbidden naming FF_API_TOKEN", path, host, status, e)
			}
		}
	}
	locked := servertest.Start(t, func(c *server.Config) { c.Token = "s3cret-api-token-0123" })
	if status, _ := hostDo(t, locked, http.MethodGet, "/healthz", "ffrun.example.com"); status != http.StatusOK {
		t.Fatalf("with a token, Host ffrun.example.com: %d; want 200", status)
	}
}
