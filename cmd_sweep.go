package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/fleetbench/fleetbench/coordinator"
	"github.com/fleetbench/fleetbench/fleet"
	"github.com/fleetbench/fleetbench/pkg/client"
	"github.com/fleetbench/fleetbench/pkg/flags"
	"github.com/fleetbench/fleetbench/pkg/kubejob"
	"github.com/fleetbench/fleetbench/pkg/kubeswitch"
	"github.com/fleetbench/fleetbench/pkg/progress"
	"github.com/fleetbench/fleetbench/pkg/ready"
	"github.com/fleetbench/fleetbench/pkg/record"
	"github.com/fleetbench/fleetbench/pkg/report"
	"github.com/fleetbench/fleetbench/pkg/sim"
	"github.com/fleetbench/fleetbench/pkg/sweep"
	"github.com/fleetbench/fleetbench/pkg/sweeprun"
	"github.com/fleetbench/fleetbench/pkg/workload"
)

// sweepOptions are the sweep command's own flags; every other flag is a
// spec setting (sweep.AddFlags), also settable in the sweep file.
type sweepOptions struct {
	file, resume string
	dryRun       bool
	kube         kubejob.Options
}

func (c *cli) sweepCmd() *cobra.Command {
	cmd, _ := c.newSweep()
	return cmd
}

// newSweep returns the sweep command and its options.
func (c *cli) newSweep() (*cobra.Command, *sweepOptions) {
	// The Kubernetes switch kinds must be known before a spec is
	// validated.
	kubeswitch.Register()
	o := &sweepOptions{}
	cmd := &cobra.Command{
		Use:   "sweep -f sweep.yaml [flags]",
		Short: "run a sweep of levels x routing modes x runs and write reports",
		Long: "Runs every level of every routing mode, runs times, switching the mode between blocks of\n" +
			"levels and waiting until the target really serves, and writes the sweep TSV, report.md,\n" +
			"baseline.json and charts. Every flag can also be set in the sweep file (flags override\n" +
			"it). Without a target the built-in simulator is started in-process.",
		Example: "  fleetbench sweep -f sweep.yaml --dry-run     # the merged, validated plan\n" +
			"  fleetbench sweep -f sweep.yaml --concurrency 20,40 --duration 2m\n" +
			"  fleetbench sweep --resume out/sweep-1",
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			spec, err := o.spec(cmd.Flags())
			if err != nil {
				return &usageError{err: err}
			}
			return c.runSweep(cmd.Context(), o, spec)
		},
	}
	fs := cmd.Flags()
	fs.StringVarP(&o.file, "file", "f", "", "sweep spec file (YAML); flags override it")
	fs.StringVar(&o.resume, "resume", "", "continue the interrupted sweep in DIR (its spec is read from DIR/"+sweeprun.SpecFile+" unless -f is given)")
	fs.BoolVar(&o.dryRun, "dry-run", false, "print the merged, validated spec and the plan (switches, estimated duration), and exit")
	flags.Group(fs, flags.GroupSweep, "file", "resume", "dry-run")
	sweep.RegisterFlags(fs)
	addKubeFlags(fs, &o.kube)
	flags.Record(fs)
	return cmd, o
}

