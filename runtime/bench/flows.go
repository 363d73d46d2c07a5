package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flowfabric/ff/compiler"
	"github.com/flowfabric/ff/compiler/plan"
	"github.com/flowfabric/ff/dsl"
	"github.com/flowfabric/ff/runtime/client"
	"github.com/flowfabric/ff/runtime/worker"
)

// FlowConfig is one flow benchmark run.
type FlowConfig struct {
	Scenarios   []string      // "chain", "diamond"
	Runs        int           // chain: runs staged in total
	Length      int           // chain: execs per run
	Width       int           // diamond: execs between the source and the sink
	Producers   int           // chain: runs in flight at once (closed loop: stage, wait for the result, repeat)
	Workers     int           // worker SDK instances
	Concurrency int           // slots per worker instance
	Partitions  int           // flow partitions (0 = store default)
	Timeout     time.Duration // per scenario
	ValkeyBin   string
	AOF         bool      // run the server with append-only persistence
	TCP         bool      // reach Valkey over TCP loopback, not its Unix socket
	Stats       io.Writer // when set, receives Valkey's INFO commandstats after each scenario
	// Template stages chain runs by template name (the server holds the
	// compiled flow, as with ffrun --flows) instead of sending the plan
	// with every run, to measure what the plan costs.
	Template bool
	// SeparateResult stages each chain run without waiting and asks for
	// its result in a second request (Run.Result's long-poll), instead of
	// letting the staging request wait for the run (client.WithWait).
	SeparateResult bool
}

func (c FlowConfig) withDefaults() FlowConfig {
	if len(c.Scenarios) == 0 {
		c.Scenarios = []string{"chain", "diamond"}
	}
	if c.Runs <= 0 {
		c.Runs = 100
	}
	if c.Length <= 0 {
		c.Length = 10
	}
	if c.Width <= 0 {
		c.Width = 1000
	}
	if c.Producers <= 0 {
		c.Producers = 16
	}
	if c.Workers <= 0 {
		c.Workers = 1
	}
	if c.Concurrency <= 0 {
		c.Concurrency = 16
	}
	if c.Timeout <= 0 {
		c.Timeout = 2 * time.Minute
	}
	return c
}

// FlowResult is the outcome of one scenario.
type FlowResult struct {
	Scenario   string
	Runs       int
	Execs      int // per run
	Elapsed    time.Duration
	RunsPerSec float64
	P50, P99   time.Duration // stage -> result, per run
	Max        time.Duration
	ValkeyCPU  time.Duration // used by the Valkey server during the scenario
	ProcessCPU time.Duration // used by this process (ffrun, workers, client) during the scenario
	// Allocs and AllocBytes are the heap allocations of this process during
	// the scenario: unlike CPU time, they hardly move with the machine's
	// other load, so they compare two builds of the Go side in one run each.
	Allocs, AllocBytes uint64
}

func (r FlowResult) String() string {
	return fmt.Sprintf("%-8s %d run(s) x %d execs in %s: %.0f runs/s (%.0f execs/s); stage->result p50 %s p99 %s max %s; Valkey CPU %.1f µs/exec, Go CPU %.1f µs/exec, Go allocs %.0f (%.1f KiB)/exec",
		r.Scenario, r.Runs, r.Execs, r.Elapsed.Round(time.Millisecond), r.RunsPerSec, r.RunsPerSec*float64(r.Execs),
		r.P50.Round(10*time.Microsecond), r.P99.Round(10*time.Microsecond), r.Max.Round(10*time.Microsecond),
		float64(r.ValkeyCPU.Microseconds())/float64(max(r.Runs*r.Execs, 1)),
		float64(r.ProcessCPU.Microseconds())/float64(max(r.Runs*r.Execs, 1)),
		float64(r.Allocs)/float64(max(r.Runs*r.Execs, 1)), float64(r.AllocBytes)/1024/float64(max(r.Runs*r.Execs, 1)))
}

// chainSource is a flow of n execs, each waiting for the previous one and
// receiving its output.
func chainSource(n int) string {
	var b strings.Builder
	b.WriteString("package bench\n\nflow chain(json) -> json {\n  namespace \"bench\"\n")
	for i := range n {
		fmt.Fprintf(&b, "  exec s%d(json) -> json {}\n", i)
	}
	for i := 1; i < n; i++ {
		fmt.Fprintf(&b, "  s%d -> s%d\n", i-1, i)
	}
	fmt.Fprintf(&b, "  result s%d\n}\n", n-1)
	return b.String()
}

