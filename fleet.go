package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/fleetbench/fleetbench/agent"
	"github.com/fleetbench/fleetbench/coordinator"
	"github.com/fleetbench/fleetbench/pkg/client"
	"github.com/fleetbench/fleetbench/pkg/kubejob"
	"github.com/fleetbench/fleetbench/pkg/load"
	"github.com/fleetbench/fleetbench/pkg/record"
	"github.com/fleetbench/fleetbench/pkg/workload"
)

// fleetConfig is one in-process fleet: a coordinator and Agents agents in
// this process, talking over real loopback gRPC, exactly as a distributed
// fleet would except for the network. It is a plain value.
type fleetConfig struct {
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
	Remote *remoteFleet
	// BeforeStage, OnWindowClosed, OnStageDone and OnReport are the
	// coordinator's hooks (coordinator.Config).
	BeforeStage    func(ctx context.Context, i int, s coordinator.Stage) error
	OnWindowClosed func(*coordinator.WindowResult)
	OnStageDone    func(*coordinator.StageResult)
	OnReport       func(agentID string, window uint32, w *record.Window)
	// Registerer, when set, takes the coordinator's metrics.
	Registerer prometheus.Registerer
}

// remoteFleet is a fleet of external agents.
type remoteFleet struct {
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
	Losses <-chan kubejob.Loss
}

// fleetAgentReport is how often local agents report: faster than a remote
// agent's default, since loopback costs nothing and short sweep windows
// close sooner.
const fleetAgentReport = 250 * time.Millisecond

// runFleet runs fc's stages with one coordinator run and returns its
// result. The agents stay connected from the first stage to the last,
// idle between stages while fc.BeforeStage runs. By default they are
// fc.Agents agents in this process over loopback gRPC, sharing one client
// (one connection pool) and one workload source; each agent still runs its
// own engine, recorder and shard, and the coordinator merges their
// histograms, so the result is the fleet's, not a single engine's. With
// fc.Remote the agents are external processes. On ctx's end it returns
// what was measured (the stage cut short marked Interrupted) with ctx's
// error.
func runFleet(ctx context.Context, logger hclog.Logger, fc fleetConfig) (*coordinator.Result, error) {
	if fc.Remote != nil {
		return runRemoteFleet(ctx, logger, fc)
	}
	if fc.Agents < 1 {
		return nil, fmt.Errorf("run fleet: agents %d: must be >= 1", fc.Agents)
	}
	if fc.Source == nil {
		return nil, errors.New("run fleet: no workload source")
	}
	cl, err := client.New(fc.Client, logger)
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
	cfg := fc.coordinatorConfig()
	cfg.Agents = fc.Agents
	// Local agents report every fleetAgentReport; a window whose
	// watermarks are missing after a few seconds has lost its agent.
	cfg.Grace = 5 * time.Second
	co, err := coordinator.New(cfg, logger, fc.coordinatorOptions()...)
	if err != nil {
		return nil, err
	}
	build := func(context.Context, agent.Spec) (agent.Target, error) {
		// Close is nil: the client outlives the stages and is closed
		// when the fleet ends.
		return agent.Target{Source: fc.Source, Streamer: cl, Options: fc.EngineOptions}, nil
	}
	var opts []agent.Option
	if fc.Observe != nil {
		opts = append(opts, agent.WithObserver(fc.Observe))
	}
	start := func(ctx context.Context, addr string, i int) error {
		a, err := agent.New(agent.Config{
			ID: fmt.Sprintf("local-%d", i), Index: i, Version: version, Coordinator: addr, Token: token,
			ReportInterval: fleetAgentReport,
		}, build, logger, opts...)
		if err != nil {
			return err
		}
		return a.Run(ctx)
	}
	return coordinator.RunLocal(ctx, co, fc.Agents, coordinator.ServerConfig{Token: token}, start)
}

