package fleet

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/fleetbench/fleetbench/coordinator"
	"github.com/fleetbench/fleetbench/internal/progress"
	"github.com/fleetbench/fleetbench/pkg/client"
	"github.com/fleetbench/fleetbench/pkg/kubejob"
	"github.com/fleetbench/fleetbench/pkg/ready"
	"github.com/fleetbench/fleetbench/pkg/record"
	"github.com/fleetbench/fleetbench/pkg/report"
	"github.com/fleetbench/fleetbench/pkg/result"
	"github.com/fleetbench/fleetbench/pkg/sim"
	"github.com/fleetbench/fleetbench/pkg/sweep"
	"github.com/fleetbench/fleetbench/pkg/sweep/runner"
	"github.com/fleetbench/fleetbench/pkg/ui"
	"github.com/fleetbench/fleetbench/pkg/workload"
)

// SweepConfig is one sweep to run: a validated spec and its plan, with the
// agents the spec asks for (in-process, external or a Kubernetes Job).
type SweepConfig struct {
	// Spec is validated; with Spec.Sim.Use the built-in simulator is
	// started in-process and Spec.Target is set to it.
	Spec *sweep.Spec
	// Plan is the spec's plan, less the points a resumed sweep has done.
	Plan *sweep.Plan
	// ID is the id of the sweep resumed; "" starts a fresh one (its output
	// directory must not hold a sweep; the spec is written there).
	ID string
	// Token is the shared secret external agents present (never logged).
	Token string
	// Kube runs the agents as an Indexed Job when Kube.Enabled.
	Kube kubejob.Options
	// Registerer, when set, takes the coordinator's and the sweep's
	// metrics.
	Registerer prometheus.Registerer
	// Live, when set, is the live dashboard: fed the fleet's merged load
	// and the sweep's progress (its level control is never used: the
	// sweep sets each level).
	Live *Live
	// Version is fleetbench's, recorded in the results.
	Version string
	// Stdout receives the summary and headline; Stderr the live status.
	Stdout, Stderr io.Writer
}

// StoppedFile is the file in a sweep's output directory that keeps the
// level fail-fast stopped, as a result.json marked "stopped".
const StoppedFile = "stopped.json"

// StartWait is how long a sweep waits for its target to accept
// connections before the preflight: in a cluster the model server is often
// applied together with the benchmark and starts after it.
const StartWait = 2 * time.Minute

// Sweep runs cfg's plan on one fleet and renders its reports; on an error
// or interrupt the results so far stay in the output directory and the
// way to resume is printed.
func Sweep(ctx context.Context, logger hclog.Logger, cfg SweepConfig) error {
	spec, plan, id, fresh := cfg.Spec, cfg.Plan, cfg.ID, cfg.ID == ""
	var simCfg *sweep.Sim
	if spec.Sim.Use {
		simCfg = &spec.Sim
	}
	// Before anything is created (an output directory, the agents' Job):
	// a target that cannot serve ends the sweep now. The in-process
	// simulator is not checked. A plan that switches modes first checks
	// the target its first switch brings up instead (afterSwitch): the
	// switch may be what starts the server.
	keyRequired := false
	if simCfg == nil && !spec.SkipPreflight && !switchesFirst(spec, plan) {
		if err := ready.WaitReachable(ctx, spec.ClientConfig(), StartWait, logger.Named("preflight")); err != nil {
			return err
		}
		if err := ready.Preflight(ctx, spec.ClientConfig(), 0, logger.Named("preflight")); err != nil {
			return err
		}
		// Agents without the key then say so as they join, at once.
		keyRequired = ready.KeyRequired(ctx, spec.ClientConfig())
	}
	if fresh {
		if err := runner.CheckFresh(spec.Output); err != nil {
			return err
		}
		id = runner.NewID(time.Now())
		s := *spec
		if simCfg != nil {
			s.Target = "" // a resumed sweep starts a simulator of its own
		}
		if err := runner.WriteSpec(spec.Output, &s); err != nil {
			return err
		}
	}
	fl := spec.Fleet
	var remote *Remote
	if fl.RemoteAgents > 0 || cfg.Kube.Enabled {
		remote = &Remote{Listen: fl.Listen, Agents: fl.RemoteAgents, Token: cfg.Token, JoinTimeout: fl.JoinTimeout.D(),
			CertFile: fl.TLSCert, KeyFile: fl.TLSKey}
		if remote.JoinTimeout == 0 {
			remote.JoinTimeout = coordinator.DefaultJoinTimeout
		}
	}
	if cfg.Kube.Enabled {
		// Only the levels matter: they size the Job with --agent-capacity.
		cc := coordinator.Config{}
		for _, l := range spec.Levels {
			cc.Stages = append(cc.Stages, coordinator.Stage{Level: l})
		}
		// A fatal condition of the agents cancels ctx with the cause; the
		// Job is deleted on every exit, a signal's included.
		kctx, agents, err := StartKube(ctx, logger, cfg.Kube, &cc)
		if err != nil {
			return err
		}
		defer agents.Stop()
		remote.Agents, remote.Losses = cc.Agents, agents.Losses()
		err = runSweep(kctx, logger, cfg, spec, simCfg, plan, id, !fl.NoRestore, remote, keyRequired)
		return kubejob.Cause(kctx, err)
	}
	return runSweep(ctx, logger, cfg, spec, simCfg, plan, id, !fl.NoRestore, remote, keyRequired)
}

