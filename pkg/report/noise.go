package report

import (
	"fmt"
	"math"
)

func (a *analysis) writeSpread(b *md) {
	b.h2("Spread across runs")
	b.p("Per-run values: mean ± 95%% confidence interval (Student t, n−1 degrees of freedom). The tables above show the figures across runs%s.",
		map[bool]string{true: " (percentiles of the merged histograms)", false: ""}[!a.averaged])
	head := []string{"Mode", "Concurrency", "Runs", "TTFT p95 (ms)", "TTFT p95 per run (ms)", "Output tok/s", "Hit rate (%)"}
	var rows [][]string
	for _, m := range a.modes {
		for _, l := range a.levels {
			c := a.cell(m, l)
			if c == nil {
				continue
			}
			p95 := a.spreadOf(m, l, func(r *Row) float64 { return r.TTFTP95 })
			rows = append(rows, []string{m, fmt.Sprint(l), fmt.Sprint(p95.N),
				ciCell(p95, 1000, 1), valuesCell(p95, 1000, 1),
				a.measuredCell(c, "output_tps", ciCell(a.spreadOf(m, l, func(r *Row) float64 { return r.OutputTPS }), 1, 1)),
				ciCell(a.spreadOf(m, l, func(r *Row) float64 { return r.HitRate }), 100, 1)})
		}
	}
	b.table(head, rows)

	b.h2("Run-to-run noise")
	b.p("A difference is within run-to-run noise when Welch's two-sided t-test on the per-run TTFT p95 values is not significant at 5%%.")
	for _, line := range a.noiseLines() {
		b.WriteString("- " + line + "\n")
	}
	b.WriteString("\n")
}

// noiseLines states, per level, whether the candidate-vs-baseline TTFT
// p95 difference is within run-to-run noise.
func (a *analysis) noiseLines() []string {
	s := a.s
	var out []string
	for _, l := range a.levels {
		bs := a.spreadOf(s.Baseline, l, func(r *Row) float64 { return r.TTFTP95 })
		cs := a.spreadOf(s.Candidate, l, func(r *Row) float64 { return r.TTFTP95 })
		switch {
		case bs.N == 0 && cs.N == 0:
			continue
		case bs.N == 0 || cs.N == 0:
			missing := s.Baseline
			if cs.N == 0 {
				missing = s.Candidate
			}
			out = append(out, fmt.Sprintf("At %d sessions: not compared, %s has no run at this level.", l, missing))
			continue
		}
		diff := fmt.Sprintf("%s %.1f ms vs %s %.1f ms", s.Candidate, 1000*cs.Mean, s.Baseline, 1000*bs.Mean)
		w := welchTest(cs, bs)
		switch {
		case !w.OK:
			out = append(out, fmt.Sprintf("At %d sessions (%s): too few runs to judge noise (need two per mode).", l, diff))
		case w.Significant:
			out = append(out, fmt.Sprintf("At %d sessions the TTFT p95 difference (%s) is larger than run-to-run noise (Welch t = %s, df = %.1f).", l, diff, fmtT(w.T), w.DF))
		default:
			out = append(out, fmt.Sprintf("At %d sessions the TTFT p95 difference (%s) is within run-to-run noise (Welch t = %s, df = %.1f, critical %.2f).", l, diff, fmtT(w.T), w.DF, w.Critical))
		}
	}
	return out
}

func fmtT(t float64) string {
	if math.IsInf(t, 0) {
		return "∞ (no variance)"
	}
	return fmt.Sprintf("%.2f", t)
}
