package judge

import (
	"fmt"
	"time"
)

// Breakpoint is one mode's SLA verdict over the levels it was measured at.
type Breakpoint struct {
	Mode string
	// Measured is false when the mode has no data at all.
	Measured bool
	// Level is the highest level before the first failure: TTFT p95 at or
	// under the threshold there and at every lower measured level. 0 means
	// None: the mode fails at its lowest level (or was not measured).
	Level int
	// Lowest and Highest are the lowest and highest measured levels.
	Lowest, Highest int
	// FirstFailure is the lowest level whose TTFT p95 exceeds the
	// threshold, 0 when the mode stays under it at every level.
	FirstFailure int
	// PassesAgain lists levels above FirstFailure that pass again (noise or
	// a non-monotonic system); they do not count towards Level.
	PassesAgain []int
}

// None reports whether the mode was measured and fails even at its lowest
// level.
func (b Breakpoint) None() bool { return b.Measured && b.Level == 0 }

// Crossed reports whether the mode exceeds the threshold at some level.
func (b Breakpoint) Crossed() bool { return b.FirstFailure > 0 }

// String is the SLA table's cell: the level, or "None".
func (b Breakpoint) String() string {
	switch {
	case !b.Measured:
		return "not measured"
	case b.Level == 0:
		return "None"
	}
	return fmt.Sprint(b.Level)
}

// FindBreakpoint returns mode's breakpoint for TTFT p95 values p95[i] at
// levels[i] (levels ascending) against threshold sla.
func FindBreakpoint(mode string, levels []int, p95 []time.Duration, sla time.Duration) Breakpoint {
	b := Breakpoint{Mode: mode, Measured: len(levels) > 0}
	if !b.Measured {
		return b
	}
	b.Lowest, b.Highest = levels[0], levels[len(levels)-1]
	for i, l := range levels {
		pass := p95[i] <= sla
		switch {
		case b.FirstFailure == 0 && pass:
			b.Level = l
		case b.FirstFailure == 0:
			b.FirstFailure = l
		case pass:
			b.PassesAgain = append(b.PassesAgain, l)
		}
	}
	return b
}
