package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/hashicorp/go-hclog"

	"github.com/fleetbench/fleetbench/agent"
	"github.com/fleetbench/fleetbench/pkg/client"
)

func (c *cli) cmdAgent(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("agent", flag.ContinueOnError)
	fs.SetOutput(c.stderr)
	host, _ := os.Hostname()
	addr := fs.String("coordinator", "", "coordinator address (host:port)")
	id := fs.String("id", fmt.Sprintf("%s-%d", host, os.Getpid()), "agent id, stable across reconnects")
	index := fs.Int("index", -1, "sharding index to ask for (e.g. a StatefulSet ordinal); -1 lets the coordinator choose")
	capacity := fs.Int("capacity", 0, "most sessions this agent runs (0: no cap)")
	tokenFile := fs.String("token-file", "", "file holding the shared token (default: $"+tokenEnv+")")
	caFile := fs.String("tls-ca", "", "CA certificate to trust the coordinator with (enables TLS)")
	serverName := fs.String("tls-server-name", "", "name to check the coordinator's certificate against")
	apiKeyEnv := fs.String("api-key-env", "OPENAI_API_KEY", "environment variable holding the target's API key")
	endpoint := fs.String("endpoint", "", "target endpoint: chat or completions (default: the coordinator's, else chat)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *addr == "" {
		fmt.Fprintln(c.stderr, "agent: --coordinator is required")
		return errUsage
	}
	token, err := loadToken(*tokenFile)
	if err != nil {
		return err
	}
	a, err := agent.New(agent.Config{
		ID: *id, Index: *index, Capacity: *capacity, Version: version, Coordinator: *addr,
		Token: token, CAFile: *caFile, ServerName: *serverName,
	}, specBuilder(c.logger, *apiKeyEnv, *endpoint), c.logger)
	if err != nil {
		return err
	}
	err = a.Run(ctx)
	if errors.Is(err, agent.ErrRefused) {
		return fmt.Errorf("join coordinator: %w", err)
	}
	return err
}

// specBuilder builds an agent's target from the coordinator's spec with
// pkg/client and pkg/workload (the whole workload: see workloadParams); the
// API key comes from this process's environment, never over the wire.
func specBuilder(logger hclog.Logger, apiKeyEnv, endpoint string) agent.Builder {
	return func(_ context.Context, spec agent.Spec) (agent.Target, error) {
		wcfg, err := workloadConfig(spec.Workload, spec.Seed, spec.MaxTokens, spec.Params)
		if err != nil {
			return agent.Target{}, err
		}
		src, err := newWorkloadSource(wcfg, logger)
		if err != nil {
			return agent.Target{}, fmt.Errorf("build workload: %w", err)
		}
		ep := endpoint
		if ep == "" {
			ep = spec.Params[paramEndpoint]
		}
		cl, err := client.New(client.Config{
			BaseURL: spec.Target, Model: spec.Model, MaxTokens: spec.MaxTokens, APIKeyEnv: apiKeyEnv, Endpoint: ep,
		}, logger)
		if err != nil {
			return agent.Target{}, fmt.Errorf("create client: %w", err)
		}
		return agent.Target{Source: src, Streamer: cl, Close: func() error { cl.Close(); return nil }}, nil
	}
}
