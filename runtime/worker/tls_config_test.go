package worker_test

import (
	"crypto/tls"
	"net/http"
	"strings"
	"testing"

	"github.com/flowfabric/ff/runtime/client"
	"github.com/flowfabric/ff/runtime/worker"
)

// Config.TLS only reaches the default transport: with HTTPClient or Client
// also set it would be dropped without a word (certificate errors at the
// first claim), so New refuses the combination.
func TestTLSWithOwnClientRefused(t *testing.T) {
	t.Parallel()
	c, err := client.New("https://ffrun.example")
	if err != nil {
		t.Fatal(err)
	}
	for name, cfg := range map[string]worker.Config{
		"HTTPClient": {URL: "https://ffrun.example", Name: "w", TLS: &tls.Config{}, HTTPClient: &http.Client{}},
		"Client":     {Name: "w", TLS: &tls.Config{}, Client: c},
	} {
		if _, err := worker.New(cfg); err == nil || !strings.Contains(err.Error(), "Config.TLS") {
			t.Errorf("Config.TLS with %s: %v, want it refused", name, err)
		}
	}
}
