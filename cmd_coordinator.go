package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/fleetbench/fleetbench/coordinator"
	"github.com/fleetbench/fleetbench/fleet"
	"github.com/fleetbench/fleetbench/pkg/workload"
)

// tokenEnv holds the shared coordinator/agent token when no file is given.
const tokenEnv = "FLEETBENCH_TOKEN"

// loadToken reads the shared token from file (trimmed), or from
// FLEETBENCH_TOKEN when file is empty. The token is never printed.
func loadToken(file string) (string, error) {
	if file == "" {
		return os.Getenv(tokenEnv), nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("read token file: %w", err)
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", fmt.Errorf("read token file %s: it is empty", file)
	}
	return tok, nil
}

// parseLevels parses "8,16,32" into concurrency levels.
func parseLevels(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("parse level %q: want a positive integer", f)
		}
		out = append(out, n)
	}
	return out, nil
}

func (c *cli) cmdCoordinator(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("coordinator", flag.ContinueOnError)
	fs.SetOutput(c.stderr)
	listen := fs.String("listen", ":7070", "address to accept agents on")
	agents := fs.Int("agents", 1, "agents to wait for before starting")
	levels := fs.String("concurrency", "8", "total concurrency; a comma list runs one stage per level")
	rate := fs.Float64("request-rate", 0, "open loop: total requests per second (0: closed loop)")
	mode := fs.String("mode", "", "routing mode label recorded with the results")
	warmup := fs.Duration("warmup", 10*time.Second, "warm-up per stage, left out of results")
	duration := fs.Duration("duration", 60*time.Second, "measured time per stage")
	window := fs.Duration("window", 0, "window length (0: one window per stage)")
	convs := fs.Int("conversations", 0, "run exactly conversations 0..N-1 (0: unbounded)")
	onLoss := fs.String("on-loss", string(coordinator.PolicyContinue), "when an agent is lost: continue, rerun or fail")
	out := fs.String("out", "out/coordinator", "directory for window-<id>.json files and stage-<i>/result.json")
	tokenFile := fs.String("token-file", "", "file holding the shared agent token (default: $"+tokenEnv+")")
	cert := fs.String("tls-cert", "", "TLS certificate file (with --tls-key enables TLS)")
	key := fs.String("tls-key", "", "TLS key file")
	target := fs.String("target", "", "base URL of the OpenAI-compatible server the agents load")
	model := fs.String("model", "", "model name")
	wl := fs.String("workload", "docchat", "workload: docchat, sharegpt or jsonl")
	dataset := fs.String("dataset", "", "dataset path for sharegpt and jsonl")
	seed := fs.Int64("seed", 1, "workload seed")
	maxTokens := fs.Int("max-tokens", 0, "output cap per turn (0: the server's)")
	sessionHeader := fs.String("session-header", "", "request header carrying a per-conversation session id")
	think := fs.String("think-time", "none", "pause before each turn after the first (none, 2s, exp:2s)")
	turns := fs.String("turns", "", "user turns per conversation: N or MIN-MAX (docchat default 3-5; sharegpt: a cap)")
	promptTokens := fs.Int("prompt-tokens", 0, "docchat: first prompt size in tokens (0: the default, 3100)")
	documents := fs.Int("documents", 0, "docchat: starter documents (0: the default, 10)")
	maxConvs := fs.Int("max-conversations", 0, "sharegpt: use at most N conversations (0: all)")
	minMessages := fs.Int("min-messages", 0, "sharegpt: drop conversations with fewer messages")
	umURL := fs.String("user-model-url", "", "docchat: base URL of a model that writes follow-up questions (agents read its key from --user-model-key-env)")
	umModel := fs.String("user-model", "", "docchat: the user model's name")
	umKeyEnv := fs.String("user-model-key-env", "", "docchat: agents' environment variable holding the user model's API key")
	cooldown := fs.Duration("cooldown", 0, "idle pause between stages")
	hb := fs.Duration("heartbeat", coordinator.DefaultHeartbeatInterval, "heartbeat interval")
	hbTimeout := fs.Duration("heartbeat-timeout", coordinator.DefaultHeartbeatTimeout, "silence after which an agent is lost")
	grace := fs.Duration("grace", coordinator.DefaultGrace, "how long a window waits for agents' watermarks")
	joinTimeout := fs.Duration("join-timeout", coordinator.DefaultJoinTimeout, "how long to wait for the agents")
	metricsListen := fs.String("metrics-listen", "", "serve Prometheus metrics on `ADDR`/metrics (e.g. :9090; empty: none)")
	kube := addKubeFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *target == "" {
		fmt.Fprintln(c.stderr, "coordinator: --target is required")
		return errUsage
	}
	lv, err := parseLevels(*levels)
	if err != nil {
		fmt.Fprintln(c.stderr, "coordinator:", err)
		return errUsage
	}
	policy, err := coordinator.ParsePolicy(*onLoss)
	if err != nil {
		fmt.Fprintln(c.stderr, "coordinator:", err)
		return errUsage
	}
	token, err := loadToken(*tokenFile)
	if err != nil {
		return err
	}
	if token == "" {
		c.logger.Warn("no token: any agent that reaches the listen address may join", "env", tokenEnv)
	}
	thinkTime, err := workload.ParseThinkTime(*think)
	if err != nil {
		fmt.Fprintln(c.stderr, "coordinator:", err)
		return errUsage
	}
	tr, err := workload.ParseTurns(*turns)
	if err != nil {
		fmt.Fprintln(c.stderr, "coordinator:", err)
		return errUsage
	}
	wcfg := workload.Config{
		Kind: *wl, Dataset: *dataset, Seed: *seed, MaxTokens: *maxTokens, Think: thinkTime,
		Documents: *documents, PromptTokens: *promptTokens, Turns: tr, SessionHeader: *sessionHeader,
		MaxConversations: *maxConvs, MinMessages: *minMessages,
	}
	if (*umURL == "") != (*umModel == "") {
		fmt.Fprintln(c.stderr, "coordinator: --user-model-url and --user-model go together")
		return errUsage
	}
	if *umURL != "" {
		wcfg.UserModel = &workload.UserModelConfig{URL: *umURL, Model: *umModel, APIKeyEnv: *umKeyEnv}
	}
	if err := wcfg.Validate(); err != nil {
		fmt.Fprintln(c.stderr, "coordinator:", err)
		return errUsage
	}
	cfg := coordinator.Config{
		Agents: *agents, Window: *window, OnLoss: policy, OutDir: *out,
		Spec:              coordinator.Spec{Target: *target, Model: *model, Workload: wcfg},
		HeartbeatInterval: *hb, HeartbeatTimeout: *hbTimeout, Grace: *grace, JoinTimeout: *joinTimeout,
	}
	for _, l := range lv {
		s := coordinator.Stage{Level: l, Mode: *mode, Warmup: *warmup, Duration: *duration, Conversations: *convs, Cooldown: *cooldown}
		if *rate > 0 {
			s.Level, s.RequestRate = 0, *rate
		}
		cfg.Stages = append(cfg.Stages, s)
	}
	// With --kube-agents the agents are an Indexed Job; a fatal pod failure
	// cancels ctx with the cause, and the Job is deleted on every exit.
	reg := newMetricsRegistry(*metricsListen)
	_, stopMetrics, err := serveMetrics(ctx, *metricsListen, reg, c.logger)
	if err != nil {
		return err
	}
	defer stopMetrics()
	ctx, losses, stopKube, err := kube.startKubeAgentsFor(ctx, c.logger, &cfg)
	if err != nil {
		return err
	}
	defer stopKube()
	var opts []coordinator.Option
	if reg != nil {
		opts = append(opts, coordinator.WithRegisterer(reg))
	}
	res, runErr := fleet.Serve(ctx, c.logger, fleet.ServeConfig{
		Coordinator: cfg, Options: opts, Listen: *listen, Losses: losses,
		Server: coordinator.ServerConfig{Token: token, CertFile: *cert, KeyFile: *key},
	})
	runErr = kubeCause(ctx, runErr)
	if res != nil {
		if err := fleet.WriteStages(c.stdout, res, cfg, *out, version); err != nil && runErr == nil {
			runErr = err
		}
		fleet.PrintStages(c.stdout, res)
	}
	return runErr
}
