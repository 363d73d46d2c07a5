// Command ffbench benchmarks ffrun end to end over HTTP on a fresh
// Valkey/Redis child per variant. See spec/api.md ("Benchmark").
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/pprof"
	"strings"

	"github.com/flowfabric/ff/runtime/bench"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("ffbench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg bench.Config
	var variants string
	fs.IntVar(&cfg.Tasks, "tasks", 10_000, "tasks per variant")
	fs.IntVar(&cfg.Producers, "producers", 16, "concurrent producers")
	fs.IntVar(&cfg.Workers, "workers", 1, "worker SDK instances")
	fs.IntVar(&cfg.Concurrency, "concurrency", 16, "slots per worker instance")
	fs.IntVar(&cfg.Batch, "batch", 50, "tasks per create request in the backlog variant")
	fs.IntVar(&cfg.Payload, "payload", 100, "payload bytes per task")
	fs.IntVar(&cfg.Partitions, "partitions", 0, "flow partitions (0 = default)")
	fs.IntVar(&cfg.IdleRate, "idle-rate", 2000, "idle variant: total submissions per second")
	fs.BoolVar(&cfg.AOF, "aof", false, "run Valkey with append-only persistence")
	fs.BoolVar(&cfg.TCP, "tcp", false, "ffrun reaches Valkey over TCP loopback instead of its Unix socket (as with a remote Valkey)")
	fs.StringVar(&cfg.ValkeyBin, "valkey-bin", "", "server program (default valkey-server or redis-server on PATH)")
	cpuprofile := fs.String("cpuprofile", "", "write a Go CPU profile of the run to this file")
	memprofile := fs.String("memprofile", "", "write a Go heap profile (allocations since the start) to this file at the end")
	stats := fs.Bool("stats", false, "print Valkey INFO commandstats after each variant")
	fs.StringVar(&variants, "variants", "backlog,idle", "comma-separated variants: backlog, idle")
	scenario := fs.String("scenario", "", "flow benchmark instead of the task variants: chain, diamond or flows (both); caps: capability routing")
	var fc bench.FlowConfig
	fs.IntVar(&fc.Runs, "runs", 100, "chain: runs in total")
	fs.IntVar(&fc.Length, "length", 10, "chain: execs per run")
	fs.IntVar(&fc.Width, "width", 1000, "diamond: execs between the source and the sink")
	fs.BoolVar(&fc.SeparateResult, "separate-result", false, "chain: stage without waiting, then ask for the result in a second request (default: the staging request waits for the run)")
	fs.BoolVar(&fc.Template, "template", false, "flows: stage runs by template name (server-side plan) instead of sending the plan each time")
	capsWorkers := fs.Int("caps-workers", 100, "caps: worker SDK instances")
	capsSets := fs.Int("caps-sets", 10, "caps: capability sets the workers and tasks are spread over")
	capsUnroutable := fs.Int("caps-unroutable", 10, "caps: tasks requiring a capability no worker has (must be parked)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	cfg.Variants = strings.Split(variants, ",")
	if *stats {
		cfg.Stats = stderr
	}
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			fmt.Fprintln(stderr, "ffbench:", err)
			return 1
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(stderr, "ffbench:", err)
			return 1
		}
		defer pprof.StopCPUProfile()
	}
	if *memprofile != "" {
		defer func() {
			if err := writeHeapProfile(*memprofile); err != nil {
				fmt.Fprintln(stderr, "ffbench:", err)
			}
		}()
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if *scenario == "caps" {
		cc := bench.CapsConfig{Tasks: cfg.Tasks, Workers: *capsWorkers, Sets: *capsSets, Concurrency: cfg.Concurrency,
			Unroutable: *capsUnroutable, Partitions: cfg.Partitions, ValkeyBin: cfg.ValkeyBin, AOF: cfg.AOF, TCP: cfg.TCP}
		if _, err := bench.RunCaps(ctx, cc, stdout); err != nil {
			fmt.Fprintln(stderr, "ffbench:", err)
			return 1
		}
		return 0
	}
	if *scenario != "" {
		fc.Scenarios = strings.Split(*scenario, ",")
		if *scenario == "flows" {
			fc.Scenarios = nil // both
		}
		fc.Stats = cfg.Stats
		fc.Producers, fc.Workers, fc.Concurrency, fc.Partitions, fc.ValkeyBin, fc.AOF, fc.TCP = cfg.Producers, cfg.Workers, cfg.Concurrency, cfg.Partitions, cfg.ValkeyBin, cfg.AOF, cfg.TCP
		if _, err := bench.RunFlows(ctx, fc, stdout); err != nil {
			fmt.Fprintln(stderr, "ffbench:", err)
			return 1
		}
		return 0
	}
	if _, err := bench.Run(ctx, cfg, stdout); err != nil {
		fmt.Fprintln(stderr, "ffbench:", err)
		return 1
	}
	return 0
}

// writeHeapProfile writes the allocations made so far (pprof's alloc_space
// and alloc_objects) to path.
func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		f.Close()
		return fmt.Errorf("write heap profile: %w", err)
	}
	return f.Close()
}