// switchesFirst reports whether plan switches modes with a switch that
// acts (not kind none): then the first switch may be what starts the
// target, and the preflight runs after it.
func switchesFirst(spec *sweep.Spec, plan *sweep.Plan) bool {
	if plan.Switches() == 0 {
		return false
	}
	for _, m := range spec.Modes {
		if sw := spec.SwitchOf(m.Name); sw != nil && sw.Kind != sweep.KindNone {
			return true
		}
	}
	return false
}

// sweep runs plan and renders the report.
func runSweep(ctx context.Context, logger hclog.Logger, cfg SweepConfig, spec *sweep.Spec, simCfg *sweep.Sim, plan *sweep.Plan, id string, restore bool,
	remote *Remote, keyRequired bool) error {
	logger = logger.Named("sweep")
	reg := cfg.Registerer
	sm, err := runner.NewMetrics(reg)
	if err != nil {
		return err
	}
	start := time.Now()
	live := runner.NewLive(runner.DefaultLiveSpan)
	display := runner.NewDisplay(cfg.Stderr, progress.IsTerminal(cfg.Stderr), logger, live)
	if r, ok := logger.(hclog.OutputResettable); ok && display.LogOutput() != cfg.Stderr {
		// On a terminal, log lines go above the status line. Only this
		// sub-logger (and those made from it) changes; the root keeps
		// its output.
		if err := r.ResetOutput(&hclog.LoggerOptions{Output: display.LogOutput()}); err != nil {
			return fmt.Errorf("set log output: %w", err)
		}
	}
	simURL := ""
	if simCfg != nil {
		s, err := startSweepSim(ctx, simCfg, spec.Model, spec.Workload.NaturalStop, logger)
		if err != nil {
			return err
		}
		defer s.Close()
		// The sim switch's URL defaults to the target: the simulator.
		spec.Target, simURL = s.URL(), s.URL()
	}
	scrapeCfg, err := spec.ScrapeConfig().ResolveSim(simURL)
	if err != nil {
		return err
	}
	switchers, err := spec.Switchers(logger)
	if err != nil {
		return err
	}
	var gate runner.Gate
	if !spec.Readiness.Skip {
		g, err := ready.New(spec.ReadyConfig(), logger)
		if err != nil {
			return err
		}
		defer g.Close()
		gate = g
	}
	wcfg, err := spec.WorkloadConfig()
	if err != nil {
		return err
	}
	src, err := workload.Open(wcfg, logger)
	if err != nil {
		return err
	}
	facts := runner.Facts(spec, id, src.Name(), cfg.Version)
	w, err := report.NewWriter(spec.Output, facts)
	if err != nil {
		return err
	}
	defer w.Close()

	fc := Config{
		Agents: max(spec.Agents, 1), Client: spec.ClientConfig(), Source: src,
		Workload: wcfg, Endpoint: spec.Endpoint, Remote: remote, Registerer: reg, Version: cfg.Version,
		SLO: spec.SLO(), KeyRequired: keyRequired, FailFast: spec.FailFast.D(), Scrape: scrapeCfg,
	}
	if ths := spec.ParsedThresholds(); spec.AbortOnFail && len(ths) > 0 {
		fc.Judge = EarlyJudge(ths, spec.SLO())
	}
	fc.OnAgents = live.SetAgents
	if remote != nil {
		// Remote agents' samples stay with them: their interval reports
		// feed the live figures.
		fc.OnReport = func(_ string, _ uint32, w *record.Window) { live.ObserveWindow(w, time.Now()) }
		fmt.Fprintf(cfg.Stdout, "Waiting for %d agents on %s (fleetbench agent --coordinator ADDR)\n", remote.Agents, remote.Listen)
	} else {
		fc.Observe = live.Observe
	}
	onStatus := display.Update
	if cfg.Live != nil && cfg.Live.Feed != nil {
		fc.Live = &Live{Feed: cfg.Live.Feed}
		var (
			mu     sync.Mutex
			latest *runner.Status
		)
		onStatus = func(s runner.Status) {
			display.Update(s)
			mu.Lock()
			latest = &s
			mu.Unlock()
		}
		cfg.Live.Feed.SetSweep(func(now time.Time) *ui.Sweep {
			mu.Lock()
			defer mu.Unlock()
			if latest == nil {
				return &ui.Sweep{Phase: "starting", Total: plan.Total, Done: plan.Done}
			}
			return sweepView(*latest, now, display.Line(*latest, now))
		})
	}
	fl := NewSweeper(Quiet(logger.Named("fleet")), fc, sm)
	rcfg := runner.Config{
		Spec: spec, Plan: plan, Switchers: switchers, Gate: gate, Fleet: fl, Output: w,
		Restore: restore, OnStatus: onStatus, Logger: logger,
	}
	if simCfg == nil && !spec.SkipPreflight && switchesFirst(spec, plan) {
		rcfg.Preflight = func(ctx context.Context) error {
			plog := logger.Named("preflight")
			if err := ready.WaitReachable(ctx, spec.ClientConfig(), StartWait, plog); err != nil {
				return err
			}
			return ready.Preflight(ctx, spec.ClientConfig(), 0, plog)
		}
	}
	r, err := runner.New(rcfg)
	if err != nil {
		return err
	}
	fmt.Fprintf(cfg.Stdout, "Sweep %s: %d points to measure (%d done), %d switches, about %s; output in %s\n",
		id, plan.Total-plan.Done, plan.Done, plan.Switches(), plan.EstimatedDuration().Round(time.Second), spec.Output)
	dctx, stopDisplay := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { display.Run(dctx) })
	res, runErr := r.Run(ctx)
	stopDisplay()
	wg.Wait()
	if err := w.Close(); err != nil && runErr == nil {
		runErr = err
	}
	measured := 0
	if res != nil {
		measured = len(res.Points)
	}
	var stopped *StoppedLevel
	if errors.As(runErr, &stopped) {
		// The level fail-fast stopped is no point, but its errors, with
		// the server's messages, are kept next to the points.
		path := filepath.Join(spec.Output, StoppedFile)
		load := result.Load{Target: client.RedactURL(spec.Target), Model: spec.Model, Workload: src.Name(), Version: cfg.Version}
		if err := stopped.SaveStopped(path, load); err != nil {
			runErr = errors.Join(runErr, err)
		} else if stopped.Window != nil {
			fmt.Fprintf(cfg.Stdout, "The level stopped early is kept in %s, with its failures by class and the server's messages\n", path)
		}
	}
	if runErr != nil {
		fmt.Fprintf(cfg.Stdout, "Sweep stopped after %d of %d points: results so far are in %s\n", plan.Done+measured, plan.Total, w.TSVPath())
		fmt.Fprintf(cfg.Stdout, "Resume with: fleetbench sweep --resume %s\n", spec.Output)
		return runErr
	}
	rendered, err := runner.Render(spec.Output, facts)
	if err != nil {
		return err
	}
	printSweepSummary(cfg.Stdout, res, rendered, simCfg, w.TSVPath(), time.Since(start))
	return judgePoints(cfg.Stdout, res.Points, spec, src.Name(), cfg.Version)
}

