package valkeytest

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/valkey-io/valkey-go"
)

func TestStartTLS(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, clientAuth := range []bool{false, true} {
		t.Run("client auth "+strconv.FormatBool(clientAuth), func(t *testing.T) {
			s := StartTLS(t, TLSOptions{ClientAuth: clientAuth})
			c := s.Client(t)
			if got, err := c.Do(ctx, c.B().Ping().Build()).ToString(); err != nil || got != "PONG" {
				t.Fatalf("PING over TLS = %q, %v", got, err)
			}
			// Plain RESP on the TLS port gets no answer.
			conn, err := net.DialTimeout("tcp", s.Addr, time.Second)
			if err != nil {
				t.Fatal(err)
			}
			_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
			_, _ = conn.Write([]byte("PING\r\n"))
			buf := make([]byte, 64)
			n, _ := conn.Read(buf)
			conn.Close()
			if strings.Contains(string(buf[:n]), "PONG") {
				t.Fatal("the TLS port answered a plain PING")
			}
			// Without the client certificate: refused only when required.
			cfg := s.PKI.ClientConfig()
			cfg.Certificates = nil
			nc, err := valkey.NewClient(valkey.ClientOption{InitAddress: []string{s.Addr}, DisableCache: true, TLSConfig: cfg, ForceSingleClient: true})
			if err == nil {
				err = nc.Do(ctx, nc.B().Ping().Build()).Error()
				nc.Close()
			}
			if clientAuth == (err == nil) {
				t.Fatalf("without a client certificate (required: %v): %v", clientAuth, err)
			}
			// Another PKI's authority does not trust this server.
			other := NewPKI(t).ClientConfig()
			nc, err = valkey.NewClient(valkey.ClientOption{InitAddress: []string{s.Addr}, DisableCache: true, TLSConfig: other, ForceSingleClient: true})
			if err == nil {
				nc.Close()
				t.Fatal("a client trusting another authority connected")
			}
			if verr := (*tls.CertificateVerificationError)(nil); !errors.As(err, &verr) {
				t.Fatalf("wrong authority: %v (%T), want a certificate verification error", err, err)
			}
		})
	}
}

func TestStartOnPort(t *testing.T) {
	port := FreePort(t)
	addr := StartOnPort(t, port)
	if want := net.JoinHostPort("127.0.0.1", strconv.Itoa(port)); addr != want {
		t.Fatalf("address %s, want %s", addr, want)
	}
	c := Client(t, addr)
	if err := c.Do(context.Background(), c.B().Ping().Build()).Error(); err != nil {
		t.Fatal(err)
	}
}
