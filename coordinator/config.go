package coordinator

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/fleetbench/fleetbench/pkg/hdr"
	"github.com/fleetbench/fleetbench/pkg/record"
	"github.com/fleetbench/fleetbench/pkg/result"
	"github.com/fleetbench/fleetbench/pkg/workload"
)

// Defaults of Config's optional fields.
const (
	// DefaultHeartbeatInterval is how often each side sends a heartbeat
	// (with up to 20% jitter).
	DefaultHeartbeatInterval = time.Second
	// DefaultHeartbeatTimeout is how long an agent may stay silent before
	// it is declared lost and its sessions move to the others.
	DefaultHeartbeatTimeout = 5 * time.Second
	// DefaultStartDelay is the lead time between the start broadcast and
	// the start instant, so every agent starts at the same moment.
	DefaultStartDelay = 500 * time.Millisecond
	// DefaultPhaseLead is how far ahead of a window boundary its Phase is
	// sent.
	DefaultPhaseLead = 100 * time.Millisecond
	// DefaultGrace bounds how long a window waits for the watermarks of its
	// agents after it ends; samples that arrive later are counted as late.
	DefaultGrace = 30 * time.Second
	// DefaultJoinTimeout bounds the wait for the expected agents.
	DefaultJoinTimeout = 2 * time.Minute
	// DefaultReadyTimeout bounds the wait for agents to warm up after an
	// assignment.
	DefaultReadyTimeout = 30 * time.Second
	// MaxReruns caps how many windows one stage re-runs under PolicyRerun.
	MaxReruns = 3
)

// Policy says what a run does when an agent is lost during a measured
// window.
type Policy string

// Policies.
const (
	// PolicyContinue keeps the degraded window (marked degraded, with its
	// coverage) and goes on.
	PolicyContinue Policy = "continue"
	// PolicyRerun marks the degraded window as re-run, leaves it out of the
	// stage's result and measures one more window in its place.
	PolicyRerun Policy = "rerun"
	// PolicyFail ends the run with ErrAgentLost after recording what was
	// measured.
	PolicyFail Policy = "fail"
)

// ErrAgentLost is returned by Run under PolicyFail when an agent is lost
// during a measured window.
var ErrAgentLost = errors.New("agent lost")

// ErrAllFailed is wrapped by Run's error when FailFast found that every
// request of a stage so far failed the same way.
var ErrAllFailed = errors.New("every request failed")

// Spec is the workload and target every agent runs; the coordinator passes
// it through to agents unchanged. It holds no secret: API keys are named by
// environment variables each agent reads.
type Spec struct {
	Target string
	Model  string
	// Endpoint is "chat" or "completions" ("": chat).
	Endpoint string
	// APIKeyEnv names the environment variable with the target's API key,
	// read by each agent from its own environment ("": none).
	APIKeyEnv string
	// Workload is the whole workload, seed and output cap included.
	Workload workload.Config
	// SLO is the goodput objectives each agent counts requests against
	// (record.Counters.Good); zero: goodput is not measured.
	SLO result.SLO
	// KeyRequired says the target refuses requests without a key (the
	// coordinator's preflight found it): an agent whose key variable is
	// unset cannot run and says so as it joins.
	KeyRequired bool
	// WorkerHeader names the response header of the serving worker
	// (client.Config.WorkerHeader), for the agents' per-worker counts.
	WorkerHeader string
}

// Stage is one level of a run: a warm-up window, then measured windows.
type Stage struct {
	// Level is the closed loop's total concurrency, split across agents.
	Level int
	// RequestRate, when > 0, is the open loop's total rate per second,
	// split across agents in proportion to their concurrency shares.
	RequestRate float64
	// Mode labels the routing mode under test.
	Mode string
	// Warmup is measured into a warm-up window, left out of results.
	Warmup time.Duration
	// ModeWarmup, when > 0, runs the stage at ModeWarmupLevel for this long
	// before its warm-up, in a warm-up window of its own (left out of
	// results); then the level changes to Level, live, as a concurrency
	// change does. A sweep gives it to each mode's first level, so that
	// every mode is measured from the caches and router state of a
	// deployment in service at its top level, not from the ones the
	// previous mode or a restart left.
	ModeWarmup time.Duration
	// ModeWarmupLevel is the level of the mode warm-up; 0 is Level.
	ModeWarmupLevel int
	// Duration is the measured time, cut into windows of Config.Window.
	Duration time.Duration
	// Conversations, when > 0, bounds the conversation indices to
	// 0..Conversations-1 (a fixed set); the stage then also ends early
	// once every agent has run out of conversations.
	Conversations int
	// Window, when > 0, overrides Config.Window for this stage.
	Window time.Duration
	// Cooldown is an idle pause after the stage, before the next one (and
	// its Config.BeforeStage): the agents stay connected and send no load.
	// The last stage's cooldown is skipped.
	Cooldown time.Duration
}