// diamondSource is a flow of a source, w execs that each wait for it, and a
// sink waiting for all of them.
func diamondSource(w int) string {
	var b strings.Builder
	b.WriteString("package bench\n\nflow diamond(json) -> json {\n  namespace \"bench\"\n  exec source(json) -> json {}\n")
	mids := make([]string, w)
	for i := range w {
		mids[i] = "m" + strconv.Itoa(i)
		fmt.Fprintf(&b, "  exec %s(json) -> json {}\n", mids[i])
	}
	b.WriteString("  exec sink(json) -> json { input m0 }\n")
	fmt.Fprintf(&b, "  source -> %s\n", strings.Join(mids, ", "))
	fmt.Fprintf(&b, "  %s -> sink\n", strings.Join(mids, ", "))
	b.WriteString("  result sink\n}\n")
	return b.String()
}

func compileFlow(name, src string) (*plan.Flow, error) {
	pkg, diags := compiler.Compile([]dsl.Source{{Name: name + ".ff", Data: []byte(src)}})
	if diags.HasErrors() {
		return nil, fmt.Errorf("compile %s: %w", name, diags.Err())
	}
	return &pkg.Flows[0], nil
}

// RunFlows runs every flow scenario, each on a fresh server, and writes a
// line per scenario to out.
func RunFlows(ctx context.Context, cfg FlowConfig, out io.Writer) ([]FlowResult, error) {
	cfg = cfg.withDefaults()
	fmt.Fprintf(out, "ffbench flows: chain %d runs x %d execs (%d in flight), diamond 1 -> %d -> 1, %d workers x %d slots, aof=%v, valkey over %s\n",
		cfg.Runs, cfg.Length, cfg.Producers, cfg.Width, cfg.Workers, cfg.Concurrency, cfg.AOF, transport(cfg.TCP))
	printLoad(out)
	var results []FlowResult
	for _, sc := range cfg.Scenarios {
		var f *plan.Flow
		var err error
		runs, producers := cfg.Runs, cfg.Producers
		switch sc {
		case "chain":
			f, err = compileFlow("chain", chainSource(cfg.Length))
		case "diamond":
			f, err = compileFlow("diamond", diamondSource(cfg.Width))
			runs, producers = 1, 1
		default:
			return results, fmt.Errorf("bench: unknown flow scenario %q (want chain or diamond)", sc)
		}
		if err != nil {
			return results, err
		}
		r, err := runFlowScenario(ctx, cfg, sc, f, runs, producers)
		if err != nil {
			return results, fmt.Errorf("bench: %s: %w", sc, err)
		}
		fmt.Fprintln(out, r)
		results = append(results, r)
	}
	return results, nil
}

