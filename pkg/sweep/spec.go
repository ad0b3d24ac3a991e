package sweep

import (
	"time"

	"github.com/fleetbench/fleetbench/internal/flags"
	"github.com/fleetbench/fleetbench/pkg/client"
	"github.com/fleetbench/fleetbench/pkg/ready"
	"github.com/fleetbench/fleetbench/pkg/result"
	"github.com/fleetbench/fleetbench/pkg/workload"
)

// Defaults of a Spec. Default returns a Spec holding them.
const (
	DefaultRuns           = 1
	DefaultWarmup         = 60 * time.Second
	DefaultMeasure        = 300 * time.Second
	DefaultSnapshots      = 3
	DefaultCooldown       = 30 * time.Second
	DefaultSLA            = 400 * time.Millisecond
	DefaultFallbackSLA    = 450 * time.Millisecond
	DefaultSwitchEstimate = 3 * time.Minute
)

// Spec is one sweep. It is a plain value read from a file and flags: Load and
// ApplyFlags fill it, Validate checks it. A Spec holds no secret (the API key
// is named by APIKeyEnv; header values of an http switch may name
// environment variables as ${NAME}). It is not safe for concurrent mutation;
// once validated it may be shared read-only.
type Spec struct {
	// Target is the server's base URL, http(s)://host[:port][/prefix].
	Target string `json:"target"`
	// Model is the model name requested and waited for.
	Model string `json:"model"`
	// APIKeyEnv names the environment variable holding the API key.
	APIKeyEnv string `json:"api_key_env,omitempty"`
	// Endpoint is "chat" (default) or "completions".
	Endpoint string `json:"endpoint,omitempty"`
	// WorkerHeader names the response header of the serving worker, tried
	// before the defaults (client.DefaultWorkerHeaders).
	WorkerHeader string `json:"worker_header,omitempty"`
	// Workload is the conversations sent: the workload package's one
	// configuration, decoded from the file's `workload:` section.
	Workload workload.Config `json:"workload"`

	// Levels are the concurrency levels, run in this order within a mode:
	// concurrent sessions in a closed loop, or, with RequestRate, the cap on
	// concurrent conversations of an open loop.
	Levels []int `json:"levels"`
	// RequestRate, when positive, makes every level an open loop with this
	// mean arrival rate (conversations per second).
	RequestRate float64 `json:"request_rate,omitempty"`

	// Modes are the routing modes compared, in the order of odd runs; even
	// runs take them in reverse.
	Modes []Mode `json:"modes"`
	// Switch is the switch of every mode that has none of its own.
	Switch *SwitchSpec `json:"switch,omitempty"`
	// Baseline and Candidate name the modes reports compare; they default
	// to the first and second mode.
	Baseline  string `json:"baseline,omitempty"`
	Candidate string `json:"candidate,omitempty"`

	// Runs is how often the whole levels x modes grid is repeated.
	Runs int `json:"runs"`
	// Warmup is run at every level before its measurement; its requests are
	// discarded.
	Warmup Duration `json:"warmup"`
	// ModeWarmup, when positive, runs the highest level, unmeasured, for
	// this long before the first level of every mode block (then that
	// level's own warm-up): each mode is measured from the caches and
	// router state of a deployment in service, not from the ones a switch
	// leaves (the previous mode's, or empty ones after a restart), which
	// would favour whichever mode runs second.
	ModeWarmup Duration `json:"mode_warmup,omitempty"`
	// Measure is the measurement window of every level, cut into Snapshots
	// equal parts reported separately (to see drift inside a level).
	Measure   Duration `json:"measure"`
	Snapshots int      `json:"snapshots"`
	// Cooldown is an idle pause after every level.
	Cooldown Duration `json:"cooldown"`
	// SLA is the TTFT target reports use to find the highest level that
	// meets it; FallbackSLA is the looser target also evaluated when the
	// breakpoints at SLA do not tell the modes apart (report.FallbackRule).
	SLA         Duration `json:"sla"`
	FallbackSLA Duration `json:"fallback_sla"`
	// SwitchEstimate is the time a mode switch plus readiness plus priming
	// is expected to take, used only for the plan's estimated duration.
	SwitchEstimate Duration `json:"switch_estimate"`

	// Output is the output directory.
	Output string `json:"output"`
	// Agents is the number of agents the coordinator waits for before the
	// sweep starts; 0 runs the load in-process.
	Agents int `json:"agents"`
	// Readiness configures the gate after every mode switch.
	Readiness Readiness `json:"readiness"`

	// SkipPreflight skips the check of the target before the sweep starts
	// (ready.Preflight).
	SkipPreflight bool `json:"skip_preflight,omitempty"`
	// FailFast stops the sweep when, this long into a level (warm-up
	// included), every request has failed with one error class; 0 never.
	FailFast Duration `json:"fail_fast"`

	// Goodput is vLLM's goodput objectives, "ttft:600 tpot:60"
	// (result.ParseSLO): every point counts the requests that meet them all
	// and reports goodput and SLO attainment. Empty: not measured.
	Goodput string `json:"goodput,omitempty"`
	// Thresholds are pass/fail criteria judged on every point's result
	// (result.ParseThreshold), e.g. "error_rate<1%"; a failed one makes the
	// sweep exit with the thresholds' code.
	Thresholds []string `json:"thresholds,omitempty"`
	// AbortOnFail checks Thresholds every few seconds of a level's
	// measurement and stops the sweep at the first failure.
	AbortOnFail bool `json:"abort_on_fail,omitempty"`

	// Sim is the in-process simulator used without a target.
	Sim Sim `json:"sim,omitzero"`
	// Fleet is where external agents come from and what the sweep serves.
	Fleet Fleet `json:"fleet,omitzero"`
	// Kube holds the Kubernetes agent flags by name (ApplyKube).
	Kube map[string]any `json:"kube,omitempty"`
	// Scrape names the serving stack's /metrics endpoints read over every
	// level's measured time (server-side figures); empty: none.
	Scrape Scrape `json:"scrape,omitzero"`
}

