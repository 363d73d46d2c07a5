// Package bench measures ffrun end to end: producers submit no-op tasks
// over HTTP, workers built on the worker SDK claim and complete them over
// HTTP, and the server runs in-process on a fresh Valkey/Redis child. It
// reports throughput, enqueue→start latency and Valkey CPU per task.
// cmd/ffbench is its command line.
package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/valkey-io/valkey-go"

	"github.com/flowfabric/ff/runtime/client"
	"github.com/flowfabric/ff/runtime/wire"
	"github.com/flowfabric/ff/runtime/worker"
)

// Config is one benchmark run.
type Config struct {
	Tasks       int           // tasks per variant
	Producers   int           // concurrent producers
	Workers     int           // worker SDK instances
	Concurrency int           // slots per worker instance
	Batch       int           // tasks per create request in the backlog variant (1 = single creates)
	Payload     int           // payload bytes per task
	Partitions  int           // flow partitions (0 = store default)
	Variants    []string      // "backlog", "idle"
	IdleRate    int           // idle variant: total submissions per second (paced, single creates)
	Timeout     time.Duration // per variant
	AOF         bool          // run the server with append-only persistence
	TCP         bool          // reach Valkey over TCP loopback, not its Unix socket
	Stats       io.Writer     // when set, receives Valkey's INFO commandstats after each variant
	ValkeyBin   string
}

