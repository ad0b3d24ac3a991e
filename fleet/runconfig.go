package fleet

import (
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fleetbench/fleetbench/pkg/client"
	"github.com/fleetbench/fleetbench/pkg/load"
	"github.com/fleetbench/fleetbench/pkg/record"
	"github.com/fleetbench/fleetbench/pkg/result"
	"github.com/fleetbench/fleetbench/pkg/servermetrics"
	"github.com/fleetbench/fleetbench/pkg/workload"
)

// RunConfig is one level of load against a target, the run command's
// settings: a plain value, checked by Validate and run by Run.
//
// Validate's messages name the run command's flags: RunConfig is that
// command's configuration, and its users read them.
type RunConfig struct {
	// Client is the target and how to reach it: BaseURL ("" starts the
	// built-in simulator, Sim), Model (required with a BaseURL; with the
	// simulator, "" is the profile's model), Endpoint, APIKeyEnv, Headers,
	// ExtraBody, HTTP2 and the timeouts. Run sets its MaxTokens (the
	// workload's) and MaxConnsPerHost (the sessions in flight).
	Client client.Config
	// Workload is the conversations. Its Seed, MaxTokens and SessionHeader
	// are the load's too. It is validated when Run opens it.
	Workload workload.Config
	// Load is the closed loop (Concurrency) or the open loop (RequestRate,
	// with Arrival, Burstiness and MaxConcurrency, all zero in the closed
	// loop), and the budget TotalRequests (vLLM's --num-prompts). Its
	// MaxTokens, SessionHeader and Seed are unused: Workload's are.
	Load load.Config
	// Agents, when > 0, runs the level with a coordinator and this many
	// agents in this process over loopback gRPC (see Run); 0 runs one load
	// engine without a coordinator.
	Agents int
	// Warmup precedes the measurement; its turns are discarded, its
	// sessions go on. Duration is the measurement's length (0 with a
	// budget: until the budget is spent). Drain bounds the wait for turns
	// in flight at the end; RampUp spreads the sessions' starts over the
	// first part of the warm-up.
	Warmup, Duration, Drain, RampUp time.Duration
	// SingleTurn sends only each conversation's first turn.
	SingleTurn bool
	// OutDir receives result.json (and requests.jsonl); required.
	OutDir string
	// SaveRequests writes every request to OutDir/requests.jsonl.
	SaveRequests bool
	// Percentiles are the extra latency percentiles, each in (0, 100].
	Percentiles []float64
	// Sim is the built-in simulator, started when Client.BaseURL is empty.
	Sim SimConfig
	// Version is fleetbench's, recorded in result.json.
	Version string
	// Label and Metadata are vLLM's --label and --metadata, recorded in
	// result.json (result.CheckMetadata rejects keys it has already).
	Label    string
	Metadata map[string]string
	// ResultFile names the result file in OutDir ("": result.json).
	ResultFile string
	// SLO is vLLM's --goodput (zero: goodput not measured); Thresholds
	// are checked on the result (result.Judge) after it is saved.
	SLO        result.SLO
	Thresholds []result.Threshold
	// AbortOnFail checks Thresholds every few seconds of the measurement
	// and stops the run at the first failure (the result is saved, cut
	// short, and judged).
	AbortOnFail bool
	// FailFast stops a single-engine run whose requests of its first
	// FailFast all failed with one class (0: never).
	FailFast time.Duration
	// SkipPreflight skips ready.Preflight against a given target (the
	// in-process simulator is never checked).
	SkipPreflight bool
	// Scrape names the serving stack's /metrics endpoints read at the
	// start and end of the measurement (empty Endpoints: none);
	// servermetrics.SimEndpoint is the in-process simulator's.
	Scrape servermetrics.Config
	// Registerer, when set, takes the run's Prometheus metrics: the load
	// (pkg/loadmetrics) from the engine's recorder every MetricsInterval, or
	// with Agents the coordinator's and the agents' metrics.
	Registerer prometheus.Registerer
	// Live, when set, is the live dashboard: fed the same load as the
	// metrics, and given what changes the level (the closed loop's
	// engine, or the coordinator with Agents).
	Live *Live
}