// Config is a coordinator's configuration, read from flags.
type Config struct {
	// Agents is how many agents must join before the first stage starts.
	Agents int
	// Spec is what agents run.
	Spec Spec
	// Stages run in order; the agents keep their connections between them.
	Stages []Stage
	// Window is the length of a measured window; 0 means one window per
	// stage.
	Window time.Duration
	// OnLoss is the agent-loss policy (default PolicyContinue).
	OnLoss Policy
	// FailFast, when positive, ends the run with ErrAllFailed when, this
	// long after a stage started (warm-up included), its agents have
	// reported failures of one class and no success: burning the rest of
	// the stage would measure nothing.
	FailFast time.Duration
	// Histogram is the geometry every agent must record with (default
	// hdr.Default).
	Histogram hdr.Config
	// OutDir receives window-<id>.json as each window closes; empty writes
	// nothing.
	OutDir string

	HeartbeatInterval time.Duration
	HeartbeatTimeout  time.Duration
	StartDelay        time.Duration
	PhaseLead         time.Duration
	Grace             time.Duration
	JoinTimeout       time.Duration
	ReadyTimeout      time.Duration

	// BeforeStage, when set, is called before stage i is assigned (after
	// the agents joined for stage 0, after the previous stage's windows
	// closed and its cooldown for the others), on a goroutine of its own
	// while the agents are connected and idle: no load runs until it
	// returns. A sweep switches the routing mode and waits for readiness
	// here. ctx ends when Run's does; an error ends the run with it (the
	// stages before are in the result). The loop keeps serving the agents
	// meanwhile, so it may take as long as it needs.
	BeforeStage func(ctx context.Context, i int, s Stage) error
	// OnWindowClosed, when set, is called from Run's loop with each window
	// as it closes (a copy the callee owns). It must return quickly: the
	// loop serves every agent and waits for it.
	OnWindowClosed func(w *WindowResult)
	// OnStageDone, when set, is called from Run's loop with each stage's
	// result once its windows have closed (the stage cut short by the end
	// of Run's ctx included, marked Interrupted). The result is shared with
	// Result.Stages: read it, do not change it. Like OnWindowClosed it must
	// return quickly.
	OnStageDone func(s *StageResult)
	// OnReport, when set, is called from Run's loop with every interval
	// report applied (once per report, resends excluded): the agent, the
	// window it belongs to and its data. It is the live view of remote
	// agents' progress. w is merged into the run's results: read it, do
	// not change or keep it. It must return quickly.
	OnReport func(agentID string, window uint32, w *record.Window)
	// OnHealth, when set, is called from Run's loop with every heartbeat of
	// an agent: its health as the agent reports it. It must return
	// quickly.
	OnHealth func(agentID string, h AgentHealth)
	// OnAgents, when set, is called from Run's loop whenever the number of
	// agents ready to run (joined and checked, not failed or lost) changes,
	// with the number expected. It must return quickly.
	OnAgents func(ready, expected int)
	// Judge, when set, is called from Run's loop every JudgeInterval while
	// a stage's measured windows run, with the stage, the merge of its
	// measured windows so far and the measured time elapsed. An error ends
	// the run with it (k6's abortOnFail: a threshold that failed). It runs
	// on the loop, so it must be quick.
	Judge func(stage int, measured *record.Window, elapsed time.Duration) error
	// OnMeasureSpan, when set, is called from Run's loop when a stage's
	// measured time is scheduled, with the planned start of its first
	// measured window and the planned end of its last, and again with
	// the new end whenever that end moves: a drain earlier than planned
	// (an interrupt, every agent out of conversations) or a window added
	// under PolicyRerun. Something that must read the server over exactly
	// the measured time (pkg/servermetrics) follows it. It must return quickly.
	OnMeasureSpan func(stage int, start, end time.Time)
}

