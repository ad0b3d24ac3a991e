package report

import (
	"fmt"
	"math"
	"strings"
)

// headline fills v's Gain and Bound and returns the sentence the report
// leads with. It names the sweep's own modes: the candidate compared with
// the baseline. When the breakpoints alone cannot judge the modes (no
// breakpoint in range, or none of them meets the threshold, or they tie)
// it adds the measured differences at a level both modes have, from the
// same merged per-level figures the report's tables show.
func (a *analysis) headline(v *Verdict) string {
	b, c := v.Baseline, v.Candidate
	at := fmt.Sprintf("TTFT p95 ≤ %s", fmtDur(v.SLA))
	switch {
	case !b.Measured || !c.Measured:
		var missing []string
		if !c.Measured {
			missing = append(missing, c.Mode)
		}
		if !b.Measured {
			missing = append(missing, b.Mode)
		}
		return fmt.Sprintf("No comparison at %s: the sweep has no data for %s.", at, strings.Join(missing, " and "))

	case b.None() && c.None():
		where := fmt.Sprintf("at any level tested, from %s up", lowestPhrase(c, b))
		if len(b.PassesAgain) > 0 || len(c.PassesAgain) > 0 {
			// Some higher level passes again: "at any level" would be false.
			where = fmt.Sprintf("at the lowest level tested (%s)", lowestPhrase(c, b))
		}
		s := fmt.Sprintf("Neither %s nor %s meets the SLA (%s) %s: no breakpoint in range.", c.Mode, b.Mode, at, where)
		if common := a.commonLevels(c.Mode, b.Mode); len(common) > 0 {
			s += " " + a.differences(c.Mode, b.Mode, common[0])
		}
		return s

	case b.None():
		return fmt.Sprintf("%s exceeds the SLA (%s) already at %d sessions, the lowest level tested; %s.", b.Mode, at, b.Lowest, supports(c))

	case c.None():
		return fmt.Sprintf("%s exceeds the SLA (%s) already at %d sessions, the lowest level tested; %s.", c.Mode, at, c.Lowest, supports(b))

	case !b.Crossed() && !c.Crossed():
		var s string
		if b.Highest == c.Highest {
			s = fmt.Sprintf("Both %s and %s stay under the SLA (%s) up to %d sessions, the highest level tested: no breakpoint in range.",
				c.Mode, b.Mode, at, c.Highest)
		} else {
			s = fmt.Sprintf("%s stays under the SLA (%s) up to %d sessions and %s up to %d, the highest level tested for each: no breakpoint in range.",
				c.Mode, at, c.Highest, b.Mode, b.Highest)
		}
		if common := a.commonLevels(c.Mode, b.Mode); len(common) > 0 {
			s += " " + a.differences(c.Mode, b.Mode, common[len(common)-1])
		}
		return s

	case !c.Crossed():
		// Only the baseline crosses. The candidate's breakpoint is at least
		// its highest level tested, so the gain is a lower bound, and only
		// worth stating when that bound is positive.
		if c.Level <= b.Level {
			return fmt.Sprintf("%s stays under the SLA (%s) up to %d sessions, the highest level tested for it, and %s up to %d (crossing at %d): the sweep does not tell which supports more.",
				c.Mode, at, c.Level, b.Mode, b.Level, b.FirstFailure)
		}
		v.Gain, v.Bound = float64(c.Level-b.Level)/float64(b.Level), true
		return fmt.Sprintf("%s supports at least %s more concurrent sessions than %s at the same SLA (%s): %s stays under it up to %d sessions (crossing at %d), %s up to %d, the highest level tested.",
			c.Mode, fmtPct(100*v.Gain), b.Mode, at, b.Mode, b.Level, b.FirstFailure, c.Mode, c.Level)

	case !b.Crossed():
		// Only the candidate crosses: the baseline's breakpoint is at least
		// its highest level tested, so the loss is at least the one
		// computed from it.
		if b.Level <= c.Level {
			return fmt.Sprintf("%s stays under the SLA (%s) up to %d sessions (crossing at %d), and %s up to %d, the highest level tested for it: the sweep does not tell which supports more.",
				c.Mode, at, c.Level, c.FirstFailure, b.Mode, b.Level)
		}
		v.Gain, v.Bound = float64(c.Level-b.Level)/float64(b.Level), true
		return fmt.Sprintf("%s supports at least %s fewer concurrent sessions than %s at the same SLA (%s): %s stays under it up to %d sessions (crossing at %d), %s up to %d, the highest level tested.",
			c.Mode, fmtPct(-100*v.Gain), b.Mode, at, c.Mode, c.Level, c.FirstFailure, b.Mode, b.Level)
	}

	v.Gain = float64(c.Level-b.Level) / float64(b.Level)
	switch {
	case c.Level > b.Level:
		return fmt.Sprintf("%s supports %s more concurrent sessions than %s at the same SLA (%s): %d sessions for %s against %d for %s.",
			c.Mode, fmtPct(100*v.Gain), b.Mode, at, c.Level, c.Mode, b.Level, b.Mode)
	case c.Level < b.Level:
		return fmt.Sprintf("%s supports %s fewer concurrent sessions than %s at the same SLA (%s): %d sessions for %s against %d for %s.",
			c.Mode, fmtPct(-100*v.Gain), b.Mode, at, c.Level, c.Mode, b.Level, b.Mode)
	}
	return fmt.Sprintf("%s supports as many concurrent sessions as %s at the same SLA (%s): %d sessions each. %s",
		c.Mode, b.Mode, at, c.Level, a.differences(c.Mode, b.Mode, c.Level))
}

