package valkeytest

// TLS servers and the throwaway certificates they need. NewPKI makes a
// certificate authority and a server and a client certificate it signed,
// as PEM files in a directory of the test (nothing is committed, nothing
// calls openssl); StartTLS starts a server that speaks TLS only, with
// them. StartOnPort starts a server on a port the test chose (tests of a
// client that waits for a server which is not there yet), StartArgs one
// with more command-line arguments.

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/valkey-io/valkey-go"
)

// PKI is a throwaway certificate authority and two certificates it
// signed, written as PEM files into a temporary directory of the test.
type PKI struct {
	CAFile string // the authority's certificate
	// ServerCertFile and ServerKeyFile are a server certificate for
	// 127.0.0.1 and localhost.
	ServerCertFile, ServerKeyFile string
	// ClientCertFile and ClientKeyFile are a client certificate (mutual
	// TLS).
	ClientCertFile, ClientKeyFile string

	caPool *x509.CertPool
	client tls.Certificate
}

// NewPKI makes a certificate authority with a server and a client
// certificate, valid for an hour. Two PKIs never trust each other.
func NewPKI(t testing.TB) *PKI {
	t.Helper()
	dir := t.TempDir()
	p := &PKI{
		CAFile:         filepath.Join(dir, "ca.pem"),
		ServerCertFile: filepath.Join(dir, "server.pem"),
		ServerKeyFile:  filepath.Join(dir, "server-key.pem"),
		ClientCertFile: filepath.Join(dir, "client.pem"),
		ClientKeyFile:  filepath.Join(dir, "client-key.pem"),
		caPool:         x509.NewCertPool(),
	}
	now := time.Now()
	caKey := newKey(t)
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "valkeytest CA " + t.Name()},
		NotBefore:             now.Add(-time.Minute),
		NotAfter:              now.Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatalf("valkeytest: CA certificate: %v", err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatalf("valkeytest: CA certificate: %v", err)
	}
	p.caPool.AddCert(ca)
	writePEM(t, p.CAFile, "CERTIFICATE", caDER)

	sign := func(serial int64, tmpl *x509.Certificate, certFile, keyFile string) tls.Certificate {
		key := newKey(t)
		tmpl.SerialNumber = big.NewInt(serial)
		tmpl.NotBefore, tmpl.NotAfter = now.Add(-time.Minute), now.Add(time.Hour)
		tmpl.KeyUsage = x509.KeyUsageDigitalSignature
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			t.Fatalf("valkeytest: certificate %s: %v", tmpl.Subject.CommonName, err)
		}
		keyDER, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			t.Fatalf("valkeytest: key of %s: %v", tmpl.Subject.CommonName, err)
		}
		writePEM(t, certFile, "CERTIFICATE", der)
		writePEM(t, keyFile, "PRIVATE KEY", keyDER)
		return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
	}
	// The server's certificate serves for client authentication too: the
	// server presents it when it dials other nodes (cluster bus).
	sign(2, &x509.Certificate{
		Subject:     pkix.Name{CommonName: "localhost"},
		DNSNames:    []string{"localhost"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}, p.ServerCertFile, p.ServerKeyFile)
	p.client = sign(3, &x509.Certificate{
		Subject:     pkix.Name{CommonName: "ffrun"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, p.ClientCertFile, p.ClientKeyFile)
	return p
}

// ClientConfig returns a TLS configuration that trusts only the PKI's
// authority and presents its client certificate.
func (p *PKI) ClientConfig() *tls.Config {
	return &tls.Config{RootCAs: p.caPool, Certificates: []tls.Certificate{p.client}, MinVersion: tls.VersionTLS12}
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("valkeytest: key: %v", err)
	}
	return key
}

func writePEM(t testing.TB, path, typ string, der []byte) {
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatalf("valkeytest: %v", err)
	}
}

// TLSOptions configures StartTLS.
type TLSOptions struct {
	// PKI gives the certificates; nil = NewPKI(t).
	PKI *PKI
	// ClientAuth makes the server require a client certificate signed by
	// the PKI's authority (tls-auth-clients yes); otherwise it asks for
	// none (tls-auth-clients no).
	ClientAuth bool
}

