package client_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/flowfabric/ff/runtime/client"
)

// WithTLSConfig must not change the caller's tls.Config: net/http's
// Transport (unlike Server.ServeTLS) does not clone TLSClientConfig and
// writes "h2"/"http/1.1" into its NextProtos on the first request. A
// config shared by two clients (two workers with one Config.TLS) is then
// written by both at once: a data race (go test -race).
func TestReviewWithTLSConfigLeavesCallersConfigAlone(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{}`))
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	cfg := &tls.Config{RootCAs: roots}
	var wg sync.WaitGroup
	for range 2 {
		c, err := client.New(srv.URL, client.WithTLSConfig(cfg))
		if err != nil {
			t.Fatal(err)
		}
		defer c.CloseIdleConnections()
		wg.Go(func() {
			if err := c.Health(context.Background()); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if len(cfg.NextProtos) != 0 {
		t.Fatalf("the caller's tls.Config was changed: NextProtos = %q (want it cloned, untouched)", cfg.NextProtos)
	}
}
