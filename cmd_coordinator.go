package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/fleetbench/fleetbench/coordinator"
	"github.com/fleetbench/fleetbench/pkg/kubejob"
	"github.com/fleetbench/fleetbench/pkg/record"
	"github.com/fleetbench/fleetbench/pkg/result"
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
	ctx, kubeAgents, err := startKube(ctx, c.logger, kube.options(*agents), &cfg)
	if err != nil {
		return err
	}
	defer kubeAgents.Stop()
	var opts []coordinator.Option
	if reg != nil {
		opts = append(opts, coordinator.WithRegisterer(reg))
	}
	co, err := coordinator.New(cfg, c.logger, opts...)
	if err != nil {
		return err
	}
	lossCtx, stopLosses := context.WithCancel(ctx)
	waitLosses := forwardLosses(lossCtx, co, kubeAgents.Losses())
	defer func() {
		stopLosses()
		waitLosses()
	}()
	var lc net.ListenConfig
	lis, err := lc.Listen(ctx, "tcp", *listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	c.logger.Info("coordinator listening", "addr", lis.Addr().String(), "agents", cfg.Agents, "tls", *cert != "")
	serveCtx, stopServe := context.WithCancel(ctx)
	defer stopServe()
	served := make(chan error, 1)
	go func() {
		served <- co.Serve(serveCtx, lis, coordinator.ServerConfig{Token: token, CertFile: *cert, KeyFile: *key})
	}()
	res, runErr := co.Run(ctx)
	runErr = kubejob.Cause(ctx, runErr)
	// Give the agents a moment to receive their stop before the server
	// goes away.
	select {
	case <-time.After(time.Second):
	case <-ctx.Done():
	}
	stopServe()
	if err := <-served; err != nil && runErr == nil {
		runErr = err
	}
	if res != nil {
		if err := writeStages(c, res, cfg, *out); err != nil && runErr == nil {
			runErr = err
		}
		printStages(c, res)
	}
	return runErr
}

// writeStages prints the vLLM block of each measured stage and writes its
// result.json to out/stage-<i>/.
func writeStages(c *cli, res *coordinator.Result, cfg coordinator.Config, out string) error {
	byID := make(map[uint32]*coordinator.WindowResult, len(res.Windows))
	for _, w := range res.Windows {
		byID[w.ID] = w
	}
	for _, s := range res.Stages {
		if s.Measured == nil || s.Measured.Counters.Requests+s.Measured.Counters.Failed == 0 {
			continue
		}
		// The stage's measured time: its measured windows not re-run.
		var dur time.Duration
		var start, end time.Time
		for _, id := range s.Windows {
			w := byID[id]
			if w == nil || w.Kind != coordinator.KindMeasure || w.Rerun {
				continue
			}
			dur += w.End.Sub(w.Start)
			if start.IsZero() || w.Start.Before(start) {
				start = w.Start
			}
			end = later(end, w.End)
		}
		if dur <= 0 {
			continue
		}
		facts := result.Facts{
			Duration: dur, MaxConcurrency: s.Level, RequestRate: s.RequestRate, Model: cfg.Spec.Model,
			Target: cfg.Spec.Target, Workload: cfg.Spec.Workload.Kind, Version: version, Start: start, End: end, Label: s.Mode,
		}
		if s.RequestRate > 0 {
			facts.MaxConcurrency = 0
		}
		sum, err := result.New(s.Measured, facts)
		if err != nil {
			return fmt.Errorf("summarise stage %d: %w", s.Index, err)
		}
		fmt.Fprintf(c.stdout, "Stage %d (level %d%s%s)\n", s.Index, s.Level, modeSuffix(s.Mode), degradedSuffix(s.Degraded))
		if err := result.WriteBlock(c.stdout, sum); err != nil {
			return err
		}
		dir := filepath.Join(out, fmt.Sprintf("stage-%d", s.Index))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("write stage %d result: %w", s.Index, err)
		}
		if err := result.WriteJSONFile(filepath.Join(dir, "result.json"), sum); err != nil {
			return fmt.Errorf("write stage %d result: %w", s.Index, err)
		}
	}
	return nil
}

func modeSuffix(mode string) string {
	if mode == "" {
		return ""
	}
	return ", mode " + mode
}

func degradedSuffix(d bool) string {
	if d {
		return ", degraded: an agent was lost"
	}
	return ""
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// printStages writes one line per stage with the fleet-wide percentiles.
func printStages(c *cli, res *coordinator.Result) {
	ms := func(d time.Duration) string { return fmt.Sprintf("%.1f", float64(d)/float64(time.Millisecond)) }
	fmt.Fprintf(c.stdout, "%-6s %-8s %-10s %9s %9s %9s %9s %9s %9s %9s %s\n",
		"stage", "level", "mode", "requests", "ttft_p50", "ttft_p95", "ttft_p99", "e2e_p50", "e2e_p99", "skew_ms", "degraded")
	for _, s := range res.Stages {
		w := s.Measured
		if w == nil {
			continue
		}
		ttft, e2e := w.Hist[record.TTFT], w.Hist[record.E2E]
		fmt.Fprintf(c.stdout, "%-6d %-8d %-10s %9d %9s %9s %9s %9s %9s %9s %t\n",
			s.Index, s.Level, s.Mode, w.Counters.Requests, ms(ttft.Percentile(50)), ms(ttft.Percentile(95)),
			ms(ttft.Percentile(99)), ms(e2e.Percentile(50)), ms(e2e.Percentile(99)), ms(s.StartSkew), s.Degraded)
	}
}
