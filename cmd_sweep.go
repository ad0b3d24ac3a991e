package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"
	"sigs.k8s.io/yaml"

	"github.com/fleetbench/fleetbench/coordinator"
	"github.com/fleetbench/fleetbench/fleet"
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

// simSettings is the optional `sim:` section of a sweep file: the built-in
// simulator the sweep starts when the spec has no target (or with --sim).
// It belongs to the command, not to sweep.Spec, because only this process
// can start a simulator; cmdSweep takes it out before the spec is parsed.
type simSettings struct {
	// Profile is the hardware profile (default: sim.DefaultProfile).
	Profile string `json:"profile,omitempty"`
	// TimeScale divides every simulated duration (default 1). Latencies
	// measured are wall-clock: at time scale 10 a TTFT of 40 ms is 400 ms
	// of simulated time, so the spec's SLA must be given in wall-clock
	// terms too.
	TimeScale float64 `json:"time_scale,omitempty"`
	// Replicas overrides the profile's number of workers.
	Replicas int `json:"replicas,omitempty"`
	// KVBlocks overrides the profile's KV blocks per worker: fewer blocks
	// make caching matter more, as on a busy production stack.
	KVBlocks int `json:"kv_blocks,omitempty"`
}

// sweepFlags are the sweep command's own flags; the spec's are registered
// by sweep.RegisterFlags.
type sweepFlags struct {
	file      string
	resume    string
	dryRun    bool
	noRestore bool
	useSim    bool
	sim       simSettings
	// listen, remoteAgents and tokenFile make external agents the fleet;
	// tlsCert and tlsKey serve them over TLS.
	listen          string
	remoteAgents    int
	tokenFile       string
	tlsCert, tlsKey string
	joinTimeout     time.Duration
	// kube runs the agents as an Indexed Job (--kube-agents).
	kube          *kubeFlags
	metricsListen string
}

// defaultKubeListen is where a sweep with --kube-agents accepts its agents
// unless --listen says otherwise: the port of the coordinator's Service.
const defaultKubeListen = ":7070"

func (c *cli) sweepFlagSet(f *sweepFlags) *pflag.FlagSet {
	fs := pflag.NewFlagSet("sweep", pflag.ContinueOnError)
	fs.SetOutput(c.stderr)
	fs.StringVarP(&f.file, "file", "f", "", "sweep spec file (YAML); flags override it")
	fs.StringVar(&f.resume, "resume", "", "continue the interrupted sweep in `DIR` (its spec is read from DIR/"+sweeprun.SpecFile+" unless -f is given)")
	fs.BoolVar(&f.dryRun, "dry-run", false, "print the plan, the number of switches and the estimated duration, and exit")
	fs.BoolVar(&f.noRestore, "no-restore", false, "leave the target in the last mode swept instead of restoring the mode it had before")
	fs.BoolVar(&f.useSim, "sim", false, "run against the built-in simulator in-process, even when the spec names a target")
	fs.StringVar(&f.sim.Profile, "sim-profile", "", "simulator: hardware profile (default: the file's, else "+sim.DefaultProfile+")")
	fs.Float64Var(&f.sim.TimeScale, "sim-time-scale", 0, "simulator: speed-up of simulated time (default: the file's, else 1)")
	fs.IntVar(&f.sim.Replicas, "sim-replicas", 0, "simulator: replicas (default: the file's, else the profile's)")
	fs.IntVar(&f.sim.KVBlocks, "sim-kv-blocks", 0, "simulator: KV blocks per replica (default: the file's, else the profile's)")
	fs.StringVar(&f.listen, "listen", "", "with --remote-agents or --kube-agents: address to accept agents on (`fleetbench agent --coordinator ADDR`; --kube-agents default "+defaultKubeListen+")")
	fs.IntVar(&f.remoteAgents, "remote-agents", 0, "run the sweep on `K` external agents instead of local ones (needs --listen)")
	fs.StringVar(&f.tlsCert, "tls-cert", "", "with --remote-agents or --kube-agents: TLS certificate file for the agents' connections (with --tls-key)")
	fs.StringVar(&f.tlsKey, "tls-key", "", "TLS key file (with --tls-cert)")
	fs.StringVar(&f.tokenFile, "token-file", "", "with --remote-agents: file holding the agents' shared token (default: $"+tokenEnv+")")
	fs.DurationVar(&f.joinTimeout, "join-timeout", coordinator.DefaultJoinTimeout, "with --remote-agents or --kube-agents: how long to wait for the agents")
	fs.StringVar(&f.metricsListen, "metrics-listen", "", "serve Prometheus metrics on `ADDR`/metrics (e.g. :9090; empty: none)")
	kfs := flag.NewFlagSet("kube", flag.ContinueOnError)
	f.kube = addKubeFlags(kfs)
	fs.AddGoFlagSet(kfs)
	sweep.RegisterFlags(fs)
	fs.Usage = func() {
		fmt.Fprintf(c.stderr, "usage: fleetbench sweep -f sweep.yaml [flags]\n"+
			"       fleetbench sweep --resume DIR [flags]\n\n"+
			"Runs every level of every routing mode, runs times, and writes the sweep TSV,\n"+
			"report.md and charts into the output directory. Without a target the built-in\n"+
			"simulator is started in-process and switched with the sim switch.\n\nflags:\n")
		fs.PrintDefaults()
	}
	return fs
}