// judgePoints judges every point of the sweep by the spec's thresholds,
// printing a pass or fail line for each; the failures of every point are
// returned as one *result.ThresholdError.
func judgePoints(w io.Writer, points []report.Point, spec *sweep.Spec, workloadName, version string) error {
	ths := spec.ParsedThresholds()
	if len(ths) == 0 {
		return nil
	}
	raws := make([]string, len(ths))
	for i, th := range ths {
		raws[i] = th.Raw
	}
	fmt.Fprintf(w, "Thresholds (%s), judged on every point:\n", strings.Join(raws, ", "))
	var failed []result.Verdict
	for _, p := range points {
		if p.Window == nil {
			continue
		}
		dur := p.MeasureEnd.Sub(p.MeasureStart)
		load := result.Load{
			Target: spec.Target, Model: spec.Model, Workload: workloadName, Version: version, Label: p.Mode,
			MaxConcurrency: p.Level, RequestRate: p.RPS, Backend: result.BackendFor(spec.Endpoint),
		}
		facts := load.Facts(p.MeasureStart, p.MeasureEnd, dur)
		facts.SLO = spec.SLO()
		sum, err := result.New(p.Window, facts)
		if err != nil {
			return fmt.Errorf("judge %s at %d sessions: %w", p.Mode, p.Level, err)
		}
		where := fmt.Sprintf("run %d, %s at %d sessions", p.Run, p.Mode, p.Level)
		var bad []string
		for _, th := range ths {
			if v := th.Check(sum, p.Window); !v.Pass {
				bad = append(bad, fmt.Sprintf("%s measured %s", th.Raw, v.Measured()))
				v.Raw = where + ": " + v.Raw
				failed = append(failed, v)
			}
		}
		if len(bad) == 0 {
			fmt.Fprintf(w, "  pass  %s\n", where)
		} else {
			fmt.Fprintf(w, "  FAIL  %s: %s\n", where, strings.Join(bad, "; "))
		}
	}
	if len(failed) > 0 {
		return &result.ThresholdError{Failed: failed}
	}
	return nil
}

