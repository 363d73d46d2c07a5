package server_test

import (
	"errors"
	"os"
	"testing"

	"github.com/flowfabric/ff/runtime/client"
	"github.com/flowfabric/ff/runtime/internal/valkeytest"
	"github.com/flowfabric/ff/runtime/server"
	"github.com/flowfabric/ff/runtime/server/servertest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	valkeytest.StopShared()
	os.Exit(code)
}

func apiErr(t *testing.T, err error) *client.APIError {
	t.Helper()
	var ae *client.APIError
	if !errors.As(err, &ae) {
		t.Fatalf("want *client.APIError, got %T %v", err, err)
	}
	return ae
}

// startOnOwnValkey serves ffrun on a Valkey of the test's own, for tests
// that stop or pause it (the shared one must stay up); mod may change the
// configuration further.
func startOnOwnValkey(t *testing.T, mod ...func(*server.Config)) (*valkeytest.Server, *servertest.Env) {
	t.Helper()
	vk, err := valkeytest.Launch()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(vk.Stop)
	own := func(c *server.Config) { c.ValkeyAddr = vk.Addr }
	return vk, servertest.Start(t, append([]func(*server.Config){own}, mod...)...)
}
