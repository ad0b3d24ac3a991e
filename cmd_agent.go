package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/fleetbench/fleetbench/agent"
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
	}, agent.ClientBuilder(c.logger, *apiKeyEnv, *endpoint), c.logger)
	if err != nil {
		return err
	}
	err = a.Run(ctx)
	if errors.Is(err, agent.ErrRefused) {
		return fmt.Errorf("join coordinator: %w", err)
	}
	return err
}