// spec reads the spec: the file (or the resumed directory's copy), the
// flags over it, then the simulator's defaults when the sweep runs against
// the built-in simulator. It is validated.
func (o *sweepOptions) spec(fs *pflag.FlagSet) (*sweep.Spec, error) {
	path := o.file
	if path == "" && o.resume != "" {
		path = filepath.Join(o.resume, sweeprun.SpecFile)
	}
	spec := sweep.Default()
	if path != "" {
		var err error
		if spec, err = sweep.Load(path); err != nil {
			return nil, err
		}
	}
	if err := spec.ApplyFlags(fs); err != nil {
		return nil, err
	}
	// The kube section, then the kube flags typed over it.
	kfs := pflag.NewFlagSet("kube", pflag.ContinueOnError)
	ko := kubejob.Options{}
	ko.AddFlags(kfs)
	if err := spec.ApplyKube(kfs); err != nil {
		return nil, err
	}
	if err := flags.Replay(fs, kfs); err != nil {
		return nil, err
	}
	fs.Visit(func(f *pflag.Flag) {
		if kf := kfs.Lookup(f.Name); kf != nil {
			kf.Changed = true
		}
	})
	spec.KubeFromFlags(kfs)
	ko.Agents, ko.AgentsSet = max(spec.Agents, 1), fs.Changed("agents") || spec.Agents > 0
	o.kube = ko
	if o.resume != "" {
		spec.Output = o.resume
	}
	if ko.Enabled && spec.Fleet.Listen == "" {
		spec.Fleet.Listen = sweep.DefaultKubeListen
	}
	if spec.Sim.Use || spec.Target == "" {
		if ko.Enabled {
			return nil, fmt.Errorf("--kube-agents needs a target the agent pods can reach; the built-in simulator listens on loopback")
		}
		if spec.Sim.Profile == "" {
			spec.Sim.Profile = sim.DefaultProfile
		}
		if spec.Sim.TimeScale == 0 {
			spec.Sim.TimeScale = 1
		}
		p, ok := sim.LookupProfile(spec.Sim.Profile)
		if !ok {
			return nil, fmt.Errorf("simulator profile %q is not built in (see fleetbench sim --list-profiles)", spec.Sim.Profile)
		}
		if spec.Model == "" {
			spec.Model = p.Model
		}
		// Until the simulator listens, a placeholder stands for its URL so
		// the spec (and the sim switch's URL) validate.
		spec.Target = simPlaceholder
		spec.Sim.Use = true
		if spec.Switch == nil {
			spec.Switch = &sweep.SwitchSpec{Kind: sweep.KindSim}
		}
	}
	if err := spec.Validate(); err != nil {
		return nil, fmt.Errorf("invalid sweep:\n%w", err)
	}
	return spec, nil
}

// simPlaceholder is the target of a sweep against the built-in simulator
// until the simulator has its address.
const simPlaceholder = "http://127.0.0.1:1"

// runSweep prints the plan (--dry-run) or runs it, with external or
// Kubernetes agents when the spec asks for them.
func (c *cli) runSweep(ctx context.Context, o *sweepOptions, spec *sweep.Spec) error {
	var done map[sweep.Key]bool
	var id string
	var err error
	if o.resume != "" {
		if id, err = sweeprun.ReadID(o.resume); err != nil {
			return fmt.Errorf("resume: %w", err)
		}
		if done, err = sweeprun.Done(o.resume, id); err != nil {
			return fmt.Errorf("resume: %w", err)
		}
	}
	plan := sweep.NewPlan(spec, done)
	var simCfg *sweep.Sim
	if spec.Sim.Use {
		simCfg = &spec.Sim
	}
	if o.dryRun {
		shown := *spec
		if simCfg != nil {
			shown.Target = ""
		} else {
			shown.Target = client.RedactURL(spec.Target)
		}
		if err := writeDryRun(c.stdout, &shown); err != nil {
			return err
		}
		if simCfg != nil {
			fmt.Fprintf(c.stdout, "\ntarget: the built-in simulator (%s, time scale %g), switched with the sim switch\n", simCfg.Profile, simCfg.TimeScale)
		} else {
			fmt.Fprintf(c.stdout, "\ntarget: %s\n", client.RedactURL(spec.Target))
		}
		return plan.WritePlan(c.stdout)
	}
	if o.resume == "" {
		if err := sweeprun.CheckFresh(spec.Output); err != nil {
			return err
		}
		id = sweeprun.NewID(time.Now())
		s := *spec
		if simCfg != nil {
			s.Target = "" // a resumed sweep starts a simulator of its own
		}
		if err := sweeprun.WriteSpec(spec.Output, &s); err != nil {
			return err
		}
	}
	fl := spec.Fleet
	reg := newMetricsRegistry(fl.MetricsListen)
	_, stopMetrics, err := serveMetrics(ctx, fl.MetricsListen, reg, c.logger)
	if err != nil {
		return err
	}
	defer stopMetrics()
	var remote *fleet.Remote
	if fl.RemoteAgents > 0 || o.kube.Enabled {
		token, err := loadToken(fl.TokenFile)
		if err != nil {
			return err
		}
		if token == "" {
			c.logger.Warn("no token: any agent that reaches the listen address may join", "env", tokenEnv)
		}
		remote = &fleet.Remote{Listen: fl.Listen, Agents: fl.RemoteAgents, Token: token, JoinTimeout: fl.JoinTimeout.D(),
			CertFile: fl.TLSCert, KeyFile: fl.TLSKey}
		if remote.JoinTimeout == 0 {
			remote.JoinTimeout = coordinator.DefaultJoinTimeout
		}
	}
	if o.kube.Enabled {
		// Only the levels matter: they size the Job with --agent-capacity.
		cfg := coordinator.Config{}
		for _, l := range spec.Levels {
			cfg.Stages = append(cfg.Stages, coordinator.Stage{Level: l})
		}
		// A fatal condition of the agents cancels ctx with the cause; the
		// Job is deleted on every exit, a signal's included.
		kctx, agents, err := fleet.StartKube(ctx, c.logger, o.kube, &cfg)
		if err != nil {
			return err
		}
		defer agents.Stop()
		remote.Agents, remote.Losses = cfg.Agents, agents.Losses()
		err = c.sweep(kctx, spec, simCfg, plan, id, !fl.NoRestore, remote, registerer(reg))
		return kubejob.Cause(kctx, err)
	}
	return c.sweep(ctx, spec, simCfg, plan, id, !fl.NoRestore, remote, registerer(reg))
}