// cmdSweep runs a sweep (or prints its plan) and reports its SLA headline.
func (c *cli) cmdSweep(ctx context.Context, args []string) error {
	// The Kubernetes switch kinds must be known before the spec is
	// validated.
	kubeswitch.Register()
	var f sweepFlags
	fs := c.sweepFlagSet(&f)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return err
		}
		return errUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(c.stderr, "fleetbench sweep: unexpected argument %q\n", fs.Arg(0))
		return errUsage
	}
	if f.kube.enabled {
		if f.remoteAgents != 0 {
			fmt.Fprintln(c.stderr, "fleetbench sweep: --kube-agents starts the agents itself: drop --remote-agents (size them with --agents or --agent-capacity)")
			return errUsage
		}
		if f.listen == "" {
			f.listen = defaultKubeListen
		}
	} else if f.remoteAgents < 0 || (f.remoteAgents > 0) != (f.listen != "") {
		fmt.Fprintln(c.stderr, "fleetbench sweep: --remote-agents K (K >= 1) and --listen ADDR go together")
		return errUsage
	}
	if (f.tlsCert == "") != (f.tlsKey == "") || (f.tlsCert != "" && f.listen == "") {
		fmt.Fprintln(c.stderr, "fleetbench sweep: --tls-cert and --tls-key go together, with --remote-agents or --kube-agents")
		return errUsage
	}
	spec, simCfg, err := c.sweepSpec(fs, &f)
	if err != nil {
		fmt.Fprintf(c.stderr, "fleetbench sweep: %v\n", err)
		return errUsage
	}
	useSim := simCfg != nil
	if useSim && f.kube.enabled {
		fmt.Fprintln(c.stderr, "fleetbench sweep: --kube-agents needs a target the agent pods can reach; the built-in simulator listens on loopback")
		return errUsage
	}

	var done map[sweep.Key]bool
	var id string
	if f.resume != "" {
		if id, err = sweeprun.ReadID(f.resume); err != nil {
			return fmt.Errorf("resume: %w", err)
		}
		if done, err = sweeprun.Done(f.resume, id); err != nil {
			return fmt.Errorf("resume: %w", err)
		}
	}
	plan := sweep.NewPlan(spec, done)
	if f.dryRun {
		if useSim {
			fmt.Fprintf(c.stdout, "target: the built-in simulator (%s, time scale %g), switched with the sim switch\n",
				simCfg.Profile, simCfg.TimeScale)
		} else {
			fmt.Fprintf(c.stdout, "target: %s\n", redactURL(spec.Target))
		}
		return plan.WritePlan(c.stdout)
	}
	if f.resume == "" {
		if err := sweeprun.CheckFresh(spec.Output); err != nil {
			return err
		}
		id = sweeprun.NewID(time.Now())
		if err := writeSweepSpec(spec, simCfg); err != nil {
			return err
		}
	}
	reg := newMetricsRegistry(f.metricsListen)
	_, stopMetrics, err := serveMetrics(ctx, f.metricsListen, reg, c.logger)
	if err != nil {
		return err
	}
	defer stopMetrics()
	var remote *fleet.Remote
	if f.remoteAgents > 0 || f.kube.enabled {
		token, err := loadToken(f.tokenFile)
		if err != nil {
			return err
		}
		if token == "" {
			c.logger.Warn("no token: any agent that reaches the listen address may join", "env", tokenEnv)
		}
		remote = &fleet.Remote{Listen: f.listen, Agents: f.remoteAgents, Token: token, JoinTimeout: f.joinTimeout,
			CertFile: f.tlsCert, KeyFile: f.tlsKey}
	}
	if f.kube.enabled {
		// --agents (the spec's agents) is the count, unless only
		// --agent-capacity is given.
		f.kube.specAgents = max(spec.Agents, 1)
		// Only the levels matter: they size the Job with --agent-capacity.
		cfg := coordinator.Config{}
		for _, l := range spec.Levels {
			cfg.Stages = append(cfg.Stages, coordinator.Stage{Level: l})
		}
		// A fatal condition of the agents cancels ctx with the cause; the
		// Job is deleted on every exit, a signal's included.
		kctx, losses, stopKube, err := f.kube.startKubeAgentsFor(ctx, c.logger, &cfg)
		if err != nil {
			return err
		}
		defer stopKube()
		remote.Agents, remote.Losses = cfg.Agents, losses
		err = c.sweep(kctx, spec, simCfg, plan, id, !f.noRestore, remote, registerer(reg))
		return kubeCause(kctx, err)
	}
	return c.sweep(ctx, spec, simCfg, plan, id, !f.noRestore, remote, registerer(reg))
}

