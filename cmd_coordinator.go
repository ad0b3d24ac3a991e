package main

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/fleetbench/fleetbench/coordinator"
	"github.com/fleetbench/fleetbench/fleet"
	"github.com/fleetbench/fleetbench/internal/flags"
	"github.com/fleetbench/fleetbench/pkg/client"
	"github.com/fleetbench/fleetbench/pkg/kubejob"
	"github.com/fleetbench/fleetbench/pkg/ready"
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

// coordinatorOptions are the coordinator command's flags.
type coordinatorOptions struct {
	cfg                                           coordinator.Config
	endpoint, apiKeyEnv                           string
	levels                                        []int
	rate                                          float64
	mode                                          string
	warmup, duration, cooldown                    time.Duration
	conversations                                 int
	onLoss, listen, tokenFile, cert, key, metrics string
	uiBaseline                                    string
	kube                                          kubejob.Options
	dryRun, skipPreflight                         bool
	thresholds                                    []string
	judged                                        []result.Threshold
	goodput                                       string
	abortOnFail                                   bool
}

func (c *cli) coordinatorCmd() *cobra.Command {
	cmd, _ := c.newCoordinator()
	return cmd
}

// newCoordinator returns the coordinator command and the options its flags
// fill.
func (c *cli) newCoordinator() (*cobra.Command, *coordinatorOptions) {
	o := &coordinatorOptions{
		cfg: coordinator.Config{
			Agents: 1, Spec: coordinator.Spec{Workload: workload.Default()},
			HeartbeatInterval: coordinator.DefaultHeartbeatInterval, HeartbeatTimeout: coordinator.DefaultHeartbeatTimeout,
			Grace: coordinator.DefaultGrace, JoinTimeout: coordinator.DefaultJoinTimeout, OutDir: "out/coordinator",
			FailFast: flags.DefaultFailFast,
		},
		endpoint: flags.DefaultEndpoint, apiKeyEnv: flags.DefaultAPIKeyEnv, levels: []int{8},
		warmup: flags.DefaultWarmup, duration: flags.DefaultDuration, cooldown: flags.DefaultCooldown,
		onLoss: string(coordinator.PolicyContinue), listen: ":7070",
	}
	cmd := &cobra.Command{
		Use:   "coordinator --target URL [flags]",
		Short: "run the coordinator that shards sessions across agents",
		Long: "Accepts agents (fleetbench agent, or an Indexed Job with --kube-agents), shards the\n" +
			"sessions of every level across them, merges their HDR histograms into exact fleet-wide\n" +
			"percentiles and writes each level's vLLM-style result.",
		Example: "  fleetbench coordinator --listen :7070 --agents 4 --token-file token --concurrency 800,1600 \\\n" +
			"      --target http://vllm:8000 --model m --duration 5m --out out/c\n" +
			"  fleetbench agent --coordinator coordinator:7070 --token-file token --index 0",
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := o.config(cmd.Flags())
			if err != nil {
				return &usageError{err: err}
			}
			if o.dryRun {
				return writeDryRun(c.stdout, newCoordinatorPlan(o, cfg))
			}
			return c.coordinate(cmd, o, cfg)
		},
	}
	fs := cmd.Flags()
	sp := &o.cfg.Spec
	flags.Target(fs, &sp.Target, &sp.Model, &o.endpoint, &o.apiKeyEnv)
	flags.Preflight(fs, &o.skipPreflight)
	flags.WorkerHeader(fs, &o.cfg.Spec.WorkerHeader)
	fs.Lookup("target").Usage = "base URL of the OpenAI-compatible server the agents load (required)"
	fs.Lookup("api-key-env").Usage = "agents' environment variable holding the API key (each agent reads its own)"
	flags.Workload(fs, &sp.Workload)
	flags.AddLoad(fs, flags.Load{Concurrency: &o.levels, RequestRate: &o.rate, Warmup: &o.warmup, Duration: &o.duration, Cooldown: &o.cooldown})
	fs.StringVar(&o.mode, "mode", "", "routing mode label recorded with the results")
	fs.DurationVar(&o.cfg.Window, "window", 0, "window length (0: one window per level)")
	fs.IntVar(&o.conversations, "conversations", 0, "run exactly conversations 0..N-1 (0: unbounded)")
	flags.Group(fs, flags.GroupLoad, "mode", "window", "conversations")
	flags.FailFast(fs, &o.cfg.FailFast)
	flags.Goodput(fs, &o.goodput)
	fs.StringVar(&o.cfg.OutDir, "out", o.cfg.OutDir, "directory for window-<id>.json files and stage-<i>/result.json")
	flags.MetricsListen(fs, &o.metrics)
	flags.UIBaseline(fs, &o.uiBaseline)
	flags.Thresholds(fs, &o.thresholds, exitThresholds)
	flags.AbortOnFail(fs, &o.abortOnFail)
	fs.BoolVar(&o.dryRun, "dry-run", false, "print the merged, validated configuration and exit without listening")
	flags.Group(fs, flags.GroupOutput, "out", "dry-run")
	fs.StringVar(&o.listen, "listen", o.listen, "address to accept agents on")
	fs.IntVar(&o.cfg.Agents, "agents", o.cfg.Agents, "agents to wait for before starting")
	fs.StringVar(&o.onLoss, "on-loss", o.onLoss, "when an agent is lost: continue, rerun or fail")
	fs.StringVar(&o.tokenFile, "token-file", "", "file holding the shared agent token (default: $"+tokenEnv+")")
	fs.StringVar(&o.cert, "tls-cert", "", "TLS certificate file (with --tls-key enables TLS)")
	fs.StringVar(&o.key, "tls-key", "", "TLS key file")
	fs.DurationVar(&o.cfg.HeartbeatInterval, "heartbeat", o.cfg.HeartbeatInterval, "heartbeat interval")
	fs.DurationVar(&o.cfg.HeartbeatTimeout, "heartbeat-timeout", o.cfg.HeartbeatTimeout, "silence after which an agent is lost")
	fs.DurationVar(&o.cfg.Grace, "grace", o.cfg.Grace, "how long a window waits for agents' watermarks")
	fs.DurationVar(&o.cfg.JoinTimeout, "join-timeout", o.cfg.JoinTimeout, "how long to wait for the agents")
	flags.Group(fs, flags.GroupFleet, "listen", "agents", "on-loss", "token-file", "tls-cert", "tls-key",
		"heartbeat", "heartbeat-timeout", "grace", "join-timeout")
	addKubeFlags(fs, &o.kube)
	return cmd, o
}

