package report

import (
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/fleetbench/fleetbench/pkg/client"
)

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
