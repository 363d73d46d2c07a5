package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/flowfabric/ff/lua"
	"github.com/valkey-io/valkey-go"
)

// callProfile is a per-call cost profile of the Valkey server, taken from
// its SLOWLOG with a threshold of 0 (every top-level command is logged
// with its execution time; commands run inside a function are part of
// their FCALL's time). FCALLs are keyed by function name, so that the cost
// of each store function shows. Profiling adds a little server work per
// command: use it to compare functions, not for headline figures.
type callProfile struct {
	vk valkey.Client
}

// slowlogLen bounds the entries kept; a run that logs more loses the
// oldest ones (the profile then says how many it saw).
const slowlogLen = 1 << 20

// startCallProfile turns on the SLOWLOG of every command and empties it.
func startCallProfile(ctx context.Context, vk valkey.Client) (*callProfile, error) {
	for _, cmd := range []valkey.Completed{
		vk.B().ConfigSet().ParameterValue().ParameterValue("slowlog-max-len", fmt.Sprint(slowlogLen)).Build(),
		vk.B().ConfigSet().ParameterValue().ParameterValue("slowlog-log-slower-than", "0").Build(),
		vk.B().SlowlogReset().Build(),
	} {
		if err := vk.Do(ctx, cmd).Error(); err != nil {
			return nil, fmt.Errorf("call profile: %w", err)
		}
	}
	return &callProfile{vk: vk}, nil
}

type callCost struct {
	name  string
	calls int
	total time.Duration
	max   time.Duration
}

// write reads the SLOWLOG, turns it off, and writes one line per command
// (FCALL: per function), costliest first, with the cost per unit (per task
// or per exec) when units > 0.
func (p *callProfile) write(ctx context.Context, w io.Writer, title string, units int) error {
	entries, err := p.vk.Do(ctx, p.vk.B().SlowlogGet().Count(-1).Build()).ToArray()
	if err != nil {
		return fmt.Errorf("call profile: SLOWLOG GET: %w", err)
	}
	_ = p.vk.Do(ctx, p.vk.B().ConfigSet().ParameterValue().ParameterValue("slowlog-log-slower-than", "10000").Build()).Error()
	by := map[string]*callCost{}
	var all time.Duration
	for _, e := range entries {
		f, err := e.ToArray()
		if err != nil || len(f) < 4 {
			continue
		}
		us, _ := f[2].AsInt64()
		args, _ := f[3].AsStrSlice()
		if len(args) == 0 {
			continue
		}
		name := strings.ToUpper(args[0])
		if (name == "FCALL" || name == "FCALL_RO") && len(args) > 1 {
			// ff_claim, not ff_claim_<version>.
			name = strings.TrimSuffix(args[1], "_"+lua.Version())
		}
		inner := false
		if len(f) > 4 {
			// Commands run by a function are logged too, with the
			// client "?:0"; their time is part of the FCALL's.
			addr, _ := f[4].ToString()
			inner = addr == "?:0"
		}
		if inner {
			name = "  (in fn) " + name
		}
		if name == "SLOWLOG" || name == "CONFIG" {
			continue
		}
		c := by[name]
		if c == nil {
			c = &callCost{name: name}
			by[name] = c
		}
		d := time.Duration(us) * time.Microsecond
		c.calls++
		c.total += d
		c.max = max(c.max, d)
		if !inner {
			all += d
		}
	}
	costs := make([]*callCost, 0, len(by))
	for _, c := range by {
		costs = append(costs, c)
	}
	slices.SortFunc(costs, func(a, b *callCost) int { return int(b.total - a.total) })
	fmt.Fprintf(w, "--- %s call profile (SLOWLOG, %d commands, %s in commands", title, len(entries), all.Round(time.Microsecond))
	if units > 0 {
		fmt.Fprintf(w, ", %.1f µs per unit", float64(all.Microseconds())/float64(units))
	}
	fmt.Fprintln(w, ")")
	fmt.Fprintf(w, "%-28s %8s %10s %9s %8s %9s\n", "command/function", "calls", "total", "µs/call", "max µs", "µs/unit")
	for _, c := range costs {
		per := 0.0
		if units > 0 {
			per = float64(c.total.Microseconds()) / float64(units)
		}
		fmt.Fprintf(w, "%-28s %8d %10s %9.1f %8d %9.1f\n", c.name, c.calls, c.total.Round(time.Microsecond),
			float64(c.total.Microseconds())/float64(c.calls), c.max.Microseconds(), per)
	}
	return nil
}

// stamp is a handler output carrying a time (Unix ns).
func stamp(ns int64) json.RawMessage {
	return json.RawMessage(`{"t":` + strconv.FormatInt(ns, 10) + `}`)
}

// stampOf returns the time of a stamp, or 0.
func stampOf(b []byte) int64 {
	var v struct {
		T int64 `json:"t"`
	}
	if json.Unmarshal(b, &v) != nil {
		return 0
	}
	return v.T
}

// hopTimes collects durations by hop name.
type hopTimes struct {
	mu sync.Mutex
	by map[string][]time.Duration
}

func newHopTimes() *hopTimes { return &hopTimes{by: map[string][]time.Duration{}} }

func (h *hopTimes) add(name string, d time.Duration) {
	h.mu.Lock()
	h.by[name] = append(h.by[name], d)
	h.mu.Unlock()
}

// write prints p50/p90/p99 of every hop.
func (h *hopTimes) write(w io.Writer, title string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	names := make([]string, 0, len(h.by))
	for n := range h.by {
		names = append(names, n)
	}
	slices.Sort(names)
	fmt.Fprintf(w, "--- %s hops (stamped by the handlers)\n", title)
	for _, n := range names {
		d := h.by[n]
		slices.Sort(d)
		q := func(f float64) time.Duration {
			return d[min(len(d)-1, int(float64(len(d))*f))].Round(10 * time.Microsecond)
		}
		fmt.Fprintf(w, "%-24s n=%-6d p50 %-9s p90 %-9s p99 %s\n", n, len(d), q(0.5), q(0.9), q(0.99))
	}
}

// requestCounts counts the HTTP requests of the benchmark's clients by
// method and route (ids folded).
type requestCounts struct {
	next http.RoundTripper
	mu   sync.Mutex
	by   map[string]int
}

func (c *requestCounts) RoundTrip(r *http.Request) (*http.Response, error) {
	parts := strings.Split(r.URL.Path, "/")
	for i, p := range parts {
		if i > 1 && (parts[i-1] == "flows" || parts[i-1] == "executions") && p != "batch" {
			parts[i] = "{id}"
		}
	}
	key := r.Method + " " + strings.Join(parts, "/")
	c.mu.Lock()
	c.by[key]++
	c.mu.Unlock()
	return c.next.RoundTrip(r)
}

// write prints the counts, and per unit (per exec) when units > 0.
func (c *requestCounts) write(w io.Writer, title string, units int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	keys := make([]string, 0, len(c.by))
	total := 0
	for k, n := range c.by {
		keys = append(keys, k)
		total += n
	}
	slices.Sort(keys)
	fmt.Fprintf(w, "--- %s HTTP requests: %d (%.2f per unit)\n", title, total, float64(total)/float64(max(units, 1)))
	for _, k := range keys {
		fmt.Fprintf(w, "%-36s %7d %6.2f per unit\n", k, c.by[k], float64(c.by[k])/float64(max(units, 1)))
	}
}
