package server

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"syscall"
	"time"

	"github.com/flowfabric/ff/runtime/store"
	"github.com/valkey-io/valkey-go"
)

// Retries of the first connection (Config.ValkeyWait): the pause after a
// failed attempt starts at valkeyRetryMin and doubles up to
// valkeyRetryMax; while it waits, Open logs a line at the first failure
// and at most one every valkeyWaitLogEvery after.
const (
	valkeyRetryMin     = 100 * time.Millisecond
	valkeyRetryMax     = 2 * time.Second
	valkeyWaitLogEvery = 10 * time.Second
)

// valkeyOptions returns the client options of cfg (validated): a Unix
// socket is dialled by path, TCP with cfg.ValkeyTLS when set. The TLS
// configuration serves every node of a cluster: valkey-go dials each
// node with the options' TLSConfig, and when it names no server each
// connection verifies the host it dials.
func valkeyOptions(cfg Config) valkey.ClientOption {
	network, address, _ := ValkeyNetwork(cfg.ValkeyAddr)
	opt := valkey.ClientOption{InitAddress: []string{address}}
	if network == "unix" {
		opt.DialCtxFn = func(ctx context.Context, dst string, d *net.Dialer, _ *tls.Config) (net.Conn, error) {
			return d.DialContext(ctx, "unix", dst)
		}
	}
	if cfg.ValkeyTLS != nil {
		opt.TLSConfig = cfg.ValkeyTLS.Clone()
	}
	opt.Username = cfg.ValkeyUsername
	opt.Password = cfg.ValkeyPassword
	opt.DisableCache = true
	opt.ConnWriteTimeout = ConnectTimeoutDefault
	opt.Dialer = net.Dialer{Timeout: ConnectTimeoutDefault}
	opt.BlockingPoolSize = 8
	// 2^4 = 16 pipelined connections: the chain benchmark measured ~3 %
	// more throughput than with 8 or 32, with two report requests in
	// flight per worker.
	opt.PipelineMultiplex = 4
	opt.RetryDelay = retryDelay
	return opt
}

// ReadRetries is how many times a read-only command is sent again after a
// network error (about 5 s in all) before its caller gets the error: the
// client's default retries until the caller's context ends, which for a
// request without a deadline, with Valkey down, is never, so the API
// answered nothing instead of 503.
const ReadRetries = 24

// retryDelay backs off exponentially from 2 µs to 1 s between the
// ReadRetries retries, then gives up (a negative delay). A timeout is not
// retried: a Valkey that takes connections and does not answer (a
// partition, a hung host) makes each attempt wait out the connection
// timeouts (10 s), and 24 of them would hold a request for minutes.
func retryDelay(attempts int, _ valkey.Completed, err error) time.Duration {
	if attempts >= ReadRetries || isTimeout(err) {
		return -1
	}
	return min(time.Second, time.Duration(1<<min(attempts+1, 20))*time.Microsecond)
}

// isTimeout reports a network timeout (an i/o deadline passed, which
// os.ErrDeadlineExceeded is too).
func isTimeout(err error) bool {
	nerr, ok := errors.AsType[net.Error](err)
	return ok && nerr.Timeout()
}

// connect reaches Valkey and opens the store on it (stCfg without its
// Client). While the attempt fails with an error that waiting can heal
// (see retryable), it tries again for up to cfg.ValkeyWait, pausing with
// a capped exponential backoff; any other error, the end of ctx or the
// end of the wait returns the last error.
func connect(ctx context.Context, cfg Config, stCfg store.Config) (valkey.Client, *store.Store, error) {
	log := cfg.Logger
	start := time.Now()
	deadline := start.Add(cfg.ValkeyWait)
	pause := valkeyRetryMin
	var lastLog time.Time
	for attempt := 1; ; attempt++ {
		vk, st, err := openOnce(ctx, cfg, stCfg)
		if err == nil {
			if attempt > 1 {
				log.InfoContext(ctx, "valkey reached", slog.String("valkey", cfg.ValkeyAddr),
					slog.Duration("waited", time.Since(start).Round(time.Millisecond)), slog.Int("attempts", attempt))
			}
			return vk, st, nil
		}
		if cfg.ValkeyWait <= 0 || !retryable(err, cfg.ValkeyTLS != nil) {
			return nil, nil, err
		}
		if ctx.Err() != nil {
			return nil, nil, fmt.Errorf("%w (stopped while waiting for valkey: %w)", err, context.Cause(ctx))
		}
		left := time.Until(deadline)
		if left <= 0 {
			return nil, nil, fmt.Errorf("%w (valkey still unreachable after waiting %s)", err, cfg.ValkeyWait)
		}
		switch now := time.Now(); {
		case attempt == 1:
			log.WarnContext(ctx, "waiting for valkey", slog.String("valkey", cfg.ValkeyAddr),
				slog.Duration("wait", cfg.ValkeyWait), slog.Any("error", err))
			lastLog = now
		case now.Sub(lastLog) >= valkeyWaitLogEvery:
			log.WarnContext(ctx, "still waiting for valkey", slog.String("valkey", cfg.ValkeyAddr),
				slog.Duration("waited", now.Sub(start).Round(time.Second)), slog.Any("error", err))
			lastLog = now
		}
		t := time.NewTimer(min(pause, left))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, nil, fmt.Errorf("%w (stopped while waiting for valkey: %w)", err, context.Cause(ctx))
		case <-t.C:
		}
		pause = min(2*pause, valkeyRetryMax)
	}
}

