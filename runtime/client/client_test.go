package client_test

import (
	"context"
	"errors"
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
	if _, err := client.New("https://ffrun.example.com:8443/base/"); err != nil {
		t.Errorf("New with a path: %v", err)
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