// TLSServer is a running server that speaks TLS only.
type TLSServer struct {
	Addr string // 127.0.0.1:port, TLS; the server has no plain TCP port
	PKI  *PKI
}

// StartTLS starts a dedicated server that accepts TLS connections only and
// stops it when t ends; a single-node cluster in cluster mode, whose nodes
// announce their TLS port (tls-cluster yes). The server starts with a
// plain port too, on which the harness sees it answer and sets a cluster
// up; that port is then closed (CONFIG SET port 0).
func StartTLS(t testing.TB, opts TLSOptions) *TLSServer {
	t.Helper()
	if opts.PKI == nil {
		opts.PKI = NewPKI(t)
	}
	port := FreePort(t)
	args := tlsArgs(port, opts)
	cluster := ClusterMode()
	if cluster {
		args = append(args, "--tls-cluster", "yes")
	}
	srv, err := launchWith(cluster, node{args: args})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	closePlainPort(t, ctx, srv.Addr)
	return &TLSServer{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), PKI: opts.PKI}
}

// StartClusterTLS starts a Valkey Cluster of n primaries that accepts TLS
// connections only, like StartCluster, with the certificates of opts, and
// stops it when t ends. The nodes talk TLS on the cluster bus too and
// announce their TLS ports (tls-cluster yes). It returns the nodes' TLS
// addresses.
func StartClusterTLS(t testing.TB, n int, opts TLSOptions) ([]string, *PKI) {
	t.Helper()
	if opts.PKI == nil {
		opts.PKI = NewPKI(t)
	}
	ports := make([]int, n)
	plain := startCluster(t, n, func(i int) []string {
		ports[i] = FreePort(t)
		return append(tlsArgs(ports[i], opts), "--tls-cluster", "yes")
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	addrs := make([]string, n)
	for i, addr := range plain {
		closePlainPort(t, ctx, addr)
		addrs[i] = net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[i]))
	}
	return addrs, opts.PKI
}

// tlsArgs are the arguments of a server with a TLS port.
func tlsArgs(port int, opts TLSOptions) []string {
	auth := "no"
	if opts.ClientAuth {
		auth = "yes"
	}
	return []string{
		"--tls-port", strconv.Itoa(port),
		"--tls-cert-file", opts.PKI.ServerCertFile,
		"--tls-key-file", opts.PKI.ServerKeyFile,
		"--tls-ca-cert-file", opts.PKI.CAFile,
		"--tls-auth-clients", auth,
	}
}

// closePlainPort closes the plain TCP port of the server at addr.
func closePlainPort(t testing.TB, ctx context.Context, addr string) {
	t.Helper()
	c, err := nodeClient(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Do(ctx, c.B().ConfigSet().ParameterValue().ParameterValue("port", "0").Build()).Error(); err != nil {
		t.Fatalf("valkeytest: %s: CONFIG SET port 0: %v", addr, err)
	}
}

// Client returns a client of s over TLS with the PKI's client
// certificate, closed when t ends.
func (s *TLSServer) Client(t testing.TB) valkey.Client {
	t.Helper()
	c, err := valkey.NewClient(valkey.ClientOption{InitAddress: []string{s.Addr}, DisableCache: true, TLSConfig: s.PKI.ClientConfig()})
	if err != nil {
		t.Fatalf("valkeytest: connect %s over TLS: %v", s.Addr, err)
	}
	t.Cleanup(c.Close)
	return c
}

// StartOnPort starts a dedicated server on port of 127.0.0.1 (a
// single-node cluster in cluster mode) and stops it when t ends. It is for
// tests of a client that was told the address before the server existed;
// the port must be free (FreePort).
func StartOnPort(t testing.TB, port int) string {
	t.Helper()
	srv, err := launchWith(ClusterMode(), node{port: port})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	return srv.Addr
}

// StartArgs starts a dedicated server with more command-line arguments
// (such as "--enable-debug-command", "local") and stops it when t ends;
// a single-node cluster in cluster mode.
func StartArgs(t testing.TB, args ...string) string {
	t.Helper()
	srv, err := launchWith(ClusterMode(), node{args: args})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	return srv.Addr
}

// FreePort returns a TCP port of 127.0.0.1 that nothing listened on a
// moment ago.
func FreePort(t testing.TB) int {
	t.Helper()
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	return port
}
