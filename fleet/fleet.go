package fleet

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/fleetbench/fleetbench/agent"
	"github.com/fleetbench/fleetbench/coordinator"
	"github.com/fleetbench/fleetbench/pkg/client"
	"github.com/fleetbench/fleetbench/pkg/kubejob"
	"github.com/fleetbench/fleetbench/pkg/load"
	"github.com/fleetbench/fleetbench/pkg/record"
	"github.com/fleetbench/fleetbench/pkg/result"
	"github.com/fleetbench/fleetbench/pkg/servermetrics"
	"github.com/fleetbench/fleetbench/pkg/workload"
)

// Config is one fleet: a coordinator and Agents agents in this process,
// talking over real loopback gRPC, exactly as a distributed fleet would
// except for the network (or, with Remote, external agents). It is a
// plain value; the hooks it holds are called as coordinator.Config says.
type Config struct {
	// Agents is the number of local agents, at least 1.
	Agents int
	// Stages run in order on one coordinator; Window cuts their measured
	// time into windows (0: one window per stage).
	Stages []coordinator.Stage
	Window time.Duration
	// Client is every agent's client configuration; its BaseURL and Model
	// are the target's.
	Client client.Config
	// Source is the conversations, shared by every agent (a Source is safe
	// for concurrent use).
	Source workload.Source
	// EngineOptions are added to every agent's load engine (single turn,
	// ramp-up). They must not set an observer: the agent owns it.
	EngineOptions []load.Option
	// Observe, when set, sees every sample of every agent as it is
	// recorded, from the sessions' goroutines (concurrently); it must be
	// quick and not keep the sample. The live progress display uses it.
	Observe func(*record.Sample)
	// OutDir, when set, receives the coordinator's window-<id>.json files.
	OutDir string
	// Workload goes to the agents in the coordinator's spec: remote agents
	// build Source from it, and every agent's engine takes its seed,
	// output cap and session header.
	Workload workload.Config
	// Endpoint is the target's endpoint for remote agents (chat or
	// completions; "" for the agents' default).
	Endpoint string
	// Remote, when set, serves the coordinator for external agents
	// (`fleetbench agent --coordinator ADDR`) instead of starting local
	// ones; Agents is then unused.
	Remote *Remote
	// BeforeStage, OnWindowClosed, OnStageDone, OnReport and
	// OnMeasureSpan are the coordinator's hooks (coordinator.Config).
	BeforeStage    func(ctx context.Context, i int, s coordinator.Stage) error
	OnWindowClosed func(*coordinator.WindowResult)
	OnStageDone    func(*coordinator.StageResult)
	OnMeasureSpan  func(stage int, start, end time.Time)
	OnReport       func(agentID string, window uint32, w *record.Window)
	OnAgents       func(ready, expected int)
	// Judge is coordinator.Config.Judge (EarlyJudge: --abort-on-fail).
	Judge func(stage int, measured *record.Window, elapsed time.Duration) error
	// Scrape names the serving stack's /metrics endpoints that Sweeper.Run
	// and RunConfig's agent run read over each stage's measured time, in
	// this process (empty Endpoints: none; coordinator.Config's
	// OnMeasureSpan drives it). Run itself does not read them.
	Scrape servermetrics.Config
	// Registerer, when set, takes the coordinator's metrics and, each
	// under an "agent" label of its id, the local agents'.
	Registerer prometheus.Registerer
	// Version is fleetbench's, which local agents report when they join.
	Version string
	// SLO is the goodput objectives every agent counts requests against
	// (zero: goodput is not measured); KeyRequired says the target needs
	// the key (agents without it are refused as they join); FailFast ends
	// the run when a stage's requests all fail one way (coordinator.Config).
	SLO         result.SLO
	KeyRequired bool
	FailFast    time.Duration
	// Live, when set, is the live dashboard: it is fed the coordinator's
	// merged load and the agents' reports, and given the coordinator as
	// what changes the running level.
	Live *Live
}

// Remote is a fleet of external agents. It is a plain value.
type Remote struct {
	// Listen is the address to accept agents on.
	Listen string
	// Agents is how many must join before the first stage.
	Agents int
	// Token is the shared secret the agents present (never logged).
	Token string
	// CertFile and KeyFile, when both set, serve the agents over TLS.
	CertFile, KeyFile string
	// JoinTimeout bounds the wait for them (default
	// coordinator.DefaultJoinTimeout).
	JoinTimeout time.Duration
	// Losses, when set, reports agents gone for good (their pods failed)
	// so the coordinator moves their sessions at once.
	Losses <-chan Loss
}

// Loss is an agent gone for good, as whatever runs the agents saw it (a
// Kubernetes Job's pod watch, StartKube): the agent's id and why.
type Loss = kubejob.Loss

// AgentReportInterval is how often local agents report: faster than a
// remote agent's default, since loopback costs nothing and short sweep
// windows close sooner.
const AgentReportInterval = 250 * time.Millisecond