// openOnce makes one attempt at connecting and opening the store.
func openOnce(ctx context.Context, cfg Config, stCfg store.Config) (valkey.Client, *store.Store, error) {
	vk, err := newClient(ctx, valkeyOptions(cfg))
	if err != nil {
		return nil, nil, fmt.Errorf("server: connect to valkey at %s: %w", cfg.ValkeyAddr, err)
	}
	stCfg.Client = vk
	st, err := store.Open(ctx, stCfg)
	if err != nil {
		vk.Close()
		return nil, nil, fmt.Errorf("server: open store: %w", err)
	}
	return vk, st, nil
}

// newClient is valkey.NewClient, which takes no context, ended by ctx:
// against a Valkey that takes the connection and never answers, the
// client's first command waits out ConnWriteTimeout (10 s), and a stop
// must not wait for it. The client of an attempt given up is closed
// when NewClient returns, in the background.
func newClient(ctx context.Context, opt valkey.ClientOption) (valkey.Client, error) {
	type made struct {
		vk  valkey.Client
		err error
	}
	ch := make(chan made, 1)
	go func() {
		vk, err := valkey.NewClient(opt)
		ch <- made{vk, err}
	}()
	select {
	case m := <-ch:
		return m.vk, m.err
	case <-ctx.Done():
		go func() {
			if m := <-ch; m.err == nil {
				m.vk.Close()
			}
		}()
		return nil, context.Cause(ctx)
	}
}

// retryable reports whether a failure to reach Valkey may heal by
// waiting: the server is not there yet (connection refused, no such file
// for a socket, a name that does not resolve yet, a connect that times
// out), or it is there but not ready (LOADING its dataset, a cluster or
// replica not up: CLUSTERDOWN, MASTERDOWN, TRYAGAIN). Over plain TCP a
// connection closed, reset or silent before a reply counts too (a proxy
// may accept before the server is up). Never retryable: anything the
// server answered otherwise (WRONGPASS, NOAUTH, an unknown command), a
// TLS failure (an unknown authority, a refused client certificate; over
// TLS, a connection that hangs up or falls silent once connected is one:
// a plain server, or a server refusing the client), partition counts that
// differ (store.ErrPartitionMismatch) and a server too old
// (store.ErrUnsupportedServer).
func retryable(err error, overTLS bool) bool {
	if errors.Is(err, store.ErrPartitionMismatch) || errors.Is(err, store.ErrUnsupportedServer) ||
		errors.Is(err, context.Canceled) {
		return false
	}
	if _, ok := errors.AsType[*valkey.ValkeyError](err); ok {
		return notReady(err)
	}
	if isTLSFailure(err) {
		return false
	}
	if _, ok := errors.AsType[*net.DNSError](err); ok {
		return true
	}
	if op, ok := errors.AsType[*net.OpError](err); ok && op.Op == "dial" {
		return true // refused, unreachable, timed out, no socket file yet
	}
	if overTLS {
		// Connected, but the handshake did not end (a plain server
		// waits for a line that never comes) or the server hung up
		// after it (a refused client certificate).
		return false
	}
	if isTimeout(err) {
		return true
	}
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// isTLSFailure reports whether err is a TLS handshake failure: a
// certificate that does not verify, an alert from either side, a reply
// that is not TLS.
func isTLSFailure(err error) bool {
	if _, ok := errors.AsType[*tls.CertificateVerificationError](err); ok {
		return true
	}
	if _, ok := errors.AsType[x509.UnknownAuthorityError](err); ok {
		return true
	}
	if _, ok := errors.AsType[x509.HostnameError](err); ok {
		return true
	}
	if _, ok := errors.AsType[x509.CertificateInvalidError](err); ok {
		return true
	}
	if _, ok := errors.AsType[tls.RecordHeaderError](err); ok {
		return true
	}
	if _, ok := errors.AsType[tls.AlertError](err); ok {
		return true
	}
	// A TLS alert is a net.OpError whose Op says which side sent it.
	if op, ok := errors.AsType[*net.OpError](err); ok && (op.Op == "remote error" || op.Op == "local error") {
		return true
	}
	return false
}
