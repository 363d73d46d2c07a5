package server

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flowfabric/ff/runtime/wire"
)

// startingRetryAfter is the Retry-After of the answers of a Front whose
// Server is not open yet.
const startingRetryAfter = 1 * time.Second

// FrontConfig configures a Front.
type FrontConfig struct {
	// TLS, when set, serves HTTPS with it; it must be the Config.APITLS of
	// the Server that takes the Front over. nil = plain HTTP.
	TLS *tls.Config
	// Logger receives the HTTP server's own errors (warn level).
	Logger *slog.Logger
	// OnServing, when set, is called once the API answers on the
	// listener: the Server that took the Front over has started its
	// scheduler and scanners.
	OnServing func()
}

// Front is the HTTP server of a listener, taken before the Server that
// answers there is open: ffrun takes its port first, then waits for Valkey
// (Config.ValkeyWait) or starts its dev child. Until Server.ServeFront
// takes it over, a Front answers GET /healthz 200 (the process is alive)
// and every other request 503 unavailable, "starting: waiting for
// Valkey", with a Retry-After header, so that probes and clients get an
// answer during the wait instead of a connection nobody reads.
type Front struct {
	ln  net.Listener
	cfg FrontConfig

	api    atomic.Pointer[http.Handler] // nil while starting
	start  sync.Once
	hs     *http.Server
	served chan error // what hs.Serve returned

	closeOnce sync.Once
	closeErr  error
}

// NewFront starts serving ln with the starting answers; a Server takes it
// over with ServeFront, or Close stops it.
func NewFront(ln net.Listener, cfg FrontConfig) *Front {
	f := newFront(ln, cfg)
	f.serve()
	return f
}

func newFront(ln net.Listener, cfg FrontConfig) *Front {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Front{ln: ln, cfg: cfg, served: make(chan error, 1)}
}

// serve starts the HTTP server, once.
func (f *Front) serve() {
	f.start.Do(func() {
		f.hs = &http.Server{
			Handler:           f,
			ReadHeaderTimeout: 10 * time.Second,
			// A read deadline also cancels a running request's context in
			// net/http, so it must outlast the longest claim wait.
			ReadTimeout: wire.ClaimWaitMaxMs*time.Millisecond + 30*time.Second,
			IdleTimeout: 2 * time.Minute,
			// No WriteTimeout: a claim may wait up to wire.ClaimWaitMaxMs.
			ErrorLog: slog.NewLogLogger(f.cfg.Logger.Handler(), slog.LevelWarn),
		}
		if f.cfg.TLS != nil {
			f.hs.TLSConfig = f.cfg.TLS.Clone()
			go func() { f.served <- f.hs.ServeTLS(f.ln, "", "") }()
		} else {
			go func() { f.served <- f.hs.Serve(f.ln) }()
		}
	})
}

// takeOver makes h answer every request from now on, serving ln if it was
// not served yet, and calls OnServing.
func (f *Front) takeOver(h http.Handler) {
	f.api.Store(&h)
	f.serve()
	if f.cfg.OnServing != nil {
		f.cfg.OnServing()
	}
}

func (f *Front) scheme() string {
	if f.cfg.TLS != nil {
		return "https"
	}
	return "http"
}

// ServeHTTP answers with the API once a Server took the Front over, with
// the starting answers before.
func (f *Front) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h := f.api.Load(); h != nil {
		(*h).ServeHTTP(w, r)
		return
	}
	if r.URL.Path == "/healthz" {
		writeAnswer(w, r, http.StatusOK, startingHealthBody)
		return
	}
	w.Header().Set("Retry-After", strconv.Itoa(int(startingRetryAfter/time.Second)))
	writeAnswer(w, r, http.StatusServiceUnavailable, startingBody)
}

// The answers of a Front whose Server is not open yet.
var (
	startingBody = answerBody(wire.ErrorEnvelope{Error: wire.ErrorBody{Code: wire.CodeUnavailable,
		Message: "starting: waiting for Valkey"}})
	startingHealthBody = answerBody(wire.Health{Status: "ok"})
)

// answerBody encodes v, a constant answer, as the API encodes its answers
// (wire.Marshal: without HTML escaping, so that a message reads "<" and
// "&" as they are), with a final newline.
func answerBody(v any) []byte {
	b, err := wire.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("server: encode a constant answer: %v", err))
	}
	return append(b, '\n')
}

// writeAnswer writes body, a JSON answer from answerBody, with status;
// a HEAD request gets the status and headers only.
func writeAnswer(w http.ResponseWriter, r *http.Request, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	if r.Method != http.MethodHead {
		_, _ = w.Write(body)
	}
}

// shutdown stops serving: it closes the listener, lets the requests being
// answered finish within ctx, then closes their connections.
func (f *Front) shutdown(ctx context.Context) error {
	f.start.Do(func() { f.ln.Close() }) // never served
	if f.hs == nil {
		return nil
	}
	if err := f.hs.Shutdown(ctx); err != nil {
		f.hs.Close()
		return err
	}
	return nil
}

// Close stops a Front no Server took over (the start failed or was
// stopped), closing its listener; its answers are quick, so it waits for
// them at most a few seconds. Safe to call twice.
func (f *Front) Close() error {
	f.closeOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := f.shutdown(ctx); err != nil {
			f.closeErr = fmt.Errorf("server: close front: %w", err)
		}
	})
	return f.closeErr
}
