package sweep

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// Key names one measured point of a sweep: run (1-based), mode and level.
// Resuming takes the set of done Keys from an output directory.
type Key struct {
	Run   int
	Mode  string
	Level int
}

// String returns "run 2 kv 40".
func (k Key) String() string { return fmt.Sprintf("run %d, %s at %d sessions", k.Run, k.Mode, k.Level) }

// StepKind is what a step does.
type StepKind string

// Step kinds, in the order they occur for one mode block: a switch, the
// readiness gate, priming, then warmup, measure and cooldown per level.
const (
	StepSwitch   StepKind = "switch"   // set the routing mode (Switcher.Switch)
	StepGate     StepKind = "gate"     // wait until ready (ready.Gate.Ready)
	StepPrime    StepKind = "prime"    // priming conversations (ready.Gate.Prime)
	StepWarmup   StepKind = "warmup"   // load at the level, discarded
	StepMeasure  StepKind = "measure"  // load at the level, measured in snapshots
	StepCooldown StepKind = "cooldown" // idle
)

// Step is one thing the runner does. Switch, gate and prime steps have
// Level 0. Duration is the planned length; for a switch it is the estimate
// of switch plus gate plus priming (Spec.SwitchEstimate), and gate and prime
// steps have none of their own. Start is the estimated offset from the
// start of the sweep.
type Step struct {
	Kind      StepKind
	Run       int
	Mode      string
	Level     int
	Duration  time.Duration
	Snapshots int // measure steps: equal parts of Duration
	Start     time.Duration
	// ModeWarmup is the part of a warm-up step's Duration run first at
	// ModeWarmupLevel (Spec.ModeWarmup): the mode block's first level.
	ModeWarmup      time.Duration
	ModeWarmupLevel int
}

// Key returns the point the step belongs to (Level 0 for a switch, gate or
// prime step).
func (s Step) Key() Key { return Key{Run: s.Run, Mode: s.Mode, Level: s.Level} }

// Plan is the ordered steps of a sweep. It is immutable once built and safe
// to share.
type Plan struct {
	// Steps in the order to run them.
	Steps []Step
	// Total is runs x modes x levels; Done is how many of those were skipped
	// because they were done already.
	Total, Done int

	modes  []string
	levels []int
	runs   int
}

// NewPlan orders spec's points. Within a run every level of one mode is run
// before switching to the next mode, so a run switches once per mode, not
// once per level. Odd runs take the modes in spec order and even runs in
// reverse (A B, B A, A B, ...), so slow drift of the target over hours
// (thermal state, fragmentation, neighbors) does not favor one mode.
//
// Every mode block starts with a switch even when the previous block ran the
// same mode (the end of run 1 and the start of run 2): each block then
// starts from the same freshly switched, gated and primed state.
//
// Points in done are skipped. A mode block with some points left still
// starts with its switch, gate and priming, so a resumed sweep measures its
// first remaining level in the right mode; a block with none left is
// skipped whole, switch included. spec should be valid; NewPlan does not
// check it.
func NewPlan(spec *Spec, done map[Key]bool) *Plan {
	p := &Plan{modes: spec.ModeNames(), levels: slices.Clone(spec.Levels), runs: spec.Runs}
	var at time.Duration
	add := func(st Step) {
		st.Start = at
		at += st.Duration
		p.Steps = append(p.Steps, st)
	}
	for run := 1; run <= spec.Runs; run++ {
		for _, mode := range RunOrder(p.modes, run) {
			var left []int
			for _, l := range spec.Levels {
				p.Total++
				if done[Key{Run: run, Mode: mode, Level: l}] {
					p.Done++
					continue
				}
				left = append(left, l)
			}
			if len(left) == 0 {
				continue
			}
			add(Step{Kind: StepSwitch, Run: run, Mode: mode, Duration: spec.SwitchEstimate.D()})
			if !spec.Readiness.Skip {
				add(Step{Kind: StepGate, Run: run, Mode: mode})
				if spec.ReadyConfig().Prime >= 0 {
					add(Step{Kind: StepPrime, Run: run, Mode: mode})
				}
			}
			for k, l := range left {
				switch {
				case k == 0 && spec.ModeWarmup > 0:
					add(Step{Kind: StepWarmup, Run: run, Mode: mode, Level: l, Duration: spec.ModeWarmup.D() + spec.Warmup.D(),
						ModeWarmup: spec.ModeWarmup.D(), ModeWarmupLevel: slices.Max(spec.Levels)})
				case spec.Warmup > 0:
					add(Step{Kind: StepWarmup, Run: run, Mode: mode, Level: l, Duration: spec.Warmup.D()})
				}
				add(Step{Kind: StepMeasure, Run: run, Mode: mode, Level: l, Duration: spec.Measure.D(), Snapshots: spec.Snapshots})
				if spec.Cooldown > 0 {
					add(Step{Kind: StepCooldown, Run: run, Mode: mode, Level: l, Duration: spec.Cooldown.D()})
				}
			}
		}
	}
	return p
}

