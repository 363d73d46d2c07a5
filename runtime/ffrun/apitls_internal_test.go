package ffrun

import (
	"bytes"
	"crypto/x509"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flowfabric/ff/runtime/internal/valkeytest"
)

// TestCertReloaderPicksUpRenewals: a certificate renewed in place is served
// at the next check, even with the old file's modification time; one that
// does not load keeps the previous one and says why.
func TestCertReloaderPicksUpRenewals(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	// Every file gets the same modification time, as a renewal copied
	// with its times kept (cp -p) has: only the contents say it changed.
	stamp := time.Now().Add(-time.Hour)
	install := func(cert, key []byte) {
		t.Helper()
		for f, b := range map[string][]byte{certFile: cert, keyFile: key} {
			if err := os.WriteFile(f, b, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Chtimes(f, stamp, stamp); err != nil {
				t.Fatal(err)
			}
		}
	}
	read := func(f string) []byte {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	first, second := valkeytest.NewPKI(t), valkeytest.NewPKI(t)
	install(read(first.ServerCertFile), read(first.ServerKeyFile))
	var logs bytes.Buffer
	r, err := newCertReloader(certFile, keyFile, 0, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	// served returns the certificate served now (DER), which differs
	// between the two authorities' server certificates.
	served := func() string {
		t.Helper()
		c, err := r.get(nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := x509.ParseCertificate(c.Certificate[0]); err != nil {
			t.Fatal(err)
		}
		return string(c.Certificate[0])
	}
	firstCA := served()
	install(read(second.ServerCertFile), read(second.ServerKeyFile))
	secondCA := served()
	if secondCA == firstCA || !strings.Contains(logs.String(), "API certificate reloaded") {
		t.Fatalf("the renewal is not served; log:\n%s", logs.String())
	}
	// A renewal caught half written (the new certificate, the old key).
	install(read(first.ServerCertFile), read(second.ServerKeyFile))
	if got := served(); got != secondCA || !strings.Contains(logs.String(), "does not load; keeping the one in use") {
		t.Fatalf("after a broken renewal the served certificate changed (%v) or nothing was said; log:\n%s", got != secondCA, logs.String())
	}
	// Said once, not at every check while it lasts.
	served()
	if n := strings.Count(logs.String(), "does not load"); n != 1 {
		t.Fatalf("a broken renewal logged %d times, want once; log:\n%s", n, logs.String())
	}
	// Completed: served.
	install(read(first.ServerCertFile), read(first.ServerKeyFile))
	if got := served(); got != firstCA {
		t.Fatal("the completed renewal is not served")
	}
	// Files removed: the certificate in use is served, and that is said
	// once.
	for _, f := range []string{certFile, keyFile} {
		if err := os.Remove(f); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 {
		if got := served(); got != firstCA {
			t.Fatal("with its files removed, another certificate is served")
		}
	}
	if n := strings.Count(logs.String(), "unreadable; keeping the one in use"); n != 1 {
		t.Fatalf("removed files logged %d times, want once; log:\n%s", n, logs.String())
	}
}