// sweepSpec reads the spec: the file (or the resumed directory's copy),
// then the flags over it, then the simulator defaults when the sweep runs
// against the built-in simulator. The simulator settings are nil
// otherwise. The spec is validated.
func (c *cli) sweepSpec(fs *pflag.FlagSet, f *sweepFlags) (*sweep.Spec, *simSettings, error) {
	path := f.file
	if path == "" && f.resume != "" {
		path = filepath.Join(f.resume, sweeprun.SpecFile)
	}
	spec := sweep.Default()
	var fileSim *simSettings
	if path != "" {
		var err error
		if spec, fileSim, err = loadSweepFile(path); err != nil {
			return nil, nil, err
		}
	}
	if err := spec.ApplyFlags(fs); err != nil {
		return nil, nil, err
	}
	if f.resume != "" {
		spec.Output = f.resume
	}
	var simCfg *simSettings
	if f.useSim || spec.Target == "" {
		s := simSettings{Profile: sim.DefaultProfile, TimeScale: 1}
		if fileSim != nil {
			mergeSim(&s, *fileSim)
		}
		mergeSim(&s, f.sim)
		p, ok := sim.LookupProfile(s.Profile)
		if !ok {
			return nil, nil, fmt.Errorf("simulator profile %q is not built in (see fleetbench sim --list-profiles)", s.Profile)
		}
		if s.TimeScale <= 0 || s.Replicas < 0 || s.KVBlocks < 0 {
			return nil, nil, fmt.Errorf("simulator time scale %g must be > 0, replicas %d and kv blocks %d >= 0", s.TimeScale, s.Replicas, s.KVBlocks)
		}
		if spec.Model == "" {
			spec.Model = p.Model
		}
		// Until the simulator listens, a placeholder stands for its URL so
		// the spec (and the sim switch's URL) validate.
		spec.Target = simPlaceholder
		if spec.Switch == nil {
			spec.Switch = &sweep.SwitchSpec{Kind: sweep.KindSim}
		}
		simCfg = &s
	}
	if err := spec.Validate(); err != nil {
		return nil, nil, fmt.Errorf("invalid sweep:\n%w", err)
	}
	return spec, simCfg, nil
}