// Run runs cfg's stages with one coordinator run and returns its result.
// The agents stay connected from the first stage to the last, idle
// between stages while cfg.BeforeStage runs. By default they are
// cfg.Agents agents in this process over loopback gRPC, sharing one client
// (one connection pool) and one workload source; each agent still runs its
// own engine, recorder and shard, and the coordinator merges their
// histograms, so the result is the fleet's, not a single engine's. With
// cfg.Remote the agents are external processes (see Serve). On ctx's end
// it returns what was measured (the stage cut short marked Interrupted)
// with ctx's error. Every goroutine it starts has ended when it returns.
func Run(ctx context.Context, logger hclog.Logger, cfg Config) (*coordinator.Result, error) {
	if cfg.Remote != nil {
		return runRemote(ctx, logger, cfg)
	}
	if cfg.Agents < 1 {
		return nil, fmt.Errorf("run fleet: agents %d: must be >= 1", cfg.Agents)
	}
	if cfg.Source == nil {
		return nil, errors.New("run fleet: no workload source")
	}
	cl, err := client.New(cfg.Client, logger)
	if err != nil {
		return nil, fmt.Errorf("create client: %w", err)
	}
	defer cl.Close()

	// The listener is on 127.0.0.1, but other users of the machine can
	// reach it too: a per-fleet random token keeps them out.
	token, err := randomToken()
	if err != nil {
		return nil, err
	}
	ccfg := cfg.coordinatorConfig()
	ccfg.Agents = cfg.Agents
	// Local agents report every AgentReportInterval; a window whose
	// watermarks are missing after a few seconds has lost its agent.
	ccfg.Grace = 5 * time.Second
	opts0 := cfg.Live.wire(&ccfg, cfg.coordinatorOptions())
	co, err := coordinator.New(ccfg, logger, opts0...)
	if err != nil {
		return nil, err
	}
	defer cfg.Live.attach(co)()
	build := func(context.Context, agent.Spec) (agent.Target, error) {
		// Close is nil: the client outlives the stages and is closed
		// when the fleet ends.
		return agent.Target{Source: cfg.Source, Streamer: cl, Options: cfg.EngineOptions}, nil
	}
	var opts []agent.Option
	if cfg.Observe != nil {
		opts = append(opts, agent.WithObserver(cfg.Observe))
	}
	start := func(ctx context.Context, addr string, i int) error {
		id := fmt.Sprintf("local-%d", i)
		opts := opts
		if cfg.Registerer != nil {
			// Every local agent's health, each under its id.
			opts = append(slices.Clip(opts), agent.WithRegisterer(prometheus.WrapRegistererWith(prometheus.Labels{"agent": id}, cfg.Registerer)))
		}
		a, err := agent.New(agent.Config{
			ID: id, Index: i, Version: cfg.Version, Coordinator: addr, Token: token,
			ReportInterval: AgentReportInterval,
		}, build, logger, opts...)
		if err != nil {
			return err
		}
		return a.Run(ctx)
	}
	return coordinator.RunLocal(ctx, co, cfg.Agents, coordinator.ServerConfig{Token: token}, start)
}

// coordinatorConfig is the coordinator's configuration for cfg, less the
// number of agents.
func (cfg Config) coordinatorConfig() coordinator.Config {
	spec := coordinator.Spec{
		Target: cfg.Client.BaseURL, Model: cfg.Client.Model, Endpoint: cfg.Endpoint, APIKeyEnv: cfg.Client.APIKeyEnv,
		Workload: cfg.Workload, SLO: cfg.SLO, KeyRequired: cfg.KeyRequired, WorkerHeader: cfg.Client.WorkerHeader,
	}
	return coordinator.Config{
		Spec: spec, Stages: cfg.Stages, Window: cfg.Window, OutDir: cfg.OutDir, StartDelay: 200 * time.Millisecond, FailFast: cfg.FailFast,
		BeforeStage: cfg.BeforeStage, OnWindowClosed: cfg.OnWindowClosed, OnStageDone: cfg.OnStageDone, OnReport: cfg.OnReport,
		OnAgents: cfg.OnAgents, Judge: cfg.Judge, OnMeasureSpan: cfg.OnMeasureSpan,
	}
}

// coordinatorOptions are the coordinator's options for cfg.
func (cfg Config) coordinatorOptions() []coordinator.Option {
	if cfg.Registerer == nil {
		return nil
	}
	return []coordinator.Option{coordinator.WithRegisterer(cfg.Registerer)}
}

// runRemote serves a coordinator on cfg.Remote.Listen and runs cfg's
// stages with the external agents that join.
func runRemote(ctx context.Context, logger hclog.Logger, cfg Config) (*coordinator.Result, error) {
	rf := cfg.Remote
	if cfg.Workload.Kind == "" {
		return nil, errors.New("run remote fleet: no workload for the agents to build")
	}
	ccfg := cfg.coordinatorConfig()
	ccfg.Agents, ccfg.JoinTimeout = rf.Agents, rf.JoinTimeout
	return Serve(ctx, logger, ServeConfig{
		Coordinator: ccfg, Options: cfg.coordinatorOptions(), Listen: rf.Listen, Losses: rf.Losses, Live: cfg.Live,
		Server: coordinator.ServerConfig{Token: rf.Token, CertFile: rf.CertFile, KeyFile: rf.KeyFile},
	})
}

// randomToken returns 128 random bits in hex.
func randomToken() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generate fleet token: %w", err)
	}
	return hex.EncodeToString(b), nil
}
