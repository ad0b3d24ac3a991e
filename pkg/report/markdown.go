package report

import (
	"bytes"
	"fmt"
	"math"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/fleetbench/fleetbench/pkg/client"
	"github.com/fleetbench/fleetbench/pkg/hdr"
	"github.com/fleetbench/fleetbench/pkg/record"
)

// md builds report.md.
type md struct {
	bytes.Buffer
}

func (b *md) p(format string, args ...any) {
	fmt.Fprintf(b, format, args...)
	b.WriteString("\n\n")
}

func (b *md) h2(title string) { b.p("## %s", title) }

// table writes a GitHub-flavoured Markdown table; the first column is
// left-aligned, the others right-aligned (numbers).
func (b *md) table(head []string, rows [][]string) {
	esc := func(s string) string { return strings.ReplaceAll(s, "|", `\|`) }
	b.WriteString("|")
	for _, h := range head {
		b.WriteString(" " + esc(h) + " |")
	}
	b.WriteString("\n|")
	for i := range head {
		if i == 0 {
			b.WriteString(" --- |")
		} else {
			b.WriteString(" ---: |")
		}
	}
	b.WriteString("\n")
	for _, r := range rows {
		b.WriteString("|")
		for i := range head {
			c := ""
			if i < len(r) {
				c = r[i]
			}
			b.WriteString(" " + esc(c) + " |")
		}
		b.WriteString("\n")
	}
	b.WriteString("\n")
}

const dash = "–"

// msCell spells seconds as milliseconds with one decimal.
func msCell(sec float64) string { return fmt.Sprintf("%.1f", 1000*sec) }

func pctCell(frac float64) string { return fmt.Sprintf("%.1f", 100*frac) }

// val returns f of the pooled row of (mode, level), or ok false.
func (a *analysis) val(mode string, level int, f func(*Row) float64) (float64, bool) {
	c := a.cell(mode, level)
	if c == nil {
		return 0, false
	}
	return f(&c.pooled), true
}

// metricCol is one per-mode column of a table: its name, its value and
// how the value is spelled.
type metricCol struct {
	name string
	f    func(*Row) float64
	// opt, used instead of f when set, is a figure that may not have been
	// measured: nil is spelled "n/a".
	opt  func(*Row) *float64
	cell func(float64) string
	// col, when set, is the TSV column f reads: a row read from a TSV
	// without it (Row.Measured) is spelled "n/a", not 0.
	col string
}

func msCol(name, col string, f func(*Row) float64) metricCol {
	return metricCol{name: name, f: f, cell: msCell, col: col}
}

func pctCol(name, col string, f func(*Row) float64) metricCol {
	return metricCol{name: name, f: f, cell: pctCell, col: col}
}

func fixedCol(name, col string, prec int, f func(*Row) float64) metricCol {
	return metricCol{name: name, f: f, cell: func(v float64) string { return fmt.Sprintf("%.*f", prec, v) }, col: col}
}

func optCell(name string, f func(*Row) *float64, cell func(float64) string) metricCol {
	return metricCol{name: name, opt: f, cell: cell}
}

// perModeTable writes a table with one row per level and, per mode, one
// column per metric.
func (a *analysis) perModeTable(b *md, cols []metricCol) {
	head := []string{"Concurrency"}
	for _, m := range a.modes {
		for _, c := range cols {
			head = append(head, m+" "+c.name)
		}
	}
	var rows [][]string
	for _, l := range a.levels {
		r := []string{fmt.Sprint(l)}
		for _, m := range a.modes {
			for _, c := range cols {
				switch cl := a.cell(m, l); {
				case cl == nil:
					r = append(r, dash)
				case c.col != "" && !cl.pooled.Measured(c.col):
					r = append(r, "n/a")
				case c.opt != nil && c.opt(&cl.pooled) == nil:
					r = append(r, "n/a")
				case c.opt != nil:
					r = append(r, c.cell(*c.opt(&cl.pooled)))
				default:
					r = append(r, c.cell(c.f(&cl.pooled)))
				}
			}
		}
		rows = append(rows, r)
	}
	b.table(head, rows)
}