// supports says how far a mode that meets the threshold at its lowest
// level goes: to its breakpoint, or to its highest level tested.
func supports(b Breakpoint) string {
	if b.Crossed() {
		return fmt.Sprintf("%s supports %d sessions (crossing at %d)", b.Mode, b.Level, b.FirstFailure)
	}
	return fmt.Sprintf("%s stays under it up to %d sessions, the highest level tested", b.Mode, b.Level)
}

// lowestPhrase names the lowest level tested of two modes, which is
// usually the same.
func lowestPhrase(c, b Breakpoint) string {
	if c.Lowest == b.Lowest {
		return fmt.Sprintf("%d sessions", c.Lowest)
	}
	return fmt.Sprintf("%d sessions for %s and %d for %s", c.Lowest, c.Mode, b.Lowest, b.Mode)
}

// commonLevels are the levels, ascending, at which both modes have data.
func (a *analysis) commonLevels(m1, m2 string) []int {
	var out []int
	for _, l := range a.levels {
		if a.cell(m1, l) != nil && a.cell(m2, l) != nil {
			out = append(out, l)
		}
	}
	return out
}

// differences compares cand with base at level, which both must have:
// TTFT p50 and p95 and output throughput, as the tables show them.
func (a *analysis) differences(cand, base string, level int) string {
	cr, br := a.cell(cand, level).pooled, a.cell(base, level).pooled
	tput := "output throughput n/a (not measured)"
	if cr.Measured("output_tps") && br.Measured("output_tps") {
		tput = fmt.Sprintf("output throughput %.1f against %.1f tok/s%s", cr.OutputTPS, br.OutputTPS, relative(cr.OutputTPS, br.OutputTPS))
	}
	return fmt.Sprintf("At %d sessions %s against %s: TTFT p50 %.1f ms against %.1f ms%s, TTFT p95 %.1f ms against %.1f ms%s, %s.",
		level, cand, base,
		1000*cr.TTFTP50, 1000*br.TTFTP50, relative(cr.TTFTP50, br.TTFTP50),
		1000*cr.TTFTP95, 1000*br.TTFTP95, relative(cr.TTFTP95, br.TTFTP95), tput)
}

// relative is " (81% lower)": c against b in percent of b, or "" when b
// is zero.
func relative(c, b float64) string {
	if b == 0 {
		return ""
	}
	d := 100 * (c - b) / b
	switch {
	case math.Abs(d) < 0.05:
		return " (no difference)"
	case d < 0:
		return fmt.Sprintf(" (%s lower)", fmtPct(-d))
	}
	return fmt.Sprintf(" (%s higher)", fmtPct(d))
}

// fmtPct spells a non-negative percentage in whole percent, or to one
// decimal under 1% so that a small difference does not read as none.
func fmtPct(p float64) string {
	if p < 0.95 {
		return fmt.Sprintf("%.1f%%", p)
	}
	return fmt.Sprintf("%.0f%%", math.Round(p))
}
