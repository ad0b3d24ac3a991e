package report

import (
	"fmt"
	"math"
	"time"

	"github.com/fleetbench/fleetbench/pkg/judge"
)

// Breakpoint is judge.Breakpoint: one mode's SLA verdict over the levels
// it was measured at.
type Breakpoint = judge.Breakpoint

// FindBreakpoint returns mode's breakpoint for TTFT p95 values p95[i] at
// levels[i] (levels ascending) against threshold sla (judge.FindBreakpoint).
func FindBreakpoint(mode string, levels []int, p95 []time.Duration, sla time.Duration) Breakpoint {
	return judge.FindBreakpoint(mode, levels, p95, sla)
}

// Verdict is the SLA comparison at one threshold.
type Verdict struct {
	// SLA is the TTFT p95 threshold.
	SLA time.Duration
	// Breakpoints has one entry per mode with data, in report order.
	Breakpoints []Breakpoint
	// Baseline and Candidate are the breakpoints of the compared modes.
	Baseline, Candidate Breakpoint
	// Gain is (candidate − baseline) / baseline breakpoint: 0.6 means 60%
	// more sessions. NaN when undefined: a side is None or unmeasured,
	// neither mode crosses the threshold, or the one that stays under it
	// was not tested high enough to compare.
	Gain float64
	// Bound reports that only one mode crosses the threshold, so Gain is
	// a bound taken at the other's highest level tested: at least that
	// much more when positive, at least that much fewer when negative.
	Bound bool
	// Headline is the sentence the report leads with.
	Headline string
}

// Outcome is the SLA result of a sweep: the verdict at the SLA and, when
// the fallback rule applies, at the fallback threshold.
type Outcome struct {
	Primary Verdict
	// Fallback is nil unless the breakpoints at the SLA do not tell the
	// modes apart (FallbackRule); FallbackReason then says why. When the
	// fallback gives the same breakpoints, its Headline says so rather
	// than repeat the primary one.
	Fallback       *Verdict
	FallbackReason string
}

// Evaluate returns s's SLA outcome, computed from the TTFT p95 across runs
// (merged histograms, or the mean of rows for TSV input).
func Evaluate(s *Sweep) (*Outcome, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	return analyze(s).outcome(), nil
}

func (a *analysis) outcome() *Outcome {
	return &Outcome{Primary: a.primary, Fallback: a.fallback, FallbackReason: a.fallbackWhy}
}

// evaluate computes the verdict at sla from each cell's p95 (seconds).
func (a *analysis) evaluate(sla time.Duration, p95 func(*cell) float64) slaEval {
	v := Verdict{SLA: sla, Gain: math.NaN()}
	for _, m := range a.modes {
		var levels []int
		var vs []time.Duration
		for _, l := range a.levels {
			if c := a.cell(m, l); c != nil {
				levels = append(levels, l)
				vs = append(vs, time.Duration(math.Round(p95(c)*1e9)))
			}
		}
		b := FindBreakpoint(m, levels, vs, sla)
		v.Breakpoints = append(v.Breakpoints, b)
		switch m {
		case a.s.Baseline:
			v.Baseline = b
		case a.s.Candidate:
			v.Candidate = b
		}
	}
	v.Baseline.Mode, v.Candidate.Mode = a.s.Baseline, a.s.Candidate
	v.Headline = a.headline(&v)
	return v
}

// slaEval is the internal name of a Verdict.
type slaEval = Verdict

// fallbackReason returns why the fallback threshold is evaluated, or "".
// The rule (--fallback-sla's help and report.md's methodology say the
// same): the fallback is evaluated when the breakpoints at --sla do not
// tell the baseline and the candidate apart, that is when the baseline
// has no level at or under --sla (None: no gain relative to it exists),
// or when both modes cross --sla at the same level (a tie). It is not
// evaluated when neither mode crosses --sla in the range (a looser
// threshold cannot cross where the tighter one did not), when either mode
// was not measured, or when the fallback is not looser than --sla.
func (a *analysis) fallbackReason() string {
	if a.s.FallbackSLA <= a.s.SLA {
		return ""
	}
	b, c := a.primary.Baseline, a.primary.Candidate
	switch {
	case !b.Measured || !c.Measured:
		return ""
	case b.None():
		return fmt.Sprintf("%s already exceeds %s at the lowest level (%d)", b.Mode, fmtDur(a.s.SLA), b.Lowest)
	case b.Crossed() && c.Crossed() && b.Level == c.Level:
		return fmt.Sprintf("%s and %s tie at %s (both stay under it up to %d sessions)", c.Mode, b.Mode, fmtDur(a.s.SLA), b.Level)
	}
	return ""
}

// FallbackRule is the rule fallbackReason applies, in words, for help
// texts and the report's methodology.
const FallbackRule = "evaluated when the breakpoints at the SLA do not tell the modes apart: " +
	"the baseline exceeds the SLA already at its lowest level, or both modes cross it at the same level; " +
	"not when neither mode crosses the SLA in the range, as a looser threshold cannot cross where the SLA did not"

// sameBreakpoints reports whether v and w put every mode's breakpoint
// at the same level, failing first at the same level.
func sameBreakpoints(v, w Verdict) bool {
	if len(v.Breakpoints) != len(w.Breakpoints) {
		return false
	}
	for i, b := range v.Breakpoints {
		o := w.Breakpoints[i]
		if b.Mode != o.Mode || b.Measured != o.Measured || b.Level != o.Level || b.FirstFailure != o.FirstFailure {
			return false
		}
	}
	return true
}

// fmtDur spells a threshold in milliseconds ("400 ms").
func fmtDur(d time.Duration) string {
	ms := float64(d) / float64(time.Millisecond)
	if ms == math.Trunc(ms) {
		return fmt.Sprintf("%.0f ms", ms)
	}
	return fmt.Sprintf("%g ms", ms)
}