// RunOrder returns the order of modes in run (1-based): as given in odd
// runs, reversed in even runs.
func RunOrder(modes []string, run int) []string {
	out := slices.Clone(modes)
	if run%2 == 0 {
		slices.Reverse(out)
	}
	return out
}

// Switches returns the number of mode switches the plan makes.
func (p *Plan) Switches() int {
	n := 0
	for _, st := range p.Steps {
		if st.Kind == StepSwitch {
			n++
		}
	}
	return n
}

// EstimatedDuration is the sum of the steps' durations: warmups,
// measurements, cooldowns and the switch estimate per switch.
func (p *Plan) EstimatedDuration() time.Duration {
	var d time.Duration
	for _, st := range p.Steps {
		d += st.Duration
	}
	return d
}

// Remaining returns the points still to measure, in plan order.
func (p *Plan) Remaining() []Key {
	var out []Key
	for _, st := range p.Steps {
		if st.Kind == StepMeasure {
			out = append(out, st.Key())
		}
	}
	return out
}

// WritePlan prints the plan as a table for --dry-run: one row per mode
// switch (with its gate and priming) and one per level, then the number of
// switches and the estimated duration.
func (p *Plan) WritePlan(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "sweep plan: %d runs x %d modes (%s) x %d levels (%s) = %d points",
		p.runs, len(p.modes), strings.Join(p.modes, ", "), len(p.levels), joinInts(p.levels), p.Total)
	if p.Done > 0 {
		fmt.Fprintf(&b, ", %d done, %d to run", p.Done, p.Total-p.Done)
	}
	b.WriteString("\n\n")
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "#\tSTART\tRUN\tMODE\tLEVEL\tSTEPS")
	row := 0
	for i := 0; i < len(p.Steps); {
		st := p.Steps[i]
		j := i + 1
		// A switch row takes its gate and prime steps; a level row takes
		// every step of that level.
		for j < len(p.Steps) && p.Steps[j].Run == st.Run && p.Steps[j].Mode == st.Mode &&
			((st.Kind == StepSwitch && p.Steps[j].Level == 0) || (st.Kind != StepSwitch && p.Steps[j].Level == st.Level)) {
			j++
		}
		row++
		level := "-"
		if st.Level > 0 {
			level = strconv.Itoa(st.Level)
		}
		parts := make([]string, 0, j-i)
		for _, s := range p.Steps[i:j] {
			parts = append(parts, describeStep(s))
		}
		fmt.Fprintf(tw, "%d\t%s\t%d\t%s\t%s\t%s\n", row, fmtDur(st.Start), st.Run, st.Mode, level, strings.Join(parts, ", "))
		i = j
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(&b, "\nswitches: %d\nestimated duration: %s (switch + readiness estimated at %s each)\n",
		p.Switches(), fmtDur(p.EstimatedDuration()), fmtDur(p.switchEstimate()))
	_, err := io.WriteString(w, b.String())
	return err
}

func (p *Plan) switchEstimate() time.Duration {
	for _, st := range p.Steps {
		if st.Kind == StepSwitch {
			return st.Duration
		}
	}
	return 0
}

func describeStep(s Step) string {
	switch s.Kind {
	case StepSwitch:
		return "switch to " + s.Mode
	case StepMeasure:
		if s.Snapshots > 1 {
			return fmt.Sprintf("measure %s (%d snapshots of %s)", fmtDur(s.Duration), s.Snapshots, fmtDur(s.Duration/time.Duration(s.Snapshots)))
		}
		return "measure " + fmtDur(s.Duration)
	case StepGate, StepPrime:
		return string(s.Kind)
	case StepWarmup:
		if s.ModeWarmup > 0 {
			return fmt.Sprintf("mode warmup %s at %d, warmup %s", fmtDur(s.ModeWarmup), s.ModeWarmupLevel, fmtDur(s.Duration-s.ModeWarmup))
		}
	}
	return string(s.Kind) + " " + fmtDur(s.Duration)
}

// fmtDur prints a duration without a trailing "0s" ("5m" not "5m0s",
// "1h30m" not "1h30m0s").
func fmtDur(d time.Duration) string {
	s := d.Round(time.Second).String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ",")
}