// addKubeFlags registers kubejob's --kube-agents flags in the Kubernetes
// help group.
func addKubeFlags(fs *pflag.FlagSet, o *kubejob.Options) {
	kfs := pflag.NewFlagSet("kube", pflag.ContinueOnError)
	o.AddFlags(kfs)
	kfs.VisitAll(func(f *pflag.Flag) {
		fs.AddFlag(f)
		flags.Group(fs, flags.GroupKubernetes, f.Name)
	})
}

// config builds the coordinator's configuration from the parsed flags.
func (o *coordinatorOptions) config(fs *pflag.FlagSet) (coordinator.Config, error) {
	cfg := o.cfg
	if cfg.Spec.Target == "" {
		return cfg, fmt.Errorf("--target is required: the agents need a server to load")
	}
	if err := client.CheckWorkerHeader(cfg.Spec.WorkerHeader); err != nil {
		return cfg, fmt.Errorf("--worker-header: %w", err)
	}
	if err := client.CheckBaseURL(cfg.Spec.Target); err != nil {
		return cfg, fmt.Errorf("--target: %w", err)
	}
	if cfg.Spec.Model == "" {
		return cfg, fmt.Errorf("--model is required with --target")
	}
	if err := checkMetricsListen(o.metrics); err != nil {
		return cfg, err
	}
	if err := checkUIBaseline(o.uiBaseline, o.metrics); err != nil {
		return cfg, err
	}
	cfg.Spec.Endpoint, cfg.Spec.APIKeyEnv = o.endpoint, o.apiKeyEnv
	policy, err := coordinator.ParsePolicy(o.onLoss)
	if err != nil {
		return cfg, err
	}
	cfg.OnLoss = policy
	if err := cfg.Spec.Workload.Validate(); err != nil {
		return cfg, fmt.Errorf("workload: %w", err)
	}
	if cfg.Spec.SLO, o.judged, err = parseJudging(o.goodput, o.thresholds); err != nil {
		return cfg, err
	}
	if o.abortOnFail && len(o.judged) > 0 {
		cfg.Judge = fleet.EarlyJudge(o.judged, cfg.Spec.SLO)
	}
	for _, l := range o.levels {
		s := coordinator.Stage{Level: l, Mode: o.mode, Warmup: o.warmup, Duration: o.duration, Conversations: o.conversations, Cooldown: o.cooldown}
		if o.rate > 0 {
			s.Level, s.RequestRate = 0, o.rate
		}
		cfg.Stages = append(cfg.Stages, s)
	}
	o.kube.Agents, o.kube.AgentsSet = cfg.Agents, fs.Changed("agents")
	maxLevel := 0
	for _, s := range cfg.Stages {
		maxLevel = max(maxLevel, s.Level)
	}
	if err := o.kube.Check(maxLevel); err != nil {
		return cfg, fmt.Errorf("configure agents job: %w", err)
	}
	return cfg, nil
}

