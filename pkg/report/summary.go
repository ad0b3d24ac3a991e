package report

import (
	"fmt"
	"math"
)

// summaryLines are the results summary in plain words. The headline and
// the fallback's verdict are not repeated: the Headline section above
// says them.
func (a *analysis) summaryLines() []string {
	s := a.s
	base, cand := s.Baseline, s.Candidate
	var out []string

	var common []int
	for _, l := range a.levels {
		if a.cell(base, l) != nil && a.cell(cand, l) != nil {
			common = append(common, l)
		}
	}
	if len(common) == 0 {
		return append(out, fmt.Sprintf("%s and %s share no measured level, so no level-by-level comparison is possible.", cand, base))
	}

	lower := 0
	for _, l := range common {
		if a.cell(cand, l).pooled.TTFTP95 < a.cell(base, l).pooled.TTFTP95 {
			lower++
		}
	}
	top := common[len(common)-1]
	bt, ct := a.cell(base, top).pooled, a.cell(cand, top).pooled
	line := fmt.Sprintf("%s has the lower TTFT p95 at %d of %d levels. At %d sessions its TTFT p95 is %.1f ms against %.1f ms for %s",
		cand, lower, len(common), top, 1000*ct.TTFTP95, 1000*bt.TTFTP95, base)
	if bt.TTFTP95 > 0 {
		d := 100 * (bt.TTFTP95 - ct.TTFTP95) / bt.TTFTP95
		switch {
		case d > 0:
			line += fmt.Sprintf(" (%.1f%% lower)", d)
		case d < 0:
			line += fmt.Sprintf(" (%.1f%% higher)", -d)
		}
	}
	out = append(out, line+".")

	var bh, ch, bl, cl float64
	later := true // every common cell measured its later turns' hit rate
	for _, l := range common {
		b, c := &a.cell(base, l).pooled, &a.cell(cand, l).pooled
		bh += b.HitRate
		ch += c.HitRate
		bl += b.LaterHitRate
		cl += c.LaterHitRate
		later = later && b.Measured("later_hit_rate") && c.Measured("later_hit_rate")
	}
	n := float64(len(common))
	laterText := "later turns: n/a, not measured"
	if later {
		laterText = fmt.Sprintf("later turns: %.1f%% against %.1f%%", 100*cl/n, 100*bl/n)
	}
	out = append(out, fmt.Sprintf("The KV-cache hit rate averages %.1f%% for %s against %.1f%% for %s over the common levels (%s).",
		100*ch/n, cand, 100*bh/n, base, laterText))

	if ct.Measured("output_tps") && bt.Measured("output_tps") {
		line = fmt.Sprintf("At %d sessions %s delivers %.1f output tok/s and %.2f req/s, %s %.1f tok/s and %.2f req/s",
			top, cand, ct.OutputTPS, ct.ActualRPS, base, bt.OutputTPS, bt.ActualRPS)
		if bt.OutputTPS > 0 {
			line += fmt.Sprintf(" (%+.1f%% output throughput)", 100*(ct.OutputTPS-bt.OutputTPS)/bt.OutputTPS)
		}
	} else {
		line = fmt.Sprintf("At %d sessions %s delivers %.2f req/s, %s %.2f req/s (output tok/s: n/a, not measured)",
			top, cand, ct.ActualRPS, base, bt.ActualRPS)
	}
	out = append(out, line+".")

	worst, wm, wl := 0.0, "", 0
	for _, m := range a.modes {
		for _, l := range a.levels {
			if c := a.cell(m, l); c != nil && c.pooled.ErrorPct > worst {
				worst, wm, wl = c.pooled.ErrorPct, m, l
			}
		}
	}
	if worst == 0 {
		out = append(out, "No request failed.")
	} else {
		out = append(out, fmt.Sprintf("The highest error rate is %.2f%% (%s at %d sessions).", worst, wm, wl))
	}

	if a.maxRuns() >= 2 {
		judged, signif := 0, 0
		for _, l := range common {
			w := welchTest(a.spreadOf(cand, l, func(r *Row) float64 { return r.TTFTP95 }),
				a.spreadOf(base, l, func(r *Row) float64 { return r.TTFTP95 }))
			if w.OK {
				judged++
				if w.Significant {
					signif++
				}
			}
		}
		switch {
		case judged == 0:
			out = append(out, "Too few runs per mode to judge run-to-run noise.")
		case signif == 0:
			out = append(out, fmt.Sprintf("The TTFT p95 difference is within run-to-run noise at every one of the %d levels judged: more runs are needed before claiming a difference.", judged))
		case signif == judged:
			out = append(out, fmt.Sprintf("The TTFT p95 difference is larger than run-to-run noise at every one of the %d levels judged (Welch's t-test, 5%%).", judged))
		default:
			out = append(out, fmt.Sprintf("The TTFT p95 difference is larger than run-to-run noise at %d of %d levels judged (Welch's t-test, 5%%); at the others it is within noise.", signif, judged))
		}
	}
	return out
}

// round rounds v to prec decimals (for baseline.json).
func round(v float64, prec int) float64 {
	p := math.Pow10(prec)
	return math.Round(v*p) / p
}
