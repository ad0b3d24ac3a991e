package report

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/fleetbench/fleetbench/pkg/hdr"
	"github.com/fleetbench/fleetbench/pkg/record"
)

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