// Mode is one routing mode of the sweep.
type Mode struct {
	// Name labels results and is what the switch sets ({mode} in
	// templates). Letters, digits, '.', '_' and '-' only: it names files.
	Name string `json:"name"`
	// Switch, when set, replaces Spec.Switch for this mode.
	Switch *SwitchSpec `json:"switch,omitempty"`
}

// Readiness configures ready.Gate. Zero fields take ready's defaults.
type Readiness struct {
	// Skip turns the gate off: the sweep goes on right after a switch.
	Skip bool `json:"skip,omitempty"`
	// Per-stage timeouts, each from the start of its stage.
	HealthTimeout      Duration `json:"health_timeout,omitempty"`
	ModelsTimeout      Duration `json:"models_timeout,omitempty"`
	CompletionsTimeout Duration `json:"completions_timeout,omitempty"`
	PrimeTimeout       Duration `json:"prime_timeout,omitempty"`
	// Completions is how many completions in a row must succeed with
	// stable TTFT; MaxTokens is their length (1..8).
	Completions int `json:"completions,omitempty"`
	MaxTokens   int `json:"max_tokens,omitempty"`
	// TTFTSpread and TTFTSlack bound the spread of those TTFTs: max <=
	// spread*min, or max-min <= slack.
	TTFTSpread float64  `json:"ttft_spread,omitempty"`
	TTFTSlack  Duration `json:"ttft_slack,omitempty"`
	// Prime is the number of short priming conversations of PrimeTurns
	// turns each, run at once after the completions pass.
	Prime      int `json:"prime,omitempty"`
	PrimeTurns int `json:"prime_turns,omitempty"`
	// Interval is the first retry delay, doubled up to MaxInterval.
	Interval    Duration `json:"interval,omitempty"`
	MaxInterval Duration `json:"max_interval,omitempty"`
}

