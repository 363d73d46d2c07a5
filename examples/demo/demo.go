// Package demo is the logic of cmd/ffdemo (`make demo`): it runs the
// example flows end to end on a fresh machine. It starts an in-process
// `ffrun dev --flows examples/flows` (with its own Valkey/Redis child in a
// temporary directory), the example workers of examples/flows in process,
// stages the media pipeline through the generated StagePublish and a
// nightly ETL run with an injected failure through its template, prints
// every member's state changes and the results, then stops everything.
package demo

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/flowfabric/ff/examples/flows"
	"github.com/flowfabric/ff/runtime/client"
	"github.com/flowfabric/ff/runtime/ffctl"
	"github.com/flowfabric/ff/runtime/ffrun"
	"github.com/flowfabric/ff/runtime/wire"
	"github.com/flowfabric/ff/runtime/worker"
)

// Main runs the demo with args (without the program name), stopping early
// on SIGINT or SIGTERM, and returns the exit status.
func Main(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := Run(ctx, args, stdout, stderr)
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errUsage):
		fmt.Fprintln(stderr, "ffdemo:", err)
		return 2
	}
	fmt.Fprintln(stderr, "ffdemo:", err)
	return 1
}

var errUsage = errors.New("usage")

// Config is what the flags set.
type Config struct {
	Flows   string        // directory of the example .ff files
	Data    string        // Valkey data directory; "" = a temporary one, removed at the end
	Delay   time.Duration // how long each demo handler works, so progress is visible
	Timeout time.Duration // the whole demo
	Verbose bool          // ffrun and worker logs on stderr
}

// Run runs the demo.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("ffdemo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg Config
	fs.StringVar(&cfg.Flows, "flows", "examples/flows", "directory of the example .ff files (served as templates)")
	fs.StringVar(&cfg.Data, "data", "", "Valkey data directory (default: a temporary directory, removed at the end)")
	fs.DurationVar(&cfg.Delay, "delay", 150*time.Millisecond, "how long each demo handler works")
	fs.DurationVar(&cfg.Timeout, "timeout", time.Minute, "give up after this long")
	fs.BoolVar(&cfg.Verbose, "v", false, "show ffrun and worker logs")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected arguments %q", errUsage, fs.Args())
	}
	return RunConfig(ctx, cfg, stdout, stderr)
}