// writeMarkdown writes report.md. charts are the chart files (relative
// links are made from dir).
func (a *analysis) writeMarkdown(b *md, charts []string, dir string) {
	s := a.s
	b.p("# fleetbench sweep %s", s.ID)
	a.writeFacts(b)

	b.h2("Headline")
	b.p("**%s**", a.primary.Headline)
	if a.fallback != nil {
		b.p("Fallback threshold: %s, so the breakpoints are also evaluated at %s. %s",
			a.fallbackWhy, fmtDur(s.FallbackSLA), a.fallback.Headline)
	}

	b.h2("Results summary")
	for _, line := range a.summaryLines() {
		b.WriteString("- " + line + "\n")
	}
	b.WriteString("\n")

	a.writeSLA(b)
	a.writeTTFT(b)

	b.h2("KV-cache hit rate")
	b.p("Token-weighted: cached prompt tokens / prompt tokens of successful requests, in percent.")
	a.perModeTable(b, []metricCol{pctCol("hit rate (%)", "", func(r *Row) float64 { return r.HitRate })})
	b.p("By turn: turn 1 (nothing to reuse from this conversation yet) against later turns.")
	a.perModeTable(b, []metricCol{
		pctCol("turn 1 (%)", "turn1_hit_rate", func(r *Row) float64 { return r.Turn1HitRate }),
		pctCol("later turns (%)", "later_hit_rate", func(r *Row) float64 { return r.LaterHitRate }),
	})

	a.writeServer(b)
	a.writeGoodput(b)

	b.h2("Throughput and request rate")
	b.p("Output tokens and completed requests per second of the measurement window; errors in percent of requests sent.")
	a.perModeTable(b, []metricCol{
		fixedCol("output tok/s", "output_tps", 1, func(r *Row) float64 { return r.OutputTPS }),
		fixedCol("req/s", "", 2, func(r *Row) float64 { return r.ActualRPS }),
		fixedCol("errors (%)", "", 2, func(r *Row) float64 { return r.ErrorPct }),
	})

	for _, lat := range []struct {
		title, note, col string
		p50, p95, p99    func(*Row) float64
	}{
		{"Inter-token latency (ITL)", "Each gap between consecutive content chunks, in ms.", "itl",
			func(r *Row) float64 { return r.ITLP50 }, func(r *Row) float64 { return r.ITLP95 }, func(r *Row) float64 { return r.ITLP99 }},
		{"Time per output token (TPOT)", "(E2E − TTFT) / (output tokens − 1) per request, in ms.", "tpot",
			func(r *Row) float64 { return r.TPOTP50 }, func(r *Row) float64 { return r.TPOTP95 }, func(r *Row) float64 { return r.TPOTP99 }},
		{"End-to-end latency (E2E)", "From sending the request to the end of the stream, in ms.", "e2e",
			func(r *Row) float64 { return r.E2EP50 }, func(r *Row) float64 { return r.E2EP95 }, func(r *Row) float64 { return r.E2EP99 }},
	} {
		b.h2(lat.title)
		b.p("%s", lat.note)
		a.perModeTable(b, []metricCol{msCol("p50", lat.col+"_p50_sec", lat.p50), msCol("p95", lat.col+"_p95_sec", lat.p95),
			msCol("p99", lat.col+"_p99_sec", lat.p99)})
	}

	if a.maxRuns() >= 2 {
		a.writeSpread(b)
	}
	a.writeQuality(b)
	a.writeErrors(b)

	if len(charts) > 0 {
		b.h2("Charts")
		for _, c := range charts {
			if filepath.Ext(c) != ".svg" {
				continue
			}
			rel, err := filepath.Rel(dir, c)
			if err != nil {
				rel = filepath.Base(c)
			}
			b.p("![%s](%s)", chartTitle(filepath.Base(c)), filepath.ToSlash(rel))
		}
	}
	a.writeMethod(b)
}