// SimConfig is the built-in simulator a run starts in-process when it
// has no target. It is a plain value.
type SimConfig struct {
	// Profile is the hardware profile (sim.Profiles).
	Profile string `json:"profile"`
	// Replicas overrides the profile's replicas when > 0.
	Replicas int `json:"replicas,omitempty"`
	// Router is the routing mode (sim.ParseMode).
	Router string `json:"router"`
	// TimeScale divides every simulated duration; must be > 0.
	TimeScale float64 `json:"time_scale"`
}

// Validate reports every problem with c at once.
// earlyJudge is the fleet's Judge for AbortOnFail, nil without it.
func (c RunConfig) earlyJudge() func(int, *record.Window, time.Duration) error {
	if !c.AbortOnFail || len(c.Thresholds) == 0 {
		return nil
	}
	return EarlyJudge(c.Thresholds, c.SLO)
}

func (c RunConfig) Validate() error {
	var errs []error
	bad := func(msg string) { errs = append(errs, errors.New(msg)) }
	l := c.Load
	if c.OutDir == "" {
		bad("--out DIR is required")
	}
	if err := client.CheckWorkerHeader(c.Client.WorkerHeader); err != nil {
		bad("--worker-header: " + err.Error())
	}
	if c.Client.BaseURL != "" {
		if err := client.CheckBaseURL(c.Client.BaseURL); err != nil {
			bad("--target: " + err.Error())
		}
	}
	if l.OpenLoop() {
		if l.Concurrency != 0 {
			bad("--concurrency is the closed loop's; with --request-rate cap concurrency with --max-concurrency")
		}
	} else {
		if l.Concurrency <= 0 {
			bad("set --concurrency N (closed loop) or --request-rate R (open loop)")
		}
		if l.MaxConcurrency != 0 || l.Arrival != "" || l.Burstiness != 0 {
			bad("--max-concurrency, --arrival and --burstiness apply to the open loop (--request-rate)")
		}
	}
	if l.TotalRequests == 0 && c.Duration <= 0 {
		bad("--duration must be > 0 (or set --num-prompts)")
	}
	if l.TotalRequests < 0 {
		bad("--num-prompts must not be negative")
	}
	if c.Warmup < 0 || c.Duration < 0 || c.Drain < 0 || c.RampUp < 0 {
		bad("--warmup, --duration, --drain-timeout and --ramp-up must not be negative")
	}
	if c.RampUp > c.Warmup {
		bad("--ramp-up must fit in --warmup: the measurement starts with every session running")
	}
	if c.Client.BaseURL == "" && c.Sim.TimeScale <= 0 {
		bad("--sim-time-scale must be > 0")
	}
	if c.Client.BaseURL != "" && c.Client.Model == "" {
		bad("--model is required with --target")
	}
	if um := c.Workload.UserModel; um != nil && (um.URL == "") != (um.Model == "") {
		bad("--user-model-url and --user-model go together")
	}
	for _, p := range c.Percentiles {
		if !(p > 0 && p <= 100) {
			errs = append(errs, fmt.Errorf("--percentiles: %v: want numbers in (0, 100]", p))
		}
	}
	if err := result.CheckMetadata(c.Metadata); err != nil {
		errs = append(errs, fmt.Errorf("--metadata: %w", err))
	}
	if c.ResultFile != "" && (filepath.Base(c.ResultFile) != c.ResultFile || c.ResultFile == "." || c.ResultFile == "..") {
		errs = append(errs, fmt.Errorf("--result-filename %q: want a file name, not a path (the file goes in --out)", c.ResultFile))
	}
	if len(c.Scrape.Endpoints) > 0 || c.Scrape.Pods != nil {
		if err := c.validateScrape(); err != nil {
			errs = append(errs, fmt.Errorf("--scrape: %w", err))
		}
	}
	if c.Agents != 0 {
		if err := c.validateAgents(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// validateScrape checks the scrape settings; "sim" needs the in-process
// simulator, whose address is known only once it listens.
func (c RunConfig) validateScrape() error {
	simURL := ""
	if c.Client.BaseURL == "" {
		simURL = "http://sim.invalid"
	}
	sc, err := c.Scrape.WithDefaults().ResolveSim(simURL)
	if err != nil {
		return err
	}
	return sc.Validate()
}

// validateAgents rejects the settings a fleet level does not carry: the
// coordinator's stages are a closed loop or a Poisson open loop of a
// fixed duration.
func (c RunConfig) validateAgents() error {
	l := c.Load
	switch {
	case c.Agents < 0:
		return errors.New("--agents must not be negative")
	case l.TotalRequests != 0:
		return errors.New("--num-prompts is not supported with --agents")
	case l.MaxConcurrency != 0:
		return errors.New("--max-concurrency is not supported with --agents")
	case l.Arrival != "" && l.Arrival != load.ArrivalPoisson:
		return errors.New("--arrival is not supported with --agents")
	case l.Burstiness != 0 && l.Burstiness != 1:
		return errors.New("--burstiness is not supported with --agents")
	case c.Duration <= 0:
		return errors.New("--duration must be > 0 with --agents")
	}
	return nil
}

// clientConfig is the streaming client's configuration for target. The
// connection cap matches the sessions in flight so net/http does not dial a
// spare connection per session while another is being returned to the pool
// (no cap when the dashboard may change the level).
func (c RunConfig) clientConfig(target, model string) client.Config {
	cfg := c.Client
	cfg.BaseURL, cfg.Model, cfg.MaxTokens = target, model, c.Workload.MaxTokens
	if c.Load.OpenLoop() {
		cfg.MaxConnsPerHost = c.Load.MaxConcurrency // 0: uncapped arrivals, no cap
	} else {
		cfg.MaxConnsPerHost = c.Load.Concurrency
	}
	if c.Live != nil && c.Live.Control != nil {
		// The dashboard may raise the level while the run goes on: a cap
		// at the starting level would hold the sessions above it back.
		cfg.MaxConnsPerHost = 0
	}
	return cfg
}

// engineConfig is the single engine's load configuration: Load with the
// workload's output cap, session header and seed, and Poisson arrivals
// written as the engine expects them.
func (c RunConfig) engineConfig() load.Config {
	l := c.Load
	l.MaxTokens, l.SessionHeader, l.Seed = c.Workload.MaxTokens, c.Workload.SessionHeader, c.Workload.Seed
	if l.OpenLoop() && (l.Arrival == "" || l.Arrival == load.ArrivalPoisson) && l.Burstiness == 1 {
		l.Burstiness = 0
	}
	return l
}

// resultPath is where Run writes the result.
func (c RunConfig) resultPath() string {
	name := c.ResultFile
	if name == "" {
		name = "result.json"
	}
	return filepath.Join(c.OutDir, name)
}

// resultLoad is what result.json says about the load of a run against
// target with model, measured with source.
func (c RunConfig) resultLoad(target, model, source string) result.Load {
	rl := result.Load{
		Target: target, Model: model, Workload: source, Version: c.Version,
		Label: c.Label, Metadata: c.Metadata, Backend: result.BackendFor(c.Client.Endpoint),
		RequestRate: c.Load.RequestRate, MaxConcurrency: c.Load.Concurrency, Percentiles: c.Percentiles,
		WorkerHeader: c.Client.WorkerHeader,
	}
	if c.Load.OpenLoop() {
		rl.MaxConcurrency, rl.Burstiness = c.Load.MaxConcurrency, c.Load.Burstiness
	}
	return rl
}
