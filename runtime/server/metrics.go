package server

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"runtime"
	rtmetrics "runtime/metrics"
	"time"

	"github.com/flowfabric/ff/lua"
	"github.com/flowfabric/ff/runtime/internal/outage"
	"github.com/flowfabric/ff/runtime/metrics"
	"github.com/flowfabric/ff/runtime/scanner"
	"github.com/flowfabric/ff/runtime/scheduler"
	"github.com/flowfabric/ff/runtime/store"
)

// serverMetrics is what ffrun exposes at GET /metrics besides the API's
// request counts (spec/api.md, "Metrics").
type serverMetrics struct {
	reg            *metrics.Registry
	scannerTicks   *metrics.CounterVec
	scannerErrors  *metrics.CounterVec
	scannerHandled *metrics.CounterVec
}

func newServerMetrics(st *store.Store, sched *scheduler.Scheduler, leases *leaseWatch, log *slog.Logger, version string) *serverMetrics {
	reg := metrics.NewRegistry()
	m := &serverMetrics{
		reg: reg,
		scannerTicks: reg.Counter("ff_scanner_ticks_total",
			"Passes of a background scanner over every partition.", "scanner"),
		scannerErrors: reg.Counter("ff_scanner_tick_errors_total",
			"Scanner passes in which a store call failed (the pass goes on with the other partitions).", "scanner"),
		scannerHandled: reg.Counter("ff_scanner_processed_total",
			"Items a scanner transitioned: leases expired, executions promoted, timed out, unblocked, runs deleted, ...", "scanner"),
	}
	start := float64(time.Now().UnixNano()) / 1e9
	var scrapes outage.Log // the outage of the scrapes that cannot read Valkey
	reg.AddCollector(func(ctx context.Context) []metrics.GaugeFamily {
		return storeGauges(ctx, st, log, &scrapes)
	})
	reg.AddCollector(func(context.Context) []metrics.GaugeFamily {
		return append(processGauges(start, cmp.Or(version, "unknown")), metrics.GaugeFamily{
			Name:    "ff_claims_waiting",
			Help:    "Claims of this ffrun waiting for work (long-polls parked until a wake-up or their deadline).",
			Samples: []metrics.Sample{{Value: float64(sched.Waiting())}},
		}, metrics.GaugeFamily{
			Name:    "ff_lease_watches_waiting",
			Help:    "Lease watches of this ffrun waiting for a lease to end (workers' long-polls, POST /v1/worker/watch).",
			Samples: []metrics.Sample{{Value: float64(leases.waiting.Load())}},
		})
	})
	return m
}

// observeScanner counts a scanner's tick (scanner.Observer).
func (m *serverMetrics) observeScanner(name string, processed int, err error) {
	m.scannerTicks.Inc(name)
	if err != nil {
		m.scannerErrors.Inc(name)
	}
	if processed > 0 {
		m.scannerHandled.Add(uint64(processed), name)
	}
}

var _ scanner.Observer = (*serverMetrics)(nil).observeScanner

// knowScanners starts every scanner's counters at 0, so that rate() and
// increase() see the first tick and the first failure.
func (m *serverMetrics) knowScanners(names []string) {
	for _, n := range names {
		m.scannerTicks.Add(0, n)
		m.scannerErrors.Add(0, n)
		m.scannerHandled.Add(0, n)
	}
}