func (a *analysis) writeFacts(b *md) {
	s := a.s
	var lines []string
	add := func(k, v string) {
		if v != "" {
			lines = append(lines, fmt.Sprintf("- %s: %s", k, v))
		}
	}
	add("Model", s.Model)
	add("Target", client.RedactURL(s.Target))
	add("Workload", s.Workload)
	var modes []string
	for _, m := range a.modes {
		switch m {
		case s.Baseline:
			modes = append(modes, m+" (baseline)")
		case s.Candidate:
			modes = append(modes, m+" (candidate)")
		default:
			modes = append(modes, m)
		}
	}
	add("Modes", strings.Join(modes, ", "))
	add("Concurrency levels", joinInts(a.levels))
	add("Runs", fmt.Sprint(len(a.runs())))
	add("SLA", fmt.Sprintf("TTFT p95 ≤ %s (fallback %s)", fmtDur(s.SLA), fmtDur(s.FallbackSLA)))
	add("fleetbench", s.Version)
	if len(s.sources) > 0 {
		add("Inputs", strings.Join(s.sources, ", "))
	}
	b.WriteString(strings.Join(lines, "\n") + "\n\n")
}

func joinInts(v []int) string {
	parts := make([]string, len(v))
	for i, x := range v {
		parts[i] = fmt.Sprint(x)
	}
	return strings.Join(parts, ", ")
}

func (a *analysis) writeSLA(b *md) {
	s := a.s
	b.h2("SLA breakpoints")
	b.p("Highest concurrency level at which each mode stays at or under the SLA (TTFT p95 at that level and every lower one), or None if even the lowest level fails.")
	head := []string{"Mode", "Highest level at or under " + fmtDur(s.SLA), "First level over " + fmtDur(s.SLA)}
	if a.fallback != nil {
		head = append(head, "Highest level at or under "+fmtDur(s.FallbackSLA)+" (fallback)")
	}
	var rows [][]string
	var notes []string
	for i, bp := range a.primary.Breakpoints {
		first := dash
		if bp.Crossed() {
			first = fmt.Sprint(bp.FirstFailure)
		}
		r := []string{bp.Mode, bp.String(), first}
		if a.fallback != nil {
			r = append(r, a.fallback.Breakpoints[i].String())
		}
		rows = append(rows, r)
		if len(bp.PassesAgain) > 0 {
			notes = append(notes, fmt.Sprintf("%s passes again at %s after failing at %d; the breakpoint counts only up to the first failure.",
				bp.Mode, joinInts(bp.PassesAgain), bp.FirstFailure))
		}
	}
	b.table(head, rows)
	for _, n := range notes {
		b.p("%s", n)
	}
	if runs := a.runs(); len(runs) >= 2 {
		b.p("Breakpoint of each run on its own (TTFT p95 of that run):")
		head := []string{"Mode"}
		for _, r := range runs {
			head = append(head, fmt.Sprintf("run %d", r))
		}
		var rows [][]string
		for _, m := range a.modes {
			row := []string{m}
			for _, run := range runs {
				row = append(row, a.runBreakpoint(m, run, s.SLA))
			}
			rows = append(rows, row)
		}
		b.table(head, rows)
	}
}

// runBreakpoint is mode's breakpoint from run's rows alone.
func (a *analysis) runBreakpoint(mode string, run int, sla time.Duration) string {
	var levels []int
	var vs []time.Duration
	for _, l := range a.levels {
		c := a.cell(mode, l)
		if c == nil {
			continue
		}
		for _, r := range c.runs {
			if r.Run == run {
				levels = append(levels, l)
				vs = append(vs, secDur(r.TTFTP95))
			}
		}
	}
	if len(levels) == 0 {
		return dash
	}
	return FindBreakpoint(mode, levels, vs, sla).String()
}

func (a *analysis) writeTTFT(b *md) {
	s := a.s
	b.h2("Time to first token (TTFT)")
	b.p("TTFT p50 and p95 in ms. KV advantage = %s − %s: positive means %s is faster; %% of %s's value.",
		s.Baseline, s.Candidate, s.Candidate, s.Baseline)
	head := []string{"Concurrency"}
	for _, m := range a.modes {
		head = append(head, m+" p50", m+" p95")
	}
	head = append(head, "KV advantage p50 (ms)", "KV advantage p50 (%)", "KV advantage p95 (ms)", "KV advantage p95 (%)")
	var rows [][]string
	for _, l := range a.levels {
		r := []string{fmt.Sprint(l)}
		for _, m := range a.modes {
			for _, f := range []func(*Row) float64{func(r *Row) float64 { return r.TTFTP50 }, func(r *Row) float64 { return r.TTFTP95 }} {
				if v, ok := a.val(m, l, f); ok {
					r = append(r, msCell(v))
				} else {
					r = append(r, dash)
				}
			}
		}
		for _, f := range []func(*Row) float64{func(r *Row) float64 { return r.TTFTP50 }, func(r *Row) float64 { return r.TTFTP95 }} {
			bv, ok1 := a.val(s.Baseline, l, f)
			cv, ok2 := a.val(s.Candidate, l, f)
			if !ok1 || !ok2 {
				r = append(r, dash, dash)
				continue
			}
			r = append(r, signedMs(bv-cv), relPct(bv-cv, bv))
		}
		rows = append(rows, r)
	}
	b.table(head, rows)
}

