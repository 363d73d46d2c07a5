package api_test

import (
	"bufio"
	"net"
	"net/http"
	"net/url"
	"testing"

	"github.com/flowfabric/ff/runtime/server/servertest"
)

// TestChunkedEmptyBodyNotAskedForType: a write without a body (a cancel
// without a reason) is not asked for a type (spec/api.md, Conventions),
// also when it comes chunked (a stream of unknown length that turned out
// empty), as with Content-Length: 0 (TestBodyContentType): the cancel of
// an execution that does not exist answers 404, not 415. A chunked body
// that is not empty is asked, as one of a known length.
func TestChunkedEmptyBodyNotAskedForType(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	u, err := url.Parse(env.URL)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		chunks string
		want   int
	}{
		{"0\r\n\r\n", http.StatusNotFound},
		{"e\r\n{\"reason\":\"x\"}\r\n0\r\n\r\n", http.StatusUnsupportedMediaType},
	} {
		if got := chunkedCancel(t, u.Host, c.chunks); got != c.want {
			t.Errorf("cancel with chunked body %q sent as text/plain: %d, want %d", c.chunks, got, c.want)
		}
	}
}

// chunkedCancel sends the cancel of an execution that does not exist to
// host, its body the chunks given and its Content-Type text/plain, and
// returns the answer's status.
func chunkedCancel(t *testing.T, host, chunks string) int {
	t.Helper()
	conn, err := net.Dial("tcp", host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	req := "POST /v1/executions/1.x/cancel HTTP/1.1\r\nHost: " + host +
		"\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n" + chunks
	if _, err := conn.Write([]byte(req)); err != nil {
		t.Fatal(err)
	}
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	return res.StatusCode
}
