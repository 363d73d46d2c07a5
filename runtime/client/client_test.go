package client_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/flowfabric/ff/compiler/plan"
	"github.com/flowfabric/ff/runtime/client"
)

func TestNewValidatesURL(t *testing.T) {
	for _, u := range []string{"", "ftp://x", "http://", "::nope"} {
		if _, err := client.New(u); err == nil {
			t.Errorf("New(%q): want an error", u)
		}
	}
	if _, err := client.New(""); err == nil || !strings.Contains(err.Error(), "empty") {
		t.Errorf("New(\"\") = %v, want it called empty", err)
	}
	if _, err := client.New("127.0.0.1:8080"); err == nil || !strings.Contains(err.Error(), "write http://127.0.0.1:8080") {
		t.Errorf("New without a scheme = %v, want the fix named", err)
	}
	if _, err := client.New("https://ffrun.example.com:8443/base/"); err != nil {
		t.Errorf("New with a path: %v", err)
	}
}

// A token no HTTP header can carry as it is (the line break ending the
// file it was read from) is refused with the reason, not sent to fail as
// "invalid header field value" at every request.
func TestNewValidatesToken(t *testing.T) {
	for _, tok := range []string{"s3cret\n", " s3cret", "s3\x00cret"} {
		if _, err := client.New("http://127.0.0.1:8080", client.WithToken(tok)); err == nil || !strings.Contains(err.Error(), "API token") {
			t.Errorf("New with token %q = %v, want the token refused", tok, err)
		}
	}
	if _, err := client.New("http://127.0.0.1:8080", client.WithToken("s3cret-~+/=")); err != nil {
		t.Errorf("New with a good token: %v", err)
	}
}

// TestNonJSONErrorBody: an error answer that is not our envelope (a proxy
// in between) still becomes an *APIError with the status.
func TestNonJSONErrorBody(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer tok" {
			t.Errorf("Authorization = %q", r.Header.Get("Authorization"))
		}
		if !strings.HasPrefix(r.URL.Path, "/base/v1/") {
			t.Errorf("path %q does not keep the base path", r.URL.Path)
		}
		http.Error(w, "bad gateway", http.StatusBadGateway)
	}))
	defer srv.Close()
	c, err := client.New(srv.URL+"/base", client.WithToken("tok"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.GetExecution(context.Background(), "1.x")
	var ae *client.APIError
	if !errors.As(err, &ae) || ae.Status != 502 || ae.Code != "http_502" || !strings.Contains(ae.Message, "bad gateway") {
		t.Fatalf("got %#v", err)
	}
}

// TestRunResultWaits: Run.Result keeps asking while the run is not
// terminal (409 not_terminal or a running state) and returns the result.
func TestRunResultWaits(t *testing.T) {
	calls := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == http.MethodPost && r.URL.Path == "/v1/flows":
			w.Write([]byte(`{"id":"run-1","flow":"f","state":"running"}`))
		case r.URL.Path == "/v1/flows/run-1/result":
			calls++
			switch calls {
			case 1:
				w.WriteHeader(409)
				w.Write([]byte(`{"error":{"code":"not_terminal","message":"running"}}`))
			case 2:
				w.Write([]byte(`{"id":"run-1","flow":"f","state":"running"}`))
			default:
				w.Write([]byte(`{"id":"run-1","flow":"f","state":"succeeded","result":{"ok":1}}`))
			}
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	c, _ := client.New(srv.URL)
	run, err := c.StageFlow(context.Background(), &plan.Flow{Name: "f"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	out, err := run.Result(context.Background())
	if err != nil || string(out) != `{"ok":1}` || calls != 3 {
		t.Fatalf("result %s %v after %d calls", out, err, calls)
	}
}

// TestFlowsUnsupported: against a server without flow routes the flow
// methods wrap ErrFlowsUnsupported; other errors do not.
func TestFlowsUnsupported(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/v1/flows/known") {
			w.WriteHeader(404)
			w.Write([]byte(`{"error":{"code":"not_found","message":"no such run"}}`))
			return
		}
		w.WriteHeader(404)
		w.Write([]byte(`{"error":{"code":"unknown_route","message":"no such route"}}`))
	}))
	defer srv.Close()
	c, _ := client.New(srv.URL)
	ctx := context.Background()
	if _, err := c.StageFlow(ctx, &plan.Flow{Name: "f"}, nil); !errors.Is(err, client.ErrFlowsUnsupported) {
		t.Errorf("StageFlow: %v", err)
	}
	if _, err := c.Templates(ctx); !errors.Is(err, client.ErrFlowsUnsupported) {
		t.Errorf("Templates: %v", err)
	}
	_, err := c.GetRun(ctx, "known")
	if errors.Is(err, client.ErrFlowsUnsupported) || !client.IsCode(err, "not_found") {
		t.Errorf("GetRun of an unknown run: %v", err)
	}
	// A base URL ending in /v1 (its routes are /v1/v1/…) is named as the
	// likelier cause.
	v1, _ := client.New(srv.URL + "/v1")
	if _, err := v1.Templates(ctx); !errors.Is(err, client.ErrFlowsUnsupported) || !strings.Contains(err.Error(), "ends in /v1") {
		t.Errorf("Templates with a base URL ending in /v1: %v", err)
	}
}

