//go:build unix

package ffrun

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/flowfabric/ff/runtime/internal/valkeytest"
)

// TestCertReloaderSlowReadHoldsUpOneHandshake: while one handshake reads
// a renewal that does not come (a stuck network mount; here a named pipe
// nobody writes yet), the others are served the certificate in use.
func TestCertReloaderSlowReadHoldsUpOneHandshake(t *testing.T) {
	pki := valkeytest.NewPKI(t)
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	certPEM, err := os.ReadFile(pki.ServerCertFile)
	if err != nil {
		t.Fatal(err)
	}
	keyPEM, err := os.ReadFile(pki.ServerKeyFile)
	if err != nil {
		t.Fatal(err)
	}
	for f, b := range map[string][]byte{certFile: certPEM, keyFile: keyPEM} {
		if err := os.WriteFile(f, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	var logs bytes.Buffer
	r, err := newCertReloader(certFile, keyFile, 0, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	inUse, _ := r.get(nil)
	// The renewal: the certificate file becomes a pipe, newer than before.
	if err := os.Remove(certFile); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(certFile, 0o600); err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(time.Minute)
	if err := os.Chtimes(certFile, later, later); err != nil {
		t.Fatal(err)
	}
	stuck := make(chan struct{})
	go func() {
		defer close(stuck)
		// It reads what the pipe's writer writes below: the same
		// certificate, loaded again.
		if c, _ := r.get(nil); c == nil || !bytes.Equal(c.Certificate[0], inUse.Certificate[0]) {
			t.Error("the handshake that read the renewal got another certificate")
		}
	}()
	// Let the first handshake reach the pipe; then another one comes.
	time.Sleep(100 * time.Millisecond)
	got := make(chan struct{})
	go func() {
		defer close(got)
		if c, _ := r.get(nil); c != inUse {
			t.Error("another handshake got another certificate")
		}
	}()
	select {
	case <-got:
	case <-time.After(5 * time.Second):
		t.Error("a handshake waited for another one's read of the certificate files")
	}
	// The pipe's writer comes (with the same certificate): the stuck
	// handshake ends, and so does the other one if it waited for it (and
	// then read the pipe in turn).
	write := func() {
		t.Helper()
		w, err := os.OpenFile(certFile, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(certPEM); err != nil {
			t.Fatal(err)
		}
		w.Close()
	}
	write()
	<-stuck
	select {
	case <-got:
	case <-time.After(5 * time.Second):
		write()
		<-got
	}
}
