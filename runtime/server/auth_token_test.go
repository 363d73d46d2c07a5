package server_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/flowfabric/ff/runtime/internal/valkeytest"
	"github.com/flowfabric/ff/runtime/server"
)

// A token read from a file often ends in a line break (a Kubernetes Secret
// made --from-file, an env file written with echo). No HTTP client can
// send it, and the API compares the header's trimmed value: every request
// would be refused by a server that started fine. Open refuses it instead.
func TestOpenRefusesTokenWithLineBreak(t *testing.T) {
	t.Parallel()
	srv, err := server.Open(context.Background(), server.Config{
		ValkeyAddr: valkeytest.Shared(t), KeyPrefix: valkeytest.Prefix(t), Token: "s3cret\n",
		DisableScanners: true, ShutdownTimeout: 5 * time.Second,
	})
	if err == nil {
		srv.Close()
		t.Fatal("Open took a token ending in a line break")
	}
	if !strings.Contains(err.Error(), "FF_API_TOKEN") || !strings.Contains(err.Error(), "white space") {
		t.Fatalf("Open = %v, want the token and why named", err)
	}
}

// A token shorter than server.TokenMinBytes could be guessed despite the
// authlimit's pace: Open refuses it, saying why.
func TestOpenRefusesShortToken(t *testing.T) {
	t.Parallel()
	srv, err := server.Open(context.Background(), server.Config{
		ValkeyAddr: valkeytest.Shared(t), KeyPrefix: valkeytest.Prefix(t), Token: "fifteen-bytes-a",
		DisableScanners: true, ShutdownTimeout: 5 * time.Second,
	})
	if err == nil {
		srv.Close()
		t.Fatal("Open took a token of 15 bytes")
	}
	if !strings.Contains(err.Error(), "FF_API_TOKEN") || !strings.Contains(err.Error(), "at least 16") {
		t.Fatalf("Open = %v, want the token and why named", err)
	}
}