// coordinatorConfig is the coordinator's configuration for fc, less the
// number of agents.
func (fc fleetConfig) coordinatorConfig() coordinator.Config {
	spec := coordinator.Spec{Target: fc.Client.BaseURL, Model: fc.Client.Model, Endpoint: fc.Endpoint, Workload: fc.Workload}
	return coordinator.Config{
		Spec: spec, Stages: fc.Stages, Window: fc.Window, OutDir: fc.OutDir, StartDelay: 200 * time.Millisecond,
		BeforeStage: fc.BeforeStage, OnWindowClosed: fc.OnWindowClosed, OnStageDone: fc.OnStageDone, OnReport: fc.OnReport,
	}
}

// coordinatorOptions are the coordinator's options for fc.
func (fc fleetConfig) coordinatorOptions() []coordinator.Option {
	if fc.Registerer == nil {
		return nil
	}
	return []coordinator.Option{coordinator.WithRegisterer(fc.Registerer)}
}

// runRemoteFleet serves a coordinator on fc.Remote.Listen and runs fc's
// stages with the external agents that join.
func runRemoteFleet(ctx context.Context, logger hclog.Logger, fc fleetConfig) (*coordinator.Result, error) {
	rf := fc.Remote
	if fc.Workload.Kind == "" {
		return nil, errors.New("run remote fleet: no workload for the agents to build")
	}
	cfg := fc.coordinatorConfig()
	cfg.Agents, cfg.JoinTimeout = rf.Agents, rf.JoinTimeout
	co, err := coordinator.New(cfg, logger, fc.coordinatorOptions()...)
	if err != nil {
		return nil, err
	}
	var lc net.ListenConfig
	lis, err := lc.Listen(ctx, "tcp", rf.Listen)
	if err != nil {
		return nil, fmt.Errorf("listen for agents: %w", err)
	}
	logger.Info("waiting for agents", "addr", lis.Addr().String(), "agents", rf.Agents)
	serveCtx, stopServe := context.WithCancel(context.WithoutCancel(ctx))
	defer stopServe()
	serveErr := make(chan error, 1)
	go func() {
		serveErr <- co.Serve(serveCtx, lis, coordinator.ServerConfig{Token: rf.Token, CertFile: rf.CertFile, KeyFile: rf.KeyFile})
	}()
	lossCtx, stopLosses := context.WithCancel(ctx)
	waitLosses := forwardLosses(lossCtx, co, rf.Losses)
	res, runErr := co.Run(ctx)
	stopLosses()
	waitLosses()
	// Run told the agents to stop; Serve's graceful stop lets the stop
	// reach them before the streams close.
	stopServe()
	if err := <-serveErr; err != nil && runErr == nil {
		runErr = err
	}
	return res, runErr
}

// randomToken returns 128 random bits in hex.
func randomToken() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generate fleet token: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// stageWindows returns the stage's measured windows that count (not re-run),
// in order, from res.
func stageWindows(res *coordinator.Result, st *coordinator.StageResult) []*coordinator.WindowResult {
	byID := make(map[uint32]*coordinator.WindowResult, len(res.Windows))
	for _, w := range res.Windows {
		byID[w.ID] = w
	}
	var out []*coordinator.WindowResult
	for _, id := range st.Windows {
		if w := byID[id]; w != nil && w.Kind == coordinator.KindMeasure && !w.Rerun {
			out = append(out, w)
		}
	}
	return out
}

// stageMeasurement is one stage's measurement: the merge of its measured
// windows (late samples included), their time span and the summed length
// of those windows, and the windows' data for snapshots.
type stageMeasurement struct {
	Window     *record.Window
	Snapshots  []*record.Window
	Start, End time.Time
	Duration   time.Duration
	Coverage   float64
	Agents     int
}

