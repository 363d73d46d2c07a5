package ffrun

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"
)

// certCheckEvery is how often at most the API's certificate files are
// checked for a change (a renewal written in place).
const certCheckEvery = 10 * time.Second

// certReloader serves the API's certificate from files, loading them again
// when they change, so that a renewed certificate (cert-manager, certbot)
// is used without a restart. A renewal that does not load (the key and
// certificate written at different moments, say) keeps the certificate in
// use, logs why, and is tried again at the next check.
type certReloader struct {
	certFile, keyFile string
	every             time.Duration
	log               *slog.Logger

	mu      sync.Mutex
	cert    *tls.Certificate
	stamp   [2]time.Time // modification times of the files loaded
	checked time.Time
}

// newCertReloader loads the certificate and key files, or says which one
// does not load.
func newCertReloader(certFile, keyFile string, every time.Duration, log *slog.Logger) (*certReloader, error) {
	r := &certReloader{certFile: certFile, keyFile: keyFile, every: every, log: log}
	stamp, err := r.stamps()
	if err != nil {
		return nil, err
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("--tls-cert %s with --tls-key %s: %w", certFile, keyFile, err)
	}
	r.cert, r.stamp, r.checked = &cert, stamp, time.Now()
	return r, nil
}

// stamps returns the modification times of both files.
func (r *certReloader) stamps() ([2]time.Time, error) {
	var out [2]time.Time
	for i, f := range []string{r.certFile, r.keyFile} {
		st, err := os.Stat(f)
		if err != nil {
			return out, fmt.Errorf("--tls-cert/--tls-key: %w", err)
		}
		out[i] = st.ModTime()
	}
	return out, nil
}

// get is tls.Config.GetCertificate.
func (r *certReloader) get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if time.Since(r.checked) < r.every {
		return r.cert, nil
	}
	r.checked = time.Now()
	stamp, err := r.stamps()
	if err != nil {
		r.log.Warn("API certificate files unreadable; keeping the one in use", slog.Any("error", err))
		return r.cert, nil
	}
	if stamp == r.stamp {
		return r.cert, nil
	}
	cert, err := tls.LoadX509KeyPair(r.certFile, r.keyFile)
	if err != nil {
		r.log.Warn("API certificate changed but does not load; keeping the one in use", slog.Any("error", err))
		return r.cert, nil
	}
	r.cert, r.stamp = &cert, stamp
	r.log.Info("API certificate reloaded", slog.String("cert", r.certFile))
	return r.cert, nil
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
