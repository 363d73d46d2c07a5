package client

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
)

// HandlerTransport returns an http.RoundTripper that serves each request
// with h in the calling goroutine, without a network: what a process uses
// to call its own API (the web console, ffrun registering the schedules
// its .ff files declare) through the same routes, checks and errors as a
// remote client. The handler sees the request as a server would
// (RequestURI set, RemoteAddr "in-process"); its response is kept whole
// and returned once the handler is done, so it suits requests that answer
// rather than streams. A request whose context ended while it was served
// fails with the context's error.
func HandlerTransport(h http.Handler) http.RoundTripper { return handlerTransport{h} }

type handlerTransport struct{ h http.Handler }

func (t handlerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	rec := &recorder{header: http.Header{}}
	// A RoundTripper must not change the caller's request.
	r := req.Clone(req.Context())
	if r.Body == nil {
		r.Body = http.NoBody
	}
	r.RequestURI = r.URL.RequestURI()
	r.RemoteAddr = "in-process"
	t.h.ServeHTTP(rec, r)
	if err := req.Context().Err(); err != nil {
		return nil, err
	}
	if rec.status == 0 {
		rec.status = http.StatusOK
	}
	return &http.Response{
		Status: fmt.Sprintf("%d %s", rec.status, http.StatusText(rec.status)), StatusCode: rec.status,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: rec.header, Body: io.NopCloser(&rec.body), ContentLength: int64(rec.body.Len()), Request: req,
	}, nil
}

// recorder is an http.ResponseWriter that keeps what is written.
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(status int) {
	if r.status == 0 {
		r.status = status
	}
}

func (r *recorder) Write(p []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.body.Write(p)
}

// Flush is a no-op: everything is kept until the handler returns.
func (r *recorder) Flush() {}
