package bench

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flowfabric/ff/runtime/wire"
	"github.com/flowfabric/ff/runtime/worker"
)

// CapsConfig is the capability-routing benchmark: Workers SDK instances
// split evenly over Sets capability sets ("cap-0" … "cap-<Sets-1>"), and
// Tasks executions each requiring one set, round robin, created as a
// backlog before the workers start. Unroutable executions require a
// capability no worker has: they must be parked, never granted.
type CapsConfig struct {
	Tasks       int
	Workers     int
	Sets        int
	Concurrency int // slots per worker instance
	Unroutable  int
	Partitions  int
	Timeout     time.Duration
	ValkeyBin   string
	AOF         bool // run the server with append-only persistence
	TCP         bool // reach Valkey over TCP loopback, not its Unix socket
}

func (c CapsConfig) withDefaults() CapsConfig {
	c.Tasks = cmp.Or(c.Tasks, 10_000)
	c.Workers = cmp.Or(c.Workers, 100)
	c.Sets = cmp.Or(c.Sets, 10)
	c.Concurrency = cmp.Or(c.Concurrency, 4)
	c.Timeout = cmp.Or(c.Timeout, 5*time.Minute)
	return c
}

// CapsResult is the outcome of the capability-routing benchmark.
type CapsResult struct {
	Tasks, Workers, Sets int
	Elapsed              time.Duration // first worker start → last task done
	TasksPerSec          float64
	Correct, Misrouted   int64 // grants whose worker covers the requirement, and the rest
	Parked               int   // unroutable executions found blocked/waiting_for_capable_worker
	Unroutable           int
}

// CorrectShare is the share of correctly routed grants.
func (r CapsResult) CorrectShare() float64 {
	n := r.Correct + r.Misrouted
	if n == 0 {
		return 0
	}
	return float64(r.Correct) / float64(n)
}

func (r CapsResult) String() string {
	return fmt.Sprintf("caps     %d tasks over %d capability sets, %d workers: %s, %.0f tasks/s; correctly routed %d of %d grants (%.2f%%); unroutable parked %d of %d",
		r.Tasks, r.Sets, r.Workers, r.Elapsed.Round(time.Millisecond), r.TasksPerSec,
		r.Correct, r.Correct+r.Misrouted, 100*r.CorrectShare(), r.Parked, r.Unroutable)
}

// RunCaps runs the capability-routing benchmark on a fresh Valkey child.
func RunCaps(ctx context.Context, cfg CapsConfig, out io.Writer) (CapsResult, error) {
	cfg = cfg.withDefaults()
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	fmt.Fprintf(out, "ffbench caps: %d tasks, %d workers x %d slots over %d capability sets, %d unroutable, aof=%v, valkey over %s\n",
		cfg.Tasks, cfg.Workers, cfg.Concurrency, cfg.Sets, cfg.Unroutable, cfg.AOF, transport(cfg.TCP))
	printLoad(out)
	st, err := startStack(ctx, stackConfig{ValkeyBin: cfg.ValkeyBin, Partitions: cfg.Partitions, AOF: cfg.AOF, TCP: cfg.TCP})
	if err != nil {
		return CapsResult{}, err
	}
	defer st.Close()
	c := st.Client

	// Backlog: task i requires set i % Sets; unroutable ones need "cap-none".
	var reqs []wire.CreateExecution
	for i := range cfg.Tasks {
		k := i % cfg.Sets
		reqs = append(reqs, wire.CreateExecution{Kind: "caps", Requires: []string{"cap-" + strconv.Itoa(k)},
			Input: json.RawMessage(`{"k":` + strconv.Itoa(k) + `}`)})
	}
	for range cfg.Unroutable {
		reqs = append(reqs, wire.CreateExecution{Kind: "caps", Requires: []string{"cap-none"}, Input: json.RawMessage(`{"k":-1}`)})
	}
	var unroutable []string
	for start := 0; start < len(reqs); start += 50 {
		res, err := c.CreateExecutions(ctx, reqs[start:min(start+50, len(reqs))])
		if err != nil {
			return CapsResult{}, fmt.Errorf("create backlog: %w", err)
		}
		for i, r := range res {
			if r.Error != nil {
				return CapsResult{}, fmt.Errorf("create backlog: %s", r.Error.Message)
			}
			if start+i >= cfg.Tasks {
				unroutable = append(unroutable, r.ID)
			}
		}
	}

	var correct, misrouted, done atomic.Int64
	allDone := make(chan struct{})
	var once sync.Once
	wctx, stopWorkers := context.WithCancel(ctx)
	var wg sync.WaitGroup
	begin := time.Now()
	for i := range cfg.Workers {
		k := i % cfg.Sets
		w, err := worker.New(worker.Config{Client: c, Name: fmt.Sprintf("caps-%d", i), Capabilities: []string{"cap-" + strconv.Itoa(k)},
			Concurrency: cfg.Concurrency, ClaimWait: 2 * time.Second, DrainTimeout: 5 * time.Second})
		if err != nil {
			stopWorkers()
			return CapsResult{}, err
		}
		if err := w.Handle("caps", func(_ context.Context, t *worker.Task) (json.RawMessage, error) {
			var in struct{ K int }
			if err := json.Unmarshal(t.Input(), &in); err != nil {
				return nil, worker.Permanent(err)
			}
			if in.K == k {
				correct.Add(1)
			} else {
				misrouted.Add(1)
			}
			if done.Add(1) == int64(cfg.Tasks) {
				once.Do(func() { close(allDone) })
			}
			return nil, nil
		}); err != nil {
			stopWorkers()
			return CapsResult{}, err
		}
		wg.Go(func() { _ = w.Run(wctx) })
	}
	select {
	case <-allDone:
	case <-ctx.Done():
		stopWorkers()
		wg.Wait()
		return CapsResult{}, fmt.Errorf("caps: %d of %d tasks done before the timeout", done.Load(), cfg.Tasks)
	}
	elapsed := time.Since(begin)
	time.Sleep(200 * time.Millisecond) // a grant of an unroutable task would show now
	stopWorkers()
	wg.Wait()
	r := CapsResult{Tasks: cfg.Tasks, Workers: cfg.Workers, Sets: cfg.Sets, Elapsed: elapsed,
		TasksPerSec: float64(cfg.Tasks) / elapsed.Seconds(), Correct: correct.Load(), Misrouted: misrouted.Load(),
		Unroutable: len(unroutable)}
	for _, id := range unroutable {
		ex, err := c.GetExecution(ctx, id)
		if err != nil {
			return r, err
		}
		if ex.State == "blocked" && ex.BlockingReason == "waiting_for_capable_worker" {
			r.Parked++
		}
	}
	fmt.Fprintln(out, r)
	if r.Misrouted > 0 || r.Parked != r.Unroutable {
		return r, fmt.Errorf("caps: %d misrouted grants, %d of %d unroutable parked", r.Misrouted, r.Parked, r.Unroutable)
	}
	return r, nil
}
