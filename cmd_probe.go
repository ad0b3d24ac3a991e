package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/fleetbench/fleetbench/pkg/client"
	"github.com/fleetbench/fleetbench/pkg/ready"
)

// cmdProbe answers "is /v1/models a sound readiness probe?" for one
// startup of a server: start it right after (or before) the server, and it
// reports when /health, /health/ready, /v1/models and a real completion
// first succeeded.
func (c *cli) cmdProbe(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("probe", flag.ContinueOnError)
	fs.SetOutput(c.stderr)
	target := fs.String("target", "", "base URL of the server to probe (required); start the probe before the server is up")
	model := fs.String("model", "", "model to ask for (default: the first model /v1/models lists)")
	endpoint := fs.String("endpoint", client.EndpointChat, "endpoint of the completion probe: chat or completions")
	apiKeyEnv := fs.String("api-key-env", "", "name of the environment variable holding the API key")
	timeout := fs.Duration("timeout", ready.DefaultProbeTimeout, "give up after this long")
	interval := fs.Duration("interval", ready.DefaultProbeInterval, "time between polls of each signal (the resolution of every figure)")
	grace := fs.Duration("grace", ready.DefaultProbeGrace, "keep polling the other signals this long after the model serves")
	reqTimeout := fs.Duration("request-timeout", 30*time.Second, "bound on one completion request")
	asJSON := fs.Bool("json", false, "print JSON instead of a table")
	fs.Usage = func() {
		fmt.Fprintf(c.stderr, "usage: fleetbench probe --target URL [--model M] [--timeout D] [--interval D] [--json]\n\n")
		fmt.Fprintf(c.stderr, "Polls /health, /health/ready, /v1/models and a one-token completion from a server's\n")
		fmt.Fprintf(c.stderr, "start and reports when each first succeeded and whether /v1/models said ready before\n")
		fmt.Fprintf(c.stderr, "the model could serve.\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return errUsage
	}
	if *target == "" || fs.NArg() > 0 {
		fmt.Fprintln(c.stderr, "fleetbench probe: --target URL is required and no arguments are taken")
		return errUsage
	}
	if *interval <= 0 || *timeout <= 0 || *reqTimeout <= 0 || *grace < 0 {
		fmt.Fprintln(c.stderr, "fleetbench probe: --interval, --timeout and --request-timeout must be positive, --grace not negative")
		return errUsage
	}
	rep, err := ready.Probe(ctx, ready.ProbeConfig{
		Client: client.Config{
			BaseURL:   *target,
			Model:     *model,
			Endpoint:  *endpoint,
			APIKeyEnv: *apiKeyEnv,
		},
		Timeout:        *timeout,
		Interval:       *interval,
		Grace:          *grace,
		RequestTimeout: *reqTimeout,
	}, c.logger)
	if rep == nil {
		return err
	}
	if *asJSON {
		if werr := rep.WriteJSON(c.stdout); werr != nil {
			return werr
		}
	} else if werr := rep.WriteText(c.stdout); werr != nil {
		return werr
	}
	if err != nil {
		return err
	}
	if !rep.Served() {
		return fmt.Errorf("the model never served a completion within %s", *timeout)
	}
	return nil
}
