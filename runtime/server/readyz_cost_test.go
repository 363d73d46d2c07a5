package server_test

import (
	"net/http"
	"sync"
	"testing"

	"github.com/flowfabric/ff/runtime/internal/valkeytest"
	"github.com/flowfabric/ff/runtime/server"
	"github.com/flowfabric/ff/runtime/server/servertest"
)

// /readyz is open to anyone and each check costs Valkey a PING and two
// FCALLs per primary: the probes of a second share one check (those that
// come while it runs wait for it), so a flood of probes costs Valkey a
// check a second, not one per probe.
func TestReadyzProbesShareChecks(t *testing.T) {
	t.Parallel()
	env, _ := servertest.StartOwnValkey(t, func(c *server.Config) { c.DisableScanners = true })
	vk := valkeytest.Client(t, env.Config.ValkeyAddr)
	before := valkeytest.CommandCalls(t, vk)
	const probes = 40
	var wg sync.WaitGroup
	for range probes {
		wg.Go(func() {
			if r := env.Do(t, http.MethodGet, "/readyz", nil, ""); r.Status != http.StatusOK {
				t.Errorf("/readyz: %d %s", r.Status, r.Body)
			}
		})
	}
	wg.Wait()
	// A check is 3 commands; the probes of this test take a second or two,
	// and the scheduler's resync reads a little too.
	if n := valkeytest.CommandCalls(t, vk) - before; n > 30 {
		t.Fatalf("%d probes of /readyz ran %d Valkey commands, want them to share checks", probes, n)
	}
}

// Every answer tells browsers not to guess its type
// (X-Content-Type-Options: nosniff): JSON that echoes what a client sent
// is never taken for a page or a script.
func TestAnswersSayNoSniff(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	for _, path := range []string{"/healthz", "/v1/executions/nope", "/v1/unknown", "/metrics"} {
		req, err := http.NewRequest(http.MethodGet, env.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if got := res.Header.Get("X-Content-Type-Options"); got != "nosniff" {
			t.Errorf("GET %s (%d): X-Content-Type-Options %q, want nosniff", path, res.StatusCode, got)
		}
	}
}