// sweep runs plan and renders the report.
func (c *cli) sweep(ctx context.Context, spec *sweep.Spec, simCfg *sweep.Sim, plan *sweep.Plan, id string, restore bool,
	remote *fleet.Remote, reg prometheus.Registerer) error {
	logger := c.logger.Named("sweep")
	sm, err := sweeprun.NewMetrics(reg)
	if err != nil {
		return err
	}
	start := time.Now()
	live := sweeprun.NewLive(sweeprun.DefaultLiveSpan)
	display := sweeprun.NewDisplay(c.stderr, progress.IsTerminal(c.stderr), logger, live)
	if r, ok := logger.(hclog.OutputResettable); ok && display.LogOutput() != c.stderr {
		// On a terminal, log lines go above the status line. Only this
		// sub-logger (and those made from it) changes; the root keeps
		// its output.
		if err := r.ResetOutput(&hclog.LoggerOptions{Output: display.LogOutput()}); err != nil {
			return fmt.Errorf("set log output: %w", err)
		}
	}
	if simCfg != nil {
		s, err := startSweepSim(ctx, simCfg, spec.Model, logger)
		if err != nil {
			return err
		}
		defer s.Close()
		// The sim switch's URL defaults to the target: the simulator.
		spec.Target = s.URL()
	}
	switchers, err := spec.Switchers(logger)
	if err != nil {
		return err
	}
	var gate sweeprun.Gate
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
	facts := sweeprun.Facts(spec, id, src.Name(), version)
	w, err := report.NewWriter(spec.Output, facts)
	if err != nil {
		return err
	}
	defer w.Close()

	fc := fleet.Config{
		Agents: max(spec.Agents, 1), Client: spec.ClientConfig(), Source: src,
		Workload: wcfg, Endpoint: spec.Endpoint, Remote: remote, Registerer: reg, Version: version,
	}
	if remote != nil {
		// Remote agents' samples stay with them: their interval reports
		// feed the live figures.
		fc.OnReport = func(_ string, _ uint32, w *record.Window) { live.ObserveWindow(w, time.Now()) }
		fmt.Fprintf(c.stdout, "Waiting for %d agents on %s (fleetbench agent --coordinator ADDR)\n", remote.Agents, remote.Listen)
	} else {
		fc.Observe = live.Observe
	}
	fl := fleet.NewSweeper(fleet.Quiet(logger.Named("fleet")), fc, sm)
	r, err := sweeprun.New(sweeprun.Config{
		Spec: spec, Plan: plan, Switchers: switchers, Gate: gate, Fleet: fl, Output: w,
		Restore: restore, OnStatus: display.Update, Logger: logger,
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(c.stdout, "Sweep %s: %d points to measure (%d done), %d switches, about %s; output in %s\n",
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
	if runErr != nil {
		fmt.Fprintf(c.stdout, "Sweep stopped after %d of %d points: results so far are in %s\n", plan.Done+measured, plan.Total, w.TSVPath())
		fmt.Fprintf(c.stdout, "Resume with: fleetbench sweep --resume %s\n", spec.Output)
		return runErr
	}
	rendered, err := sweeprun.Render(spec.Output, facts)
	if err != nil {
		return err
	}
	c.printSweepSummary(res, rendered, simCfg, w.TSVPath(), time.Since(start))
	return nil
}

// printSweepSummary prints where the results are and the SLA headline.
func (c *cli) printSweepSummary(res *sweeprun.Result, r *report.Rendered, simCfg *sweep.Sim, tsv string, took time.Duration) {
	out := c.stdout
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

// startSweepSim starts the built-in simulator on a loopback port.
func startSweepSim(ctx context.Context, s *sweep.Sim, model string, logger hclog.Logger) (*sim.Sim, error) {
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
