package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/fleetbench/fleetbench/internal/flags"
	"github.com/fleetbench/fleetbench/pkg/client"
	"github.com/fleetbench/fleetbench/pkg/ready"
)

// probeCmd answers "is /v1/models a sound readiness probe?" for one
// startup of a server: start it right after (or before) the server, and it
// reports when /health, /health/ready, /v1/models and a real completion
// first succeeded.
func (c *cli) probeCmd() *cobra.Command {
	var (
		target, model, endpoint, apiKeyEnv  string
		timeout, interval, grace, reqTimout time.Duration
		asJSON                              bool
	)
	endpoint, apiKeyEnv = flags.DefaultEndpoint, flags.DefaultAPIKeyEnv
	cmd := &cobra.Command{
		Use:   "probe --target URL [flags]",
		Short: "measure which readiness signal of a starting server can be trusted",
		Long: "Polls /health, /health/ready, /v1/models and a one-token completion from a server's\n" +
			"start and reports when each first succeeded and whether /v1/models said ready before\n" +
			"the model could serve. A --model the server does not serve (its completions answer 404\n" +
			"while /v1/models lists other models) ends the probe at once with one line.",
		Example: "  fleetbench probe --target http://127.0.0.1:8000 --timeout 10m --json",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if target == "" {
				return usagef("--target URL is required")
			}
			if interval <= 0 || timeout <= 0 || reqTimout <= 0 || grace < 0 {
				return usagef("--interval, --timeout and --request-timeout must be positive, --grace not negative")
			}
			rep, err := ready.Probe(cmd.Context(), ready.ProbeConfig{
				Client:  client.Config{BaseURL: target, Model: model, Endpoint: endpoint, APIKeyEnv: apiKeyEnv},
				Timeout: timeout, Interval: interval, Grace: grace, RequestTimeout: reqTimout,
			}, c.logger)
			if rep == nil {
				return err
			}
			write := rep.WriteText
			if asJSON {
				write = rep.WriteJSON
			}
			if werr := write(c.stdout); werr != nil {
				return werr
			}
			if err != nil {
				return err
			}
			if !rep.Served() {
				return fmt.Errorf("the model never served a completion within %s", timeout)
			}
			return nil
		},
	}
	fs := cmd.Flags()
	flags.Target(fs, &target, &model, &endpoint, &apiKeyEnv)
	fs.Lookup("target").Usage = "base URL of the server to probe (required); start the probe before the server is up"
	fs.Lookup("model").Usage = "model to ask for (default: the first model /v1/models lists)"
	fs.DurationVar(&timeout, "timeout", ready.DefaultProbeTimeout, "give up after this long")
	fs.DurationVar(&interval, "interval", ready.DefaultProbeInterval, "time between polls of each signal (the resolution of every figure)")
	fs.DurationVar(&grace, "grace", ready.DefaultProbeGrace, "keep polling the other signals this long after the model serves")
	fs.DurationVar(&reqTimout, "request-timeout", 30*time.Second, "bound on one completion request")
	fs.BoolVar(&asJSON, "json", false, "print JSON instead of a table")
	return cmd
}