// storeGauges reads the store's snapshot. When Valkey does not answer,
// ff_valkey_up is 0 and the other gauges are left out (a scrape must not
// show zero queues it could not read); the failure is logged at warn
// level once per outage, the next ones at debug level (a scraper comes
// every few seconds), and the end of the outage at info level.
func storeGauges(ctx context.Context, st *store.Store, log *slog.Logger, down *outage.Log) []metrics.GaugeFamily {
	up := metrics.GaugeFamily{Name: "ff_valkey_up", Help: "1 when the last scrape could read Valkey, else 0."}
	// The scrape ends with ctx even when a read does not: a command
	// queued on a connection to a Valkey that stopped answering can wait
	// for the connection's own timeout (10 s, seen in CI) past ctx. The
	// read left behind ends with that timeout.
	type result struct {
		stats *store.Stats
		err   error
	}
	done := make(chan result, 1)
	go func() {
		stats, err := st.Stats(ctx)
		done <- result{stats, err}
	}()
	var stats *store.Stats
	var err error
	select {
	case r := <-done:
		stats, err = r.stats, r.err
	case <-ctx.Done():
		err = fmt.Errorf("store stats: %w", ctx.Err())
	}
	if err != nil {
		level, first := down.Failed()
		msg := "metrics: read store stats"
		if first {
			msg += " (the next failures at debug level, until a scrape reads it)"
		}
		log.Log(ctx, level, msg, slog.Any("error", err))
		up.Samples = []metrics.Sample{{Value: 0}}
		return []metrics.GaugeFamily{up}
	}
	if down.Ended() {
		log.InfoContext(ctx, "metrics: store stats read again")
	}
	up.Samples = []metrics.Sample{{Value: 1}}
	lanes := metrics.GaugeFamily{
		Name:   "ff_executions",
		Help:   "Executions in a lane's index: eligible, delayed, pending (flow members waiting for upstreams), blocked_route, blocked_budget, blocked_quota, terminal (ended, kept until retention).",
		Labels: []string{"namespace", "lane", "state"},
	}
	for _, l := range stats.Lanes {
		if l == (store.LaneStats{Namespace: l.Namespace, Lane: l.Lane}) {
			// Nothing in any index: a lane whose executions retention has
			// deleted. Its name stays in the partition's lane set forever,
			// and clients choose lane names: leaving it out bounds the
			// series to the lanes in use.
			continue
		}
		for _, c := range []struct {
			state string
			n     int64
		}{
			{"eligible", l.Eligible}, {"delayed", l.Delayed}, {"pending", l.Pending},
			{"blocked_route", l.BlockedRoute}, {"blocked_budget", l.BlockedBudget}, {"blocked_quota", l.BlockedQuota},
			{"terminal", l.Terminal},
		} {
			lanes.Samples = append(lanes.Samples, metrics.Sample{Values: []string{l.Namespace, l.Lane, c.state}, Value: float64(c.n)})
		}
	}
	running := metrics.GaugeFamily{
		Name:    "ff_executions_running",
		Help:    "Executions holding a lease (running on a worker), all namespaces.",
		Samples: []metrics.Sample{{Value: float64(stats.Running)}},
	}
	workers := metrics.GaugeFamily{
		Name:   "ff_workers_connected",
		Help:   "Connected worker instances (heartbeat not expired), by namespace.",
		Labels: []string{"namespace"},
	}
	for _, w := range stats.Workers {
		workers.Samples = append(workers.Samples, metrics.Sample{Values: []string{w.Namespace}, Value: float64(w.Connected)})
	}
	return []metrics.GaugeFamily{up, lanes, running, workers}
}

// processGauges describes this ffrun process.
func processGauges(start float64, version string) []metrics.GaugeFamily {
	samples := []rtmetrics.Sample{{Name: "/sched/goroutines:goroutines"}, {Name: "/memory/classes/heap/objects:bytes"}}
	rtmetrics.Read(samples)
	value := func(s rtmetrics.Sample) float64 {
		if s.Value.Kind() == rtmetrics.KindUint64 {
			return float64(s.Value.Uint64())
		}
		return 0
	}
	return []metrics.GaugeFamily{
		{
			Name:    "ff_build_info",
			Help:    "Always 1: the version of ffrun, of its Functions library and of Go it was built with.",
			Labels:  []string{"version", "library_version", "go_version"},
			Samples: []metrics.Sample{{Values: []string{version, lua.Version(), runtime.Version()}, Value: 1}},
		},
		{Name: "ff_process_start_time_seconds", Help: "When this ffrun process started, Unix time.", Samples: []metrics.Sample{{Value: start}}},
		{Name: "ff_go_goroutines", Help: "Goroutines of this ffrun process.", Samples: []metrics.Sample{{Value: value(samples[0])}}},
		{Name: "ff_go_heap_objects_bytes", Help: "Bytes of live and not yet swept heap objects of this ffrun process.", Samples: []metrics.Sample{{Value: value(samples[1])}}},
	}
}
