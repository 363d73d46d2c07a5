package devserver

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestLockInheritedAndNotStale: the data directory's lock is
// inherited by the child, so while the child runs the directory stays
// locked even once ffrun's own descriptor is gone (ffrun crashed); once
// the child is gone too (killed, no clean-up), the lock file that stays
// behind must not block the next Start.
func TestLockInheritedAndNotStale(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg := Config{Dir: dir, NoPersistence: true}
	s, err := Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop(ctx)
	// ffrun's descriptor closed, as the kernel does when ffrun dies.
	s.unlock.Do(func() { s.lock.Close() })
	if second, err := Start(ctx, cfg); err == nil {
		second.Stop(ctx)
		t.Fatal("Start succeeded while the first child still runs: the child does not hold the lock")
	} else if !strings.Contains(err.Error(), "in use") {
		t.Fatalf("Start while the child runs: %v, want the in-use error", err)
	}
	// The child dies without any clean-up.
	if err := s.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-s.exited
	if _, err := os.Stat(filepath.Join(dir, LockFile)); err != nil {
		t.Fatalf("the lock file is gone (%v): the test does not exercise a stale lock file", err)
	}
	third, err := Start(ctx, cfg)
	if err != nil {
		t.Fatalf("Start after the holder died: %v (a stale lock file blocks the directory)", err)
	}
	if err := third.Stop(ctx); err != nil {
		t.Fatal(err)
	}
}
