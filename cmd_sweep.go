package main

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/fleetbench/fleetbench/fleet"
	"github.com/fleetbench/fleetbench/internal/bundle"
	"github.com/fleetbench/fleetbench/internal/flags"
	"github.com/fleetbench/fleetbench/pkg/client"
	"github.com/fleetbench/fleetbench/pkg/kubejob"
	"github.com/fleetbench/fleetbench/pkg/sim"
	"github.com/fleetbench/fleetbench/pkg/sweep"
	"github.com/fleetbench/fleetbench/pkg/sweep/kubeswitch"
	"github.com/fleetbench/fleetbench/pkg/sweep/runner"
)

// sweepOptions are the sweep command's own flags; every other flag is a
// spec setting (sweep.AddFlags), also settable in the sweep file.
type sweepOptions struct {
	file, resume string
	dryRun       bool
	linger       time.Duration
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
			if o.linger < 0 {
				return usagef("--linger must not be negative")
			}
			if o.linger > 0 && spec.Fleet.MetricsListen == "" {
				return usagef("--linger serves the results on the metrics port: give --metrics-listen too")
			}
			if err := checkUIBaseline(spec.Fleet.UIBaseline, spec.Fleet.MetricsListen); err != nil {
				return &usageError{err: err}
			}
			return c.runSweep(cmd.Context(), o, spec)
		},
	}
	fs := cmd.Flags()
	fs.StringVarP(&o.file, "file", "f", "", "sweep spec file (YAML); flags override it")
	fs.StringVar(&o.resume, "resume", "", "continue the interrupted sweep in DIR (its spec is read from DIR/"+runner.SpecFile+" unless -f is given)")
	fs.BoolVar(&o.dryRun, "dry-run", false, "print the merged, validated spec and the plan (switches, estimated duration), and exit")
	fs.DurationVar(&o.linger, "linger", 0, "after the sweep, keep serving its output directory on the metrics port ("+bundle.Path+", for `fleetbench fetch`) this long, or until stopped")
	flags.Group(fs, flags.GroupSweep, "file", "resume", "dry-run", "linger")
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
		path = filepath.Join(o.resume, runner.SpecFile)
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
	// The spec's agents size the Job unless --agent-capacity is given
	// without a typed --agents: then the largest level does.
	ko.Agents, ko.AgentsSet = max(spec.Agents, 1), fs.Changed("agents")
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
		spec.APIKeyEnv = "" // the built-in simulator takes no key
		if spec.Switch == nil {
			spec.Switch = &sweep.SwitchSpec{Kind: sweep.KindSim}
		}
	}
	if err := spec.Validate(); err != nil {
		return nil, fmt.Errorf("invalid sweep:\n%w", err)
	}
	maxLevel := 0
	for _, l := range spec.Levels {
		maxLevel = max(maxLevel, l)
	}
	if err := ko.Check(maxLevel); err != nil {
		return nil, fmt.Errorf("configure agents job: %w", err)
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
		if id, err = runner.ReadID(o.resume); err != nil {
			return fmt.Errorf("resume: %w", err)
		}
		if done, err = runner.Done(o.resume, id); err != nil {
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
	token := ""
	if spec.Fleet.RemoteAgents > 0 || o.kube.Enabled {
		if token, err = loadToken(spec.Fleet.TokenFile); err != nil {
			return err
		}
		if token == "" {
			c.logger.Warn("no token: any agent that reaches the listen address may join", "env", tokenEnv)
		}
	}
	reg := newMetricsRegistry(spec.Fleet.MetricsListen)
	results := bundle.NewServer(spec.Output)
	dash, err := newDashboard("sweep", spec.Fleet.MetricsListen, token, spec.Fleet.UIBaseline, false,
		"read-only during a sweep: the sweep sets each level", c.logger)
	if err != nil {
		return err
	}
	_, stopMetrics, err := serveMetrics(ctx, spec.Fleet.MetricsListen, reg, c.logger, append(dash.routes(), route{bundle.Path, results})...)
	if err != nil {
		return err
	}
	defer stopMetrics()
	defer dash.close() // before the server stops: a feed stream never goes idle
	err = fleet.Sweep(ctx, c.logger, fleet.SweepConfig{
		Spec: spec, Plan: plan, ID: id, Token: token, Kube: o.kube, Registerer: registerer(reg), Live: dash.fleetLive(),
		Version: version, Stdout: c.stdout, Stderr: c.stderr,
	})
	outcome := "ok"
	if err != nil {
		outcome = err.Error()
	}
	results.Finish(outcome)
	if err != nil && o.linger > 0 && ctx.Err() == nil {
		// Said now: the exit line comes only after the linger.
		c.logger.Error("sweep failed", "error", err)
	}
	c.linger(ctx, o.linger, spec.Output)
	return err
}

// linger keeps the process, and so its metrics port's results, up for d
// after a sweep, or until ctx ends (the pod is stopped).
func (c *cli) linger(ctx context.Context, d time.Duration, dir string) {
	if d <= 0 || ctx.Err() != nil {
		return
	}
	c.logger.Info("sweep ended; serving its output for fleetbench fetch", "dir", dir, "path", bundle.Path, "for", d)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
