package store

import (
	"context"
	"strings"
	"testing"

	"github.com/flowfabric/ff/runtime/internal/valkeytest"
)

// A server that answers but refuses writes (maxmemory reached without
// eviction) is not ready: every state change would fail. Ready said it
// was, since the probe only read.
func TestReadyWantsWrites(t *testing.T) {
	t.Parallel()
	addr := valkeytest.Start(t) // its own server: its memory limit is changed
	c := valkeytest.Client(t, addr)
	ctx := context.Background()
	s, err := Open(ctx, Config{Client: c, KeyPrefix: valkeytest.Prefix(t), Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Ready(ctx); err != nil {
		t.Fatalf("Ready = %v", err)
	}
	set := func(v string) {
		t.Helper()
		if err := c.Do(ctx, c.B().ConfigSet().ParameterValue().ParameterValue("maxmemory-policy", "noeviction").
			ParameterValue("maxmemory", v).Build()).Error(); err != nil {
			t.Fatal(err)
		}
	}
	set("1") // every write refused from now on
	if err := s.Ready(ctx); err == nil || !strings.Contains(err.Error(), "refuses writes") {
		t.Fatalf("Ready at maxmemory = %v, want not ready: refuses writes", err)
	}
	set("0")
	if err := s.Ready(ctx); err != nil {
		t.Fatalf("Ready after raising maxmemory = %v", err)
	}
}