func signedMs(sec float64) string { return fmt.Sprintf("%+.1f", 1000*sec) }

// relPct spells d/base as a signed percentage, or a dash when base is 0.
func relPct(d, base float64) string {
	if base == 0 {
		return dash
	}
	return fmt.Sprintf("%+.1f", 100*d/base)
}

// ciCell spells a spread as "mean ± half" with scale and decimals.
func ciCell(sp spread, scale float64, prec int) string {
	if sp.N == 0 {
		return dash
	}
	if sp.N < 2 {
		return fmt.Sprintf("%.*f", prec, scale*sp.Mean)
	}
	return fmt.Sprintf("%.*f ± %.*f", prec, scale*sp.Mean, prec, scale*sp.HalfCI)
}

func valuesCell(sp spread, scale float64, prec int) string {
	parts := make([]string, len(sp.Values))
	for i, v := range sp.Values {
		parts[i] = fmt.Sprintf("%.*f", prec, scale*v)
	}
	return strings.Join(parts, ", ")
}

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

func (a *analysis) writeQuality(b *md) {
	s := a.s
	b.h2("Measurement quality")
	var lines []string
	if s.AlternatedOrder && len(a.modes) >= 2 {
		fwd := strings.Join(a.modes, " ")
		rev := make([]string, len(a.modes))
		for i, m := range a.modes {
			rev[len(a.modes)-1-i] = m
		}
		lines = append(lines, fmt.Sprintf("Runs alternated the mode order (%s, %s) so drift does not favour one mode.", fwd, strings.Join(rev, " ")))
	}
	if a.averaged {
		if len(s.averagedFiles) > 0 {
			lines = append(lines, fmt.Sprintf("Percentiles were averaged across files because only TSVs were given (%s): without histograms the runs' percentiles cannot be merged, and an average of percentiles is not a percentile of all requests.",
				strings.Join(s.averagedFiles, ", ")))
		} else {
			lines = append(lines, "Some points had no histograms, so their percentiles were averaged across runs rather than merged.")
		}
	}
	for _, m := range a.modes {
		for _, l := range a.levels {
			c := a.cell(m, l)
			if c == nil {
				continue
			}
			if c.mergeErr != nil {
				lines = append(lines, fmt.Sprintf("Warning: %s at %d: histograms could not be merged (%v); figures are averaged across runs.", m, l, c.mergeErr))
			}
			for _, p := range a.points(m, l) {
				for _, n := range p.AgentNotes {
					lines = append(lines, fmt.Sprintf("Agent: run %d, %s at %d sessions: %s.", p.Run, m, l, n))
				}
			}
			for _, r := range c.runs {
				if r.Degraded {
					lines = append(lines, fmt.Sprintf("Warning: run %d, %s at %d sessions is marked degraded (coverage %.0f%%).", r.Run, m, l, 100*r.Coverage))
				} else if r.Coverage > 0 && r.Coverage < 0.99 {
					lines = append(lines, fmt.Sprintf("Warning: run %d, %s at %d sessions covers %.0f%% of the planned agent-seconds.", r.Run, m, l, 100*r.Coverage))
				}
			}
		}
	}
	if len(lines) == 0 || (len(lines) == 1 && s.AlternatedOrder) {
		lines = append(lines, "Every point has full coverage and none is marked degraded.")
	}
	lines = append(lines, a.answerLines()...)
	for _, line := range lines {
		b.WriteString("- " + line + "\n")
	}
	b.WriteString("\n")
	a.writeFinishReasons(b)
}

