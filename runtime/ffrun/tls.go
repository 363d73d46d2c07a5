package ffrun

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"syscall"

	"github.com/flowfabric/ff/runtime/server"
)

// tlsFlags are the --valkey-tls flags of ffrun serve.
type tlsFlags struct {
	enabled    bool
	ca         string // PEM file of the authorities to trust; "" = the system's
	cert, key  string // client certificate and its key (both or neither)
	serverName string // name to verify; "" = the host of --valkey
}

// tlsEnv are the environment twins of the TLS flags, refused by ffrun dev.
var tlsEnv = []string{"FF_VALKEY_TLS", "FF_VALKEY_TLS_CA", "FF_VALKEY_TLS_CERT", "FF_VALKEY_TLS_KEY", "FF_VALKEY_TLS_SERVER_NAME"}

// on reports whether the flags ask for TLS: --valkey-tls, or any option
// that only means something with it.
func (f tlsFlags) on() bool {
	return f.enabled || f.ca != "" || f.cert != "" || f.key != "" || f.serverName != ""
}

// config builds the TLS configuration of the flags for the Valkey address
// addr (validated), reading the files named; nil when TLS is off. There
// is deliberately no way to skip verification.
func (f tlsFlags) config(addr string) (*tls.Config, error) {
	if !f.on() {
		return nil, nil
	}
	if network, _, _ := server.ValkeyNetwork(addr); network == "unix" {
		return nil, fmt.Errorf("--valkey %s is a Unix socket, which has no TLS: drop the --valkey-tls options or give host:port", addr)
	}
	if (f.cert == "") != (f.key == "") {
		return nil, errors.New("--valkey-tls-cert and --valkey-tls-key go together: give both (a client certificate and its key) or neither")
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: f.serverName}
	if f.ca != "" {
		b, err := os.ReadFile(f.ca)
		if err != nil {
			return nil, fmt.Errorf("--valkey-tls-ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(b) {
			return nil, fmt.Errorf("--valkey-tls-ca %s: no PEM certificate in it", f.ca)
		}
		cfg.RootCAs = pool
	}
	if f.cert != "" {
		certPEM, err := os.ReadFile(f.cert)
		if err != nil {
			return nil, fmt.Errorf("--valkey-tls-cert: %w", err)
		}
		if err := checkCertPEM(certPEM); err != nil {
			return nil, fmt.Errorf("--valkey-tls-cert %s: %w", f.cert, err)
		}
		keyPEM, err := os.ReadFile(f.key)
		if err != nil {
			return nil, fmt.Errorf("--valkey-tls-key: %w", err)
		}
		if b, _ := pem.Decode(keyPEM); b == nil || !strings.HasSuffix(b.Type, "PRIVATE KEY") {
			return nil, fmt.Errorf("--valkey-tls-key %s: no PEM private key in it", f.key)
		}
		pair, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			return nil, fmt.Errorf("--valkey-tls-key %s with --valkey-tls-cert %s: %w", f.key, f.cert, err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}

// checkCertPEM checks that b holds PEM certificates and that they parse.
func checkCertPEM(b []byte) error {
	n := 0
	for {
		var block *pem.Block
		block, b = pem.Decode(b)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		if _, err := x509.ParseCertificate(block.Bytes); err != nil {
			return err
		}
		n++
	}
	if n == 0 {
		return errors.New("no PEM certificate in it")
	}
	return nil
}

// tlsHint adds what to check to a failure to reach Valkey that looks like
// a TLS problem, or like a server that wants TLS it did not get.
func tlsHint(err error, overTLS bool) error {
	if err == nil {
		return nil
	}
	op, ok := errors.AsType[*net.OpError](err)
	dialFailed := ok && op.Op == "dial" // nothing listens: not a TLS matter
	closed := !dialFailed && (errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET))
	_, unverified := errors.AsType[*tls.CertificateVerificationError](err)
	_, notTLS := errors.AsType[tls.RecordHeaderError](err)
	switch {
	case !overTLS && closed:
		return fmt.Errorf("%w (if the server wants TLS, set --valkey-tls)", err)
	case !overTLS:
		return err
	case unverified:
		return fmt.Errorf("%w (check --valkey-tls-ca and, when the certificate names another host, --valkey-tls-server-name)", err)
	case notTLS:
		return fmt.Errorf("%w (the server does not speak TLS on this port)", err)
	case errors.Is(err, context.DeadlineExceeded) && !dialFailed:
		return fmt.Errorf("%w (no TLS handshake: the server may not speak TLS on this port)", err)
	case closed, strings.Contains(err.Error(), "remote error: tls:"): // the alert type is not exported
		return fmt.Errorf("%w (the server closed the connection after the TLS handshake: it may require a client certificate its authority signed: check --valkey-tls-cert and --valkey-tls-key)", err)
	}
	return err
}
