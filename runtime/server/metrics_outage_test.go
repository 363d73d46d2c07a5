package server_test

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/flowfabric/ff/runtime/server"
	"github.com/flowfabric/ff/runtime/server/servertest"
)

// TestMetricsScrapeOutageLogsOnce: while Valkey is down, a scrape of
// /metrics that cannot read it is logged at warn level once for the
// outage, the next ones at debug level (a scraper every few seconds must
// not fill the log), and the first scrape that reads it again says so at
// info level.
func TestMetricsScrapeOutageLogsOnce(t *testing.T) {
	vk, port := startValkeyAnyPort(t)
	logs := &logBuffer{t: t}
	env := servertest.Start(t, func(c *server.Config) {
		c.ValkeyAddr, c.KeyPrefix = vk.Addr, "scrapeoutage:"
		c.DisableScanners = true
		c.ResyncInterval = time.Hour
		c.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	if m := scrape(t, env, ""); m["ff_valkey_up"] != 1 {
		t.Fatalf("ff_valkey_up %v with Valkey up", m["ff_valkey_up"])
	}
	if err := vk.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Scrapers that give up after a moment: with Valkey down the reads
	// are retried for seconds, and the scrape ends with its request.
	const scrapes = 4
	hc := &http.Client{Timeout: 300 * time.Millisecond}
	for range scrapes {
		if res, err := hc.Get(env.URL + "/metrics"); err == nil {
			res.Body.Close()
		}
	}
	const failed = `msg="metrics: read store stats`
	lines := func(level, msg string) int {
		n := 0
		for line := range strings.Lines(logs.String()) {
			if strings.Contains(line, "level="+level+" ") && strings.Contains(line, msg) {
				n++
			}
		}
		return n
	}
	for deadline := time.Now().Add(10 * time.Second); lines("WARN", failed)+lines("DEBUG", failed) < scrapes; {
		if time.Now().After(deadline) {
			t.Fatalf("%d failed scrapes logged of %d", lines("WARN", failed)+lines("DEBUG", failed), scrapes)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if w, d := lines("WARN", failed), lines("DEBUG", failed); w != 1 || d != scrapes-1 {
		t.Errorf("%d failed scrapes of one outage logged at warn level and %d at debug level; want 1 and %d", w, d, scrapes-1)
	}
	if n := lines("ERROR", "metrics"); n != 0 {
		t.Errorf("%d scrape lines at error level", n)
	}

	startValkeyOn(t, port)
	const back = `level=INFO msg="metrics: store stats read again"`
	for deadline := time.Now().Add(15 * time.Second); scrape(t, env, "")["ff_valkey_up"] != 1; {
		if time.Now().After(deadline) {
			t.Fatal("ff_valkey_up is not 1 again after Valkey came back")
		}
		time.Sleep(50 * time.Millisecond)
	}
	scrape(t, env, "")
	if n := strings.Count(logs.String(), back); n != 1 {
		t.Errorf("%d lines %s after the outage, want 1", n, back)
	}
}