// writeGoodput writes the goodput and SLO attainment per level and mode,
// when the points counted good requests (vLLM's --goodput).
func (a *analysis) writeGoodput(b *md) {
	slo := ""
	for _, p := range a.s.Points {
		if p.SLO != "" {
			slo = p.SLO
			break
		}
	}
	if slo == "" {
		return
	}
	b.h2("Goodput and SLO attainment")
	b.p("A request is good when it succeeded and met every objective (%s), as vLLM's --goodput counts it. Goodput is good requests per second of the measurement window; attainment is the share of the requests sent that were good, in percent. \"n/a\": not measured.", slo)
	a.perModeTable(b, []metricCol{
		optCell("goodput (req/s)", func(r *Row) *float64 { return r.Goodput }, func(v float64) string { return fmt.Sprintf("%.2f", v) }),
		optCell("attainment (%)", func(r *Row) *float64 { return r.SLOAttainment }, pctCell),
	})
}

// measuredCell is text, or "n/a" when c's figures lack the TSV column col.
func (a *analysis) measuredCell(c *cell, col, text string) string {
	if !c.pooled.Measured(col) {
		return "n/a"
	}
	return text
}

// points returns the points of (mode, level), by run.
func (a *analysis) points(mode string, level int) []*Point {
	var out []*Point
	for i := range a.s.Points {
		if p := &a.s.Points[i]; p.Mode == mode && p.Level == level {
			out = append(out, p)
		}
	}
	return out
}

func (a *analysis) writeMethod(b *md) {
	b.h2("Method")
	lines := []string{
		"TTFT: from just before the request is handed to the HTTP transport to the first streamed content (or reasoning) chunk. Latencies, tokens and hit rates count successful turns only; a turn belongs to the window in force when it was sent.",
		"KV-cache hit rate: Σ cached prompt tokens / Σ prompt tokens (token-weighted), in percent here and in baseline.json; the TSV's kv_hit_rate is the 0–1 fraction.",
		"Throughput: tokens (or requests) of the successful turns sent in the measurement window ÷ its length. Errors (%): failed ÷ sent turns × 100; turns cancelled when the drain timed out count as failed.",
		"Percentiles come from HDR histograms (3 significant figures). Across runs they are read from the merged histograms, never averaged, unless only TSVs were given; the per-run spread is shown separately.",
		"Breakpoint: the highest level before the first level whose TTFT p95 exceeds the SLA; \"None\" when the lowest level already exceeds it.",
		fmt.Sprintf("\"X%% more concurrent sessions\" = (%s breakpoint − %s breakpoint) / %s breakpoint.", a.s.Candidate, a.s.Baseline, a.s.Baseline),
		fmt.Sprintf("Fallback: the breakpoints at the fallback threshold (%s) are %s.", fmtDur(a.s.FallbackSLA), FallbackRule),
		"Run-to-run noise: Welch's two-sided t-test at 5% on per-run values; intervals are Student t 95% intervals.",
	}
	for _, line := range lines {
		b.WriteString("- " + line + "\n")
	}
}

// maxReportErrors is how many distinct errors report.md lists per mode.
const maxReportErrors = 5

// writeErrors lists each mode's most frequent distinct failures over all
// its points, with the server's own message; nothing when no point with
// histograms failed.
func (a *analysis) writeErrors(b *md) {
	var rows [][]string
	for _, m := range a.modes {
		merged := record.NewWindow(0, hdr.Default)
		for _, p := range a.s.Points {
			if p.Mode == m && p.Window != nil {
				merged.AddErrors(p.Window.TopErrors(0))
			}
		}
		for _, e := range merged.TopErrors(maxReportErrors) {
			text := e.Example
			if text == "" {
				text = e.Message
			}
			first := "–"
			if !e.First.IsZero() {
				first = e.First.UTC().Format("2006-01-02 15:04:05")
			}
			rows = append(rows, []string{m, string(e.Class), strconv.FormatInt(e.Count, 10), first, strings.ReplaceAll(text, "|", "\\|")})
		}
	}
	if len(rows) == 0 {
		return
	}
	b.h2("Errors")
	b.p("The most frequent distinct failures of each mode over all its levels and runs (ids and numbers masked to group them; one real message shown).")
	b.table([]string{"Mode", "Class", "Requests", "First seen (UTC)", "Message"}, rows)
}