// JudgeInterval is how often Config.Judge looks at the running stage.
const JudgeInterval = 5 * time.Second

// withDefaults fills the zero optional fields.
func (c Config) withDefaults() Config {
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&c.HeartbeatInterval, DefaultHeartbeatInterval)
	def(&c.HeartbeatTimeout, DefaultHeartbeatTimeout)
	def(&c.StartDelay, DefaultStartDelay)
	def(&c.PhaseLead, DefaultPhaseLead)
	def(&c.Grace, DefaultGrace)
	def(&c.JoinTimeout, DefaultJoinTimeout)
	def(&c.ReadyTimeout, DefaultReadyTimeout)
	if c.OnLoss == "" {
		c.OnLoss = PolicyContinue
	}
	if c.Histogram == (hdr.Config{}) {
		c.Histogram = hdr.Default
	}
	return c
}

// Validate reports every problem with the config at once.
func (c Config) Validate() error {
	c = c.withDefaults()
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if c.Agents < 1 {
		bad("agents %d: must be >= 1", c.Agents)
	}
	if len(c.Stages) == 0 {
		bad("stages: at least one is required")
	}
	for i, s := range c.Stages {
		if s.Level < 0 || (s.Level == 0 && s.RequestRate <= 0) {
			bad("stage %d: level %d: must be >= 1 (or set a request rate)", i, s.Level)
		}
		if s.RequestRate < 0 {
			bad("stage %d: request rate %v: must be >= 0", i, s.RequestRate)
		}
		if s.Warmup < 0 || s.Duration <= 0 {
			bad("stage %d: warm-up %v and duration %v: need warm-up >= 0 and duration > 0", i, s.Warmup, s.Duration)
		}
		if s.ModeWarmup < 0 || s.ModeWarmupLevel < 0 {
			bad("stage %d: mode warm-up %v at level %d: must be >= 0", i, s.ModeWarmup, s.ModeWarmupLevel)
		}
		if s.ModeWarmup > 0 && s.RequestRate > 0 {
			bad("stage %d: a mode warm-up is for closed-loop levels, not a request rate", i)
		}
		if s.Window < 0 || s.Cooldown < 0 {
			bad("stage %d: window %v and cooldown %v: must be >= 0", i, s.Window, s.Cooldown)
		}
		if s.Conversations < 0 {
			bad("stage %d: conversations %d: must be >= 0", i, s.Conversations)
		}
	}
	if c.Window < 0 {
		bad("window %v: must be >= 0", c.Window)
	}
	switch c.OnLoss {
	case PolicyContinue, PolicyRerun, PolicyFail:
	default:
		bad("on-loss %q: must be %q, %q or %q", c.OnLoss, PolicyContinue, PolicyRerun, PolicyFail)
	}
	if err := c.Histogram.Validate(); err != nil {
		errs = append(errs, err)
	}
	if c.HeartbeatTimeout < 2*c.HeartbeatInterval {
		bad("heartbeat timeout %v: must be at least twice the interval %v", c.HeartbeatTimeout, c.HeartbeatInterval)
	}
	for name, d := range map[string]time.Duration{"heartbeat interval": c.HeartbeatInterval, "start delay": c.StartDelay,
		"phase lead": c.PhaseLead, "grace": c.Grace, "join timeout": c.JoinTimeout, "ready timeout": c.ReadyTimeout} {
		if d < 0 {
			bad("%s %v: must be >= 0", name, d)
		}
	}
	return errors.Join(errs...)
}

// ParsePolicy parses a --on-loss flag value.
func ParsePolicy(s string) (Policy, error) {
	switch p := Policy(s); p {
	case PolicyContinue, PolicyRerun, PolicyFail:
		return p, nil
	}
	return "", fmt.Errorf("parse policy %q: must be %q, %q or %q", s, PolicyContinue, PolicyRerun, PolicyFail)
}