// simPlaceholder is the target of a sweep against the built-in simulator
// until the simulator has its address.
const simPlaceholder = "http://127.0.0.1:1"

// mergeSim sets the fields of o that are set over s.
func mergeSim(s *simSettings, o simSettings) {
	if o.Profile != "" {
		s.Profile = o.Profile
	}
	if o.TimeScale != 0 {
		s.TimeScale = o.TimeScale
	}
	if o.Replicas != 0 {
		s.Replicas = o.Replicas
	}
	if o.KVBlocks != 0 {
		s.KVBlocks = o.KVBlocks
	}
}

// loadSweepFile reads a sweep file: the spec, and its optional `sim:`
// section, which is taken out before sweep.Parse checks the rest strictly.
func loadSweepFile(path string) (*sweep.Spec, *simSettings, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("load sweep spec: %w", err)
	}
	j, err := yaml.YAMLToJSON(b)
	if err != nil {
		return nil, nil, fmt.Errorf("load sweep spec %s: %w", path, err)
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(j, &doc); err != nil || doc == nil {
		// Not an object: let Parse say what is wrong.
		s, perr := sweep.Parse(b)
		if perr != nil {
			return nil, nil, fmt.Errorf("load sweep spec %s: %w", path, perr)
		}
		return s, nil, nil
	}
	var simCfg *simSettings
	if raw, ok := doc["sim"]; ok {
		delete(doc, "sim")
		simCfg = &simSettings{}
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(simCfg); err != nil {
			return nil, nil, fmt.Errorf("load sweep spec %s: sim: %w (known: profile, time_scale, replicas, kv_blocks)", path, err)
		}
		if j, err = json.Marshal(doc); err != nil {
			return nil, nil, fmt.Errorf("load sweep spec %s: %w", path, err)
		}
	}
	s, err := sweep.Parse(j)
	if err != nil {
		return nil, nil, fmt.Errorf("load sweep spec %s: %w", path, err)
	}
	return s, simCfg, nil
}

// writeSweepSpec keeps the spec (with its sim section) in the output
// directory for --resume. A simulator's address is not kept: a resumed
// sweep starts a simulator of its own.
func writeSweepSpec(spec *sweep.Spec, simCfg *simSettings) error {
	s := *spec
	if simCfg != nil {
		s.Target = ""
	}
	if err := sweeprun.WriteSpec(spec.Output, &s); err != nil {
		return err
	}
	if simCfg == nil {
		return nil
	}
	b, err := yaml.Marshal(map[string]*simSettings{"sim": simCfg})
	if err != nil {
		return fmt.Errorf("encode sim settings: %w", err)
	}
	fh, err := os.OpenFile(filepath.Join(spec.Output, sweeprun.SpecFile), os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("write sweep spec: %w", err)
	}
	if _, err := fh.Write(b); err != nil {
		_ = fh.Close()
		return fmt.Errorf("write sweep spec: %w", err)
	}
	return fh.Close()
}

// sweep runs plan and renders the report.
func (c *cli) sweep(ctx context.Context, spec *sweep.Spec, simCfg *simSettings, plan *sweep.Plan, id string, restore bool,
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
func (c *cli) printSweepSummary(res *sweeprun.Result, r *report.Rendered, simCfg *simSettings, tsv string, took time.Duration) {
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
func startSweepSim(ctx context.Context, s *simSettings, model string, logger hclog.Logger) (*sim.Sim, error) {
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