// coordinate serves the agents and runs the stages.
func (c *cli) coordinate(cmd *cobra.Command, o *coordinatorOptions, cfg coordinator.Config) error {
	ctx := cmd.Context()
	if !o.skipPreflight {
		// Before any agent is assigned a stage: a target the coordinator
		// cannot use is a target its agents cannot use either.
		cc := client.Config{BaseURL: cfg.Spec.Target, Model: cfg.Spec.Model, Endpoint: cfg.Spec.Endpoint, APIKeyEnv: cfg.Spec.APIKeyEnv}
		if err := ready.Preflight(ctx, cc, 0, c.logger.Named("preflight")); err != nil {
			return err
		}
		// Agents without the key then say so as they join, at once.
		cfg.Spec.KeyRequired = ready.KeyRequired(ctx, cc)
	}
	token, err := loadToken(o.tokenFile)
	if err != nil {
		return err
	}
	if token == "" {
		c.logger.Warn("no token: any agent that reaches the listen address may join", "env", tokenEnv)
	}
	reg := newMetricsRegistry(o.metrics)
	dash, err := newDashboard("coordinator", o.metrics, token, o.uiBaseline, o.rate <= 0,
		"the open loop's arrival rate is fixed (--request-rate)", c.logger)
	if err != nil {
		return err
	}
	_, stopMetrics, err := serveMetrics(ctx, o.metrics, reg, c.logger, dash.routes()...)
	if err != nil {
		return err
	}
	defer stopMetrics()
	defer dash.close() // before the server stops: a feed stream never goes idle
	// With --kube-agents the agents are an Indexed Job; a fatal pod failure
	// cancels ctx with the cause, and the Job is deleted on every exit.
	ctx, kubeAgents, err := fleet.StartKube(ctx, c.logger, o.kube, &cfg)
	if err != nil {
		return err
	}
	defer kubeAgents.Stop()
	var opts []coordinator.Option
	if reg != nil {
		opts = append(opts, coordinator.WithRegisterer(reg))
	}
	res, runErr := fleet.Serve(ctx, c.logger, fleet.ServeConfig{
		Coordinator: cfg, Options: opts, Listen: o.listen, Losses: kubeAgents.Losses(), Live: dash.fleetLive(),
		Server: coordinator.ServerConfig{Token: token, CertFile: o.cert, KeyFile: o.key},
	})
	runErr = kubejob.Cause(ctx, runErr)
	if res != nil {
		if err := fleet.WriteStages(c.stdout, res, cfg, cfg.OutDir, version, o.judged); err != nil && runErr == nil {
			runErr = err
		}
		fleet.PrintStages(c.stdout, res)
	}
	return runErr
}

// coordinatorPlan is what `coordinator --dry-run` prints.
type coordinatorPlan struct {
	Target      string          `json:"target"`
	Model       string          `json:"model"`
	Endpoint    string          `json:"endpoint"`
	APIKeyEnv   string          `json:"api_key_env"`
	Workload    workload.Config `json:"workload"`
	Concurrency []int           `json:"concurrency"`
	RequestRate float64         `json:"request_rate,omitempty"`
	Warmup      string          `json:"warmup"`
	Duration    string          `json:"duration"`
	Cooldown    string          `json:"cooldown"`
	Listen      string          `json:"listen"`
	Agents      int             `json:"agents"`
	KubeAgents  bool            `json:"kube_agents,omitempty"`
	OnLoss      string          `json:"on_loss"`
	Out         string          `json:"out"`
}

func newCoordinatorPlan(o *coordinatorOptions, cfg coordinator.Config) coordinatorPlan {
	return coordinatorPlan{
		Target: client.RedactURL(cfg.Spec.Target), Model: cfg.Spec.Model, Endpoint: cfg.Spec.Endpoint, APIKeyEnv: o.apiKeyEnv,
		Workload: cfg.Spec.Workload, Concurrency: o.levels, RequestRate: o.rate, Warmup: o.warmup.String(),
		Duration: o.duration.String(), Cooldown: o.cooldown.String(), Listen: o.listen, Agents: cfg.Agents,
		KubeAgents: o.kube.Enabled, OnLoss: string(cfg.OnLoss), Out: cfg.OutDir,
	}
}
