package sweep

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/spf13/pflag"

	"github.com/fleetbench/fleetbench/internal/flags"
	"github.com/fleetbench/fleetbench/pkg/servermetrics"
)

// Sim is the sweep file's `sim:` section: the built-in simulator the sweep
// starts in-process when the spec has no target (or with Use). Zero
// fields take the defaults.
type Sim struct {
	// Use runs against the simulator even when the spec names a target.
	Use bool `json:"use,omitempty"`
	// Profile is the hardware profile (default: the simulator's default).
	Profile string `json:"profile,omitempty"`
	// TimeScale divides every simulated duration (default 1). Latencies
	// measured are wall-clock: at time scale 10 a TTFT of 40 ms is 400 ms
	// of simulated time, so the spec's SLA is given in wall-clock terms.
	TimeScale float64 `json:"time_scale,omitempty"`
	// Replicas overrides the profile's number of workers.
	Replicas int `json:"replicas,omitempty"`
	// KVBlocks overrides the profile's KV blocks per worker.
	KVBlocks int `json:"kv_blocks,omitempty"`
}

// Fleet is the sweep file's `fleet:` section: where the agents come from
// when they are not the sweep's own in-process ones, and what the sweep
// serves. Kube holds the Kubernetes agent flags by name (the `kube:`
// section: `kube-agents: true`, `agent-capacity: 800`, ...), applied
// under the command line's.
type Fleet struct {
	// Listen is the address external agents dial.
	Listen string `json:"listen,omitempty"`
	// RemoteAgents is how many external agents (fleetbench agent) the
	// sweep waits for; 0 runs its own in-process agents.
	RemoteAgents int `json:"remote_agents,omitempty"`
	// TokenFile holds the agents' shared token (default: $FLEETBENCH_TOKEN).
	TokenFile string `json:"token_file,omitempty"`
	// TLSCert and TLSKey serve the agents over TLS.
	TLSCert string `json:"tls_cert,omitempty"`
	TLSKey  string `json:"tls_key,omitempty"`
	// JoinTimeout bounds the wait for the agents.
	JoinTimeout Duration `json:"join_timeout,omitempty"`
	// MetricsListen serves Prometheus metrics on ADDR/metrics.
	MetricsListen string `json:"metrics_listen,omitempty"`
	// UIBaseline is a baseline.json drawn in the dashboard at
	// MetricsListen/ui.
	UIBaseline string `json:"ui_baseline,omitempty"`
	// NoRestore leaves the target in the last mode swept.
	NoRestore bool `json:"no_restore,omitempty"`
}

// Scrape is the sweep file's `scrape:` section: the serving stack's
// /metrics endpoints read at the start and end of every level's measured
// time (pkg/servermetrics), e.g. `scrape: {urls: [http://vllm:8000/metrics],
// interval: 5s, timeout: 2s}`. Zero durations take pkg/servermetrics's defaults.
type Scrape struct {
	// URLs are the /metrics pages; servermetrics.SimEndpoint ("sim") stands for
	// the in-process simulator's.
	URLs []string `json:"urls,omitempty"`
	// Interval is how often gauges are sampled within a level.
	Interval Duration `json:"interval,omitempty"`
	// Timeout bounds one read of one endpoint.
	Timeout Duration `json:"timeout,omitempty"`
	// Pods finds serving pods to read through the Kubernetes API, listed
	// again every level: `pods: {selector: app=vllm, port: 8000}`.
	Pods servermetrics.Pods `json:"pods,omitzero"`
}

// ScrapeConfig is the scraper's configuration of the spec's scrape
// section, defaults applied; its Endpoints are empty when nothing is
// scraped, and may name servermetrics.SimEndpoint (servermetrics.Config.ResolveSim).
func (s *Spec) ScrapeConfig() servermetrics.Config {
	c := servermetrics.Config{Endpoints: s.Scrape.URLs, Interval: s.Scrape.Interval.D(), Timeout: s.Scrape.Timeout.D()}.WithDefaults()
	if s.Scrape.Pods != (servermetrics.Pods{}) {
		p := s.Scrape.Pods
		c.Pods = &p
	}
	return c
}

// validateScrape checks the scrape section.
func (s *Spec) validateScrape() []error {
	c := s.ScrapeConfig()
	if len(c.Endpoints) == 0 && c.Pods == nil {
		if s.Scrape.Interval < 0 || s.Scrape.Timeout < 0 {
			return []error{errors.New("scrape: interval and timeout must not be negative")}
		}
		return nil
	}
	simURL := ""
	if s.Sim.Use {
		simURL = "http://sim.invalid" // the simulator's address is known once it listens
	}
	c, err := c.ResolveSim(simURL)
	if err != nil {
		return []error{err}
	}
	if err := c.Validate(); err != nil {
		return []error{err}
	}
	return nil
}

