// Command stage starts one run of an example flow through the generated
// Stage<Flow> functions of examples/flows and prints its result: the Go
// client side of `ffrun dev --flows examples/flows` plus
// `go run ./examples/worker`.
//
//	go run ./examples/stage -flow publish
//	go run ./examples/stage -flow nightly_etl -source corrupt-feed
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/flowfabric/ff/examples/flows"
	"github.com/flowfabric/ff/runtime/client"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("stage", flag.ContinueOnError)
	fs.SetOutput(stderr)
	url := fs.String("url", envOr("FF_SERVER", "http://127.0.0.1:8080"), "ffrun base URL (env FF_SERVER, as the ffrun client commands)")
	token := fs.String("token", os.Getenv("FF_API_TOKEN"), "bearer token (env FF_API_TOKEN)")
	flow := fs.String("flow", "publish", "flow to run: publish, ask, nightly_etl or fulfil_order")
	source := fs.String("source", "clickstream", "nightly_etl: the batch source (a name containing \"corrupt\" fails validation)")
	key := fs.String("key", "", "idempotency key (a repeat returns the first run)")
	timeout := fs.Duration("timeout", time.Minute, "how long to wait for the result")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	c, err := client.New(*url, client.WithToken(*token))
	if err != nil {
		fmt.Fprintln(stderr, "stage:", err)
		return 2
	}
	var opts []client.StageOption
	if *key != "" {
		opts = append(opts, client.WithIdempotencyKey(*key))
	}
	result, runID, err := stageAndWait(ctx, c, *flow, *source, opts)
	if runID != "" {
		fmt.Fprintf(stdout, "run %s\n", runID)
	}
	var re *client.RunError
	switch {
	case errors.As(err, &re):
		fmt.Fprintf(stdout, "%s: %s\n", re.State, re.Message)
		return 1
	case err != nil:
		fmt.Fprintln(stderr, "stage:", err)
		return 1
	}
	out, _ := json.MarshalIndent(result, "", "  ")
	fmt.Fprintf(stdout, "succeeded: %s\n", out)
	return 0
}

// stageAndWait stages a run of the named flow with a sample input and
// waits for its typed result.
func stageAndWait(ctx context.Context, c *client.Client, flow, source string, opts []client.StageOption) (any, string, error) {
	switch flow {
	case "publish":
		run, err := flows.StagePublish(ctx, c, flows.Clip{
			ID: "clip-7", URL: "s3://raw/clip-7.mov", Seconds: 12, Tags: []string{"dogs"},
			Labels: map[string]string{"codec": "prores"}, Taken: time.Now().UTC().Truncate(time.Second), TTL: 24 * time.Hour,
		}, opts...)
		if err != nil {
			return nil, "", err
		}
		out, err := run.Result(ctx)
		return out, run.ID, err
	case "ask":
		run, err := flows.StageAsk(ctx, c, flows.Question{ID: "q-7", Tenant: "acme", Prompt: "Why is the sky blue?", MaxTokens: 256}, opts...)
		if err != nil {
			return nil, "", err
		}
		out, err := run.Result(ctx)
		return out, run.ID, err
	case "nightly_etl":
		run, err := flows.StageNightlyETL(ctx, c, flows.Batch{Source: source, Day: time.Now().UTC().Format(time.DateOnly)}, opts...)
		if err != nil {
			return nil, "", err
		}
		out, err := run.Result(ctx)
		return out, run.ID, err
	case "fulfil_order":
		run, err := flows.StageFulfilOrder(ctx, c, flows.Order{
			ID: "o-7", CustomerID: "c-7", Items: []flows.LineItem{{SKU: "MUG-01", Quantity: 1, PriceCents: 1250}},
			TotalCents: 1250, Currency: "EUR", CardToken: "tok_visa",
			Address: flows.Address{Name: "Ada", Street: "Hauptstr. 1", City: "Berlin", PostalCode: "10115", Country: "DE"},
			Placed:  time.Now().UTC().Truncate(time.Second),
		}, opts...)
		if err != nil {
			return nil, "", err
		}
		out, err := run.Result(ctx)
		return out, run.ID, err
	}
	return nil, "", fmt.Errorf("unknown flow %q: want publish, ask, nightly_etl or fulfil_order", flow)
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
