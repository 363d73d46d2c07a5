package scanner

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flowfabric/ff/lua"
	"github.com/flowfabric/ff/runtime/internal/valkeytest"
	"github.com/flowfabric/ff/runtime/store"
)

// TestLibraryScanner: the library scanner deletes a library version that
// nobody in its key prefix used for store.LibraryIdleAfter, and keeps its
// own version's record fresh.
func TestLibraryScanner(t *testing.T) {
	ctx := context.Background()
	c := valkeytest.Client(t, valkeytest.Start(t)) // dedicated: it deletes libraries
	const other = "fedcba9876543210"
	src := strings.ReplaceAll(lua.Source(), lua.Version(), other)
	if err := c.Do(ctx, c.B().FunctionLoad().FunctionCode(src).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	s, err := store.Open(ctx, store.Config{Client: c, KeyPrefix: "sc:"})
	if err != nil {
		t.Fatal(err)
	}
	key := "sc:ff:libraries"
	tm, err := c.Do(ctx, c.B().Time().Build()).AsStrSlice()
	if err != nil {
		t.Fatal(err)
	}
	sec, _ := strconv.ParseInt(tm[0], 10, 64)
	idle := strconv.FormatInt(sec*1000-store.LibraryIdleAfter.Milliseconds()-1000, 10)
	c.Do(ctx, c.B().Hset().Key(key).FieldValue().FieldValue(other, idle).FieldValue(lua.Version(), idle).Build())

	if _, err := NewLibrary(LibraryConfig{Store: s, Interval: store.LibraryIdleAfter/2 + time.Second}); err == nil || !strings.Contains(err.Error(), "Interval") {
		t.Fatalf("an interval over half the idle time: %v", err)
	}
	sc, err := NewLibrary(LibraryConfig{Store: s, Interval: store.LibraryIdleAfter / 2, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if n, more, err := sc.RunOnce(ctx); n != 1 || more || err != nil {
		t.Fatalf("RunOnce = %d, %v, %v; want the idle version deleted", n, more, err)
	}
	if _, err := c.Do(ctx, c.B().Fcall().Function("ff_version_"+other).Numkeys(0).Build()).ToString(); err == nil {
		t.Fatal("the idle version's functions still answer")
	}
	at, err := c.Do(ctx, c.B().Hget().Key(key).Field(lua.Version()).Build()).AsInt64()
	if err != nil || at <= sec*1000-60_000 {
		t.Fatalf("this version's use recorded at %d (%v), want the server's time", at, err)
	}
	if n, _, err := sc.RunOnce(ctx); n != 0 || err != nil {
		t.Fatalf("second RunOnce = %d, %v", n, err)
	}
	run(t, sc)
}
