package report

import (
	"errors"
	"fmt"
	"time"

	"github.com/fleetbench/fleetbench/pkg/record"
	"github.com/fleetbench/fleetbench/pkg/servermetrics"
)

// Default SLA thresholds: TTFT p95 at or under DefaultSLA, and the fallback
// evaluated when the baseline fails at its lowest level or no mode crosses
// the SLA within the range.
const (
	DefaultSLA         = 400 * time.Millisecond
	DefaultFallbackSLA = 450 * time.Millisecond
)

// Default mode names of the A/B comparison.
const (
	DefaultBaseline  = "round_robin"
	DefaultCandidate = "kv"
)

// ErrInvalidSweep is returned for a Sweep or Point that cannot be reported.
var ErrInvalidSweep = errors.New("invalid sweep")

// Point is the measurement of one (run, mode, level): the sweep runner's
// input to this package. A Point is a plain value; the package never
// mutates its Window or Snapshots.
type Point struct {
	// Run is the 1-based run index.
	Run int
	// fromRun marks the one point of a `fleetbench run` output directory.
	fromRun bool
	// Mode is the routing mode's name (e.g. "kv", "round_robin").
	Mode string
	// Level is the concurrency level (sessions).
	Level int
	// RPS is the open-loop target rate in requests per second; 0 for a
	// closed loop.
	RPS float64
	// Window is the measurement window merged across agents. Required unless
	// Row is set.
	Window *record.Window
	// Snapshots are the optional interval windows inside the measurement
	// window, in time order (written to the snapshot interval log).
	Snapshots []*record.Window
	// MeasureStart and MeasureEnd bound the measurement window; every rate
	// is divided by its length.
	MeasureStart, MeasureEnd time.Time
	// Coverage is the share (0..1) of the planned agent-seconds that
	// delivered data in the window; below 1 means an agent was lost or late.
	Coverage float64
	// Degraded marks a point the runner judged unreliable (lost agents,
	// failed readiness, clamped samples).
	Degraded bool
	// StartSkew is the spread of the agents' measurement start times.
	StartSkew time.Duration
	// Agents is the number of agents that contributed.
	Agents int
	// AgentNotes says, one line each, which agents failed (with the reason
	// they gave), were lost or warned during the point.
	AgentNotes []string
	// SLO is the goodput objectives the point's requests were counted
	// against (Window.Counters.Good), result.SLO's form; "" when goodput
	// was not measured.
	SLO string
	// Server is what the serving stack's own /metrics said over the
	// measured time (pkg/servermetrics: server-side hit rate, queue, KV usage,
	// worker balance); nil when it was not scraped.
	Server *servermetrics.Window
	// Row is a precomputed measurement, used only when Window is nil (points
	// read back from TSV files). The sweep runner leaves it nil.
	Row *Row
}

// Sweep is a whole sweep: its facts and its points. It is a plain value.
type Sweep struct {
	// ID names the sweep, YYYYMMDD-HHMMSS (the TSV's file name suffix).
	ID string
	// Model, Target and Workload describe what was measured; Version is
	// fleetbench's version.
	Model, Target, Workload, Version string
	// Endpoint is the client endpoint driven ("chat", "completions"; ""
	// is chat): it names vLLM's backend in each point's result.json.
	Endpoint string
	// Modes lists the modes in report order.
	Modes []string
	// Baseline and Candidate name the modes compared (defaults
	// DefaultBaseline and DefaultCandidate).
	Baseline, Candidate string
	// Levels lists the concurrency levels, ascending.
	Levels []int
	// Runs is the number of runs.
	Runs int
	// SLA and FallbackSLA are TTFT p95 thresholds (defaults DefaultSLA and
	// DefaultFallbackSLA).
	SLA, FallbackSLA time.Duration
	// AlternatedOrder reports that the runner alternated the mode order
	// between runs (A B, B A, ...).
	AlternatedOrder bool
	// WorkerHeader is the --worker-header the sweep asked for ("": none);
	// the report says at which points no response carried it.
	WorkerHeader string
	// Points are the measurements, in any order.
	Points []Point

	// averagedFiles is set by Load when the points came from TSV files
	// only, so the report says percentiles were averaged.
	averagedFiles []string
	// sources lists the inputs Load read, for the report.
	sources []string
}

// withDefaults returns a copy of s with defaults filled in and Modes and
// Levels completed from the points.
func (s *Sweep) withDefaults() *Sweep {
	c := *s
	if c.SLA <= 0 {
		c.SLA = DefaultSLA
	}
	if c.FallbackSLA <= 0 {
		c.FallbackSLA = DefaultFallbackSLA
	}
	if c.Baseline == "" {
		c.Baseline = DefaultBaseline
	}
	if c.Candidate == "" {
		c.Candidate = DefaultCandidate
	}
	c.Modes = append([]string(nil), s.Modes...)
	c.Levels = append([]int(nil), s.Levels...)
	seenMode := make(map[string]bool)
	for _, m := range c.Modes {
		seenMode[m] = true
	}
	seenLevel := make(map[int]bool)
	for _, l := range c.Levels {
		seenLevel[l] = true
	}
	runs := make(map[int]bool)
	for _, p := range c.Points {
		if !seenMode[p.Mode] {
			seenMode[p.Mode] = true
			c.Modes = append(c.Modes, p.Mode)
		}
		if !seenLevel[p.Level] {
			seenLevel[p.Level] = true
			c.Levels = append(c.Levels, p.Level)
		}
		runs[p.Run] = true
	}
	sortInts(c.Levels)
	if c.Runs < len(runs) {
		c.Runs = len(runs)
	}
	return &c
}

// Validate reports whether s can be reported: every point has a mode, a
// positive level, a positive run, and a Window or a Row, and no (run, mode,
// level) appears twice.
func (s *Sweep) Validate() error {
	seen := make(map[key]bool)
	for i, p := range s.Points {
		if err := p.validate(); err != nil {
			return fmt.Errorf("validate sweep: point %d: %w", i, err)
		}
		k := key{p.Run, p.Mode, p.Level}
		if seen[k] {
			return fmt.Errorf("validate sweep: %w: run %d mode %s level %d appears twice", ErrInvalidSweep, p.Run, p.Mode, p.Level)
		}
		seen[k] = true
	}
	return nil
}

func (p *Point) validate() error {
	switch {
	case p.Mode == "":
		return fmt.Errorf("%w: empty mode", ErrInvalidSweep)
	case p.Level <= 0:
		return fmt.Errorf("%w: level %d", ErrInvalidSweep, p.Level)
	case p.Run <= 0:
		return fmt.Errorf("%w: run %d", ErrInvalidSweep, p.Run)
	case p.Window == nil && p.Row == nil:
		return fmt.Errorf("%w: run %d mode %s level %d has no window", ErrInvalidSweep, p.Run, p.Mode, p.Level)
	}
	return nil
}

// key identifies one (run, mode, level).
type key struct {
	run   int
	mode  string
	level int
}

// cellKey identifies one (mode, level) across runs.
type cellKey struct {
	mode  string
	level int
}
