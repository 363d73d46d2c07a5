// Command worker runs the demo handlers of every example flow
// (examples/flows) against an ffrun server: one worker per namespace of the
// flows, with the lanes and capabilities they need. Start a server with
// `ffrun dev --flows examples/flows`, then `go run ./examples/worker`.
//
// Failures can be injected per exec ("flow.exec") with -fail (every attempt
// fails, retryably), -permanent and -hang (block until cancelled).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/flowfabric/ff/examples/flows"
	"github.com/flowfabric/ff/runtime/worker"
)

func main() { os.Exit(run(os.Args[1:], os.Stderr)) }

func run(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	fs.SetOutput(stderr)
	url := fs.String("url", envOr("FF_SERVER", "http://127.0.0.1:8080"), "ffrun base URL (env FF_SERVER, as the ffrun client commands)")
	token := fs.String("token", os.Getenv("FF_API_TOKEN"), "bearer token, the one ffrun was started with (env FF_API_TOKEN)")
	concurrency := fs.Int("concurrency", 8, "handlers running at once per namespace")
	fail := fs.String("fail", "", "comma-separated flow.exec names whose every attempt fails")
	permanent := fs.String("permanent", "", "comma-separated flow.exec names that fail permanently")
	hang := fs.String("hang", "", "comma-separated flow.exec names that block until cancelled")
	verbose := fs.Bool("v", false, "log every claim and report")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	level := slog.LevelInfo
	if *verbose {
		level = slog.LevelDebug
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	faults := flows.Faults{Fail: set(*fail), Permanent: set(*permanent), Hang: set(*hang)}
	unknown, err := faults.Unknown()
	if err != nil {
		fmt.Fprintf(stderr, "worker: %v\n", err)
		return 1
	}
	if len(unknown) > 0 {
		execs, _ := flows.Execs()
		fmt.Fprintf(stderr, "worker: -fail, -permanent and -hang take <flow>.<exec> names; no exec is named %s (there are: %s)\n",
			strings.Join(unknown, ", "), strings.Join(execs, ", "))
		return 2
	}
	demo := flows.NewDemo(faults)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	logger.Info("serving the example flows", "url", *url)
	err = flows.RunWorkers(ctx, worker.Config{URL: *url, Token: *token, Name: "examples", Concurrency: *concurrency, Logger: logger}, demo)
	if err != nil {
		fmt.Fprintf(stderr, "worker: %v\n", err)
		return 1
	}
	return 0
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// set turns "a,b" into {"a": true, "b": true}.
func set(list string) map[string]bool {
	m := map[string]bool{}
	for s := range strings.SplitSeq(list, ",") {
		if s = strings.TrimSpace(s); s != "" {
			m[s] = true
		}
	}
	return m
}