// Defaults.
func (c Config) withDefaults() Config {
	if c.Tasks <= 0 {
		c.Tasks = 10_000
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
	if c.Batch <= 0 {
		c.Batch = 50
	}
	if c.Payload <= 0 {
		c.Payload = 100
	}
	if c.IdleRate <= 0 {
		c.IdleRate = 2000
	}
	if len(c.Variants) == 0 {
		c.Variants = []string{"backlog", "idle"}
	}
	if c.Timeout <= 0 {
		c.Timeout = 2 * time.Minute
	}
	return c
}

// Result is what one variant measured.
type Result struct {
	Variant      string
	ProcessCPU   time.Duration // user+sys of this process (server, workers, producers) during the run
	Tasks        int
	Elapsed      time.Duration
	TasksPerSec  float64
	P50, P99     time.Duration // enqueue→start
	ValkeyCPU    time.Duration // user+sys of the Valkey server during the run
	ValkeyCPUPer time.Duration // per task
}

func (r Result) String() string {
	return fmt.Sprintf("%-8s tasks=%d elapsed=%s tasks/s=%.0f enqueue→start p50=%s p99=%s valkey_cpu=%s (%.1f µs/task) go_cpu=%s (%.1f µs/task)",
		r.Variant, r.Tasks, r.Elapsed.Round(time.Millisecond), r.TasksPerSec,
		r.P50.Round(10*time.Microsecond), r.P99.Round(10*time.Microsecond),
		r.ValkeyCPU.Round(time.Millisecond), float64(r.ValkeyCPUPer.Nanoseconds())/1000,
		r.ProcessCPU.Round(time.Millisecond), float64(r.ProcessCPU.Nanoseconds())/1000/float64(max(r.Tasks, 1)))
}

// Run runs every variant, each on a fresh server, and writes a line per
// variant to out.
func Run(ctx context.Context, cfg Config, out io.Writer) ([]Result, error) {
	cfg = cfg.withDefaults()
	if cfg.Payload < 16 {
		return nil, errors.New("bench: payload must be at least 16 bytes (it carries the enqueue time)")
	}
	fmt.Fprintf(out, "ffbench: %d tasks, %d producers, %d workers x %d slots, %d-byte payload, backlog batch %d, idle rate %d/s, aof=%v, valkey over %s\n",
		cfg.Tasks, cfg.Producers, cfg.Workers, cfg.Concurrency, cfg.Payload, cfg.Batch, cfg.IdleRate, cfg.AOF, transport(cfg.TCP))
	printLoad(out)
	var results []Result
	for _, v := range cfg.Variants {
		if v != "backlog" && v != "idle" {
			return results, fmt.Errorf("bench: unknown variant %q (want backlog or idle)", v)
		}
		r, err := runVariant(ctx, cfg, v)
		if err != nil {
			return results, fmt.Errorf("bench: %s: %w", v, err)
		}
		fmt.Fprintln(out, r)
		results = append(results, r)
	}
	return results, nil
}

func runVariant(ctx context.Context, cfg Config, variant string) (Result, error) {
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	st, err := startStack(ctx, stackConfig{ValkeyBin: cfg.ValkeyBin, Partitions: cfg.Partitions, AOF: cfg.AOF, TCP: cfg.TCP})
	if err != nil {
		return Result{}, err
	}
	defer st.Close()
	c, vk := st.Client, st.Valkey

	// Workers.
	lat := make([]int64, cfg.Tasks)
	var started, recorded atomic.Int64
	var dup atomic.Int64
	allRecorded := make(chan struct{})
	onReported := func(_ string, err error) {
		if err == nil && recorded.Add(1) == int64(cfg.Tasks) {
			close(allRecorded)
		}
	}
	seen := make([]atomic.Bool, cfg.Tasks)
	done := make(chan struct{})
	handler := func(_ context.Context, t *worker.Task) (json.RawMessage, error) {
		now := time.Now().UnixNano()
		var p struct {
			I int    `json:"i"`
			T int64  `json:"t"`
			P string `json:"p"`
		}
		if err := json.Unmarshal(t.Input(), &p); err != nil {
			return nil, worker.Permanent(err)
		}
		if p.I < 0 || p.I >= len(lat) {
			return nil, worker.Permanent(fmt.Errorf("task index %d", p.I))
		}
		if seen[p.I].Swap(true) {
			dup.Add(1)
			return nil, nil
		}
		lat[p.I] = now - p.T
		if started.Add(1) == int64(cfg.Tasks) {
			close(done)
		}
		return nil, nil
	}
	wctx, stopWorkers := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for i := range cfg.Workers {
		w, err := worker.New(worker.Config{
			Client: c, Name: "bench-" + strconv.Itoa(i), Concurrency: cfg.Concurrency, OnReported: onReported,
			LeaseTTL: 30 * time.Second, ClaimWait: 5 * time.Second, DrainTimeout: 5 * time.Second,
			Logger: st.Logger,
		})
		if err != nil {
			stopWorkers()
			return Result{}, err
		}
		if err := w.Handle("noop", handler); err != nil {
			stopWorkers()
			return Result{}, err
		}
		wg.Go(func() { _ = w.Run(wctx) })
	}
	defer func() { stopWorkers(); wg.Wait() }()
	// Let every worker park its first long-poll.
	time.Sleep(200 * time.Millisecond)

	var prof *callProfile
	if cfg.Stats != nil {
		if prof, err = startCallProfile(ctx, vk); err != nil {
			return Result{}, err
		}
	}
	cpu0, err := valkeyCPU(ctx, vk)
	if err != nil {
		return Result{}, err
	}
	batch, every := cfg.Batch, time.Duration(0)
	if variant == "idle" {
		batch = 1
		every = time.Duration(cfg.Producers) * time.Second / time.Duration(cfg.IdleRate)
	}
	begin := time.Now()
	proc0 := processCPU()
	if err := produce(ctx, c, cfg, batch, every); err != nil {
		return Result{}, err
	}
	select {
	case <-done:
	case <-ctx.Done():
		return Result{}, fmt.Errorf("only %d of %d tasks started before the timeout", started.Load(), cfg.Tasks)
	}
	// The run ends when the server has recorded every completion.
	select {
	case <-allRecorded:
	case <-ctx.Done():
		return Result{}, fmt.Errorf("only %d of %d completions recorded before the timeout", recorded.Load(), cfg.Tasks)
	}
	elapsed := time.Since(begin)
	procCPU := processCPU() - proc0
	cpu1, err := valkeyCPU(ctx, vk)
	if err != nil {
		return Result{}, err
	}
	if d := dup.Load(); d > 0 {
		return Result{}, fmt.Errorf("%d tasks ran twice", d)
	}
	slices.Sort(lat)
	r := Result{
		Variant:     variant,
		Tasks:       cfg.Tasks,
		Elapsed:     elapsed,
		TasksPerSec: float64(cfg.Tasks) / elapsed.Seconds(),
		P50:         time.Duration(lat[len(lat)/2]),
		P99:         time.Duration(lat[len(lat)*99/100]),
		ValkeyCPU:   cpu1 - cpu0,
		ProcessCPU:  procCPU,
	}
	r.ValkeyCPUPer = r.ValkeyCPU / time.Duration(cfg.Tasks)
	if cfg.Stats != nil {
		if st, err := vk.Do(ctx, vk.B().Info().Section("commandstats").Build()).ToString(); err == nil {
			fmt.Fprintf(cfg.Stats, "--- %s commandstats\n%s\n", variant, st)
		}
		if err := prof.write(ctx, cfg.Stats, variant, cfg.Tasks); err != nil {
			return Result{}, err
		}
	}
	return r, nil
}

// produce submits cfg.Tasks tasks from cfg.Producers goroutines, batch per
// request; with every > 0 each producer submits at most once per every.
func produce(ctx context.Context, c *client.Client, cfg Config, batch int, every time.Duration) error {
	var next atomic.Int64
	pad := strings.Repeat("x", cfg.Payload)
	var wg sync.WaitGroup
	errs := make(chan error, cfg.Producers)
	for range cfg.Producers {
		wg.Go(func() {
			reqs := make([]wire.CreateExecution, 0, batch)
			var tick <-chan time.Time
			if every > 0 {
				t := time.NewTicker(every)
				defer t.Stop()
				tick = t.C
			}
			for {
				if tick != nil {
					select {
					case <-tick:
					case <-ctx.Done():
						errs <- ctx.Err()
						return
					}
				}
				lo := int(next.Add(int64(batch))) - batch
				if lo >= cfg.Tasks {
					return
				}
				hi := min(lo+batch, cfg.Tasks)
				reqs = reqs[:0]
				for i := lo; i < hi; i++ {
					head := fmt.Sprintf(`{"i":%d,"t":%d,"p":"`, i, time.Now().UnixNano())
					in := head + pad[:max(0, cfg.Payload-len(head)-2)] + `"}`
					reqs = append(reqs, wire.CreateExecution{Kind: "noop", Input: json.RawMessage(in)})
				}
				var err error
				if len(reqs) == 1 {
					_, _, err = c.CreateExecution(ctx, reqs[0])
				} else {
					var res []wire.CreateBatchResult
					res, err = c.CreateExecutions(ctx, reqs)
					for _, r := range res {
						if r.Error != nil && err == nil {
							err = fmt.Errorf("create: %s: %s", r.Error.Code, r.Error.Message)
						}
					}
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// valkeyCPU reads used_cpu_sys + used_cpu_user from INFO cpu.
func valkeyCPU(ctx context.Context, vk valkey.Client) (time.Duration, error) {
	info, err := vk.Do(ctx, vk.B().Info().Section("cpu").Build()).ToString()
	if err != nil {
		return 0, fmt.Errorf("INFO cpu: %w", err)
	}
	var total float64
	for _, line := range strings.Split(info, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || (k != "used_cpu_sys" && k != "used_cpu_user") {
			continue
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return 0, fmt.Errorf("INFO cpu %s=%q: %w", k, v, err)
		}
		total += f
	}
	return time.Duration(total * float64(time.Second)), nil
}

// processCPU returns the user+sys CPU time of this process so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