// printSweepSummary prints where the results are and the SLA headline.
func printSweepSummary(out io.Writer, res *runner.Result, r *report.Rendered, simCfg *sweep.Sim, tsv string, took time.Duration) {
	restored := ""
	switch {
	case res.Restored:
		restored = fmt.Sprintf("; mode %s restored", res.Original)
	case res.Original != "":
		restored = fmt.Sprintf("; left in mode %s", res.Original)
	}
	fmt.Fprintf(out, "\nSweep done in %s: %d points measured, %d switches%s.\n", took.Round(time.Second), len(res.Points), res.Switches, restored)
	fmt.Fprintf(out, "Results: %s\nReport:  %s\n", tsv, r.Report)
	v := r.Outcome.Primary
	parts := make([]string, 0, len(v.Breakpoints))
	for _, b := range v.Breakpoints {
		parts = append(parts, fmt.Sprintf("%s %s", b.Mode, b))
	}
	fmt.Fprintf(out, "SLA breakpoint (highest level with TTFT p95 <= %s): %s\n", v.SLA, strings.Join(parts, ", "))
	fmt.Fprintf(out, "%s\n", v.Headline)
	if fb := r.Outcome.Fallback; fb != nil {
		fmt.Fprintf(out, "At the fallback threshold (%s): %s\n", r.Outcome.FallbackReason, fb.Headline)
	}
	if simCfg != nil && simCfg.TimeScale != 1 {
		fmt.Fprintf(out, "Simulator time scale %g: latencies are wall-clock, so %s here is %s of simulated time.\n",
			simCfg.TimeScale, v.SLA, time.Duration(float64(v.SLA)*simCfg.TimeScale))
	}
}

// startSweepSim starts the built-in simulator on a loopback port; with
// naturalStop (the workload's natural_stop) its answers stop on their own.
func startSweepSim(ctx context.Context, s *sweep.Sim, model string, naturalStop bool, logger hclog.Logger) (*sim.Sim, error) {
	cfg, err := sim.ProfileConfig(s.Profile)
	if err != nil {
		return nil, fmt.Errorf("simulator profile: %w", err)
	}
	if s.Replicas > 0 {
		cfg.Replicas = s.Replicas
	}
	if s.KVBlocks > 0 {
		cfg.Engine.NumBlocks = s.KVBlocks
	}
	cfg.TimeScale, cfg.Listen, cfg.Model = s.TimeScale, "127.0.0.1:0", model
	if naturalStop {
		cfg.Output.UntilMaxTokens = false
	}
	sm, err := sim.New(cfg, logger, nil)
	if err != nil {
		return nil, fmt.Errorf("create simulator: %w", err)
	}
	// The simulator outlives the sweep's signal so turns can drain and the
	// mode be restored; Close stops it.
	if err := sm.Start(context.WithoutCancel(ctx)); err != nil {
		return nil, fmt.Errorf("start simulator: %w", err)
	}
	logger.Info("simulator started", "url", sm.URL(), "profile", cfg.Profile, "replicas", cfg.Replicas, "time_scale", cfg.TimeScale)
	return sm, nil
}