// Default returns a Spec with every default set and nothing else: no target,
// model, levels, modes or output.
func Default() *Spec {
	return &Spec{
		Endpoint:       client.EndpointChat,
		APIKeyEnv:      client.DefaultAPIKeyEnv,
		Workload:       workload.Default(),
		Runs:           DefaultRuns,
		Warmup:         Duration(DefaultWarmup),
		Measure:        Duration(DefaultMeasure),
		Snapshots:      DefaultSnapshots,
		Cooldown:       Duration(DefaultCooldown),
		SLA:            Duration(DefaultSLA),
		FallbackSLA:    Duration(DefaultFallbackSLA),
		SwitchEstimate: Duration(DefaultSwitchEstimate),
		FailFast:       Duration(flags.DefaultFailFast),
	}
}

// SLO returns the parsed Goodput (zero when empty); Validate has checked it.
func (s *Spec) SLO() result.SLO {
	slo, _ := result.ParseSLO(s.Goodput)
	return slo
}

// ParsedThresholds returns the parsed Thresholds; Validate has checked
// them.
func (s *Spec) ParsedThresholds() []result.Threshold {
	out := make([]result.Threshold, 0, len(s.Thresholds))
	for _, raw := range s.Thresholds {
		if th, err := result.ParseThreshold(raw); err == nil {
			out = append(out, th)
		}
	}
	return out
}

// Compared returns the baseline and candidate mode names: the ones set, else
// the first and second modes not already taken. candidate is "" with a
// single mode.
func (s *Spec) Compared() (baseline, candidate string) {
	baseline, candidate = s.Baseline, s.Candidate
	for _, m := range s.Modes {
		switch {
		case baseline == "" && m.Name != candidate:
			baseline = m.Name
		case candidate == "" && m.Name != baseline:
			candidate = m.Name
		}
	}
	return baseline, candidate
}

// SwitchOf returns the switch configuration of the named mode: its own, or
// the sweep's default, or nil when it has neither or there is no such mode.
func (s *Spec) SwitchOf(mode string) *SwitchSpec {
	for _, m := range s.Modes {
		if m.Name != mode {
			continue
		}
		if m.Switch != nil {
			return m.Switch
		}
		return s.Switch
	}
	return nil
}

// ModeNames returns the modes' names in spec order.
func (s *Spec) ModeNames() []string {
	names := make([]string, len(s.Modes))
	for i, m := range s.Modes {
		names[i] = m.Name
	}
	return names
}

// ClientConfig returns the client configuration of the target. Request
// timeouts, headers and sampling settings are the runner's to add.
func (s *Spec) ClientConfig() client.Config {
	return client.Config{
		BaseURL:   s.Target,
		Model:     s.Model,
		Endpoint:  s.Endpoint,
		APIKeyEnv: s.APIKeyEnv,
		MaxTokens: s.Workload.MaxTokens,
		// Validated with the spec: a bad name is the spec's error.
		WorkerHeader: s.WorkerHeader,
	}
}

// ReadyConfig returns the readiness gate's configuration for the target,
// with ready's defaults for the zero fields.
func (s *Spec) ReadyConfig() ready.Config {
	r := s.Readiness
	cc := s.ClientConfig()
	cc.MaxTokens = 0
	return ready.Config{
		Client:             cc,
		HealthTimeout:      r.HealthTimeout.D(),
		ModelsTimeout:      r.ModelsTimeout.D(),
		CompletionsTimeout: r.CompletionsTimeout.D(),
		PrimeTimeout:       r.PrimeTimeout.D(),
		Completions:        r.Completions,
		MaxTokens:          r.MaxTokens,
		TTFTSpread:         r.TTFTSpread,
		TTFTSlack:          r.TTFTSlack.D(),
		Prime:              r.Prime,
		PrimeTurns:         r.PrimeTurns,
		Interval:           r.Interval.D(),
		MaxInterval:        r.MaxInterval.D(),
	}.WithDefaults()
}

// WorkloadConfig returns the workload configuration, checked.
func (s *Spec) WorkloadConfig() (workload.Config, error) {
	if err := s.Workload.Validate(); err != nil {
		return workload.Config{}, err
	}
	return s.Workload, nil
}