func runFlowScenario(ctx context.Context, cfg FlowConfig, name string, f *plan.Flow, runs, producers int) (FlowResult, error) {
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	scfg := stackConfig{ValkeyBin: cfg.ValkeyBin, Partitions: cfg.Partitions, AOF: cfg.AOF, TCP: cfg.TCP}
	if cfg.Template {
		scfg.Templates = []*plan.Flow{f}
	}
	var reqs *requestCounts
	if cfg.Stats != nil {
		reqs = &requestCounts{next: pooledTransport(), by: map[string]int{}}
		scfg.Transport = reqs
	}
	st, err := startStack(ctx, scfg)
	if err != nil {
		return FlowResult{}, err
	}
	defer st.Close()
	c, vk := st.Client, st.Valkey

	// With Stats, every handler returns the time it ran; the next one (and
	// the producer, for the result) reads it from its input, to show where
	// a run's time goes hop by hop. Without, handlers return 1.
	var ran atomic.Int64
	var hops *hopTimes
	if cfg.Stats != nil {
		hops = newHopTimes()
	}
	step := func(_ context.Context, t *worker.Task) (json.RawMessage, error) {
		ran.Add(1)
		if hops == nil {
			return json.RawMessage(`1`), nil
		}
		now := time.Now().UnixNano()
		if prev := stampOf(t.Input()); prev > 0 {
			hops.add("input ready -> handler", time.Duration(now-prev))
		}
		return stamp(now), nil
	}
	wctx, stopWorkers := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for i := range cfg.Workers {
		w, err := worker.New(worker.Config{
			Client: c, Name: "bench-" + strconv.Itoa(i), Namespace: f.Namespace, Lanes: []string{f.Lane},
			Concurrency: cfg.Concurrency, LeaseTTL: 30 * time.Second, ClaimWait: 5 * time.Second, DrainTimeout: 5 * time.Second,
			Logger: st.Logger,
		})
		if err != nil {
			stopWorkers()
			return FlowResult{}, err
		}
		for _, x := range f.Execs {
			if err := w.Handle(x.Kind, step); err != nil {
				stopWorkers()
				return FlowResult{}, err
			}
		}
		wg.Go(func() { _ = w.Run(wctx) })
	}
	defer func() { stopWorkers(); wg.Wait() }()
	time.Sleep(200 * time.Millisecond) // let every worker park its first long-poll

	var prof *callProfile
	if cfg.Stats != nil {
		if prof, err = startCallProfile(ctx, vk); err != nil {
			return FlowResult{}, err
		}
	}
	cpu0, err := valkeyCPU(ctx, vk)
	if err != nil {
		return FlowResult{}, err
	}
	// Runs are staged as generated Stage<Flow> functions stage them: the
	// plan's JSON, encoded once, sent as it is.
	planJSON, err := json.Marshal(f)
	if err != nil {
		return FlowResult{}, fmt.Errorf("encode plan: %w", err)
	}
	// As a caller that wants the result does: the staging request waits
	// for the run to end, and Result answers from its answer.
	stageOpts := []client.StageOption{client.WithWait(time.Minute)}
	if cfg.SeparateResult {
		stageOpts = nil
	}
	proc0 := processCPU()
	var mem0 runtime.MemStats
	runtime.ReadMemStats(&mem0)
	lat := make([]time.Duration, runs)
	var next atomic.Int64
	errs := make([]error, producers)
	begin := time.Now()
	var pg sync.WaitGroup
	for p := range producers {
		pg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= runs {
					return
				}
				t0 := time.Now()
				var in any = i
				if hops != nil {
					in = stamp(t0.UnixNano())
				}
				var run *client.Run
				var err error
				if cfg.Template {
					run, err = c.StageTemplate(ctx, f.Name, in, stageOpts...)
				} else {
					run, err = c.StageFlowJSON(ctx, planJSON, in, stageOpts...)
				}
				var out json.RawMessage
				if err == nil && hops != nil && cfg.SeparateResult {
					hops.add("stage request", time.Since(t0))
				}
				if err == nil {
					out, err = run.Result(ctx)
				}
				if err != nil {
					errs[p] = fmt.Errorf("run %d: %w", i, err)
					return
				}
				lat[i] = time.Since(t0)
				if hops != nil {
					if last := stampOf(out); last > 0 {
						hops.add("last handler -> result", time.Duration(time.Now().UnixNano()-last))
					}
				}
			}
		})
	}
	pg.Wait()
	elapsed := time.Since(begin)
	procCPU := processCPU() - proc0
	var mem1 runtime.MemStats
	runtime.ReadMemStats(&mem1)
	if err := errors.Join(errs...); err != nil {
		return FlowResult{}, err
	}
	if got, want := ran.Load(), int64(runs*len(f.Execs)); got != want {
		return FlowResult{}, fmt.Errorf("%d handler calls, want %d", got, want)
	}
	cpu1, err := valkeyCPU(ctx, vk)
	if err != nil {
		return FlowResult{}, err
	}
	if cfg.Stats != nil {
		if st, err := vk.Do(ctx, vk.B().Info().Section("commandstats").Build()).ToString(); err == nil {
			fmt.Fprintf(cfg.Stats, "--- %s commandstats\n%s\n", name, st)
		}
		if err := prof.write(ctx, cfg.Stats, name, runs*len(f.Execs)); err != nil {
			return FlowResult{}, err
		}
		hops.write(cfg.Stats, name)
		reqs.write(cfg.Stats, name, runs*len(f.Execs))
	}
	slices.Sort(lat)
	return FlowResult{
		Scenario: name, Runs: runs, Execs: len(f.Execs), Elapsed: elapsed,
		RunsPerSec: float64(runs) / elapsed.Seconds(),
		P50:        lat[len(lat)/2], P99: lat[min(len(lat)-1, len(lat)*99/100)], Max: lat[len(lat)-1],
		ValkeyCPU: cpu1 - cpu0, ProcessCPU: procCPU,
		Allocs: mem1.Mallocs - mem0.Mallocs, AllocBytes: mem1.TotalAlloc - mem0.TotalAlloc,
	}, nil
}
