package ffrun

import (
	"bytes"
	"crypto/tls"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// certCheckEvery is how often at most the API's certificate files are
// checked for a change (a renewal written in place).
const certCheckEvery = 10 * time.Second

// certReloader serves the API's certificate from files, loading them again
// when their contents change, so that a renewed certificate (cert-manager,
// certbot) is used without a restart. Contents, not modification times:
// a renewal copied with its old times kept (cp -p, a restored backup)
// changes the bytes only, and two small files read every few seconds cost
// nothing. A renewal that does not load (the key and
// certificate written at different moments, say) keeps the certificate in
// use, logs why, and is tried again at the next check.
type certReloader struct {
	certFile, keyFile string
	every             time.Duration
	log               *slog.Logger

	cert atomic.Pointer[tls.Certificate] // served now
	next atomic.Int64                    // when the files are checked next (Unix ns)

	// mu is held by the one handshake that checks the files: the others
	// serve cert meanwhile, so that a slow read (a stuck network mount)
	// or a large key holds up no handshake but that one.
	mu     sync.Mutex
	loaded [2][]byte // the certificate and key files as last read
	warned string    // the last problem logged, until a check finds none
}

// newCertReloader loads the certificate and key files, or says which one
// does not load.
func newCertReloader(certFile, keyFile string, every time.Duration, log *slog.Logger) (*certReloader, error) {
	r := &certReloader{certFile: certFile, keyFile: keyFile, every: every, log: log}
	files, err := r.read()
	if err != nil {
		return nil, err
	}
	cert, err := tls.X509KeyPair(files[0], files[1])
	if err != nil {
		return nil, fmt.Errorf("--tls-cert %s with --tls-key %s: %w", certFile, keyFile, err)
	}
	r.cert.Store(&cert)
	r.loaded = files
	r.next.Store(time.Now().Add(every).UnixNano())
	return r, nil
}

// read returns the contents of both files.
func (r *certReloader) read() ([2][]byte, error) {
	var out [2][]byte
	for i, f := range []string{r.certFile, r.keyFile} {
		b, err := os.ReadFile(f)
		if err != nil {
			return out, fmt.Errorf("--tls-cert/--tls-key: %w", err)
		}
		out[i] = b
	}
	return out, nil
}

// get is tls.Config.GetCertificate.
func (r *certReloader) get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	if time.Now().UnixNano() < r.next.Load() || !r.mu.TryLock() {
		return r.cert.Load(), nil
	}
	defer r.mu.Unlock()
	if time.Now().UnixNano() < r.next.Load() {
		return r.cert.Load(), nil // checked meanwhile
	}
	r.next.Store(time.Now().Add(r.every).UnixNano())
	files, err := r.read()
	if err != nil {
		r.warn("API certificate files unreadable; keeping the one in use", err)
		return r.cert.Load(), nil
	}
	if bytes.Equal(files[0], r.loaded[0]) && bytes.Equal(files[1], r.loaded[1]) {
		r.warned = ""
		return r.cert.Load(), nil
	}
	cert, err := tls.X509KeyPair(files[0], files[1])
	if err != nil {
		r.warn("API certificate changed but does not load; keeping the one in use", err)
		return r.cert.Load(), nil
	}
	r.warned = ""
	r.cert.Store(&cert)
	r.loaded = files
	r.log.Info("API certificate reloaded", slog.String("cert", r.certFile))
	return &cert, nil
}

// warn logs a problem of the files once, not at every check while it
// lasts (files removed stay removed for every handshake until a restart).
func (r *certReloader) warn(msg string, err error) {
	if text := msg + ": " + err.Error(); text != r.warned {
		r.log.Warn(msg, slog.Any("error", err))
		r.warned = text
	}
}

// apiTLS returns the TLS configuration of the API for --tls-cert and
// --tls-key (both or neither: nil for neither).
func apiTLS(certFile, keyFile string, log *slog.Logger) (*tls.Config, error) {
	if certFile == "" && keyFile == "" {
		return nil, nil
	}
	if certFile == "" || keyFile == "" {
		return nil, fmt.Errorf("--tls-cert and --tls-key go together (HTTPS for the API)")
	}
	r, err := newCertReloader(certFile, keyFile, certCheckEvery, log)
	if err != nil {
		return nil, err
	}
	return &tls.Config{GetCertificate: r.get, MinVersion: tls.VersionTLS12}, nil
}
