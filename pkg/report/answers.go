package report

import (
	"fmt"

	"github.com/fleetbench/fleetbench/pkg/result"
)

// answerLines warns about the answers of the sweep's points: where most
// stopped early (finish_reason "stop" before max_tokens), with how to get
// the intended lengths once, and where the asked --worker-header never
// appeared. Points known only by their TSV row say nothing.
func (a *analysis) answerLines() []string {
	var out []string
	var unseen []string
	total := 0
	for _, m := range a.modes {
		for _, l := range a.levels {
			for _, p := range a.points(m, l) {
				if p.Window == nil {
					continue
				}
				total++
				c := p.Window.Counters
				if share, early := result.StoppedEarly(c.FinishReasons); early {
					out = append(out, fmt.Sprintf("Warning: run %d, %s at %d sessions: %.0f%% of answers ended with finish_reason \"stop\" before their max_tokens (%s): shorter than the workload asked for.",
						p.Run, m, l, 100*share, result.FinishText(c.FinishReasons)))
				}
				if note := result.WorkerHeaderNote(a.s.WorkerHeader, c.WorkerHeaders, c.Requests); note != "" {
					unseen = append(unseen, fmt.Sprintf("run %d, %s at %d sessions: %s", p.Run, m, l, note))
				}
			}
		}
	}
	if len(out) > 0 {
		out = append(out, "To get the intended answer lengths (unless --natural-stop was meant), "+result.IgnoreEOSHint+".")
	}
	switch {
	case len(unseen) == 0:
	case len(unseen) == 1:
		out = append(out, "Warning: "+unseen[0]+".")
	default:
		out = append(out, fmt.Sprintf("Warning: --worker-header %s was never seen at %d of %d points (first, %s).", a.s.WorkerHeader, len(unseen), total, unseen[0]))
	}
	return out
}

// writeFinishReasons writes the successful answers' finish reasons per
// level and mode, every run of a point added up; nothing when no point
// has a window (TSV inputs).
func (a *analysis) writeFinishReasons(b *md) {
	var rows [][]string
	for _, m := range a.modes {
		for _, l := range a.levels {
			sum := map[string]int64{}
			seen := false
			for _, p := range a.points(m, l) {
				if p.Window != nil {
					seen = true
					for k, v := range p.Window.Counters.FinishReasons {
						sum[k] += v
					}
				}
			}
			if !seen {
				continue
			}
			text := result.FinishText(sum)
			if text == "" {
				text = dash
			}
			rows = append(rows, []string{m, fmt.Sprint(l), text})
		}
	}
	if len(rows) == 0 {
		return
	}
	b.p("Finish reasons of the successful answers (every run added up; \"none\": the stream carried no finish_reason):")
	b.table([]string{"Mode", "Concurrency", "Finish reasons"}, rows)
}