// TestRunErrorNamesFailures: a failed run's Result is a *RunError with the
// run's error and failed members.
func TestRunErrorNamesFailures(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("wait_ms") != "30000" {
			t.Errorf("result asked with wait_ms=%q", r.URL.Query().Get("wait_ms"))
		}
		w.Write([]byte(`{"id":"r","flow":"f","state":"failed","error":"b failed: boom",
			"failures":[{"exec":"b","execution_id":"1.x","state":"failed","error":"boom"}]}`))
	}))
	defer srv.Close()
	c, _ := client.New(srv.URL)
	_, err := c.Run("r").Result(context.Background())
	var re *client.RunError
	if !errors.As(err, &re) || re.State != "failed" || re.Message != "b failed: boom" || strings.Join(re.FailedExecs(), ",") != "b" {
		t.Fatalf("got %#v", err)
	}
	if !strings.Contains(err.Error(), "run r failed: b failed: boom") {
		t.Fatalf("message %q", err)
	}
}

// TestFlowErrorsSayClientOnce: a request that fails on the way names the
// operation once, not "client: list runs: client: GET ...".
func TestFlowErrorsSayClientOnce(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close() // nothing listens there any more
	c, _ := client.New(url)
	ctx := context.Background()
	_, err := c.ListRuns(ctx, client.RunListOptions{})
	if err == nil || strings.Count(err.Error(), "client: ") != 1 || !strings.HasPrefix(err.Error(), "client: list runs: GET ") {
		t.Fatalf("ListRuns against a closed port: %v", err)
	}
	var ne net.Error
	if !errors.As(err, &ne) {
		t.Fatalf("the transport error is not kept in the chain: %#v", err)
	}
}

// The default transport speaks HTTP/2 to an https server that offers it
// (a custom http.Transport speaks HTTP/1.1 unless told otherwise), and
// WithTLSConfig is how it trusts a private CA.
func TestDefaultTransportHTTP2WithPrivateCA(t *testing.T) {
	protos := make(chan string, 4)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		protos <- r.Proto
		w.Write([]byte(`{}`))
	}))
	srv.EnableHTTP2 = true
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshake below
	srv.StartTLS()
	defer srv.Close()
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())

	// Without the CA the server is not trusted.
	c, err := client.New(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Health(context.Background()); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("Health without the CA = %v, want a certificate error", err)
	}
	c, err = client.New(srv.URL, client.WithTLSConfig(&tls.Config{RootCAs: roots}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseIdleConnections()
	if err := c.Health(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := <-protos; got != "HTTP/2.0" {
		t.Fatalf("the default transport spoke %s, want HTTP/2.0", got)
	}
}