// addSettingsFlags registers the sim, fleet and scrape sections' flags
// bound to s.
func addSettingsFlags(fs *pflag.FlagSet, s *Spec) {
	flags.Scrape(fs, &s.Scrape.URLs, (*time.Duration)(&s.Scrape.Interval), (*time.Duration)(&s.Scrape.Timeout))
	flags.ScrapePods(fs, &s.Scrape.Pods)

	fs.BoolVar(&s.Sim.Use, "sim", s.Sim.Use, "run against the built-in simulator in-process, even when the spec names a target")
	fs.StringVar(&s.Sim.Profile, "sim-profile", s.Sim.Profile, "simulator: hardware profile (default: the simulator's default; fleetbench sim --list-profiles)")
	fs.Float64Var(&s.Sim.TimeScale, "sim-time-scale", s.Sim.TimeScale, "simulator: speed-up of simulated time; latencies are wall-clock (0: 1)")
	fs.IntVar(&s.Sim.Replicas, "sim-replicas", s.Sim.Replicas, "simulator: replicas (0: the profile's)")
	fs.IntVar(&s.Sim.KVBlocks, "sim-kv-blocks", s.Sim.KVBlocks, "simulator: KV blocks per replica (0: the profile's)")
	flags.Group(fs, flags.GroupSimulator, "sim", "sim-profile", "sim-time-scale", "sim-replicas", "sim-kv-blocks")

	f := &s.Fleet
	fs.StringVar(&f.Listen, "listen", f.Listen, "with --remote-agents or --kube-agents: address to accept agents on (default with --kube-agents "+DefaultKubeListen+")")
	fs.IntVar(&f.RemoteAgents, "remote-agents", f.RemoteAgents, "run the sweep on K external agents (fleetbench agent --coordinator ADDR) instead of its own")
	fs.StringVar(&f.TokenFile, "token-file", f.TokenFile, "file holding the agents' shared token (default: $FLEETBENCH_TOKEN)")
	fs.StringVar(&f.TLSCert, "tls-cert", f.TLSCert, "TLS certificate file for the agents' connections (with --tls-key)")
	fs.StringVar(&f.TLSKey, "tls-key", f.TLSKey, "TLS key file (with --tls-cert)")
	fs.DurationVar((*time.Duration)(&f.JoinTimeout), "join-timeout", f.JoinTimeout.D(), "how long to wait for external agents (0: the coordinator's default)")
	flags.Group(fs, flags.GroupFleet, "listen", "remote-agents", "token-file", "tls-cert", "tls-key", "join-timeout")
	flags.MetricsListen(fs, &f.MetricsListen)
	flags.UIBaseline(fs, &f.UIBaseline)
	fs.BoolVar(&f.NoRestore, "no-restore", f.NoRestore, "leave the target in the last mode swept instead of restoring the mode it had before")
	flags.Group(fs, flags.GroupSwitch, "no-restore")
}

// DefaultKubeListen is where a sweep with Kubernetes agents accepts them
// unless Fleet.Listen says otherwise: the port of the coordinator's
// Service.
const DefaultKubeListen = ":7070"

// ApplyKube sets the `kube:` section's flags on kfs (a flag set with the
// Kubernetes agent flags registered), by flag name: a list sets a
// repeatable flag once per item. Unknown names are errors that list the
// known ones.
func (s *Spec) ApplyKube(kfs *pflag.FlagSet) error {
	names := make([]string, 0, len(s.Kube))
	for k := range s.Kube {
		names = append(names, k)
	}
	sort.Strings(names)
	var errs []error
	for _, k := range names {
		f := kfs.Lookup(k)
		if f == nil {
			var known []string
			kfs.VisitAll(func(f *pflag.Flag) { known = append(known, f.Name) })
			errs = append(errs, fmt.Errorf("kube: unknown setting %q (known: %v)", k, known))
			continue
		}
		vals, ok := s.Kube[k].([]any)
		if !ok {
			vals = []any{s.Kube[k]}
		}
		for _, v := range vals {
			if err := kfs.Set(k, fmt.Sprint(v)); err != nil {
				errs = append(errs, fmt.Errorf("kube: %s: %w", k, err))
			}
		}
	}
	return errors.Join(errs...)
}

// validateFleet checks the fleet section against the kube one.
func (s *Spec) validateFleet(kubeAgents bool) []error {
	var errs []error
	f := s.Fleet
	switch {
	case kubeAgents && f.RemoteAgents != 0:
		errs = append(errs, errors.New("kube-agents starts the agents itself: drop remote_agents (--remote-agents); size them with agents or agent-capacity"))
	case !kubeAgents && (f.RemoteAgents < 0 || (f.RemoteAgents > 0) != (f.Listen != "")):
		errs = append(errs, errors.New("remote_agents K (K >= 1) and listen ADDR go together (--remote-agents, --listen)"))
	}
	if (f.TLSCert == "") != (f.TLSKey == "") || (f.TLSCert != "" && f.Listen == "" && !kubeAgents) {
		errs = append(errs, errors.New("tls_cert and tls_key go together, with remote or Kubernetes agents (--tls-cert, --tls-key)"))
	}
	if f.JoinTimeout < 0 {
		errs = append(errs, fmt.Errorf("join_timeout %s must not be negative", f.JoinTimeout))
	}
	if s.Sim.TimeScale < 0 || s.Sim.Replicas < 0 || s.Sim.KVBlocks < 0 {
		errs = append(errs, fmt.Errorf("sim: time_scale %g, replicas %d and kv_blocks %d must not be negative", s.Sim.TimeScale, s.Sim.Replicas, s.Sim.KVBlocks))
	}
	return errs
}

// KubeFromFlags records in s.Kube every flag of kfs marked Changed (set
// by the file or the command line), so the spec written for --resume
// keeps them.
func (s *Spec) KubeFromFlags(kfs *pflag.FlagSet) {
	s.Kube = nil
	kfs.VisitAll(func(f *pflag.Flag) {
		if !f.Changed {
			return
		}
		if s.Kube == nil {
			s.Kube = map[string]any{}
		}
		if sv, ok := f.Value.(pflag.SliceValue); ok {
			items := make([]any, 0, len(sv.GetSlice()))
			for _, v := range sv.GetSlice() {
				items = append(items, v)
			}
			s.Kube[f.Name] = items
			return
		}
		s.Kube[f.Name] = f.Value.String()
	})
}

// KubeAgents reports whether the kube section runs the agents as a Job.
func (s *Spec) KubeAgents() bool {
	v, ok := s.Kube["kube-agents"]
	if !ok {
		return false
	}
	b, err := strconv.ParseBool(fmt.Sprint(v))
	return err == nil && b
}