// syncBuffer collects logs from several goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// RunConfig runs the demo with cfg.
func RunConfig(ctx context.Context, cfg Config, stdout, stderr io.Writer) (err error) {
	if cfg.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cfg.Timeout)
		defer cancel()
	}
	if _, err := os.Stat(cfg.Flows); err != nil {
		return fmt.Errorf("flows directory: %w (run the demo from the repository root: make demo)", err)
	}
	if cfg.Data == "" {
		dir, err := os.MkdirTemp("", "ffdemo-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		cfg.Data = filepath.Join(dir, "valkey")
	}
	// Logs go to stderr with -v; otherwise they are kept and shown only
	// when the demo fails.
	var logs io.Writer = stderr
	var kept *syncBuffer
	if !cfg.Verbose {
		kept = &syncBuffer{}
		logs = kept
		defer func() {
			if err != nil && kept.String() != "" {
				fmt.Fprintf(stderr, "--- logs ---\n%s", kept)
			}
		}()
	}
	token := randomToken()

	// ffrun dev --flows, in process.
	srvCtx, stopServer := context.WithCancel(context.WithoutCancel(ctx))
	defer stopServer()
	type addrs struct{ api, valkey string }
	listening := make(chan addrs, 1)
	served := make(chan error, 1)
	level := "warn"
	if cfg.Verbose {
		level = "info"
	}
	go func() {
		served <- ffrun.Run(srvCtx, []string{"dev", "--data", cfg.Data, "--listen", "127.0.0.1:0", "--flows", cfg.Flows, "--log-level", level},
			ffrun.Env{
				Stdout: logs, Stderr: logs,
				Getenv:   func(k string) string { return map[string]string{"FF_API_TOKEN": token}[k] },
				OnListen: func(api, vk string) { listening <- addrs{api, vk} },
			})
	}()
	var at addrs
	select {
	case at = <-listening:
	case err := <-served:
		return fmt.Errorf("ffrun dev did not start: %w", err)
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() {
		stopServer()
		if serr := <-served; serr != nil && err == nil {
			err = fmt.Errorf("ffrun dev: %w", serr)
		}
	}()
	url := "http://" + at.api
	c, err := client.New(url, client.WithToken(token))
	if err != nil {
		return err
	}
	templates, err := c.Templates(ctx)
	if err != nil {
		return err
	}
	names := make([]string, len(templates))
	for i, t := range templates {
		names[i] = t.Name
	}
	fmt.Fprintf(stdout, "ffrun dev on %s (own Valkey child on %s), flows from %s\n", url, at.valkey, cfg.Flows)
	fmt.Fprintf(stdout, "templates: %s\n", strings.Join(names, ", "))

	// The example workers, in process: one per namespace of the flows.
	demo := flows.NewDemo(flows.Faults{
		Permanent: map[string]bool{"nightly_etl.transform": true},
		Delay:     cfg.Delay,
	})
	wctx, stopWorkers := context.WithCancel(context.WithoutCancel(ctx))
	defer stopWorkers()
	workersDone := make(chan error, 1)
	go func() {
		workersDone <- flows.RunWorkers(wctx, worker.Config{
			URL: url, Token: token, Name: "demo", Concurrency: 8, ClaimWait: 5 * time.Second, DrainTimeout: 5 * time.Second,
			Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn})),
		}, demo)
	}()
	defer func() {
		stopWorkers()
		if werr := <-workersDone; werr != nil && err == nil {
			err = fmt.Errorf("workers: %w", werr)
		}
	}()
	var ns []string
	for _, w := range flows.WorkerConfigs(worker.Config{}) {
		ns = append(ns, w.Namespace)
	}
	fmt.Fprintf(stdout, "workers: one per namespace (%s), each handler takes %s\n", strings.Join(ns, ", "), cfg.Delay)

	// 1. The media pipeline, staged through the generated code.
	clip := flows.Clip{
		ID: "clip-42", URL: "s3://raw/clip-42.mov", Seconds: 42, Tags: []string{"cats"},
		Labels: map[string]string{"codec": "prores"},
		Taken:  time.Date(2026, 11, 20, 9, 30, 0, 0, time.UTC), TTL: 30 * 24 * time.Hour,
	}
	fmt.Fprintf(stdout, "\n1. media pipeline: StagePublish(clip %s)\n", clip.ID)
	pub, err := flows.StagePublish(ctx, c, clip)
	if err != nil {
		return err
	}
	if err := follow(ctx, stdout, c, pub.Run); err != nil {
		return err
	}
	out, err := pub.Result(ctx)
	if err != nil {
		return fmt.Errorf("media pipeline: %w", err)
	}
	res, _ := json.MarshalIndent(out, "   ", "  ")
	fmt.Fprintf(stdout, "   result (Clip): %s\n", res)

	// 2. The nightly ETL through its template, with transform failing.
	fmt.Fprintf(stdout, "\n2. nightly ETL, transform fails (injected): POST /v1/templates/nightly_etl/runs\n")
	etl, err := c.StageTemplate(ctx, "nightly_etl", flows.Batch{Source: "clickstream", Day: "2026-11-20"})
	if err != nil {
		return err
	}
	if err := follow(ctx, stdout, c, etl); err != nil {
		return err
	}
	_, err = etl.Result(ctx)
	var re *client.RunError
	if !errors.As(err, &re) {
		return fmt.Errorf("nightly ETL: want a failed run, got %v", err)
	}
	fmt.Fprintf(stdout, "   run %s: %s\n", re.State, re.Message)
	notified := demo.Notifications()
	fmt.Fprintf(stdout, "   on-call notified: %s\n", strings.Join(notified, "; "))
	if re.State != wire.RunFailed || !slices.Equal(re.FailedExecs(), []string{"transform"}) || len(notified) != 1 {
		return fmt.Errorf("nightly ETL: want a failed run with transform failed and on-call notified once, got %v (failed %v, notified %q)",
			re, re.FailedExecs(), notified)
	}
	fmt.Fprintf(stdout, "\ndone: both runs behaved as their .ff files say; stopping workers, ffrun and Valkey.\n")
	return nil
}

// follow prints every member's state changes until the run ends.
func follow(ctx context.Context, w io.Writer, c *client.Client, run *client.Run) error {
	fmt.Fprintf(w, "   run %s\n", run.ID)
	_, err := ffctl.Follow(ctx, w, c, run.ID, ffctl.FollowOptions{Interval: 5 * time.Millisecond, Indent: "   "})
	return err
}

func randomToken() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