// measureStage merges the measured windows of st. Percentiles come from
// the merged histograms, never from averaging the windows'.
func measureStage(res *coordinator.Result, st *coordinator.StageResult) (*stageMeasurement, error) {
	ws := stageWindows(res, st)
	if len(ws) == 0 {
		return nil, fmt.Errorf("stage %d (level %d): no measured window", st.Index, st.Level)
	}
	m := &stageMeasurement{}
	var covered, planned float64
	agents := map[string]bool{}
	for _, w := range ws {
		data, err := w.Merged()
		if err != nil {
			return nil, fmt.Errorf("merge window %d: %w", w.ID, err)
		}
		m.Snapshots = append(m.Snapshots, data)
		if m.Window == nil {
			m.Window = data.Clone()
		} else if err := m.Window.Merge(data); err != nil {
			return nil, fmt.Errorf("merge window %d: %w", w.ID, err)
		}
		if m.Start.IsZero() || w.Start.Before(m.Start) {
			m.Start = w.Start
		}
		if w.End.After(m.End) {
			m.End = w.End
		}
		d := w.End.Sub(w.Start)
		m.Duration += d
		// Coverage: agent-seconds delivered over agent-seconds planned,
		// every agent of the window for its whole length. A restarted
		// agent has two entries but one planned share.
		inWindow := map[string]bool{}
		for _, c := range w.Coverage {
			agents[c.Agent], inWindow[c.Agent] = true, true
			covered += c.Seconds
		}
		planned += float64(len(inWindow)) * d.Seconds()
	}
	m.Coverage = 1
	if planned > 0 {
		m.Coverage = min(covered/planned, 1)
	}
	m.Agents = len(agents)
	return m, nil
}

// quietLogger passes on only messages at or above min, so the lifecycle
// logs of a local coordinator and its agents (joins, stage assignments,
// drains: a dozen lines per level) do not bury a sweep's progress. Use the
// parent at debug level to see them.
type quietLogger struct {
	hclog.Logger
	min hclog.Level
}

// quiet returns logger unchanged when it logs at debug level or below,
// else a logger that drops messages below warn.
func quiet(logger hclog.Logger) hclog.Logger {
	if logger.IsDebug() {
		return logger
	}
	return &quietLogger{Logger: logger, min: hclog.Warn}
}

func (q *quietLogger) Log(level hclog.Level, msg string, args ...any) {
	if level >= q.min {
		q.Logger.Log(level, msg, args...)
	}
}
func (q *quietLogger) Trace(msg string, args ...any) { q.Log(hclog.Trace, msg, args...) }
func (q *quietLogger) Debug(msg string, args ...any) { q.Log(hclog.Debug, msg, args...) }
func (q *quietLogger) Info(msg string, args ...any)  { q.Log(hclog.Info, msg, args...) }
func (q *quietLogger) Warn(msg string, args ...any)  { q.Log(hclog.Warn, msg, args...) }
func (q *quietLogger) Error(msg string, args ...any) { q.Log(hclog.Error, msg, args...) }
func (q *quietLogger) IsTrace() bool                 { return false }
func (q *quietLogger) IsDebug() bool                 { return false }
func (q *quietLogger) IsInfo() bool                  { return q.min <= hclog.Info && q.Logger.IsInfo() }
func (q *quietLogger) With(args ...any) hclog.Logger {
	return &quietLogger{Logger: q.Logger.With(args...), min: q.min}
}
func (q *quietLogger) Named(name string) hclog.Logger {
	return &quietLogger{Logger: q.Logger.Named(name), min: q.min}
}
func (q *quietLogger) ResetNamed(name string) hclog.Logger {
	return &quietLogger{Logger: q.Logger.ResetNamed(name), min: q.min}
}

// stageResult returns stage i of res, nil when it has none. A stage cut
// short by the end of the run's ctx is there, marked Interrupted.
func stageResult(res *coordinator.Result, i int) *coordinator.StageResult {
	if res == nil {
		return nil
	}
	for _, s := range res.Stages {
		if s.Index == i {
			return s
		}
	}
	return nil
}
