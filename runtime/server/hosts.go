package server

import (
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync/atomic"

	"github.com/flowfabric/ff/runtime/wire"
)

// loopbackHosts serves h only the requests addressed to localhost or to
// an IP address (the Host header, its port aside), and refuses others with
// 403 forbidden. It guards an ffrun without a token against DNS rebinding:
// a web page of attacker.example whose name is made to resolve to
// 127.0.0.1 reaches ffrun from the browser as its own origin (no
// cross-origin check stops it) but still names attacker.example in Host.
// A request with no Host (HTTP/1.0) names no host to rebind, and passes.
// The first refusal is logged at warn, the others at debug.
func loopbackHosts(h http.Handler, log *slog.Logger) http.Handler {
	var warned atomic.Bool
	body := answerBody(wire.ErrorEnvelope{Error: wire.ErrorBody{Code: wire.CodeForbidden,
		Message: "this ffrun has no API token, so it answers only requests addressed to localhost or an IP address " +
			"(a defence against DNS rebinding); to serve it under a host name, set FF_API_TOKEN"}})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hostAllowed(r.Host) {
			h.ServeHTTP(w, r)
			return
		}
		level := slog.LevelDebug
		if !warned.Swap(true) {
			level = slog.LevelWarn
		}
		log.Log(r.Context(), level, "request refused: no API token, and addressed to a host name other than localhost",
			slog.String("host", r.Host), slog.String("path", r.URL.Path), slog.String("remote", r.RemoteAddr))
		writeAnswer(w, r, http.StatusForbidden, body)
	})
}

// hostAllowed says whether host (a Host header: a name or an IP address,
// with or without a port) is "", localhost or an IP address.
func hostAllowed(host string) bool {
	if host == "" {
		return true
	}
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	} else {
		host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	_, err := netip.ParseAddr(host)
	return err == nil
}
