package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/fleetbench/fleetbench/agent"
	"github.com/fleetbench/fleetbench/internal/flags"
	"github.com/fleetbench/fleetbench/pkg/client"
)

// agentCmd runs one agent of a distributed fleet: it joins a coordinator,
// takes its share of the sessions of every stage and streams histograms
// back.
func (c *cli) agentCmd() *cobra.Command {
	host, _ := os.Hostname()
	cfg := agent.Config{ID: fmt.Sprintf("%s-%d", host, os.Getpid()), Index: -1, Version: version}
	var tokenFile, endpoint, termLog, metricsAddr string
	var apiKeyEnv string
	var blockingReads bool
	cmd := &cobra.Command{
		Use:   "agent --coordinator ADDR [flags]",
		Short: "run an agent that takes sessions from a coordinator",
		Long: "Joins a coordinator and runs its share of every stage's sessions against the target the\n" +
			"coordinator names, streaming HDR histograms back. The API key is read from this\n" +
			"process's environment, never sent over the wire.",
		Example: "  fleetbench agent --coordinator coordinator:7070 --token-file token --index 0",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cfg.Coordinator == "" {
				return usagef("--coordinator ADDR is required")
			}
			if err := checkMetricsListen(metricsAddr); err != nil {
				return &usageError{err: err}
			}
			token, err := loadToken(tokenFile)
			if err != nil {
				return err
			}
			cfg.Token = token
			if reserveLoopProcs && !blockingReads {
				defer client.ReserveLoopProcs()()
			}
			// The agent's own health; the load it measures is exported,
			// merged over the fleet, by the coordinator.
			reg := newMetricsRegistry(metricsAddr)
			_, stopMetrics, err := serveMetrics(cmd.Context(), metricsAddr, reg, c.logger)
			if err != nil {
				return err
			}
			defer stopMetrics()
			a, err := agent.New(cfg, agent.ClientBuilder(c.logger, agent.ClientOptions{APIKeyEnv: apiKeyEnv, Endpoint: endpoint, BlockingReads: blockingReads}), c.logger,
				agent.WithChecker(agent.EnvChecker(apiKeyEnv)), agent.WithRegisterer(registerer(reg)))
			if err != nil {
				return err
			}
			err = a.Run(cmd.Context())
			if errors.Is(err, agent.ErrRefused) {
				err = fmt.Errorf("join coordinator: %w", err)
			}
			if err != nil && cmd.Context().Err() == nil {
				writeTerminationLog(termLog, err, c)
			}
			return err
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&cfg.Coordinator, "coordinator", "", "coordinator address (host:port)")
	fs.StringVar(&cfg.ID, "id", cfg.ID, "agent id, stable across reconnects")
	fs.IntVar(&cfg.Index, "index", -1, "sharding index to ask for (e.g. a Job completion index); -1 lets the coordinator choose")
	fs.IntVar(&cfg.Capacity, "capacity", 0, "most sessions this agent runs (0: no cap)")
	fs.StringVar(&tokenFile, "token-file", "", "file holding the shared token (default: $"+tokenEnv+")")
	fs.StringVar(&cfg.CAFile, "tls-ca", "", "CA certificate to trust the coordinator with (enables TLS)")
	fs.StringVar(&cfg.ServerName, "tls-server-name", "", "name to check the coordinator's certificate against")
	fs.StringVar(&termLog, "termination-log", defaultTerminationLog, "file the reason of a failure is written to, when it exists (Kubernetes shows it as the pod's termination message)")
	flags.Group(fs, flags.GroupFleet, "coordinator", "id", "index", "capacity", "token-file", "tls-ca", "tls-server-name", "termination-log")
	fs.StringVar(&apiKeyEnv, "api-key-env", "", "environment variable holding the target's API key (default: the coordinator's --api-key-env, "+flags.DefaultAPIKeyEnv+"; unset variable: no key)")
	fs.StringVar(&endpoint, "endpoint", "", "target endpoint: chat or completions (default: the coordinator's)")
	fs.BoolVar(&blockingReads, "blocking-reads", false, blockingReadsUsage)
	flags.Group(fs, flags.GroupTarget, "api-key-env", "endpoint", "blocking-reads")
	flags.MetricsListen(fs, &metricsAddr)
	return cmd
}

// defaultTerminationLog is where Kubernetes reads a container's
// termination message from (the container's terminationMessagePath).
const defaultTerminationLog = "/dev/termination-log"

// writeTerminationLog writes err, one line, to path when that file exists:
// on Kubernetes the pod's status then carries the agent's reason, so no one
// has to read its logs. Elsewhere the file is absent and nothing happens.
func writeTerminationLog(path string, err error, c *cli) {
	if path == "" {
		return
	}
	if _, statErr := os.Stat(path); statErr != nil {
		return
	}
	msg := strings.Join(strings.Fields(err.Error()), " ")
	if werr := os.WriteFile(path, []byte(msg+"\n"), 0o644); werr != nil && c.logger != nil {
		c.logger.Debug("write termination log", "path", path, "error", werr)
	}
}
